"""InsertField: add the record's topic, partition, offset, timestamp or a static value as fields.

A field name ending in ``!`` is required in the output schema, ``?`` (the default) optional.
Tombstones pass through unchanged.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from ..config import AbstractConfig, ConfigDef, Importance, Type
from ..data import (
    INT32_SCHEMA, INT64_SCHEMA, OPTIONAL_INT32_SCHEMA, OPTIONAL_INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA,
    Schema, SchemaBuilder, Struct, Timestamp, copy_schema_basics,
)
from ..records import ConnectRecord
from .base import (
    KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide, require_map, require_sink_record,
    require_struct,
)

PURPOSE = "field insertion"
TOPIC_FIELD, PARTITION_FIELD, OFFSET_FIELD = "topic.field", "partition.field", "offset.field"
TIMESTAMP_FIELD, STATIC_FIELD, STATIC_VALUE = "timestamp.field", "static.field", "static.value"
_OPTIONALITY_DOC = ("Suffix with <code>!</code> to make this a required field, or <code>?</code> to keep it "
                    "optional (the default).")


class InsertionSpec(NamedTuple):
    name: str
    optional: bool

    @staticmethod
    def parse(spec: str | None) -> "InsertionSpec | None":
        if not spec:
            return None
        if spec.endswith("?"):
            return InsertionSpec(spec[:-1], True)
        if spec.endswith("!"):
            return InsertionSpec(spec[:-1], False)
        return InsertionSpec(spec, True)


def config_def() -> ConfigDef:
    return (ConfigDef()
            .define(TOPIC_FIELD, Type.STRING, None, None, Importance.MEDIUM,
                    "Field name for Kafka topic. " + _OPTIONALITY_DOC)
            .define(PARTITION_FIELD, Type.STRING, None, None, Importance.MEDIUM,
                    "Field name for Kafka partition. " + _OPTIONALITY_DOC)
            .define(OFFSET_FIELD, Type.STRING, None, None, Importance.MEDIUM,
                    "Field name for Kafka offset - only applicable to sink connectors.<br/>" + _OPTIONALITY_DOC)
            .define(TIMESTAMP_FIELD, Type.STRING, None, None, Importance.MEDIUM,
                    "Field name for record timestamp. " + _OPTIONALITY_DOC)
            .define(STATIC_FIELD, Type.STRING, None, None, Importance.MEDIUM,
                    "Field name for static data field. " + _OPTIONALITY_DOC)
            .define(STATIC_VALUE, Type.STRING, None, None, Importance.MEDIUM,
                    "Static field value, if field name configured."))


class InsertField(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.topic: InsertionSpec | None = None
        self.partition: InsertionSpec | None = None
        self.offset: InsertionSpec | None = None
        self.timestamp: InsertionSpec | None = None
        self.static: InsertionSpec | None = None
        self.static_value: str | None = None
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return config_def()

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.topic = InsertionSpec.parse(config.get(TOPIC_FIELD))
        self.partition = InsertionSpec.parse(config.get(PARTITION_FIELD))
        self.offset = InsertionSpec.parse(config.get(OFFSET_FIELD))
        self.timestamp = InsertionSpec.parse(config.get(TIMESTAMP_FIELD))
        self.static = InsertionSpec.parse(config.get(STATIC_FIELD))
        self.static_value = config.get(STATIC_VALUE)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if self.operating_value(record) is None:
            return record
        if self.operating_schema(record) is None:
            return self._schemaless(record)
        return self._with_schema(record)

    def _insertions(self, record: ConnectRecord, as_logical: bool) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        if self.topic:
            out.append((self.topic.name, record.topic))
        if self.partition:
            out.append((self.partition.name, record.kafka_partition))
        if self.offset:
            out.append((self.offset.name, require_sink_record(record, PURPOSE).kafka_offset))
        if self.timestamp:
            ts = record.timestamp
            if as_logical and ts is not None:
                out.append((self.timestamp.name, Timestamp.to_logical(Timestamp.SCHEMA, ts)))
            else:
                out.append((self.timestamp.name, ts))
        if self.static:
            out.append((self.static.name, self.static_value))
        return out

    def _schemaless(self, record: ConnectRecord) -> ConnectRecord:
        value = dict(require_map(self.operating_value(record), PURPOSE))
        for name, inserted in self._insertions(record, as_logical=False):
            value[name] = inserted
        return self.new_record(record, None, value)

    def _updated_schema(self, schema: Schema) -> Schema:
        return self.cache.get_or_build(schema, self._build_schema)

    def _build_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            builder.field(field.name, field.schema)
        if self.topic:
            builder.field(self.topic.name, OPTIONAL_STRING_SCHEMA if self.topic.optional else STRING_SCHEMA)
        if self.partition:
            builder.field(self.partition.name, OPTIONAL_INT32_SCHEMA if self.partition.optional else INT32_SCHEMA)
        if self.offset:
            builder.field(self.offset.name, OPTIONAL_INT64_SCHEMA if self.offset.optional else INT64_SCHEMA)
        if self.timestamp:
            ts = Timestamp.builder()
            builder.field(self.timestamp.name, (ts.optional() if self.timestamp.optional else ts).build())
        if self.static:
            builder.field(self.static.name, OPTIONAL_STRING_SCHEMA if self.static.optional else STRING_SCHEMA)
        return builder.build()

    def _with_schema(self, record: ConnectRecord) -> ConnectRecord:
        value = require_struct(self.operating_value(record), PURPOSE)
        schema = self._updated_schema(value.schema)
        updated = Struct(schema)
        for field in value.schema.fields:
            updated.put(field.name, value.get(field))
        for name, inserted in self._insertions(record, as_logical=True):
            updated.put(name, inserted)
        return self.new_record(record, schema, updated)


class InsertFieldKey(KeySide, InsertField):
    """org.apache.kafka.connect.transforms.InsertField$Key"""


class InsertFieldValue(ValueSide, InsertField):
    """org.apache.kafka.connect.transforms.InsertField$Value"""


