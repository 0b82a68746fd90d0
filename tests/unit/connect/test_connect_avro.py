"""AvroConverter: Confluent's wire format and AvroData mapping, against an in-memory registry client."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import struct

import pytest

from kafkalite.connect.converters.avro import AvroConverter
from kafkalite.connect.converters.avro_data import AvroData
from kafkalite.connect.data import (
    INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Date, Decimal, SchemaBuilder, Struct, Timestamp,
)
from kafkalite.connect.errors import DataException, RetriableException
from kafkalite.registry.client import RegisteredSchema, RegistryClient, RegistryClientError


class MemoryRegistry(RegistryClient):
    """The registry client's interface over a dict (the registry itself has its own tests)."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")
        self.schemas: list[str] = []
        self.subjects: dict[str, list[int]] = {}
        self.down = False

    def register(self, subject, schema, schema_type="AVRO", references=None):
        if self.down:
            raise RegistryClientError("cannot reach the schema registry")
        if schema not in self.schemas:
            self.schemas.append(schema)
        schema_id = self.schemas.index(schema) + 1
        self.subjects.setdefault(subject, []).append(schema_id)
        return schema_id

    def lookup(self, subject, schema, schema_type="AVRO", references=None):
        if schema not in self.schemas or self.schemas.index(schema) + 1 not in self.subjects.get(subject, []):
            raise RegistryClientError("Schema not found", 40403, 404)
        return self.schemas.index(schema) + 1

    def latest(self, subject):
        return self.by_id(self.subjects[subject][-1])

    def by_id(self, schema_id):
        return RegisteredSchema(schema_id, "AVRO", self.schemas[schema_id - 1])


def converter(registry, **configs):
    conv = AvroConverter(registry)
    conv.configure({"schema.registry.url": "http://127.0.0.1:1", **{k.replace("_", "."): v for k, v in configs.items()}},
                   False)
    return conv


def order_schema():
    return (SchemaBuilder.struct().name("com.acme.Order").version(3)
            .field("id", INT64_SCHEMA).field("qty", SchemaBuilder.int8().build())
            .field("note", OPTIONAL_STRING_SCHEMA).field("price", Decimal.schema(2))
            .field("day", Date.SCHEMA).field("at", Timestamp.SCHEMA)
            .field("attrs", SchemaBuilder.map(STRING_SCHEMA, STRING_SCHEMA).build())
            .field("counts", SchemaBuilder.map(INT64_SCHEMA, INT64_SCHEMA).build()).build())


def order():
    return (Struct(order_schema()).put("id", 7).put("qty", 2).put("price", decimal.Decimal("9.99"))
            .put("day", dt.date(2021, 5, 1)).put("at", dt.datetime(2021, 5, 1, 12, tzinfo=dt.timezone.utc))
            .put("attrs", {"k": "v"}).put("counts", {1: 2}))


def test_round_trip_in_confluents_wire_format():
    registry = MemoryRegistry()
    conv = converter(registry)
    data = conv.from_connect_data("orders", order_schema(), order())
    assert data[0] == 0 and struct.unpack(">I", data[1:5])[0] == 1
    assert registry.subjects == {"orders-value": [1]}
    avro = json.loads(registry.schemas[0])
    assert avro["type"] == "record" and avro["name"] == "Order" and avro["namespace"] == "com.acme"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["qty"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["note"]["type"] == ["null", "string"] and fields["note"]["default"] is None
    assert fields["price"]["type"]["logicalType"] == "decimal" and fields["price"]["type"]["scale"] == 2
    assert fields["counts"]["type"]["items"]["name"] == "MapEntry"
    assert avro["connect.version"] == 3 and avro["connect.name"] == "com.acme.Order"
    back = converter(registry).to_connect_data("orders", data)
    assert back.value == order() and back.schema == order_schema()


def test_lookup_mode_latest_version_and_errors():
    registry = MemoryRegistry()
    with pytest.raises(DataException, match="Schema not found"):
        converter(registry, auto_register_schemas="false").from_connect_data("t", STRING_SCHEMA, "x")
    converter(registry).from_connect_data("t", STRING_SCHEMA, "x")
    assert converter(registry, auto_register_schemas="false").from_connect_data("t", STRING_SCHEMA, "y")[1:5] == \
        b"\x00\x00\x00\x01"
    latest = converter(registry, auto_register_schemas="false", use_latest_version="true")
    assert latest.from_connect_data("t", STRING_SCHEMA, "z")[1:5] == b"\x00\x00\x00\x01"
    registry.down = True
    with pytest.raises(RetriableException):
        converter(registry).from_connect_data("u", STRING_SCHEMA, "x")
    with pytest.raises(DataException, match="Unknown magic byte"):
        converter(registry).to_connect_data("t", b"\x01\x00\x00\x00\x01x")
    assert converter(registry).from_connect_data("t", STRING_SCHEMA, None) is None


def test_record_name_strategy_and_unnamed_struct():
    registry = MemoryRegistry()
    conv = converter(registry, value_subject_name_strategy="io.confluent.kafka.serializers.subject.RecordNameStrategy")
    conv.from_connect_data("t", order_schema(), order())
    assert list(registry.subjects) == ["com.acme.Order"]
    anon = SchemaBuilder.struct().field("a", STRING_SCHEMA).build()
    avro = AvroData().from_connect_schema(anon)
    assert (avro["name"], avro["namespace"]) == ("ConnectDefault", "io.confluent.connect.avro")
    assert AvroData().to_connect_schema(avro) == anon
