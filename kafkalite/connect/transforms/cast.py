"""Cast: fields (``spec=a:int32,b:string``) or the whole key/value (``spec=int64``) to another type.

From integers, floats, booleans and strings to any of int8..int64, float32, float64, boolean,
string, and bytes to string (base64). Narrowing wraps around as Java's casts do; a string that is
not a number of the target type is a DataException. Tombstones pass through.
"""
from __future__ import annotations

import base64
import datetime as _dt
import decimal
import struct as _struct
from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type as ConfigType
from ..data import (
    LOGICAL_NAMES, Date, Schema, SchemaBuilder, Struct, Time, Timestamp, Type, copy_schema_basics, schema_type_of,
)
from ..errors import DataException
from ..records import ConnectRecord
from ..values import convert_to_string, format_timestamp
from .base import KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide, require_map, require_struct

PURPOSE = "cast types"
SPEC_CONFIG = "spec"
INPUT_TYPES = {Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN,
               Type.STRING, Type.BYTES}
OUTPUT_TYPES = INPUT_TYPES - {Type.BYTES}
_BY_NAME = {t.value: t for t in Type}
WHOLE_VALUE = ""


def parse_field_types(specs: list[str]) -> dict[str, Type]:
    """``field:type`` pairs, or one bare type for the whole value (Kafka's parseFieldTypes)."""
    casts: dict[str, Type] = {}
    is_whole = False
    for spec in specs:
        parts = spec.split(":")
        if len(parts) > 2:
            raise ConfigException(SPEC_CONFIG, ",".join(specs), "Invalid cast mapping: " + spec)
        if len(parts) == 1:
            target = _valid_type(parts[0].strip(), "output")
            casts[WHOLE_VALUE] = target
            is_whole = True
        else:
            casts[parts[0]] = _valid_type(parts[1].strip(), "output")
    if is_whole and len(casts) > 1:
        raise ConfigException("Cast transformations that specify a type to cast the entire value to may only "
                              "specify a single cast in their spec")
    return casts


def _valid_type(name: str, direction: str) -> Type:
    schema_type = _BY_NAME.get(name.lower())
    if schema_type is None:
        raise ConfigException(f"Invalid type found in casting spec: {name}")
    if schema_type not in OUTPUT_TYPES:
        raise ConfigException(f"Cast transformation does not support casting to/from {schema_type}; supported "
                              f"types are {', '.join(sorted(t.value for t in OUTPUT_TYPES))}")
    return schema_type


class _SpecValidator:
    def ensure_valid(self, name: str, value: Any) -> None:
        if not value:
            raise ConfigException("Must specify at least one field to cast.")
        parse_field_types(list(value))

    def __str__(self) -> str:
        return "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"


def config_def() -> ConfigDef:
    return ConfigDef().define(
        SPEC_CONFIG, ConfigType.LIST, ConfigDef.NO_DEFAULT_VALUE, _SpecValidator(), Importance.HIGH,
        "List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of Maps or "
        "Structs. A single type to cast the entire value. Valid types are int8, int16, int32, int64, float32, "
        "float64, boolean, and string. Note that binary fields can only be cast to string.")


def _wrap(number: int, bits: int) -> int:
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >= 1 << (bits - 1) else number


def _to_float32(number: float) -> float:
    return float(_struct.unpack(">f", _struct.pack(">f", number))[0])


def _number(value: Any, integral: bool) -> int | float:
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, (int, float, decimal.Decimal)):
        return int(value) if integral else float(value)
    if isinstance(value, str):
        try:
            return int(value.strip()) if integral else float(value.strip())
        except ValueError:
            raise DataException(f"Value ({value}) was out of range for requested data type") from None
    raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")


