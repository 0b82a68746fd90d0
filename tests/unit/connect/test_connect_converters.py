"""Converters: Kafka's exact JSON envelope, schemaless JSON, strings, bytes, numbers, header strings."""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import json

import pytest

from kafkalite.connect.converters import new_converter, new_header_converter
from kafkalite.connect.converters.bytes import ByteArrayConverter
from kafkalite.connect.converters.json import JsonConverter
from kafkalite.connect.converters.number import IntegerConverter
from kafkalite.connect.converters.simple_header import SimpleHeaderConverter
from kafkalite.connect.converters.string import StringConverter
from kafkalite.connect.data import (
    INT32_SCHEMA, INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Date, Decimal, SchemaBuilder, Struct,
    Timestamp,
)
from kafkalite.connect.errors import ConfigException, DataException


def json_converter(**configs):
    converter = JsonConverter()
    converter.configure({k.replace("_", "."): v for k, v in configs.items()}, False)
    return converter


def test_envelope_bytes_are_kafkas():
    conv = json_converter()
    assert conv.from_connect_data("t", STRING_SCHEMA, "foo") == b'{"schema":{"type":"string","optional":false},"payload":"foo"}'
    schema = (SchemaBuilder.struct().name("rec").field("id", INT64_SCHEMA)
              .field("tags", SchemaBuilder.array(STRING_SCHEMA).optional().build()).build())
    out = conv.from_connect_data("t", schema, Struct(schema).put("id", 1).put("tags", ["a"]))
    assert out == (b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
                   b'{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"}],'
                   b'"optional":false,"name":"rec"},"payload":{"id":1,"tags":["a"]}}')
    back = conv.to_connect_data("t", out)
    assert back.schema == schema and back.value == Struct(schema).put("id", 1).put("tags", ["a"])


def test_schemaless_and_tombstones():
    conv = json_converter(schemas_enable="false")
    assert conv.from_connect_data("t", None, {"a": [1, 2.5, None]}) == b'{"a":[1,2.5,null]}'
    assert conv.to_connect_data("t", b'{"a":[1,2.5]}').value == {"a": [1, 2.5]}
    assert conv.from_connect_data("t", None, None) is None
    assert conv.to_connect_data("t", None) == (None, None)
    with pytest.raises(DataException, match="requires \"schema\" and \"payload\""):
        json_converter().to_connect_data("t", b'{"a":1}')
    with pytest.raises(DataException, match="serialization error"):
        conv.to_connect_data("t", b"{not json")
    with pytest.raises(DataException):
        json_converter().to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":"x"}')


def test_logical_types_and_decimal_format():
    schema = (SchemaBuilder.struct().field("price", Decimal.schema(2)).field("day", Date.SCHEMA)
              .field("at", Timestamp.SCHEMA).build())
    value = (Struct(schema).put("price", decimal.Decimal("12.34")).put("day", dt.date(1970, 1, 3))
             .put("at", dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)))
    payload = json.loads(json_converter().from_connect_data("t", schema, value))["payload"]
    assert payload == {"price": base64.b64encode((1234).to_bytes(2, "big")).decode(), "day": 2, "at": 1000}
    numeric = json_converter(decimal_format="NUMERIC")
    out = numeric.from_connect_data("t", schema, value)
    assert b'"price":12.34' in out
    assert numeric.to_connect_data("t", out).value == value
    assert json_converter().to_connect_data("t", json_converter().from_connect_data("t", schema, value)).value == value


def test_map_with_non_string_keys_is_array_of_pairs():
    schema = SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build()
    conv = json_converter()
    out = conv.from_connect_data("t", schema, {1: "a"})
    assert json.loads(out)["payload"] == [[1, "a"]]
    assert conv.to_connect_data("t", out).value == {1: "a"}


def test_string_bytes_and_number_converters():
    string = StringConverter()
    string.configure({}, False)
    assert string.from_connect_data("t", None, True) == b"true"
    assert string.from_connect_data("t", None, {"a": [1, 2]}) == b"{a=[1, 2]}"  # Java's toString
    struct_schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    assert string.from_connect_data("t", struct_schema, Struct(struct_schema).put("id", 3)) == b"Struct{id=3}"
    assert string.to_connect_data("t", "é".encode()) == (OPTIONAL_STRING_SCHEMA, "é")
    latin = new_converter("StringConverter", {"converter.encoding": "ISO-8859-1"}, True)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"
    raw = ByteArrayConverter()
    assert raw.from_connect_data("t", None, b"\x00") == b"\x00"
    with pytest.raises(DataException, match="Invalid schema type"):
        raw.from_connect_data("t", STRING_SCHEMA, b"x")
    ints = IntegerConverter()
    assert ints.from_connect_data("t", None, 258) == b"\x00\x00\x01\x02"
    assert ints.to_connect_data("t", b"\x00\x00\x01\x02").value == 258
    with pytest.raises(DataException):
        ints.to_connect_data("t", b"\x01")
    with pytest.raises(ConfigException):
        new_converter("org.example.Missing", {}, False)


def test_simple_header_converter_infers_schemas():
    conv = new_header_converter("org.apache.kafka.connect.storage.SimpleHeaderConverter", {})
    assert isinstance(conv, SimpleHeaderConverter)
    assert conv.to_connect_header("t", "h", b"42").schema.type.name == "INT8"
    assert conv.to_connect_header("t", "h", b"true").value is True
    assert conv.to_connect_header("t", "h", b"hello world") == (STRING_SCHEMA, "hello world")
    parsed = conv.to_connect_header("t", "h", b'[1,2,3]')
    assert parsed.value == [1, 2, 3] and parsed.schema.value_schema.type.name == "INT8"
    assert conv.from_connect_header("t", "h", None, {"a": [1, "x"]}) == b'{"a":[1,"x"]}'
    assert conv.to_connect_header("t", "h", b'{"a":1}').value == {"a": 1}


def test_repeated_schemas_read_the_same_as_new_ones():
    conv = json_converter()
    first = conv.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":1}')
    again = conv.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":2}')
    assert (first.value, again.value, again.schema) == (1, 2, first.schema)
    other = conv.to_connect_data("t", b'{"schema":{"type":"string","optional":true},"payload":null}')
    assert other.schema == OPTIONAL_STRING_SCHEMA and other.value is None
    conv.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":3}')
    with pytest.raises(DataException, match='requires "schema" and "payload"'):
        conv.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":3,"extra":1}')
    with pytest.raises(DataException):
        conv.to_connect_data("t", b'{"schema":{"type":"int32","optional":false},"payload":"x"}')
