"""HoistField: wrap the key or value in a struct (or map) with a single field."""
from __future__ import annotations

from ..config import AbstractConfig, ConfigDef, Importance, Type
from ..data import SchemaBuilder, Struct
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide


class HoistField(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.field = ""
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return ConfigDef().define("field", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, None, Importance.MEDIUM,
                                  "Field name for the single field that will be created in the resulting Struct "
                                  "or Map.")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.field = config.get("field")

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        updated_schema = self.cache.get_or_build(schema, lambda s: SchemaBuilder.struct().field(self.field, s).build())
        return self.new_record(record, updated_schema, Struct(updated_schema).put(self.field, value))


class HoistFieldKey(KeySide, HoistField):
    """org.apache.kafka.connect.transforms.HoistField$Key"""


class HoistFieldValue(ValueSide, HoistField):
    """org.apache.kafka.connect.transforms.HoistField$Value"""


