"""Topic-level log configuration: the typed fields storage reads (Kafka's ``LogConfig``).

There is one table of topic properties, ``kafkalite.config.TOPIC_KEYS`` (names, types, validators,
broker synonyms; a pure module with no broker, Twisted or kazoo imports). Each key whose ``field``
is set is carried here: the field defaults are the table's Kafka defaults (``TOPIC_DEFAULTS``), a
constructed LogConfig is validated by the table's validators, and the broker builds one from a
topic's resolved typed values with :meth:`LogConfig.from_topic_config` (no rendering to strings
and parsing back). Keys without a field are read by the broker (``min.insync.replicas``,
``unclean.leader.election.enable``) or accepted and ignored (``preallocate``, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from kafkalite.config import TOPIC_DEFAULTS, TOPIC_KEYS, TopicKey

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"

#: LogConfig field -> the topic key it carries.
FIELD_KEYS: dict[str, TopicKey] = {key.field: key for key in TOPIC_KEYS.values() if key.field}


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings; the defaults are Kafka 2.x topic defaults, from the table."""

    segment_bytes: int = TOPIC_DEFAULTS["segment.bytes"]
    segment_ms: int = TOPIC_DEFAULTS["segment.ms"]
    retention_ms: int = TOPIC_DEFAULTS["retention.ms"]                 # -1 = unlimited
    retention_bytes: int = TOPIC_DEFAULTS["retention.bytes"]           # -1 = unlimited
    index_interval_bytes: int = TOPIC_DEFAULTS["index.interval.bytes"]
    segment_index_bytes: int = TOPIC_DEFAULTS["segment.index.bytes"]
    flush_messages: int = TOPIC_DEFAULTS["flush.messages"]             # Long.MAX_VALUE = leave it to the OS
    flush_ms: int = TOPIC_DEFAULTS["flush.ms"]
    message_timestamp_type: str = TOPIC_DEFAULTS["message.timestamp.type"]
    max_message_bytes: int = TOPIC_DEFAULTS["max.message.bytes"]
    cleanup_policy: tuple[str, ...] = tuple(TOPIC_DEFAULTS["cleanup.policy"])
    file_delete_delay_ms: int = TOPIC_DEFAULTS["file.delete.delay.ms"]
    delete_retention_ms: int = TOPIC_DEFAULTS["delete.retention.ms"]   # tombstones stay this long after first cleaned
    min_cleanable_dirty_ratio: float = TOPIC_DEFAULTS["min.cleanable.dirty.ratio"]
    min_compaction_lag_ms: int = TOPIC_DEFAULTS["min.compaction.lag.ms"]
    max_compaction_lag_ms: int = TOPIC_DEFAULTS["max.compaction.lag.ms"]

    def __post_init__(self) -> None:
        """Validate with the table's rules (ConfigError, a ValueError naming the property); list
        properties become tuples so the config stays hashable."""
        for f in fields(self):
            key = FIELD_KEYS[f.name]
            value = getattr(self, f.name)
            if key.kind == "list":
                if isinstance(value, str):
                    raise TypeError(f"{f.name} takes a list of values, not the string {value!r}")
                value = tuple(value)
                object.__setattr__(self, f.name, value)
                key.check(list(value))
            else:
                key.check(value)

    @classmethod
    def from_topic_config(cls, values: Mapping[str, Any]) -> LogConfig:
        """From a topic's typed values by Kafka property name (``BrokerConfig.topic_config``);
        properties storage does not carry are left out, missing ones keep Kafka's default."""
        return cls(**{f: values[key.name] for f, key in FIELD_KEYS.items() if key.name in values})

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Time/size retention applies only when the cleanup policy includes delete."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        """The log cleaner compacts the log (cleanup.policy compact or compact,delete)."""
        return "compact" in self.cleanup_policy
