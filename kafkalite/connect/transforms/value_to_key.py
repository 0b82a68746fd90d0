"""ValueToKey: the record key becomes the listed fields of the value (a map, or a struct with a
schema built from the value's)."""
from __future__ import annotations

from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type
from ..data import Schema, SchemaBuilder, Struct
from ..errors import DataException
from ..records import ConnectRecord
from .base import SchemaUpdateCache, Transformation, require_map, require_struct

PURPOSE = "copying fields from value to key"


class _NonEmptyList:
    def ensure_valid(self, name: str, value: Any) -> None:
        if not value:
            raise ConfigException(name, value, "Empty list")

    def __str__(self) -> str:
        return "non-empty list"


class ValueToKey(Transformation):
    """org.apache.kafka.connect.transforms.ValueToKey"""

    def __init__(self) -> None:
        self.fields: list[str] = []
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return ConfigDef().define("fields", Type.LIST, ConfigDef.NO_DEFAULT_VALUE, _NonEmptyList(), Importance.HIGH,
                                  "Field names on the record value to extract as the record key.")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.fields = list(config.get("fields"))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if record.value_schema is None:
            value = require_map(record.value, PURPOSE)
            key = {name: value.get(name) for name in self.fields}
            return record.new_record(record.topic, record.kafka_partition, None, key, record.value_schema,
                                     record.value, record.timestamp)
        struct = require_struct(record.value, PURPOSE)
        key_schema = self._key_schema(struct.schema)
        key_struct = Struct(key_schema)
        for name in self.fields:
            key_struct.put(name, struct.get(name))
        return record.new_record(record.topic, record.kafka_partition, key_schema, key_struct, record.value_schema,
                                 record.value, record.timestamp)

    def _key_schema(self, value_schema: Schema) -> Schema:
        return self.cache.get_or_build(value_schema, self._build_key_schema)

    def _build_key_schema(self, value_schema: Schema) -> Schema:
        builder = SchemaBuilder.struct()
        for name in self.fields:
            field = value_schema.field(name)
            if field is None:
                raise DataException(f"Field does not exist: {name}")
            builder.field(name, field.schema)
        return builder.build()
