"""The Connect AvroConverter on kafkalite's schema registry, read and written by Confluent's own
Python serializers: the same wire format and the same schemas as Confluent's converter."""
from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kafkalite.connect.converters import new_converter
from kafkalite.connect.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, Decimal, SchemaBuilder, Struct, Timestamp


def test_converter_and_confluent_serializers_understand_each_other(broker: Any, registry_factory: Any) -> None:
    registry = registry_factory(broker.bootstrap)
    converter = new_converter("io.confluent.connect.avro.AvroConverter", {"schema.registry.url": registry.url}, False)
    schema = (SchemaBuilder.struct().name("fleet.Position").field("truck", INT64_SCHEMA)
              .field("note", OPTIONAL_STRING_SCHEMA).field("price", Decimal.schema(2))
              .field("at", Timestamp.SCHEMA).build())
    at = dt.datetime(2021, 1, 1, 12, tzinfo=dt.timezone.utc)
    value = Struct(schema).put("truck", 7).put("price", decimal.Decimal("3.10")).put("at", at)
    data = converter.from_connect_data("positions", schema, value)

    client = SchemaRegistryClient({"url": registry.url})
    registered = client.get_latest_version("positions-value")
    assert json.loads(registered.schema.schema_str)["connect.name"] == "fleet.Position"
    decoded = AvroDeserializer(client)(data, SerializationContext("positions", MessageField.VALUE))
    assert decoded == {"truck": 7, "note": None, "price": decimal.Decimal("3.10"), "at": at}

    written = AvroSerializer(client, registered.schema.schema_str)(
        {"truck": 8, "note": "late", "price": decimal.Decimal("4.00"), "at": at},
        SerializationContext("positions", MessageField.VALUE))
    back = new_converter("AvroConverter", {"schema.registry.url": registry.url}, False).to_connect_data(
        "positions", written)
    assert back.schema == schema
    assert back.value == Struct(schema).put("truck", 8).put("note", "late").put("price", decimal.Decimal("4.00")) \
        .put("at", at)
