"""Kafka's Values utility: values to and from their string form, and schemas inferred from values.

SimpleHeaderConverter writes header values with ``convert_to_string`` and reads them back with
``parse_string`` (which infers the smallest fitting schema: ``42`` is INT8, ``true`` BOOLEAN,
``[1,2]`` an array, ``{"a":1}`` a map, ISO-8601 text a Timestamp/Date/Time); the Cast transform
and StringConverter use the same rules, so every component prints a value the same way.
"""
from __future__ import annotations

import base64
import datetime as _dt
import decimal
from typing import Any

from .data import (
    BOOLEAN_SCHEMA, BYTES_SCHEMA, FLOAT32_SCHEMA, FLOAT64_SCHEMA, INT8_SCHEMA, INT16_SCHEMA, INT32_SCHEMA,
    INT64_SCHEMA, STRING_SCHEMA, Date, Decimal, Schema, SchemaAndValue, SchemaBuilder, Struct, Time, Timestamp,
    Type,
)
from .errors import DataException

__all__ = ["convert_to_string", "java_string", "parse_string", "infer_schema", "ISO_8601_TIMESTAMP_FORMAT"]

ISO_8601_DATE_FORMAT = "%Y-%m-%d"
ISO_8601_TIME_FORMAT = "%H:%M:%S.%fZ"
ISO_8601_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def _ms(value: _dt.time | _dt.datetime) -> str:
    return f"{value.microsecond // 1000:03d}"


def format_timestamp(value: _dt.datetime) -> str:
    """Kafka's yyyy-MM-dd'T'HH:mm:ss.SSS'Z' (UTC)."""
    utc = value.astimezone(_dt.timezone.utc) if value.tzinfo else value
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + _ms(utc) + "Z"


def format_time(value: _dt.time) -> str:
    return value.strftime("%H:%M:%S.") + _ms(value) + "Z"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _append(out: list[str], schema: Schema | None, value: Any, embedded: bool) -> None:
    if value is None:
        out.append("null")
        return
    if schema is not None and schema.name is not None:
        if schema.name == Decimal.LOGICAL_NAME and isinstance(value, decimal.Decimal):
            out.append(format(value, "f"))
            return
        if schema.name == Date.LOGICAL_NAME and isinstance(value, _dt.date):
            text = (value.date() if isinstance(value, _dt.datetime) else value).isoformat()
            out.append(f'"{text}"' if embedded else text)
            return
        if schema.name == Time.LOGICAL_NAME and isinstance(value, _dt.time):
            out.append(f'"{format_time(value)}"' if embedded else format_time(value))
            return
    if isinstance(value, _dt.datetime):
        out.append(f'"{format_timestamp(value)}"' if embedded else format_timestamp(value))
    elif isinstance(value, str):
        out.append(f'"{_escape(value)}"' if embedded else value)
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, float):
        out.append(repr(value))
    elif isinstance(value, decimal.Decimal):
        out.append(format(value, "f"))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        text = base64.b64encode(bytes(value)).decode("ascii")
        out.append(f'"{text}"' if embedded else text)
    elif isinstance(value, (list, tuple)):
        element = schema.value_schema if schema is not None and schema.type is Type.ARRAY else None
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _append(out, element, item, True)
        out.append("]")
    elif isinstance(value, dict):
        key_schema = schema.key_schema if schema is not None and schema.type is Type.MAP else None
        value_schema = schema.value_schema if schema is not None and schema.type is Type.MAP else None
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(",")
            _append(out, key_schema, k, True)
            out.append(":")
            _append(out, value_schema, v, True)
        out.append("}")
    elif isinstance(value, Struct):
        out.append("{")
        for i, field in enumerate(value.schema.fields):
            if i:
                out.append(",")
            _append(out, None, field.name, True)
            out.append(":")
            _append(out, field.schema, value.get(field), True)
        out.append("}")
    elif isinstance(value, _dt.date):
        out.append(f'"{value.isoformat()}"' if embedded else value.isoformat())
    else:
        out.append(str(value))


def convert_to_string(schema: Schema | None, value: Any) -> str:
    """A value's string form as Kafka's Values.convertToString writes it (None stays 'null')."""
    out: list[str] = []
    _append(out, schema, value, False)
    return "".join(out)


