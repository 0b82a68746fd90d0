"""Topic-level log configuration with Kafka's property names (``LogConfig.scala``).

The broker maps its ``log.*`` defaults and each topic's ZooKeeper overrides onto one
:class:`LogConfig`; storage only ever reads the typed fields.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

#: Kafka topic-level properties that are valid but are enforced outside storage (the broker's
#: validator, replication, a cleaner). They are accepted and ignored here so that a topic's full
#: override map can be passed through unchanged; anything else unknown is rejected.
NON_STORAGE_PROPERTIES = frozenset({
    "compression.type", "min.insync.replicas", "unclean.leader.election.enable",
    "message.timestamp.difference.max.ms", "message.downconversion.enable", "message.format.version",
    "preallocate", "segment.jitter.ms", "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
})


def _long(lo: int, hi: int = LONG_MAX) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"{name}={text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise ValueError(f"{name}={value} is out of range [{lo}, {hi}]")
        return value
    return parse


def _ratio(name: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={value} is out of range [0, 1]")
    return value


def _choice(*allowed: str) -> Callable[[str, str], str]:
    def parse(name: str, text: str) -> str:
        value = text.strip()
        if value not in allowed:
            raise ValueError(f"{name}={text!r} must be one of {', '.join(allowed)}")
        return value
    return parse


def _cleanup_policy(name: str, text: str) -> str:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"{name}={text!r} must be a list of delete and/or compact")
    return ",".join(sorted(set(parts), reverse=True))   # canonical: "delete", "compact" or "delete,compact"


# Kafka property -> (dataclass field, parser)
_PROPERTIES: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "segment.bytes": ("segment_bytes", _long(14, INT_MAX)),
    "segment.ms": ("segment_ms", _long(1)),
    "retention.ms": ("retention_ms", _long(-1)),
    "retention.bytes": ("retention_bytes", _long(-1)),
    "index.interval.bytes": ("index_interval_bytes", _long(0, INT_MAX)),
    "segment.index.bytes": ("segment_index_bytes", _long(12, INT_MAX)),
    "flush.messages": ("flush_messages", _long(1)),
    "flush.ms": ("flush_ms", _long(0)),
    "message.timestamp.type": ("message_timestamp_type", _choice(CREATE_TIME, LOG_APPEND_TIME)),
    "max.message.bytes": ("max_message_bytes", _long(0, INT_MAX)),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "file.delete.delay.ms": ("file_delete_delay_ms", _long(0)),
    # log compaction (cleaner.py)
    "delete.retention.ms": ("delete_retention_ms", _long(0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _long(0)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _long(1)),
}


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings; field defaults are Kafka 2.x topic defaults."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000            # -1 = unlimited
    retention_bytes: int = -1                # -1 = unlimited
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    flush_messages: int = LONG_MAX           # LONG_MAX = leave flushing to the OS
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = CREATE_TIME
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000      # tombstones stay this long after the cleaner first saw them
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    def __post_init__(self) -> None:
        # Re-validate typed construction through the same parsers as from_properties.
        for prop, (field, parse) in _PROPERTIES.items():
            parse(prop, str(getattr(self, field)))

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka property strings over ``base`` (default: Kafka's defaults).

        Raises ValueError with one line naming the property for a bad value or an unknown name.
        """
        changes: dict[str, Any] = {}
        for name, text in props.items():
            if name in _PROPERTIES:
                field, parse = _PROPERTIES[name]
                changes[field] = parse(name, str(text))
            elif name not in NON_STORAGE_PROPERTIES:
                raise ValueError(f"unknown topic config {name!r}")
        return dataclasses.replace(base or cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Kafka property name -> string value, e.g. for DescribeConfigs."""
        return {prop: str(getattr(self, field)) for prop, (field, _) in _PROPERTIES.items()}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Time/size retention applies only when the cleanup policy includes delete."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact_enabled(self) -> bool:
        """The log cleaner compacts the log (cleanup.policy compact or compact,delete)."""
        return "compact" in self.cleanup_policy.split(",")
