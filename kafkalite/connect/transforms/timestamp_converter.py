"""TimestampConverter: a timestamp field (or the whole key/value) between Unix epoch millis,
a formatted string (``format``, a Java SimpleDateFormat pattern, UTC), and Connect's Date, Time
and Timestamp logical types (``target.type``)."""
from __future__ import annotations

import datetime as _dt
from typing import Any

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Type as ConfigType, ValidString
from ..data import (
    INT64_SCHEMA, OPTIONAL_INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Date, Schema, SchemaBuilder, Struct,
    Time, Timestamp, Type, copy_schema_basics,
)
from ..errors import DataException
from ..records import ConnectRecord
from .base import KeyOrValueTransformation, KeySide, SchemaUpdateCache, ValueSide, require_map, require_struct
from ..java_time import format_utc, parse_utc, validate_pattern

PURPOSE = "converting timestamp formats"
TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def config_def() -> ConfigDef:
    return (ConfigDef()
            .define("field", ConfigType.STRING, "", None, Importance.HIGH,
                    "The field containing the timestamp, or empty if the entire value is a timestamp")
            .define("target.type", ConfigType.STRING, ConfigDef.NO_DEFAULT_VALUE,
                    ValidString.in_(TYPE_STRING, TYPE_UNIX, TYPE_DATE, TYPE_TIME, TYPE_TIMESTAMP), Importance.HIGH,
                    "The desired timestamp representation: string, unix, Date, Time, or Timestamp")
            .define("format", ConfigType.STRING, "", None, Importance.MEDIUM,
                    "A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when "
                    "type=string or used to parse the input if the input is a string."))


def _to_instant(kind: str, value: Any, pattern: str | None) -> _dt.datetime:
    if kind == TYPE_STRING:
        if not pattern:
            raise DataException("TimestampConverter requires format option to be specified when using string "
                                "timestamps")
        return parse_utc(str(value), pattern)
    if kind == TYPE_UNIX:
        if not isinstance(value, int) or isinstance(value, bool):
            raise DataException(f"Expected Unix timestamp to be a Long, but found {type(value).__name__}")
        return _EPOCH + _dt.timedelta(milliseconds=value)
    if kind == TYPE_TIME and isinstance(value, _dt.time):
        return _dt.datetime.combine(_EPOCH.date(), value, tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
    raise DataException(f"Expected {kind} to be a java.util.Date, but found {type(value).__name__}")


def _from_instant(kind: str, moment: _dt.datetime, pattern: str | None) -> Any:
    if kind == TYPE_STRING:
        if not pattern:
            raise DataException("TimestampConverter requires format option to be specified when using string "
                                "timestamps")
        return format_utc(moment, pattern)
    if kind == TYPE_UNIX:
        return Timestamp.from_logical(Timestamp.SCHEMA, moment)
    if kind == TYPE_DATE:
        return moment.astimezone(_dt.timezone.utc).date()
    if kind == TYPE_TIME:
        return moment.astimezone(_dt.timezone.utc).time().replace(tzinfo=None)
    return moment


def _kind_of_schema(schema: Schema) -> str:
    if schema.name == Timestamp.LOGICAL_NAME:
        return TYPE_TIMESTAMP
    if schema.name == Date.LOGICAL_NAME:
        return TYPE_DATE
    if schema.name == Time.LOGICAL_NAME:
        return TYPE_TIME
    if schema.type is Type.STRING:
        return TYPE_STRING
    if schema.type is Type.INT64:
        return TYPE_UNIX
    raise DataException(f"Schema {schema} does not correspond to a known timestamp type format")




def _kind_of_value(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        return TYPE_TIMESTAMP
    if isinstance(value, _dt.date):
        return TYPE_DATE
    if isinstance(value, _dt.time):
        return TYPE_TIME
    if isinstance(value, int) and not isinstance(value, bool):
        return TYPE_UNIX
    if isinstance(value, str):
        return TYPE_STRING
    raise DataException(f"TimestampConverter does not support {type(value).__name__} objects as timestamps")


def _target_schema(kind: str, optional: bool) -> Schema:
    if kind == TYPE_STRING:
        return OPTIONAL_STRING_SCHEMA if optional else STRING_SCHEMA
    if kind == TYPE_UNIX:
        return OPTIONAL_INT64_SCHEMA if optional else INT64_SCHEMA
    builder = {TYPE_DATE: Date.builder, TYPE_TIME: Time.builder, TYPE_TIMESTAMP: Timestamp.builder}[kind]()
    return (builder.optional() if optional else builder).build()


class TimestampConverter(KeyOrValueTransformation):
    def __init__(self) -> None:
        self.field = ""
        self.target = TYPE_TIMESTAMP
        self.format: str | None = None
        self.cache = SchemaUpdateCache()

    def config(self) -> ConfigDef:
        return config_def()

    def configure_parsed(self, config: AbstractConfig) -> None:
        self.field = config.get("field") or ""
        self.target = config.get("target.type")
        self.format = config.get("format") or None
        if self.target == TYPE_STRING and not self.format:
            raise ConfigException("TimestampConverter requires format option to be specified when using string "
                                  "timestamps")
        if self.format:
            try:
                validate_pattern(self.format)
            except ConfigException as exc:
                raise ConfigException("TimestampConverter requires a SimpleDateFormat-compatible pattern for "
                                      f"string timestamps: {self.format}: {exc}") from None

    def _convert(self, value: Any, source_kind: str) -> Any:
        if value is None:
            return None
        return _from_instant(self.target, _to_instant(source_kind, value, self.format), self.format)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None and (schema is None or not self.field):
            return record
        if schema is None:
            if not self.field:
                return self.new_record(record, None, self._convert(value, _kind_of_value(value)))
            data = dict(require_map(value, PURPOSE))
            inner = data.get(self.field)
            data[self.field] = None if inner is None else self._convert(inner, _kind_of_value(inner))
            return self.new_record(record, None, data)
        if not self.field:
            return self.new_record(record, _target_schema(self.target, schema.optional),
                                   self._convert(value, _kind_of_schema(schema)))
        struct = require_struct(value, PURPOSE)
        updated_schema = self._updated_schema(struct.schema)
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            inner = struct.get(field)
            if field.name == self.field:
                inner = self._convert(inner, _kind_of_schema(field.schema))
            updated.put(field.name, inner)
        return self.new_record(record, updated_schema, updated)

    def _updated_schema(self, schema: Schema) -> Schema:
        return self.cache.get_or_build(schema, self._build_schema)

    def _build_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            if field.name == self.field:
                builder.field(field.name, _target_schema(self.target, field.schema.optional))
            else:
                builder.field(field.name, field.schema)
        if schema.optional:
            builder.optional()
        return builder.build()


class TimestampConverterKey(KeySide, TimestampConverter):
    """org.apache.kafka.connect.transforms.TimestampConverter$Key"""


class TimestampConverterValue(ValueSide, TimestampConverter):
    """org.apache.kafka.connect.transforms.TimestampConverter$Value"""
