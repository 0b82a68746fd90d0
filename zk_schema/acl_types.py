"""Kafka's ACL vocabulary, as ZooKeeper stores it: resource types, pattern types, operations,
permission types (Kafka's wire codes, ``org.apache.kafka.common.acl`` / ``resource``, with their
Pascal-case names as in the znodes' JSON and paths: ``Read``, ``DescribeConfigs``,
``TransactionalId``), a resource pattern and an access control entry.

It lives here, with the codec of the ACL znodes (``zk_schema.acls``), because zk_schema is the
self-contained codec of Kafka's znodes and imports nothing of kafkalite;
``kafkalite.security.acl`` (the authorizer's model and decision) re-exports it.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class _Named(enum.IntEnum):
    """An enum with Kafka's wire code and its Pascal-case name (what ZooKeeper and tools use)."""

    @property
    def pascal(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> "_Named":
        """Kafka's ``SecurityUtils`` lookup: the Pascal name, else case-insensitive without underscores."""
        wanted = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str          # "User:alice", or "User:*"
    host: str               # an IP address, or "*"
    operation: Operation
    permission: Permission

    def __str__(self) -> str:
        return f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, " \
               f"permissionType={self.permission.name})"