def java_string(value: Any) -> str:
    """A value as Java's toString prints it (StringConverter writes ``value.toString()``):
    ``true``, ``[a, b]``, ``{k=v}``, ``Struct{f=v}``; bytes as base64, times as ISO-8601."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_string(k)}={java_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        return "Struct{" + ",".join(f"{name}={java_string(v)}" for name, v in value.items() if v is not None) + "}"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, _dt.datetime):
        return format_timestamp(value)
    if isinstance(value, _dt.time):
        return format_time(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    return str(value)


def infer_schema(value: Any) -> Schema | None:
    """The schema of a plain value (Values.inferSchema); None when it cannot be told (empty list...)."""
    if isinstance(value, bool):
        return BOOLEAN_SCHEMA
    if isinstance(value, int):
        for schema, bits in ((INT8_SCHEMA, 8), (INT16_SCHEMA, 16), (INT32_SCHEMA, 32), (INT64_SCHEMA, 64)):
            if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                return schema
        return None
    if isinstance(value, float):
        return FLOAT64_SCHEMA
    if isinstance(value, str):
        return STRING_SCHEMA
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BYTES_SCHEMA
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        return Decimal.schema(-exponent if isinstance(exponent, int) else 0)
    if isinstance(value, _dt.datetime):
        return Timestamp.SCHEMA
    if isinstance(value, _dt.date):
        return Date.SCHEMA
    if isinstance(value, _dt.time):
        return Time.SCHEMA
    if isinstance(value, Struct):
        return value.schema
    if isinstance(value, (list, tuple)):
        element = _common_schema([infer_schema(v) for v in value])
        return SchemaBuilder.array(element).build() if element is not None else None
    if isinstance(value, dict):
        keys = _common_schema([infer_schema(k) for k in value])
        values = _common_schema([infer_schema(v) for v in value.values()])
        return SchemaBuilder.map(keys, values).build() if keys is not None and values is not None else None
    return None


def _common_schema(schemas: list[Schema | None]) -> Schema | None:
    if not schemas or any(s is None for s in schemas):
        return None
    first = schemas[0]
    return first if all(s == first for s in schemas) else None


# -- parsing ----------------------------------------------------------------------------------
class _Parser:
    """A small recursive-descent reader of Values' text: tokens, "quoted strings", [..] and {..}."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise DataException(f"expected '{char}' at {self.pos}")
        self.pos += 1

    def value(self) -> SchemaAndValue:
        char = self.peek()
        if char == "[":
            self.pos += 1
            items: list[SchemaAndValue] = []
            if self.peek() == "]":
                self.pos += 1
            else:
                while True:
                    items.append(self.value())
                    if self.peek() == ",":
                        self.pos += 1
                        continue
                    self.expect("]")
                    break
            element = _common_schema([i.schema for i in items])
            values = [i.value for i in items]
            if element is None:
                return SchemaAndValue(None, values)
            return SchemaAndValue(SchemaBuilder.array(element).build(), values)
        if char == "{":
            self.pos += 1
            entries: list[tuple[SchemaAndValue, SchemaAndValue]] = []
            if self.peek() == "}":
                self.pos += 1
            else:
                while True:
                    key = self.value()
                    self.expect(":")
                    entries.append((key, self.value()))
                    if self.peek() == ",":
                        self.pos += 1
                        continue
                    self.expect("}")
                    break
            key_schema = _common_schema([k.schema for k, _ in entries])
            value_schema = _common_schema([v.schema for _, v in entries])
            mapping = {_hashable(k.value): v.value for k, v in entries}
            if key_schema is None or value_schema is None:
                return SchemaAndValue(None, mapping)
            return SchemaAndValue(SchemaBuilder.map(key_schema, value_schema).build(), mapping)
        if char == '"':
            return SchemaAndValue(STRING_SCHEMA, self.quoted())
        return _scalar(self.token())

    def quoted(self) -> str:
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if char == '"':
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        raise DataException("unterminated string")

    def token(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in ",]}:" and not self.text[self.pos].isspace():
            self.pos += 1
        if start == self.pos:
            raise DataException(f"unexpected character at {self.pos}")
        return self.text[start:self.pos]


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(value.items())
    return value


def _scalar(token: str) -> SchemaAndValue:
    lowered = token.lower()
    if lowered == "true":
        return SchemaAndValue(BOOLEAN_SCHEMA, True)
    if lowered == "false":
        return SchemaAndValue(BOOLEAN_SCHEMA, False)
    if token == "null":
        return SchemaAndValue(None, None)
    try:
        number = decimal.Decimal(token)
    except decimal.InvalidOperation:
        number = None
    if number is not None and number.is_finite():
        exponent = number.as_tuple().exponent
        if isinstance(exponent, int) and exponent >= 0 and "e" not in lowered and "." not in token:
            integral = int(number)
            schema = infer_schema(integral)
            if schema is not None:
                return SchemaAndValue(schema, integral)
            return SchemaAndValue(Decimal.schema(0), number)
        as_float = float(number)
        if abs(as_float) <= 3.4028234663852886e38:
            return SchemaAndValue(FLOAT32_SCHEMA, as_float)
        if as_float not in (float("inf"), float("-inf")):
            return SchemaAndValue(FLOAT64_SCHEMA, as_float)
        return SchemaAndValue(Decimal.schema(-exponent if isinstance(exponent, int) else 0), number)
    temporal = _temporal(token)
    if temporal is not None:
        return temporal
    return SchemaAndValue(STRING_SCHEMA, token)


def _temporal(token: str) -> SchemaAndValue | None:
    for fmt, schema in ((ISO_8601_TIMESTAMP_FORMAT, Timestamp.SCHEMA), (ISO_8601_DATE_FORMAT, Date.SCHEMA),
                        (ISO_8601_TIME_FORMAT, Time.SCHEMA)):
        try:
            parsed = _dt.datetime.strptime(token, fmt)
        except ValueError:
            continue
        if schema is Timestamp.SCHEMA:
            return SchemaAndValue(schema, parsed.replace(tzinfo=_dt.timezone.utc))
        if schema is Date.SCHEMA:
            return SchemaAndValue(schema, parsed.date())
        return SchemaAndValue(schema, parsed.time())
    return None


def parse_string(text: str | None) -> SchemaAndValue:
    """A string's value and inferred schema (Values.parseString); text that does not parse as a
    whole is a STRING."""
    if text is None:
        return SchemaAndValue(None, None)
    if text == "":
        return SchemaAndValue(STRING_SCHEMA, text)
    if text.strip() and text.strip()[0] in "[{":
        parser = _Parser(text)
        try:
            result = parser.value()
            if parser.at_end():
                return result
        except DataException:
            pass
        return SchemaAndValue(STRING_SCHEMA, text)
    stripped = text.strip()
    if stripped and not any(c.isspace() for c in stripped) and stripped == text:
        return _scalar(stripped)
    temporal = _temporal(text)
    return temporal if temporal is not None else SchemaAndValue(STRING_SCHEMA, text)
