"""Registry-framed Avro read into typed columns by the ``kafkalite`` data source, in the shared
local[2] Spark session against the shared broker and schema registry (tests/spark/conftest.py)."""
from __future__ import annotations

import io
import json
import struct
import uuid

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

from tests.spark.conftest import new_topic, produce

N = 1_000_000
HALF = N // 2
PARTS = 4

V1 = {"type": "record", "name": "Reading", "namespace": "kafkalite.spark", "fields": [
    {"name": "id", "type": "long"}, {"name": "sensor", "type": "string"},
    {"name": "value", "type": "float"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
# v2 (BACKWARD-compatible): value widened float -> double, a defaulted field added
V2 = {**V1, "fields": [{"name": "id", "type": "long"}, {"name": "sensor", "type": "string"},
                       {"name": "value", "type": "double"},
                       {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                       {"name": "unit", "type": "string", "default": "celsius"}]}
TS0 = 1_700_000_000_000


def _reader(spark, kafka, **options):
    r = spark.read.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def encoder(schema_id: int, schema: dict):
    """Registry framing + fastavro's encoding, reusing one buffer (values are pre-encoded here so
    that producing a million records stays cheap)."""
    parsed = fastavro.parse_schema(schema)
    header = struct.pack(">bI", 0, schema_id)
    buf = io.BytesIO()
    write = fastavro.schemaless_writer

    def encode(datum: dict) -> bytes:
        buf.seek(0)
        buf.truncate()
        buf.write(header)
        write(buf, parsed, datum)
        return buf.getvalue()
    return encode


@pytest.fixture(scope="module")
def avro_topic(kafka, schema_registry):
    """1,000,000 readings over 4 partitions (reading i in partition i % 4, key str(i)): the first
    half written with v1 of the subject, the second half with v2 (registered half-way)."""
    topic = new_topic(kafka, PARTS, "avro")
    sr = SchemaRegistryClient({"url": schema_registry.url})
    subject = f"{topic}-value"
    v1_id = sr.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    enc1 = encoder(v1_id, V1)

    def first_half():
        for i in range(HALF):
            yield i % PARTS, b"%d" % i, enc1({"id": i, "sensor": f"s{i % 10}", "value": i % 1000 + 0.5,
                                              "ts": TS0 + i})
    produce(kafka, topic, first_half())
    v2_id = sr.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    assert v2_id != v1_id
    enc2 = encoder(v2_id, V2)

    def second_half():
        for i in range(HALF, N):
            yield i % PARTS, b"%d" % i, enc2({"id": i, "sensor": f"s{i % 10}", "value": i / 4, "ts": TS0 + i,
                                              "unit": "kelvin"})
    produce(kafka, topic, second_half())
    return topic, v1_id, v2_id


def test_million_avro_records_into_typed_columns_across_a_schema_change(spark, kafka, schema_registry,
                                                                        avro_topic):
    """valueAvroSubject (latest = v2) types the value column as v2's struct; every record is read
    once, in its partition, and v1's records are resolved to v2 (float widened, the added field
    defaulted) while v2's keep their own values."""
    topic, _, _ = avro_topic
    df = _reader(spark, kafka, subscribe=topic, schemaRegistryUrl=schema_registry.url,
                 valueAvroSubject=f"{topic}-value").load()
    assert df.schema["value"].dataType == StructType([
        StructField("id", LongType()), StructField("sensor", StringType()), StructField("value", DoubleType()),
        StructField("ts", TimestampType()), StructField("unit", StringType())])
    assert df.schema["key"].dataType.simpleString() == "binary"      # the raw key stays bytes
    v = F.col("value")
    key = F.col("key").cast("string").cast("long")
    old, new = v["id"] < HALF, v["id"] >= HALF
    stats = df.agg(
        F.count("*").alias("n"), F.countDistinct(v["id"]).alias("ids"), F.min(v["id"]).alias("lo"),
        F.max(v["id"]).alias("hi"),
        F.sum(F.when((v["id"] != key) | (F.col("partition") != key % PARTS)
                     | (F.col("offset") != F.floor(key / PARTS)), 1).otherwise(0)).alias("misplaced"),
        F.sum(F.when(v["sensor"] != F.concat(F.lit("s"), (v["id"] % 10).cast("string")), 1).otherwise(0))
        .alias("bad_sensor"),
        F.sum(F.when(old & ((v["unit"] != "celsius") | (v["value"] != v["id"] % 1000 + 0.5)), 1).otherwise(0))
        .alias("bad_old"),
        F.sum(F.when(new & ((v["unit"] != "kelvin") | (v["value"] != v["id"] / 4)), 1).otherwise(0))
        .alias("bad_new"),
        F.sum(F.when(F.unix_millis(v["ts"]) != v["id"] + TS0, 1).otherwise(0)).alias("bad_ts"),
        F.sum(old.cast("int")).alias("n_old"),
    ).collect()[0]
    assert (stats.n, stats.ids, stats.lo, stats.hi, stats.n_old) == (N, N, 0, N - 1, HALF)
    assert (stats.misplaced, stats.bad_sensor, stats.bad_old, stats.bad_new, stats.bad_ts) == (0, 0, 0, 0, 0)


def test_a_pinned_version_and_avro_keys(spark, kafka, schema_registry):
    """valueAvroVersion=1 pins the reader schema: v2's records resolve *down* to v1 (the added
    field dropped); an Avro string key decodes with keyAvroSubject; null values stay null."""
    topic = new_topic(kafka, 1, "avro-small")
    sr = SchemaRegistryClient({"url": schema_registry.url})
    v1_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(V1), "AVRO"))
    sr.set_compatibility(f"{topic}-value", "FULL")
    v2_full = {**V2, "fields": [*V1["fields"], {"name": "unit", "type": "string", "default": "celsius"}]}
    v2_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(v2_full), "AVRO"))
    key_id = sr.register_schema(f"{topic}-key", Schema('"string"', "AVRO"))
    key = encoder(key_id, "string")   # type: ignore[arg-type]
    produce(kafka, topic, [(0, key("a"), encoder(v1_id, V1)({"id": 1, "sensor": "x", "value": 1.5, "ts": TS0})),
                           (0, key("b"), encoder(v2_id, v2_full)({"id": 2, "sensor": "y", "value": 2.5, "ts": TS0,
                                                                  "unit": "kelvin"})),
                           (0, key("c"), None)])
    df = _reader(spark, kafka, subscribe=topic, schemaRegistryUrl=schema_registry.url,
                 valueAvroSubject=f"{topic}-value", valueAvroVersion="1", keyAvroSubject=f"{topic}-key").load()
    assert [f.name for f in df.schema["value"].dataType.fields] == ["id", "sensor", "value", "ts"]
    rows = [(r.key, None if r.value is None else (r.value.id, r.value.sensor, r.value.value))
            for r in df.orderBy("offset").collect()]
    assert rows == [("a", (1, "x", 1.5)), ("b", (2, "y", 2.5)), ("c", None)]


