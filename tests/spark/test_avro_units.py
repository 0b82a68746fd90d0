"""The Avro decoding path of the Spark reader without a JVM, a broker or a registry: Avro -> Spark
types, decoding framed values with schema evolution (fastavro's own writer is the oracle), the
errors for unknown ids and unframed values, writer schemas fetched once, the options, and the
whole path from a fetched record-batch blob to the typed Arrow batch Spark receives."""
from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import logging
import pickle
import re
import struct

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType, BinaryType, DateType, DecimalType, DoubleType, IntegerType, LongType, MapType, StringType,
    StructField, StructType, TimestampNTZType, TimestampType,
)

from kafkalite.records import build_batch
from kafkalite.registry.client import RegisteredSchema, RegistryClientError
from spark_integration.avro import (
    AvroDecodeError, AvroSchemaError, ColumnDecoder, ReaderSchema, decode_columns, spark_type_of, malformed_handler,
)
from spark_integration.arrow_records import convert
from spark_integration.broker_io import ReadSettings
from spark_integration.options import AvroSubject, parse_options
from tests.spark.test_spark_units import _blob

BS = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
URL = "http://127.0.0.1:1"


def record(fields: list[dict], name: str = "Pos") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "kafkalite.test", "fields": fields})


V1 = record([{"name": "truck", "type": "string"}, {"name": "n", "type": "int"},
             {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}])
# v2: n widened to long, a defaulted field added, ts unchanged
V2 = record([{"name": "truck", "type": "string"}, {"name": "n", "type": "long"},
             {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
             {"name": "speed", "type": ["null", "double"], "default": None},
             {"name": "driver", "type": "string", "default": "unknown"}])


def reader_of(schema: str, schema_id: int = 2, deps: tuple = ()) -> ReaderSchema:
    return ReaderSchema("value", URL, "pos-value", 2, schema_id, schema, deps)


def framed(schema_id: int, schema: str, datum: dict) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema)), datum)
    return out.getvalue()


class Registry:
    """A stand-in for the registry's ``GET /schemas/ids/<id>``, counting lookups."""

    def __init__(self, schemas: dict[int, str]) -> None:
        self.schemas = schemas
        self.calls: list[int] = []

    def __call__(self, schema_id: int) -> RegisteredSchema:
        self.calls.append(schema_id)
        if schema_id not in self.schemas:
            raise RegistryClientError("Schema 999 not found", 40403, 404)
        return RegisteredSchema(schema_id, "AVRO", self.schemas[schema_id])


# --- types ----------------------------------------------------------------------------------------

def test_avro_types_map_to_spark_types_like_from_avro():
    """Records, enums, fixed, arrays, maps, optional fields, int/long and float/double unions,
    logical types, named-type references and referenced schemas become Spark's from_avro types."""
    address = record([{"name": "city", "type": "string"}], "Address")
    schema = record([
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "f", "type": "float"},
        {"name": "raw", "type": "bytes"}, {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "wide", "type": ["int", "long"]}, {"name": "real", "type": ["null", "float", "double"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "home", "type": "kafkalite.test.Address"}, {"name": "work", "type": "kafkalite.test.Address"},
    ])
    got = spark_type_of(reader_of(schema, deps=(("kafkalite.test.Address", address),)))
    city = StructType([StructField("city", StringType())])
    assert got == StructType([
        StructField("b", got["b"].dataType), StructField("i", IntegerType()), StructField("f", got["f"].dataType),
        StructField("raw", BinaryType()), StructField("kind", StringType()), StructField("fx", BinaryType()),
        StructField("tags", ArrayType(StringType())), StructField("attrs", MapType(StringType(), LongType())),
        StructField("opt", StringType()), StructField("wide", LongType()), StructField("real", DoubleType()),
        StructField("ts", TimestampType()), StructField("local", TimestampNTZType()), StructField("day", DateType()),
        StructField("tm", IntegerType()), StructField("id", StringType()), StructField("price", DecimalType(9, 2)),
        StructField("home", city), StructField("work", city)])
    assert got["b"].dataType.simpleString() == "boolean" and got["f"].dataType.simpleString() == "float"
    assert spark_type_of(reader_of('"string"')) == StringType()


