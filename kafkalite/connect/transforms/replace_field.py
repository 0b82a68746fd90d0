"""ReplaceField: keep (``include``), drop (``exclude``) and rename (``renames``) fields.

``whitelist``/``blacklist`` are accepted as Kafka 2.8 still does (deprecated aliases of
include/exclude). Tombstones pass through.
"""
from __future__ import annotations

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type
from ..data import Schema, SchemaBuilder, Struct, copy_schema_basics
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide, require_map, require_struct

PURPOSE = "field replacement"


def _parse_renames(name: str, value: object) -> None:
    for mapping in value or []:  # type: ignore[attr-defined]
        parts = str(mapping).split(":")
        if len(parts) != 2:
            raise ConfigException(name, value, f"Invalid rename mapping: {mapping}")


class _RenamesValidator:
    def ensure_valid(self, name: str, value: object) -> None:
        _parse_renames(name, value)

    def __str__(self) -> str:
        return "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"


def config_def() -> ConfigDef:
    return (ConfigDef()
            .define("exclude", Type.LIST, "", None, Importance.MEDIUM,
                    "Fields to exclude. This takes precedence over the fields to include.")
            .define("blacklist", Type.LIST, None, None, Importance.LOW, "Deprecated. Use exclude instead.")
            .define("include", Type.LIST, "", None, Importance.MEDIUM,
                    "Fields to include. If specified, only these fields will be used.")
            .define("whitelist", Type.LIST, None, None, Importance.LOW, "Deprecated. Use include instead.")
            .define("renames", Type.LIST, "", _RenamesValidator(), Importance.MEDIUM, "Field rename mappings."))


class ReplaceField(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.exclude: set[str] = set()
        self.include: set[str] = set()
        self.renames: dict[str, str] = {}
        self.reverse: dict[str, str] = {}
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return config_def()

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.exclude = set(config.get("exclude") or config.get("blacklist") or [])
        self.include = set(config.get("include") or config.get("whitelist") or [])
        self.renames = dict(tuple(m.split(":")) for m in config.get("renames"))
        self.reverse = {v: k for k, v in self.renames.items()}

    def keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def renamed(self, name: str) -> str:
        return self.renames.get(name, name)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        if value is None:
            return record
        if self.operating_schema(record) is None:
            data = require_map(value, PURPOSE)
            return self.new_record(record, None, {self.renamed(k): v for k, v in data.items() if self.keep(k)})
        struct = require_struct(value, PURPOSE)
        schema = self._updated_schema(struct.schema)
        updated = Struct(schema)
        for field in schema.fields:
            updated.put(field, struct.get(self.reverse.get(field.name, field.name)))
        return self.new_record(record, schema, updated)

    def _updated_schema(self, schema: Schema) -> Schema:
        return self.cache.get_or_build(schema, self._build_schema)

    def _build_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            if self.keep(field.name):
                builder.field(self.renamed(field.name), field.schema)
        return builder.build()


class ReplaceFieldKey(KeySide, ReplaceField):
    """org.apache.kafka.connect.transforms.ReplaceField$Key"""


class ReplaceFieldValue(ValueSide, ReplaceField):
    """org.apache.kafka.connect.transforms.ReplaceField$Value"""
