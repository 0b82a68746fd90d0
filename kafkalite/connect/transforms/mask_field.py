"""MaskField: replace fields with their type's empty value (0, false, "", empty list/map, epoch),
or with ``replacement`` for numeric and string fields. The schema is unchanged."""
from __future__ import annotations

import datetime as _dt
import decimal
from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, NonEmptyString, Type as ConfigType
from ..data import Schema, Struct, Type
from ..errors import DataException
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, ValueSide, require_map, require_struct

PURPOSE = "mask fields"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


class _NonEmptyList:
    def ensure_valid(self, name: str, value: Any) -> None:
        if not value:
            raise ConfigException(name, value, "Empty list")

    def __str__(self) -> str:
        return "non-empty list"


def config_def() -> ConfigDef:
    return (ConfigDef()
            .define("fields", ConfigType.LIST, ConfigDef.NO_DEFAULT_VALUE, _NonEmptyList(), Importance.HIGH,
                    "Names of fields to mask.")
            .define("replacement", ConfigType.STRING, None, NonEmptyString(), Importance.LOW,
                    "Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty "
                    "string values only)."))


def _empty_value(value: Any) -> Any:
    """The masked value for a Python value's type (Kafka's PRIMITIVE_VALUE_MAPPING by class)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, _dt.datetime):
        return _EPOCH
    if isinstance(value, _dt.date):
        return _dt.date(1970, 1, 1)
    if isinstance(value, _dt.time):
        return _dt.time(0)
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    raise DataException(f"Cannot mask value of type: {type(value).__name__}")


def _replacement_for(value: Any, replacement: str) -> Any:
    try:
        if isinstance(value, bool):
            raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")
        if isinstance(value, int):
            return int(replacement)
        if isinstance(value, float):
            return float(replacement)
        if isinstance(value, decimal.Decimal):
            return decimal.Decimal(replacement)
        if isinstance(value, str):
            return replacement
    except (ValueError, decimal.InvalidOperation):
        raise DataException(f"Unable to convert {replacement} ({type(replacement).__name__}) to number") from None
    raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")


class MaskField(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.fields: set[str] = set()
        self.replacement: str | None = None

    def config(self) -> ConfigDef:
        return config_def()

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.fields = set(config.get("fields"))
        self.replacement = config.get("replacement")

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        return _empty_value(value) if self.replacement is None else _replacement_for(value, self.replacement)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        if value is None:
            return record
        schema: Schema | None = self.operating_schema(record)
        if schema is None:
            data = dict(require_map(value, PURPOSE))
            for name in self.fields:
                if name in data:
                    data[name] = self._masked(data[name])
            return self.new_record(record, None, data)
        struct = require_struct(value, PURPOSE)
        updated = Struct(struct.schema)
        for field in struct.schema.fields:
            original = struct.get(field)
            if field.name in self.fields and original is not None:
                masked = self._masked(original)
                if field.schema.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64) and isinstance(masked, float):
                    masked = int(masked)
                updated.put(field, masked)
            else:
                updated.put(field, original)
        return self.new_record(record, struct.schema, updated)


class MaskFieldKey(KeySide, MaskField):
    """org.apache.kafka.connect.transforms.MaskField$Key"""


class MaskFieldValue(ValueSide, MaskField):
    """org.apache.kafka.connect.transforms.MaskField$Value"""
