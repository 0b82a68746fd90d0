"""Dynamic configuration: ``/config/<type>/<name>`` and ``/config/changes/config_change_<seq>``.

Entity config (also written, empty, at every topic creation)::

    {"version":1,"config":{"retention.ms":"86400000"}}

Change notification (persistent sequential; every broker watches ``/config/changes`` and
re-reads ``/config/<entity_path>``; version 1 used separate type/name fields, still read)::

    {"version":2,"entity_path":"topics/my-topic"}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote, unquote

from zk_schema import paths
from zk_schema._json import dumps, loads_object, req_object, req_str, req_version
from zk_schema.errors import ZkDataError


def sanitize(name: str) -> str:
    """An entity name as a znode name (Kafka's Sanitizer: URL-encoded UTF-8, ``*`` as ``%2A``,
    a space as ``%20``, ``.-_~`` and letters/digits as they are), so ``User:CN=a,O=b`` fits in
    one path element."""
    return quote(name, safe="")


def desanitize(name: str) -> str:
    return unquote(name)


@dataclass(frozen=True)
class ConfigEntityZNode:
    """Per-entity config overrides; every value is a string."""

    config: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = {k: v for k, v in self.config.items()
               if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise ValueError(f"config keys and values must be strings: {bad!r}")

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{paths.CONFIG}/{entity_type}/{entity_name}"

    def encode(self) -> bytes:
        return dumps({"version": 1, "config": dict(self.config)})

    @classmethod
    def decode(cls, data: bytes) -> "ConfigEntityZNode":
        znode = "entity config"
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        config = req_object(znode, obj, "config")
        if not all(isinstance(v, str) for v in config.values()):
            raise ZkDataError(znode, "config values must be strings")
        return cls(dict(config))


@dataclass(frozen=True)
class TopicConfigZNode(ConfigEntityZNode):
    """``/config/topics/<t>``."""

    @staticmethod
    def path(topic: str) -> str:  # type: ignore[override]  # the entity type is fixed: only the topic is given
        return f"{paths.CONFIG}/topics/{topic}"


@dataclass(frozen=True)
class ConfigEntityChangeNotification:
    """Tells every broker that ``/config/<entity_path>`` changed."""

    entity_path: str

    PREFIX = "config_change_"

    @staticmethod
    def path_prefix() -> str:
        """Pass to a sequential create; ZooKeeper appends the 10-digit counter."""
        return f"{paths.CONFIG_CHANGES}/{ConfigEntityChangeNotification.PREFIX}"

    @classmethod
    def for_topic(cls, topic: str) -> "ConfigEntityChangeNotification":
        return cls(f"topics/{topic}")

    @property
    def entity_type(self) -> str:
        return self.entity_path.split("/", 1)[0]

    def encode(self) -> bytes:
        return dumps({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def decode(cls, data: bytes) -> "ConfigEntityChangeNotification":
        znode = "/config/changes notification"
        obj = loads_object(znode, data)
        version = req_version(znode, obj, (1, 2))
        if version == 1:
            return cls(f"{req_str(znode, obj, 'entity_type')}/{req_str(znode, obj, 'entity_name')}")
        entity_path = req_str(znode, obj, "entity_path")
        if "/" not in entity_path:
            raise ZkDataError(znode, f"entity_path must be <type>/<name>, got {entity_path!r}")
        return cls(entity_path)