def cast_value(schema: Schema | None, value: Any, target: Type) -> Any:
    """One value to ``target`` (Kafka's castValueToType)."""
    if value is None:
        return None
    inferred = schema.type if schema is not None else schema_type_of(value)
    if inferred is None:
        raise DataException(f"Cast transformation was passed a value of type {type(value).__name__} which is not "
                            "supported by Connect's data API")
    if inferred not in INPUT_TYPES:
        raise DataException(f"Cast transformation does not support casting to/from {inferred}; supported types "
                            f"are {', '.join(sorted(t.value for t in OUTPUT_TYPES))}")
    if inferred is Type.BYTES and target is not Type.STRING:
        raise DataException(f"Unexpected type in Cast transformation: bytes can only be cast to string, not {target}")
    if schema is not None and schema.name is not None and target is not Type.STRING:
        value = _encode_logical(schema, value)
    if target is Type.STRING:
        if isinstance(value, _dt.datetime):
            return format_timestamp(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return base64.b64encode(bytes(value)).decode("ascii")
        return convert_to_string(schema, value)
    if target is Type.BOOLEAN:
        if isinstance(value, str):
            return value.strip().lower() == "true"
        if isinstance(value, (int, float, decimal.Decimal)):
            return int(value) != 0 if not isinstance(value, bool) else value
        raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")
    if target in (Type.FLOAT32, Type.FLOAT64):
        number = float(_number(value, integral=False))
        return _to_float32(number) if target is Type.FLOAT32 else number
    bits = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}[target]
    if isinstance(value, str):
        parsed = int(_number(value, integral=True))
        if not -(1 << (bits - 1)) <= parsed < (1 << (bits - 1)):
            raise DataException(f"Value ({value}) was out of range for requested data type")
        return parsed
    return _wrap(int(_number(value, integral=True)), bits)


def _encode_logical(schema: Schema, value: Any) -> Any:
    if schema.name == Date.LOGICAL_NAME:
        return Date.from_logical(schema, value)
    if schema.name == Time.LOGICAL_NAME:
        return Time.from_logical(schema, value)
    if schema.name == Timestamp.LOGICAL_NAME:
        return Timestamp.from_logical(schema, value)
    return value


class Cast(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.casts: dict[str, Type] = {}
        self.whole: Type | None = None
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return config_def()

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.casts = parse_field_types(list(config.get(SPEC_CONFIG)))
        self.whole = self.casts.get(WHOLE_VALUE)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            if self.whole is not None:
                return self.new_record(record, None, cast_value(None, value, self.whole))
            data = dict(require_map(value, PURPOSE))
            for name, target in self.casts.items():
                data[name] = cast_value(None, data.get(name), target)
            return self.new_record(record, None, data)
        updated_schema = self._updated_schema(schema)
        if self.whole is not None:
            return self.new_record(record, updated_schema, cast_value(schema, value, self.whole))
        struct = require_struct(value, PURPOSE)
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            original = struct.get(field)
            cast_to = self.casts.get(field.name)
            updated.put(field.name, cast_value(field.schema, original, cast_to) if cast_to is not None else original)
        return self.new_record(record, updated_schema, updated)

    def _updated_schema(self, schema: Schema) -> Schema:
        return self.cache.get_or_build(schema, self._build_schema)

    def _build_schema(self, schema: Schema) -> Schema:
        if self.whole is not None:
            # a logical type's name would no longer describe the cast value
            builder = (SchemaBuilder(self.whole) if schema.name in LOGICAL_NAMES
                       else copy_schema_basics(schema, SchemaBuilder(self.whole)))
        else:
            builder = copy_schema_basics(schema, SchemaBuilder.struct())
            for field in schema.fields:
                target = self.casts.get(field.name)
                if target is None:
                    builder.field(field.name, field.schema)
                    continue
                field_builder = SchemaBuilder(target)
                if field.schema.optional:
                    field_builder.optional()
                if field.schema.default is not None:
                    field_builder.default_value(cast_value(field.schema, field.schema.default, target))
                builder.field(field.name, field_builder.build())
        if schema.optional:
            builder.optional()
        if schema.default is not None:
            builder.default_value(cast_value(schema, schema.default, builder.type))
        return builder.build()


class CastKey(KeySide, Cast):
    """org.apache.kafka.connect.transforms.Cast$Key"""


class CastValue(ValueSide, Cast):
    """org.apache.kafka.connect.transforms.Cast$Value"""
