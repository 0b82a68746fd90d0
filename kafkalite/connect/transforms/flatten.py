"""Flatten: nested structs (or maps, without a schema) become top-level fields named
``outer<delimiter>inner``; a field is optional if it or any parent was. Arrays are kept as
they are. Tombstones pass through."""
from __future__ import annotations

from typing import Any

from ..config import AbstractConfig, ConfigDef, Importance, Type as ConfigType
from ..data import Schema, SchemaBuilder, Struct, Type, copy_schema_basics
from ..errors import DataException
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide, require_map, require_struct

PURPOSE = "flattening"


class Flatten(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.delimiter = "."
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return ConfigDef().define("delimiter", ConfigType.STRING, ".", None, Importance.MEDIUM,
                                  "Delimiter to insert between field names from the input record when generating "
                                  "field names for the output record")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.delimiter = config.get("delimiter")

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            out: dict[str, Any] = {}
            self._flatten_map(require_map(value, PURPOSE), "", out)
            return self.new_record(record, None, out)
        struct = require_struct(value, PURPOSE)
        updated_schema = self.cache.get_or_build(struct.schema, self._flat_schema)
        updated = Struct(updated_schema)
        self._flatten_struct(struct, struct.schema, "", updated)
        return self.new_record(record, updated_schema, updated)

    def _flatten_map(self, value: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, inner in value.items():
            name = self._name(prefix, str(key))
            if isinstance(inner, dict):
                self._flatten_map(inner, name, out)
            elif isinstance(inner, Struct):
                raise DataException(f"Flatten transformation does not support {type(inner).__name__} for record "
                                    f"without schemas (for field {name}).")
            else:
                out[name] = inner

    def _flat_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        self._build_schema(schema, "", builder, schema.optional)
        return builder.build()

    def _build_schema(self, schema: Schema, prefix: str, builder: SchemaBuilder, optional: bool) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            field_optional = optional or field.schema.optional
            if field.schema.type is Type.STRUCT:
                self._build_schema(field.schema, name, builder, field_optional)
                continue
            field_builder = copy_schema_basics(field.schema, SchemaBuilder(field.schema.type))
            if field.schema.type is Type.ARRAY:
                field_builder = copy_schema_basics(field.schema, SchemaBuilder.array(field.schema.value_schema))
            elif field.schema.type is Type.MAP:
                field_builder = copy_schema_basics(
                    field.schema, SchemaBuilder.map(field.schema.key_schema, field.schema.value_schema))
            if field_optional:
                field_builder.optional()
            if field.schema.default is not None:
                field_builder.default_value(field.schema.default)
            builder.field(name, field_builder.build())

    def _flatten_struct(self, value: Struct | None, schema: Schema, prefix: str, out: Struct) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            inner = value.get(field) if value is not None else None
            if field.schema.type is Type.STRUCT:
                self._flatten_struct(inner, field.schema, name, out)
            else:
                out.put(name, inner)


class FlattenKey(KeySide, Flatten):
    """org.apache.kafka.connect.transforms.Flatten$Key"""


class FlattenValue(ValueSide, Flatten):
    """org.apache.kafka.connect.transforms.Flatten$Value"""
