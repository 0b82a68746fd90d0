"""The Transformation and Predicate plugin API, and the helpers every Kafka SMT shares.

Kafka's transforms come in $Key/$Value pairs: one algorithm, applied to the record's key or its
value. Here the algorithm is a class written against ``operating_schema``/``operating_value``/
``new_record``, and the _Key/_Value mixins say which side those touch (Kafka's abstract methods).
"""
from __future__ import annotations

import abc
from collections import OrderedDict
from typing import Any, Callable, Mapping

from .. import __version__
from ..config import AbstractConfig, ConfigDef
from ..data import Schema, Struct
from ..errors import DataException
from ..records import ConnectRecord, SinkRecord

__all__ = ["Transformation", "Predicate", "KeyOrValueTransformation", "KeySide", "ValueSide", "require_map",
           "require_struct", "require_sink_record", "require_schema", "SchemaUpdateCache"]


class ConfigurablePlugin(abc.ABC):
    """What transformations and predicates share (Kafka's Versioned, Configurable and Closeable):
    a ConfigDef, configuration through it, a version, ``close``."""

    def version(self) -> str:
        return __version__

    @abc.abstractmethod
    def config(self) -> ConfigDef: ...

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.configure_parsed(AbstractConfig(self.config(), configs))

    def configure_parsed(self, config: AbstractConfig) -> None:
        """Read the parsed configuration (the common path of ``configure``)."""

    def close(self) -> None:
        pass


class Transformation(ConfigurablePlugin):
    """A single message transform: ``apply`` returns the new record, or None to drop it."""

    @abc.abstractmethod
    def apply(self, record: ConnectRecord) -> ConnectRecord | None: ...


class Predicate(ConfigurablePlugin):
    """A condition on a record: a transformation with ``transforms.X.predicate`` applies only where it holds."""

    @abc.abstractmethod
    def test(self, record: ConnectRecord) -> bool: ...


class KeyOrValueTransformation(Transformation):
    """A transform of one side of the record; the side comes from KeySide or ValueSide."""

    @abc.abstractmethod
    def operating_schema(self, record: ConnectRecord) -> Schema | None: ...

    @abc.abstractmethod
    def operating_value(self, record: ConnectRecord) -> Any: ...

    @abc.abstractmethod
    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord: ...


class KeySide:
    """Kafka's ``$Key`` variant: the transform reads and replaces the record key."""

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(record.topic, record.kafka_partition, schema, value, record.value_schema,
                                 record.value, record.timestamp)


class ValueSide:
    """Kafka's ``$Value`` variant: the transform reads and replaces the record value."""

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        return record.new_record(record.topic, record.kafka_partition, record.key_schema, record.key, schema,
                                 value, record.timestamp)


def _class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], found: "
                            f"{_class_name(value)}")
    return value


def require_map_or_null(value: Any, purpose: str) -> dict[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {_class_name(value)}")
    return value


def require_struct_or_null(value: Any, purpose: str) -> Struct | None:
    return None if value is None else require_struct(value, purpose)


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def require_sink_record(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], found: {_class_name(record)}")
    return record


class SchemaUpdateCache:
    """Kafka's per-transform LRU of input schema -> output schema (16 entries)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._entries: OrderedDict[Schema, Schema] = OrderedDict()

    def get(self, schema: Schema) -> Schema | None:
        found = self._entries.get(schema)
        if found is not None:
            self._entries.move_to_end(schema)
        return found

    def put(self, schema: Schema, updated: Schema) -> None:
        self._entries[schema] = updated
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def get_or_build(self, schema: Schema, build: Callable[[Schema], Schema]) -> Schema:
        """The output schema for ``schema``, built (and remembered) on a miss."""
        found = self.get(schema)
        if found is None:
            found = build(schema)
            self.put(schema, found)
        return found
