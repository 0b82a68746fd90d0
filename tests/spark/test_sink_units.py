"""The ``kafkalite`` sink without a SparkSession: option and column checks in Spark's words, rows
to records, and the exactly-once task protocol against the shared broker (a batch written twice
is recognised by its marker; a zombie attempt is fenced)."""
from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from kafkalite.client.errors import ClientError
from spark_integration.sink import (TaskInfo, ensure_commit_topic, make_producer, record_encoder,
                                    transactional_id, write_at_least_once, write_exactly_once)
from spark_integration.sink_options import EXACTLY_ONCE, parse_sink_options
from tests.spark.conftest import new_topic
from tests.support.records import read_committed

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
KV = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
BS = {"kafka.bootstrap.servers": "127.0.0.1:1"}


@pytest.mark.parametrize("options, schema, message", [
    ({}, KV, "kafka.bootstrap.servers' must be specified"),
    (BS, KV, "topic option required when no 'topic' attribute is present"),
    ({**BS, "topic": "t"}, StructType([StructField("key", StringType())]), "Required attribute 'value' not found"),
    ({**BS, "topic": "t"}, StructType([StructField("value", LongType())]),
     "value attribute type must be a StringType or BinaryType, found bigint"),
    (BS, StructType([StructField("topic", IntegerType()), StructField("value", StringType())]),
     "Topic type must be a StringType, found int"),
    ({**BS, "topic": "t"}, StructType([StructField("value", StringType()), StructField("partition", LongType())]),
     "partition attribute type must be an IntegerType"),
    ({**BS, "topic": "t"}, StructType([StructField("value", StringType()), StructField("headers", StringType())]),
     "headers attribute type must be an array<struct<key:string,value:binary>>"),
    ({**BS, "topic": "t"}, StructType([StructField("value", StringType()), StructField("timestamp", StringType())]),
     "timestamp attribute type must be a TimestampType or a LongType of epoch milliseconds, found string"),
    ({**BS, "topic": "t"}, StructType([StructField("value", StringType()), StructField("timestamp", IntegerType())]),
     "timestamp attribute type must be a TimestampType or a LongType of epoch milliseconds, found int"),
    ({**BS, "topic": "t", "kafka.value.serializer": "x"}, KV, "'value.serializer' is not supported"),
    ({**BS, "topic": "t", "kafka.transactional.id": "x"}, KV, "use deliveryGuarantee=exactly_once"),
    ({**BS, "topic": "t", "deliveryGuarantee": "twice"}, KV, "Invalid value 'twice' for option 'deliveryGuarantee'"),
    ({**BS, "topic": "t", "transactionalIdPrefix": "p"}, KV, "needs deliveryGuarantee=exactly_once"),
    ({**BS, "topic": "t", "deliveryGuarantee": "exactly_once", "batchId": "3"}, KV,
     "Option 'batchId' must be a non-negative number, with deliveryGuarantee=exactly_once and transactionalIdPrefix"),
    ({**BS, "topic": "t", "kafka.acks": "1"}, KV, "kafka.acks=1 needs an idempotence-free producer"),
    ({**BS, "topic": "t", "kafka.compression.type": "brotli"}, KV, "'kafka.compression.type'"),
    ({**BS, "topic": "t", "kafka.security.protocol": "SASL_PLAINTEXT"}, KV, "Invalid Kafka security options"),
    ({**BS, "topic": "t", "valueAvroSubject": "s"}, KV, "schemaRegistryUrl' must be specified"),
])
def test_bad_options_and_columns_are_refused_in_sparks_words(options: dict, schema: StructType, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_sink_options(options, schema)


def test_columns_map_to_records_and_the_topic_option_overrides_the_column() -> None:
    schema = StructType([StructField("topic", StringType()), StructField("Key", StringType()),
                         StructField("value", BinaryType()), StructField("headers", HEADERS),
                         StructField("partition", IntegerType()), StructField("extra", LongType())])
    row = Row(topic="a", Key="k", value=bytearray(b"v"), headers=[Row(key="h", value=bytearray(b"1"))],
              partition=2, extra=7)
    encode = record_encoder(parse_sink_options(BS, schema))
    assert encode(row) == ("a", b"k", b"v", [("h", b"1")], 2, None)
    assert record_encoder(parse_sink_options({**BS, "topic": "b"}, schema))(row)[0] == "b"
    nulls = Row(topic="a", Key=None, value=None, headers=None, partition=None, extra=None)
    assert encode(nulls) == ("a", None, None, [], None, None)
    with pytest.raises(ValueError, match="null topic present in the data"):
        encode(Row(topic=None, Key=None, value=b"v", headers=None, partition=None, extra=None))
    opts = parse_sink_options({**BS, "topic": "t", "deliveryGuarantee": "exactly-once",
                               "kafka.linger.ms": "0", "kafka.compression.type": "LZ4"}, KV)
    assert (opts.guarantee, opts.linger_ms, opts.compression_type, opts.acks) == (EXACTLY_ONCE, 0, "lz4", "all")


@pytest.mark.parametrize("dtype", [TimestampType(), LongType()])
def test_a_timestamp_column_becomes_the_records_create_time(dtype: Any) -> None:
    """kafkalite's addition to Spark's sink columns: epoch milliseconds exactly (no float on the
    way), from a naive local datetime as PySpark hands a TimestampType over, from an aware one,
    or from a long; null is the producer's clock, as in Kafka."""
    schema = StructType([StructField("value", StringType()), StructField("TimeStamp", dtype)])
    encode = record_encoder(parse_sink_options({**BS, "topic": "t"}, schema))
    ms = 1_700_000_123_456
    aware = datetime.datetime(2023, 11, 14, 22, 15, 23, 456789, tzinfo=datetime.timezone.utc)
    naive_local = aware.astimezone().replace(tzinfo=None)
    for value in (ms, aware, naive_local, aware.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))):
        assert encode(Row(value="v", TimeStamp=value))[5] == ms
    assert encode(Row(value="v", TimeStamp=0))[5] == 0
    assert encode(Row(value="v", TimeStamp=None))[5] is None
    with pytest.raises(ValueError, match="before 1970-01-01"):
        encode(Row(value="v", TimeStamp=-1))
    with pytest.raises(ValueError, match="timestamp must be a timestamp or epoch milliseconds, found str"):
        encode(Row(value="v", TimeStamp="2023-11-14"))