@pytest.mark.parametrize("schema, message", [
    (record([{"name": "u", "type": ["string", "int"]}]), "u: union"),
    (record([{"name": "next", "type": ["null", "kafkalite.test.Node"]}], "Node"), "next: record kafkalite.test.Node is recursive"),
    (record([{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 2}}]),
     r"d: decimal\(50, 2\)"),
    ('{"type": "bogus"}', "invalid Avro schema"),
])
def test_schemas_spark_cannot_type_are_refused_at_load(schema, message):
    """General unions, recursive records, oversized decimals and invalid schemas: AvroSchemaError
    naming the option, subject and version."""
    with pytest.raises(AvroSchemaError, match=message) as exc:
        spark_type_of(reader_of(schema))
    assert "invalid" in message or str(exc.value).startswith("valueAvroSubject: subject 'pos-value' version 2")


# --- decoding -------------------------------------------------------------------------------------

def test_decode_resolves_older_writers_to_the_reader_schema():
    """Values written with v1 (id 1) and v2 (id 2) in one column decode to v2: v1's rows get the
    defaults and their int widens to long; nulls stay null; the Arrow type is Spark's mapping."""
    v1_rows = [{"truck": f"t{i}", "n": i, "ts": 1_700_000_000_000 + i} for i in range(3)]
    v2_rows = [{"truck": "t9", "n": 1 << 40, "ts": 1_700_000_000_123, "speed": 61.5, "driver": "ada"}]
    values = [framed(1, V1, v1_rows[0]), None, framed(2, V2, v2_rows[0]), framed(1, V1, v1_rows[1]),
              framed(1, V1, v1_rows[2])]
    registry = Registry({1: V1})
    decoder = ColumnDecoder(reader_of(V2), registry)
    out = decoder.decode(pa.array(values, pa.binary()), np.arange(10, 15), "trucks", 3)
    assert out.type == to_arrow_type(spark_type_of(reader_of(V2)), timezone="UTC")
    utc = dt.timezone.utc
    expected = [{**r, "ts": dt.datetime.fromtimestamp(r["ts"] / 1000, utc), "speed": None, "driver": "unknown"}
                for r in v1_rows]
    assert out.to_pylist() == [expected[0], None,
                               {**v2_rows[0], "ts": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, utc)},
                               expected[1], expected[2]]
    assert registry.calls == [1]                       # the reader's own id needs no lookup
    decoder.decode(pa.array([framed(1, V1, v1_rows[0])], pa.binary()), np.array([20]), "trucks", 3)
    assert registry.calls == [1]                       # writer schemas are fetched once


