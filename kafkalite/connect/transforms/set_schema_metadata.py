"""SetSchemaMetadata: set the key or value schema's name and/or version (a struct value is
re-attached to the renamed schema)."""
from __future__ import annotations

from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type
from ..data import Schema, Struct
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, ValueSide, require_schema


class SetSchemaMetadata(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.schema_name: str | None = None
        self.schema_version: int | None = None

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("schema.name", Type.STRING, None, None, Importance.HIGH, "Schema name to set.")
                .define("schema.version", Type.INT, None, None, Importance.HIGH, "Schema version to set."))

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.schema_name = config.get("schema.name")
        self.schema_version = config.get("schema.version")
        if self.schema_name is None and self.schema_version is None:
            raise ConfigException("Neither schema name nor version configured")

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema = require_schema(self.operating_schema(record), "updating schema metadata")
        updated = Schema(schema.type, schema.optional, schema.default,
                         self.schema_name if self.schema_name is not None else schema.name,
                         self.schema_version if self.schema_version is not None else schema.version,
                         schema.doc, schema.parameters,
                         schema.fields if schema.type.value == "struct" else None,
                         schema.key_schema if schema.type.value == "map" else None,
                         schema.value_schema if schema.type.value in ("map", "array") else None)
        return self.new_record(record, updated, _update_schema_in(self.operating_value(record), updated))


def _update_schema_in(value: Any, schema: Schema) -> Any:
    if isinstance(value, Struct):
        updated = Struct(schema)
        for field in value.schema.fields:
            updated.put(field.name, value.get_without_default(field))
        return updated
    return value


class SetSchemaMetadataKey(KeySide, SetSchemaMetadata):
    """org.apache.kafka.connect.transforms.SetSchemaMetadata$Key"""


class SetSchemaMetadataValue(ValueSide, SetSchemaMetadata):
    """org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"""
