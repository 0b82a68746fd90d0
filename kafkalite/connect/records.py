"""The records connectors exchange with the runtime (org.apache.kafka.connect.connector/source/sink/header).

A SourceRecord carries where it came from in the external system (``source_partition``,
``source_offset``: plain JSON-able dicts the runtime stores in the offsets topic); a SinkRecord
carries where it came from in Kafka (``kafka_offset``) and, once a transform renamed its topic or
partition, the original coordinates, so the dead-letter reporter and the offsets the task commits
still name the consumed partition.
"""
from __future__ import annotations

import enum
from typing import Any, Iterable, Iterator

from .data import (
    BOOLEAN_SCHEMA, BYTES_SCHEMA, FLOAT32_SCHEMA, FLOAT64_SCHEMA, INT8_SCHEMA, INT16_SCHEMA, INT32_SCHEMA,
    INT64_SCHEMA, STRING_SCHEMA, Schema, validate_value,
)

__all__ = ["Header", "ConnectHeaders", "ConnectRecord", "SourceRecord", "SinkRecord", "TimestampType"]


class TimestampType(enum.Enum):
    """Kafka's record TimestampType; ``value`` is its name (as __connect.errors headers and clients print)."""

    NO_TIMESTAMP_TYPE = "NoTimestampType"
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


class Header:
    """One header: a key, a schema (None when unknown) and a value."""

    __slots__ = ("key", "schema", "value")

    def __init__(self, key: str, value: Any, schema: Schema | None = None) -> None:
        self.key = key
        self.schema = schema
        self.value = value

    def rename(self, key: str) -> "Header":
        return Header(key, self.value, self.schema)

    def with_value(self, schema: Schema | None, value: Any) -> "Header":
        return Header(self.key, value, schema)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Header) and self.key == other.key and self.schema == other.schema
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"ConnectHeader(key={self.key}, value={self.value!r}, schema={self.schema})"


class ConnectHeaders:
    """An ordered, mutable list of headers; a key may repeat (Kafka's ConnectHeaders)."""

    def __init__(self, headers: Iterable[Header] | None = None) -> None:
        self._headers: list[Header] = list(headers or ())

    def add(self, key: str, value: Any, schema: Schema | None = None) -> "ConnectHeaders":
        if schema is not None:
            validate_value(schema, value, key)
        self._headers.append(Header(key, value, schema))
        return self

    def add_header(self, header: Header) -> "ConnectHeaders":
        self._headers.append(header)
        return self

    def add_string(self, key: str, value: str | None) -> "ConnectHeaders":
        return self.add(key, value, STRING_SCHEMA if value is not None else None)

    def add_boolean(self, key: str, value: bool) -> "ConnectHeaders":
        return self.add(key, value, BOOLEAN_SCHEMA)

    def add_byte(self, key: str, value: int) -> "ConnectHeaders":
        return self.add(key, value, INT8_SCHEMA)

    def add_short(self, key: str, value: int) -> "ConnectHeaders":
        return self.add(key, value, INT16_SCHEMA)

    def add_int(self, key: str, value: int) -> "ConnectHeaders":
        return self.add(key, value, INT32_SCHEMA)

    def add_long(self, key: str, value: int) -> "ConnectHeaders":
        return self.add(key, value, INT64_SCHEMA)

    def add_float(self, key: str, value: float) -> "ConnectHeaders":
        return self.add(key, value, FLOAT32_SCHEMA)

    def add_double(self, key: str, value: float) -> "ConnectHeaders":
        return self.add(key, value, FLOAT64_SCHEMA)

    def add_bytes(self, key: str, value: bytes) -> "ConnectHeaders":
        return self.add(key, value, BYTES_SCHEMA)

    def last_with_name(self, key: str) -> Header | None:
        for header in reversed(self._headers):
            if header.key == key:
                return header
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [h for h in self._headers if h.key == key]

    def remove(self, key: str) -> "ConnectHeaders":
        self._headers = [h for h in self._headers if h.key != key]
        return self

    def retain_latest(self, key: str | None = None) -> "ConnectHeaders":
        """Keep only the last header of ``key`` (of every key when None)."""
        seen: set[str] = set()
        kept: list[Header] = []
        for header in reversed(self._headers):
            if (key is None or header.key == key) and header.key in seen:
                continue
            seen.add(header.key)
            kept.append(header)
        self._headers = list(reversed(kept))
        return self

    def clear(self) -> "ConnectHeaders":
        self._headers = []
        return self

    def duplicate(self) -> "ConnectHeaders":
        return ConnectHeaders(self._headers)

    def __iter__(self) -> Iterator[Header]:
        return iter(list(self._headers))

    def __len__(self) -> int:
        return len(self._headers)

    def is_empty(self) -> bool:
        return not self._headers

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConnectHeaders) and self._headers == other._headers

    def __hash__(self) -> int:
        return hash(tuple(h.key for h in self._headers))

    def __repr__(self) -> str:
        return f"ConnectHeaders(headers={self._headers})"


