"""ExtractField: replace the key or value with one of its fields (a null record stays null)."""
from __future__ import annotations

from ..config import AbstractConfig, ConfigDef, Importance, Type
from ..errors import DataException
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, ValueSide, require_map, require_struct

PURPOSE = "field extraction"


class ExtractField(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.field = ""

    def config(self) -> ConfigDef:
        return ConfigDef().define("field", Type.STRING, ConfigDef.NO_DEFAULT_VALUE, None, Importance.MEDIUM,
                                  "Field name to extract.")

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.field = config.get("field")

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            data = require_map(value, PURPOSE) if value is not None else None
            return self.new_record(record, None, None if data is None else data.get(self.field))
        struct = require_struct(value, PURPOSE) if value is not None else None
        field = schema.field(self.field)
        if field is None:
            raise DataException(f"Unknown field: {self.field}")
        return self.new_record(record, field.schema, None if struct is None else struct.get(self.field))


class ExtractFieldKey(KeySide, ExtractField):
    """org.apache.kafka.connect.transforms.ExtractField$Key"""


class ExtractFieldValue(ValueSide, ExtractField):
    """org.apache.kafka.connect.transforms.ExtractField$Value"""
