"""Connect's data model: schemas compare by value, structs validate, logical types keep Kafka's encodings."""
from __future__ import annotations

import datetime as dt
import decimal

import pytest

from kafkalite.connect.data import (
    INT32_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Date, Decimal, SchemaBuilder, Struct, Time, Timestamp,
    Type, validate,
)
from kafkalite.connect.errors import DataException, SchemaBuilderException
from kafkalite.connect.records import ConnectHeaders, SinkRecord, SourceRecord


def person_schema():
    return (SchemaBuilder.struct().name("Person").version(2)
            .field("name", STRING_SCHEMA).field("age", SchemaBuilder.int32().optional().default_value(7))
            .build())


def test_schemas_compare_by_value_and_builder_refuses_resetting():
    assert person_schema() == person_schema()
    assert person_schema() != SchemaBuilder.struct().name("Person").field("name", STRING_SCHEMA).build()
    with pytest.raises(SchemaBuilderException, match="name has already been set"):
        SchemaBuilder.string().name("a").name("b")
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.int8().default_value(1000)
    with pytest.raises(DataException):
        INT32_SCHEMA.fields  # noqa: B018 - non-struct has no fields


def test_struct_validates_puts_and_uses_defaults():
    struct = Struct(person_schema()).put("name", "ann")
    assert struct.get("age") == 7 and struct.get_without_default("age") is None
    with pytest.raises(DataException, match="Invalid Java object"):
        struct.put("name", 3)
    with pytest.raises(DataException, match="not a valid field name"):
        struct.put("nope", 1)
    empty = Struct(person_schema())
    with pytest.raises(DataException, match='null used for required field: "name"'):
        empty.validate()
    assert struct == Struct(person_schema()).put("name", "ann")
    assert repr(struct) == "Struct{name=ann}"


def test_validate_covers_containers_and_ranges():
    validate(SchemaBuilder.array(INT32_SCHEMA).build(), [1, 2])
    with pytest.raises(DataException):
        validate(SchemaBuilder.array(INT32_SCHEMA).build(), [1, "x"])
    with pytest.raises(DataException):
        validate(SchemaBuilder.int8().build(), 128)
    with pytest.raises(DataException):
        validate(SchemaBuilder.boolean().build(), 1)
    validate(OPTIONAL_STRING_SCHEMA, None)
    validate(SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), {"a": 1})


def test_logical_types_use_kafka_encodings():
    schema = Decimal.schema(2)
    assert schema.name == "org.apache.kafka.connect.data.Decimal" and schema.parameters == {"scale": "2"}
    raw = Decimal.from_logical(schema, decimal.Decimal("-1.28"))
    assert raw == (-128).to_bytes(2, "big", signed=True)
    assert Decimal.to_logical(schema, raw) == decimal.Decimal("-1.28")
    with pytest.raises(DataException, match="mismatching scale"):
        Decimal.from_logical(schema, decimal.Decimal("1.5"))
    assert Date.from_logical(Date.SCHEMA, dt.date(1970, 1, 11)) == 10
    assert Time.to_logical(Time.SCHEMA, 3_723_004) == dt.time(1, 2, 3, 4000)
    ts = dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
    assert Timestamp.to_logical(Timestamp.SCHEMA, Timestamp.from_logical(Timestamp.SCHEMA, ts)) == ts
    validate(Date.SCHEMA, dt.date(2020, 2, 2))
    with pytest.raises(DataException):
        validate(Date.SCHEMA, 5)


def test_records_new_record_keeps_source_and_original_coordinates():
    headers = ConnectHeaders().add_string("h", "v")
    src = SourceRecord({"file": "a"}, {"position": 3}, "t", None, None, None, STRING_SCHEMA, "line", 5, headers)
    moved = src.new_record("t2", 1, None, None, STRING_SCHEMA, "x", 6)
    assert isinstance(moved, SourceRecord) and moved.source_offset == {"position": 3}
    assert moved.headers == headers and moved.headers is not headers
    sink = SinkRecord("orders", 2, None, None, None, {"a": 1}, 42)
    routed = sink.new_record("orders-2021", None, None, None, None, {"a": 1}, None)
    assert (routed.topic, routed.kafka_partition, routed.kafka_offset) == ("orders-2021", 2, 42)
    assert (routed.original_topic, routed.original_kafka_partition, routed.original_kafka_offset) == ("orders", 2, 42)
    assert Type.INT8.value == "int8"