def _headers_of(headers: "ConnectHeaders | Iterable[Header] | None") -> ConnectHeaders:
    if isinstance(headers, ConnectHeaders):
        return headers
    return ConnectHeaders(headers)


class ConnectRecord:
    """A record with its key/value schemas: the common part of SourceRecord and SinkRecord."""

    def __init__(self, topic: str, kafka_partition: int | None, key_schema: Schema | None, key: Any,
                 value_schema: Schema | None, value: Any, timestamp: int | None = None,
                 headers: ConnectHeaders | Iterable[Header] | None = None) -> None:
        self.topic = topic
        self.kafka_partition = kafka_partition
        self.key_schema = key_schema
        self.key = key
        self.value_schema = value_schema
        self.value = value
        self.timestamp = timestamp
        self.headers = _headers_of(headers)

    def new_record(self, topic: str, kafka_partition: int | None, key_schema: Schema | None, key: Any,
                   value_schema: Schema | None, value: Any, timestamp: int | None,
                   headers: ConnectHeaders | Iterable[Header] | None = None) -> "ConnectRecord":
        """A copy with these fields (headers duplicated when not given), as Kafka's newRecord."""
        return ConnectRecord(topic, kafka_partition, key_schema, key, value_schema, value, timestamp,
                             self.headers.duplicate() if headers is None else headers)

    def _fields(self) -> tuple[Any, ...]:
        return (self.topic, self.kafka_partition, self.key_schema, self.key, self.value_schema, self.value,
                self.timestamp, self.headers)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((self.topic, self.kafka_partition))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}{{topic='{self.topic}', kafkaPartition={self.kafka_partition}, "
                f"key={self.key!r}, keySchema={self.key_schema}, value={self.value!r}, "
                f"valueSchema={self.value_schema}, timestamp={self.timestamp}, headers={self.headers}}}")


class SourceRecord(ConnectRecord):
    """A record a SourceTask polled, with its position in the source system."""

    def __init__(self, source_partition: dict[str, Any] | None, source_offset: dict[str, Any] | None,
                 topic: str, kafka_partition: int | None = None, key_schema: Schema | None = None,
                 key: Any = None, value_schema: Schema | None = None, value: Any = None,
                 timestamp: int | None = None,
                 headers: ConnectHeaders | Iterable[Header] | None = None) -> None:
        super().__init__(topic, kafka_partition, key_schema, key, value_schema, value, timestamp, headers)
        self.source_partition = source_partition
        self.source_offset = source_offset

    def new_record(self, topic: str, kafka_partition: int | None, key_schema: Schema | None, key: Any,
                   value_schema: Schema | None, value: Any, timestamp: int | None,
                   headers: ConnectHeaders | Iterable[Header] | None = None) -> "SourceRecord":
        return SourceRecord(self.source_partition, self.source_offset, topic, kafka_partition, key_schema, key,
                            value_schema, value, timestamp,
                            self.headers.duplicate() if headers is None else headers)

    def _fields(self) -> tuple[Any, ...]:
        return super()._fields() + (self.source_partition, self.source_offset)


class SinkRecord(ConnectRecord):
    """A record consumed from Kafka, handed to SinkTask.put.

    ``original_topic``/``original_kafka_partition``/``original_kafka_offset`` stay those of the
    consumed record through transforms (new_record keeps them), for commits and DLQ context.
    """

    def __init__(self, topic: str, kafka_partition: int, key_schema: Schema | None, key: Any,
                 value_schema: Schema | None, value: Any, kafka_offset: int, timestamp: int | None = None,
                 timestamp_type: TimestampType = TimestampType.NO_TIMESTAMP_TYPE,
                 headers: ConnectHeaders | Iterable[Header] | None = None, *,
                 original_topic: str | None = None, original_kafka_partition: int | None = None,
                 original_kafka_offset: int | None = None) -> None:
        super().__init__(topic, kafka_partition, key_schema, key, value_schema, value, timestamp, headers)
        self.kafka_offset = kafka_offset
        self.timestamp_type = timestamp_type
        self.original_topic = original_topic if original_topic is not None else topic
        self.original_kafka_partition = (original_kafka_partition if original_kafka_partition is not None
                                         else kafka_partition)
        self.original_kafka_offset = original_kafka_offset if original_kafka_offset is not None else kafka_offset

    def new_record(self, topic: str, kafka_partition: int | None, key_schema: Schema | None, key: Any,
                   value_schema: Schema | None, value: Any, timestamp: int | None,
                   headers: ConnectHeaders | Iterable[Header] | None = None) -> "SinkRecord":
        partition = kafka_partition if kafka_partition is not None else self.kafka_partition
        return SinkRecord(topic, partition if partition is not None else -1,
                          key_schema, key, value_schema, value, self.kafka_offset, timestamp, self.timestamp_type,
                          self.headers.duplicate() if headers is None else headers,
                          original_topic=self.original_topic,
                          original_kafka_partition=self.original_kafka_partition,
                          original_kafka_offset=self.original_kafka_offset)

    def _fields(self) -> tuple[Any, ...]:
        return super()._fields() + (self.kafka_offset, self.timestamp_type)