def test_decode_logical_types_and_sliced_columns():
    """Dates, local timestamps, uuids and decimals decode to their Spark values; a sliced Arrow
    column (non-zero offset) decodes its own rows."""
    schema = record([{"name": "day", "type": {"type": "int", "logicalType": "date"}},
                     {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
                     {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
                     {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                                "scale": 2}}])
    rows = [{"day": dt.date(2024, 2, 29), "local": dt.datetime(2024, 2, 29, 12, 30, 0, 5),
             "id": "0b7e5f5c-4b0e-4e2a-9b52-7c1d2b3c4d5e", "price": decimal.Decimal("12.34")},
            {"day": dt.date(1970, 1, 2), "local": dt.datetime(1999, 12, 31, 23, 59, 59),
             "id": "00000000-0000-0000-0000-000000000001", "price": decimal.Decimal("-0.05")}]
    column = pa.array([b"junk"] + [framed(7, schema, r) for r in rows], pa.binary()).slice(1)
    out = ColumnDecoder(reader_of(schema, schema_id=7), Registry({})).decode(column, np.array([1, 2]), "t", 0)
    assert out.to_pylist() == rows


def test_unknown_schema_id_names_topic_partition_offset_and_id():
    """A value whose id the registry does not know (40403) fails with where it is and the id."""
    values = [framed(2, V2, {"truck": "a", "n": 1, "ts": 0, "speed": None, "driver": "x"}), b"\x00\x00\x00\x03\xe7ab"]
    with pytest.raises(AvroDecodeError) as exc:
        ColumnDecoder(reader_of(V2), Registry({})).decode(pa.array(values, pa.binary()), np.array([41, 42]),
                                                          "trucks", 5)
    assert str(exc.value).startswith("The value of trucks-5 at offset 42 has schema id 999, which the schema "
                                     f"registry at {URL} does not know (error 40403")


@pytest.mark.parametrize("value, message", [
    (b"\x01\x00\x00\x00\x02x", "offset 8 is not registry-framed Avro: magic byte 1, expected 0"),
    (b"\x00\x00", "offset 8 is 2 bytes, too short for registry-framed Avro"),
    (b"\x00\x00\x00\x00\x02\x80", "offset 8 (schema id 2) cannot be decoded to pos-value version 2"),
])
def test_unframed_or_truncated_values_name_their_offset(value, message):
    """A wrong magic byte, a value shorter than the frame and Avro data that ends early each fail
    with the offset of the bad value."""
    good = framed(2, V2, {"truck": "a", "n": 1, "ts": 0, "speed": None, "driver": "x"})
    with pytest.raises(AvroDecodeError, match=re.escape(message)):
        ColumnDecoder(reader_of(V2), Registry({})).decode(pa.array([good, value], pa.binary()), np.array([7, 8]),
                                                          "t", 0)


def test_incompatible_writer_schema_is_an_error_with_both_ids():
    """A writer schema that cannot be resolved to the reader (a field without default missing)."""
    other = record([{"name": "truck", "type": "int"}])
    with pytest.raises(AvroDecodeError, match=r"offset 3 \(schema id 5\) cannot be decoded to pos-value version 2 "
                                              r"\(schema id 2\)"):
        ColumnDecoder(reader_of(V2), Registry({5: other})).decode(
            pa.array([framed(5, other, {"truck": 1})], pa.binary()), np.array([3]), "t", 0)


def test_decode_columns_from_a_fetched_blob():
    """The whole worker path: a record-batch blob -> convert -> key and value decoded, with the
    schema Spark declared; offsets and other columns untouched."""
    key_schema = '"string"'
    rows = [{"truck": f"t{i}", "n": i, "ts": 1000 * i, "speed": float(i), "driver": "d"} for i in range(5)]
    recs = [(1_700_000_000_000 + i, framed(3, key_schema, f"k{i}"), framed(2, V2, r), []) for i, r in enumerate(rows)]
    blob = _blob([build_batch(recs[:2]), build_batch(recs[2:])])
    batch, _ = convert(blob, topic="trucks", partition=0, start=1, end=5)
    key_reader = ReaderSchema("key", URL, "trucks-key", 1, 3, key_schema)
    settings = ReadSettings("b", "c", False, True, 1, 1, 1, 1, (key_reader, reader_of(V2)))
    out = decode_columns(batch, settings.avro, settings.output_schema(), "trucks", 0)
    assert out.schema.field("key").type == pa.string()
    assert out.column("key").to_pylist() == ["k1", "k2", "k3", "k4"]
    assert [v["n"] for v in out.column("value").to_pylist()] == [1, 2, 3, 4]
    assert out.column("offset").to_pylist() == [1, 2, 3, 4]
    assert pickle.loads(pickle.dumps(settings)) == settings


def test_dropmalformed_leaves_out_and_logs_the_values_that_cannot_be_decoded(caplog):
    """``mode=DROPMALFORMED``: an unframed value and corrupt Avro between good ones are dropped,
    each logged with its topic, partition and offset; the good ones keep their offsets. FAILFAST
    (the default) fails the batch."""
    rows = [{"truck": f"t{i}", "n": i, "ts": 1000 * i, "speed": None, "driver": "d"} for i in range(3)]
    values = [framed(2, V2, rows[0]), b"not avro at all", framed(2, V2, rows[1]), b"\x00\x00\x00\x00\x02\x80",
              framed(2, V2, rows[2])]
    recs = [(1_700_000_000_000 + i, b"k", v, []) for i, v in enumerate(values)]
    batch, _ = convert(_blob([build_batch(recs)]), topic="trucks", partition=3, start=0, end=5)
    settings = ReadSettings("b", "c", False, True, 1, 1, 1, 1, (reader_of(V2),),
                            drop_malformed=parse_options({**BS, "mode": "dropMalformed"}).avro_mode == "DROPMALFORMED")
    with pytest.raises(AvroDecodeError, match="trucks-3 at offset 1 is not registry-framed Avro"):
        decode_columns(batch, settings.avro, settings.output_schema(), "trucks", 3)
    with caplog.at_level(logging.ERROR, logger="spark_integration.avro"):
        out = decode_columns(batch, settings.avro, settings.output_schema(), "trucks", 3, settings.drop_malformed)
    assert out.column("offset").to_pylist() == [0, 2, 4]
    assert [v["truck"] for v in out.column("value").to_pylist()] == ["t0", "t1", "t2"]
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2 and "trucks-3 at offset 1" in logged[0] and "trucks-3 at offset 3" in logged[1]
    assert pickle.loads(pickle.dumps(settings)) == settings
    # the malformedRecordHandler option: each dropped record handed to the application's function
    opts = parse_options({**BS, "mode": "DROPMALFORMED", "malformedRecordHandler": f"{__name__}:collect_dropped",
                          "malformedRecordHandlerArgs": "ctx"})
    assert opts.malformed_handler == (f"{__name__}:collect_dropped", "ctx")
    handler = malformed_handler(opts.malformed_handler[0])
    DROPPED.clear()
    out = decode_columns(batch, settings.avro, settings.output_schema(), "trucks", 3, True,
                         lambda r: handler("ctx", r))
    assert out.column("offset").to_pylist() == [0, 2, 4]
    assert [(a, r.topic, r.partition, r.offset, r.field, r.data) for a, r in DROPPED] == [
        ("ctx", "trucks", 3, 1, "value", b"not avro at all"), ("ctx", "trucks", 3, 3, "value", values[3])]
    assert "trucks-3 at offset 1 is not registry-framed Avro" in DROPPED[0][1].cause
    # a failing handler is logged, the read goes on
    with caplog.at_level(logging.ERROR, logger="spark_integration.avro"):
        out = decode_columns(batch, settings.avro, settings.output_schema(), "trucks", 3, True, lambda r: 1 / 0)
    assert out.num_rows == 3 and any("malformedRecordHandler failed" in r.getMessage() for r in caplog.records)


DROPPED: list = []


def collect_dropped(args, record):
    DROPPED.append((args, record))


@pytest.mark.parametrize("options, message", [
    ({"malformedRecordHandler": "no colon"}, "Invalid value 'no colon' for option 'malformedRecordHandler'"),
    ({"malformedRecordHandler": "tests.nowhere:f"}, "Option 'malformedRecordHandler': cannot import tests.nowhere:f"),
    ({"malformedRecordHandler": "json:nothing"}, "Option 'malformedRecordHandler': cannot import json:nothing"),
    ({"malformedRecordHandlerArgs": "x"}, "Option 'malformedRecordHandlerArgs' needs option 'malformedRecordHandler'")])
def test_a_bad_malformed_record_handler_names_the_option(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_options({**BS, "mode": "DROPMALFORMED", **options})


def test_the_mode_option_is_failfast_or_dropmalformed():
    assert parse_options(BS).avro_mode == "FAILFAST"
    with pytest.raises(ValueError, match="Invalid value 'PERMISSIVE' for option 'mode'"):
        parse_options({**BS, "mode": "PERMISSIVE"})


# --- options --------------------------------------------------------------------------------------

def test_avro_options_parse():
    """Subjects with their version (latest by default), case-insensitive keys, the first URL."""
    opts = parse_options({**BS, "schemaRegistryUrl": "http://r:8081/, http://s:8081", "valueAvroSubject": "t-value",
                          "KEYAVROSUBJECT": "t-key", "keyAvroVersion": "3"})
    assert opts.schema_registry_url == "http://r:8081"
    assert opts.value_avro == AvroSubject("value", "t-value", "latest")
    assert opts.key_avro == AvroSubject("key", "t-key", "3")
    assert parse_options(BS).avro_subjects == ()


@pytest.mark.parametrize("options, message", [
    ({"valueAvroSubject": "t-value"}, "Option 'schemaRegistryUrl' must be specified with 'valueAvroSubject'"),
    ({"schemaRegistryUrl": URL}, "'schemaRegistryUrl' needs 'keyAvroSubject' and/or 'valueAvroSubject'"),
    ({"schemaRegistryUrl": "r:8081", "valueAvroSubject": "x"}, "must be an http:// or https:// URL"),
    ({"schemaRegistryUrl": URL, "valueAvroSubject": " "}, "'valueAvroSubject' must not be empty"),
    ({"schemaRegistryUrl": URL, "valueAvroSubject": "x", "valueAvroVersion": "0"}, "must be 'latest' or a positive"),
    ({"schemaRegistryUrl": URL, "valueAvroSubject": "x", "keyAvroVersion": "1"}, "'keyAvroVersion' needs"),
])
def test_bad_avro_options_name_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        parse_options({**BS, **options})