def test_unknown_schema_id_fails_the_read_naming_where(spark, kafka, schema_registry):
    """A value whose schema id the registry does not know fails the action with topic, partition,
    offset and the id; an unknown subject fails at load."""
    topic = new_topic(kafka, 1, "avro-bad")
    sr = SchemaRegistryClient({"url": schema_registry.url})
    schema_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(V1), "AVRO"))
    enc = encoder(schema_id, V1)
    produce(kafka, topic, [(0, None, enc({"id": 0, "sensor": "a", "value": 0.0, "ts": TS0})),
                           (0, None, struct.pack(">bI", 0, 987654) + b"\x02")])
    df = _reader(spark, kafka, subscribe=topic, schemaRegistryUrl=schema_registry.url,
                 valueAvroSubject=f"{topic}-value").load()
    with pytest.raises(PythonException) as exc:
        df.count()
    assert (f"The value of {topic}-0 at offset 1 has schema id 987654, which the schema registry at "
            f"{schema_registry.url} does not know (error 40403") in str(exc.value)
    missing = f"no-such-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AnalysisException, match=f"valueAvroSubject: cannot read version latest of subject "
                                                f"'{missing}' .*\\(error 40401\\)"):
        _reader(spark, kafka, subscribe=topic, schemaRegistryUrl=schema_registry.url,
                valueAvroSubject=missing).load()


def test_streaming_reads_avro_values_typed(spark, kafka, schema_registry, tmp_path):
    """readStream with valueAvroSubject: micro-batches (maxOffsetsPerTrigger) carry the typed
    value column; records of both schema versions arrive resolved to the latest."""
    topic = new_topic(kafka, 2, "avro-stream")
    sr = SchemaRegistryClient({"url": schema_registry.url})
    v1_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(V1), "AVRO"))
    enc1 = encoder(v1_id, V1)
    produce(kafka, topic, [(i % 2, None, enc1({"id": i, "sensor": "a", "value": 1.0, "ts": TS0 + i}))
                           for i in range(300)])
    v2_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(V2), "AVRO"))
    enc2 = encoder(v2_id, V2)
    produce(kafka, topic, [(i % 2, None, enc2({"id": i, "sensor": "b", "value": 2.0, "ts": TS0 + i,
                                               "unit": "kelvin"})) for i in range(300, 500)])
    out = tmp_path / "out"
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
          .option("schemaRegistryUrl", schema_registry.url).option("valueAvroSubject", f"{topic}-value").load())
    q = (df.select("value.*").writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 500
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3
    rows = sorted((r.id, r.sensor, r.value, r.unit) for r in spark.read.parquet(str(out)).collect())
    assert rows == [(i, "a", 1.0, "celsius") for i in range(300)] + \
        [(i, "b", 2.0, "kelvin") for i in range(300, 500)]