def _read_committed(bootstrap: str, topic: str, partitions: int = 1) -> list[bytes]:
    return [m.value() for m in read_committed(bootstrap, topic, partitions, 3.0)]


def test_exactly_once_task_writes_a_batch_once_and_fences_a_zombie(kafka: Any) -> None:
    topic = new_topic(kafka, 2)
    opts = parse_sink_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic,
                               "deliveryGuarantee": "exactly_once"}, KV)
    ensure_commit_topic(opts)
    ensure_commit_topic(opts)                                    # a second call finds it
    prefix = f"unit-{uuid.uuid4().hex[:6]}"
    rows = [Row(key=f"k{i}", value=b"b0-%d" % i) for i in range(50)]
    first = write_exactly_once(opts, iter(rows), TaskInfo(3, 0, 0, None), prefix)
    assert (first.records, first.skipped) == (50, False)
    again = write_exactly_once(opts, iter(rows), TaskInfo(3, 1, 0, None), prefix)      # Spark re-runs batch 0
    assert (again.records, again.skipped) == (0, True)
    nxt = write_exactly_once(opts, iter([Row(key="x", value=b"b1")]), TaskInfo(3, 0, 1, None), prefix)
    assert (nxt.records, nxt.skipped) == (1, False)
    assert sorted(_read_committed(kafka.bootstrap, topic, 2)) == sorted([r.value for r in rows] + [b"b1"])

    # a zombie attempt of batch 2 is fenced by the next attempt: its records never become visible
    zombie = make_producer(opts, transactional_id(prefix, 3))
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0).result(30)
    retry = write_exactly_once(opts, iter([Row(key="y", value=b"b2")]), TaskInfo(3, 1, 2, None), prefix)
    assert retry.records == 1
    with pytest.raises(ClientError):
        zombie.commit_transaction()
    zombie.close(5)
    got = _read_committed(kafka.bootstrap, topic, 2)
    assert b"zombie" not in got and got.count(b"b2") == 1 and len(got) == 52


def test_at_least_once_reports_a_failed_delivery(kafka: Any) -> None:
    topic = new_topic(kafka, 1)
    opts = parse_sink_options({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic},
                              StructType([StructField("value", StringType()), StructField("partition", IntegerType())]))
    assert write_at_least_once(opts, iter([Row(value="a", partition=0), Row(value="b", partition=None)])) == 2
    with pytest.raises(ClientError, match="partition 5 of topic"):
        write_at_least_once(opts, iter([Row(value="c", partition=5)]))
