"""Kafka's ACL model and the AclAuthorizer's decision, as pure data and functions.

The wire codes of resource types, pattern types, operations and permission types are Kafka's
(``org.apache.kafka.common.acl`` / ``resource``); their names in ZooKeeper's JSON and paths are
Kafka's Pascal-case spellings (``Read``, ``DescribeConfigs``, ``TransactionalId``). That
vocabulary is defined with the znodes' codec (``zk_schema.acl_types``) and re-exported here.

The decision (Kafka 2.x ``AclAuthorizer.authorizeAction``): a super user may do anything;
otherwise the ACLs that apply to a resource are the literal ones on its name, the literal ones on
the wildcard ``*`` and the prefixed ones whose prefix starts the name. No such ACL at all:
``allow.everyone.if.no.acl.found`` decides. Else a matching Deny (principal or ``User:*``, host
or ``*``, operation or ``All``) refuses, and otherwise one matching Allow is needed, where an
Allow of Read/Write/Delete/Alter implies Describe and AlterConfigs implies DescribeConfigs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

# the vocabulary the ACL znodes store lives with their codec (zk_schema imports nothing of
# kafkalite); it is Kafka's model all the same, re-exported here for the rest of the project
from zk_schema.acl_types import (AccessControlEntry, Operation, PatternType, Permission,  # noqa: F401
                                 ResourcePattern, ResourceType)

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

#: the operations each resource type has (Kafka's ``AclEntry.supportedOperations``): what KIP-430's
#: authorized-operations bit field is computed over
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
}

#: an Allow of any of these grants the key operation (Kafka's ACL inheritance)
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}

#: KIP-430: "authorized operations were not asked for"
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filters: ``None`` (a null string) and ANY match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: MATCH also finds the wildcard and prefixes
        that would apply to ``name``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == Operation.ANY or self.operation == entry.operation)
                and (self.permission == Permission.ANY or self.permission == entry.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_at_most_one(self) -> bool:
        """Every field definite (Kafka's ``matchesAtMostOne``): the filter names one pattern."""
        return (self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN) and self.name is not None
                and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED))

    def invalid_reason(self) -> str | None:
        """Why Kafka refuses this filter (unknown elements), or None."""
        if PatternType.UNKNOWN in (self.pattern_type,) or self.resource_type == ResourceType.UNKNOWN \
                or self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Filter contains UNKNOWN elements"
        return None


def binding_error(binding: AclBinding) -> str | None:
    """Why a CreateAcls entry is invalid (Kafka's request validation, ``validateAclBinding`` and
    the handler's cluster-name and empty-name checks), or None."""
    p, e = binding.pattern, binding.entry
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid resource pattern type {p.pattern_type.name}"
    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resource type {p.resource_type.name}"
    if e.operation in (Operation.ANY, Operation.UNKNOWN):
        return f"Invalid operation {e.operation.name}"
    if e.permission in (Permission.ANY, Permission.UNKNOWN):
        return f"Invalid permission type {e.permission.name}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return "Invalid empty resource name"
    if "/" in p.name:
        return f"ACL binding contains invalid resource name: {p.name}"
    if ":" not in e.principal or not e.principal.split(":", 1)[0]:
        return f"Invalid principal {e.principal!r}: expected principalType:principalName"
    if not e.host:
        return "Invalid empty host"
    return None


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclMatcher:
    """The authorizer's decision over a snapshot of ACLs by resource pattern."""

    def __init__(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]], *,
                 super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False) -> None:
        self.acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def applicable(self, resource_type: ResourceType, name: str) -> Iterator[AccessControlEntry]:
        """Every ACL entry on a pattern that covers ``name``: literal, wildcard, prefixes."""
        yield from self.acls.get(ResourcePattern(resource_type, name, PatternType.LITERAL), ())
        if name != WILDCARD_RESOURCE:
            yield from self.acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL), ())
        for i in range(1, len(name) + 1):
            yield from self.acls.get(ResourcePattern(resource_type, name[:i], PatternType.PREFIXED), ())

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = list(self.applicable(resource_type, name))
        if not entries:
            return self.allow_if_no_acl
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        mine = [e for e in entries if e.principal in principals and e.host in hosts]
        if any(e.permission == Permission.DENY and e.operation in (operation, Operation.ALL) for e in mine):
            return False
        granting = IMPLIED_BY.get(operation, frozenset({operation})) | {Operation.ALL}
        return any(e.permission == Permission.ALLOW and e.operation in granting for e in mine)

    def authorize_by_resource_type(self, principal: str, host: str, operation: Operation,
                                   resource_type: ResourceType) -> bool:
        """May the principal do ``operation`` on SOME resource of the type? (Kafka 2.8's
        ``authorizeByResourceType``, what InitProducerId asks for an idempotent producer without
        IdempotentWrite: an Allow not shadowed by a Deny; a Deny on ``*`` refuses everything.)"""
        if principal in self.super_users:
            return True
        ops = (operation, Operation.ALL)

        def names(permission: Permission, pattern_type: PatternType) -> set[str]:
            return {p.name for p, entries in self.acls.items()
                    if p.resource_type == resource_type and p.pattern_type == pattern_type
                    and any(e.permission == permission and e.operation in ops and e.principal in (principal, WILDCARD_PRINCIPAL)
                            and e.host in (host, WILDCARD_HOST) for e in entries)}
        deny_literals = names(Permission.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_if_no_acl:
            return True
        deny_prefixes = names(Permission.DENY, PatternType.PREFIXED)
        allow_literals = names(Permission.ALLOW, PatternType.LITERAL)
        allow_prefixes = names(Permission.ALLOW, PatternType.PREFIXED)
        if any(not any(a.startswith(d) for d in deny_prefixes) for a in allow_prefixes):
            return True
        return any(a == WILDCARD_RESOURCE or (a not in deny_literals and not any(a.startswith(d) for d in deny_prefixes))
                   for a in allow_literals)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit ``op.value`` set for each supported operation allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << int(op)
        return bits

    def bindings(self, flt: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: every stored binding the filter matches, in a stable order."""
        out = [AclBinding(p, e) for p, entries in self.acls.items() if flt.matches_pattern(p)
               for e in entries if flt.matches_entry(e)]
        return sorted(out)


def group_by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Bindings grouped by resource pattern (DescribeAcls' response shape), order kept."""
    out: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(b.pattern, []).append(b.entry)
    return out
