"""The ``kafkalite`` sink in the shared local[2] session: a batch write read back with every
column, a ``topic`` column routing to several topics, Avro values through the schema registry,
and a streaming exactly-once query stopped mid-way, made to run a committed batch again (its
commit-log entry removed, as when the driver dies between the sink's commit and Spark's), and
restarted: a ``read_committed`` verifier finds every input record exactly once."""
from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from pyspark.sql import functions as F

from tests.spark.conftest import new_topic, produce
from tests.spark.test_sink_units import _read_committed
from tests.support.waiting import wait_for


def _read(spark: Any, kafka: Any, topic: str, **options: str) -> Any:
    r = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_write_then_read_back(spark: Any, kafka: Any) -> None:
    topic = new_topic(kafka, 2)
    rows = [(f"k{i}", f"v{i}", i % 2, [("h", b"%d" % i)] if i % 3 else None) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    (df.write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", topic).save())
    got = _read(spark, kafka, topic, includeHeaders="true").selectExpr(
        "cast(key as string) k", "cast(value as string) v", "partition", "headers").collect()
    assert len(got) == 300
    by_key = {r.k: r for r in got}
    for k, v, partition, headers in rows:
        r = by_key[k]
        assert (r.v, r.partition) == (v, partition)
        assert (None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]) == headers


def test_a_timestamp_column_sets_create_time_and_a_read_then_write_keeps_event_time(spark: Any, kafka: Any) -> None:
    """kafkalite's ``timestamp`` column: a long of epoch ms (null: the producer's clock), then the
    source's own TimestampType column copied into another topic unchanged."""
    first, second = new_topic(kafka, 1, "ts-a"), new_topic(kafka, 1, "ts-b")
    # an hour ago, a whole second: old enough to tell from "now", young enough for the topic's
    # 7-day time retention (a 2020 timestamp made the broker roll a segment for it and retention
    # delete that segment, as Kafka's would, taking a record with it)
    base = (int(time.time()) - 3600) * 1000
    df = spark.createDataFrame([(f"{i}", base + 1000 * i if i else None) for i in range(20)],
                               "value string, timestamp bigint")
    before = int(time.time() * 1000)
    (df.write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", first).save())
    got = {int(r.v): (r.ts, r.timestampType) for r in _read(spark, kafka, first).selectExpr(
        "cast(value as string) v", "unix_millis(timestamp) ts", "timestampType").collect()}
    assert {i: got[i] for i in range(1, 20)} == {i: (base + 1000 * i, 0) for i in range(1, 20)}
    assert got[0][0] >= before and got[0][1] == 0            # null: now, as a Kafka producer stamps it
    (_read(spark, kafka, first).select("value", "timestamp").write.format("kafkalite").mode("append")
     .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", second).save())
    copied = {int(r.v): r.ts for r in _read(spark, kafka, second).selectExpr(
        "cast(value as string) v", "unix_millis(timestamp) ts").collect()}
    assert copied == {i: ts for i, (ts, _) in got.items()}


def test_topic_column_routes_to_several_topics(spark: Any, kafka: Any) -> None:
    topics = [new_topic(kafka, 1, "route") for _ in range(3)]
    df = spark.createDataFrame([(topics[i % 3], f"{i}") for i in range(90)], "topic string, value string")
    (df.write.mode("append").format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("deliveryGuarantee", "exactly_once").save())
    for n, topic in enumerate(topics):
        got = sorted(int(r.v) for r in _read(spark, kafka, topic).selectExpr("cast(value as string) v").collect())
        assert got == list(range(n, 90, 3))


def test_avro_values_through_the_schema_registry(spark: Any, kafka: Any, schema_registry: Any) -> None:
    topic = new_topic(kafka, 1, "avro-sink")
    subject = f"{topic}-value"
    schema = {"type": "record", "name": "Speed", "namespace": "kafkalite.sink", "fields": [
        {"name": "truck", "type": "string"}, {"name": "speed", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None}]}
    SchemaRegistryClient({"url": schema_registry.url}).register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    rows = [(f"t{i}", float(i) / 2, None if i % 2 else "x") for i in range(40)]
    df = spark.createDataFrame(rows, "truck string, speed double, note string") \
        .select(F.col("truck").alias("key"), F.struct("truck", "speed", "note").alias("value"))
    (df.write.mode("append").format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", topic)
     .option("schemaRegistryUrl", schema_registry.url).option("valueAvroSubject", subject).save())
    back = _read(spark, kafka, topic, schemaRegistryUrl=schema_registry.url, valueAvroSubject=subject) \
        .select("value.truck", "value.speed", "value.note").collect()
    assert sorted((r.truck, r.speed, r.note) for r in back) == sorted(rows)


def test_avro_keys_through_the_schema_registry(spark: Any, kafka: Any, schema_registry: Any) -> None:
    """keyAvroSubject: a struct ``key`` column goes out as Confluent-framed Avro (magic byte 0,
    the subject's schema id, the Avro body), decoded here by confluent-kafka's own deserializer
    from the registry; a null key stays a null key, and the reader's keyAvroSubject reads it back."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = new_topic(kafka, 2, "avro-key-sink")
    subject = f"{topic}-key"
    schema = {"type": "record", "name": "TruckKey", "namespace": "kafkalite.sink", "fields": [
        {"name": "truck", "type": "string"}, {"name": "fleet", "type": "int"}]}
    registry = SchemaRegistryClient({"url": schema_registry.url})
    schema_id = registry.register_schema(subject, Schema(json.dumps(schema), "AVRO"))
    rows = [(f"t{i}", i % 3, f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "truck string, fleet int, value string") \
        .select(F.struct("truck", "fleet").alias("key"), "value") \
        .union(spark.createDataFrame([(None, "no-key")], "key struct<truck:string,fleet:int>, value string"))
    (df.write.mode("append").format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", topic)
     .option("schemaRegistryUrl", schema_registry.url).option("keyAvroSubject", subject).save())

    raw = {r.v: None if r.key is None else bytes(r.key)
           for r in _read(spark, kafka, topic).selectExpr("key", "cast(value as string) v").collect()}
    assert len(raw) == 31 and raw["no-key"] is None
    deserialize = AvroDeserializer(registry)
    ctx = SerializationContext(topic, MessageField.KEY)
    for truck, fleet, value in rows:
        framed = raw[value]
        assert framed is not None and framed[0] == 0 and int.from_bytes(framed[1:5], "big") == schema_id
        assert deserialize(framed, ctx) == {"truck": truck, "fleet": fleet}

    back = _read(spark, kafka, topic, schemaRegistryUrl=schema_registry.url, keyAvroSubject=subject) \
        .selectExpr("key.truck", "key.fleet", "cast(value as string) v").collect()
    assert sorted((r.truck, r.fleet, r.v) for r in back if r.v != "no-key") == sorted(rows)
    assert [(r.truck, r.fleet) for r in back if r.v == "no-key"] == [(None, None)]


def test_streaming_exactly_once_survives_a_stop_and_a_batch_run_again(spark: Any, kafka: Any, tmp_path: Path) -> None:
    source, out = new_topic(kafka, 2, "eos-in"), new_topic(kafka, 2, "eos-out")
    produce(kafka, source, [(i % 2, None, b"r%d" % i) for i in range(600)])
    ckpt = str(tmp_path / "ckpt")

    def start(**trigger: Any) -> Any:
        df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "100").load())
        return (df.select("key", "value").writeStream.format("kafkalite")
                .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", out)
                .option("deliveryGuarantee", "exactly_once").option("checkpointLocation", ckpt)
                .trigger(**trigger).start())

    q = start(processingTime="100 milliseconds")
    try:
        wait_for(lambda: len(q.recentProgress) >= 3, 120, "three micro-batches")
    finally:
        q.stop()                                         # mid-way: possibly inside a batch
    assert q.exception() is None
    commits = Path(ckpt) / "commits"
    last = max(int(p.name) for p in (Path(ckpt) / "offsets").iterdir() if p.name.isdigit())
    # the last planned batch runs again: either the stop cut it short, or (commit-log entry
    # removed) the driver "died" after the sink committed it but before Spark logged it
    for name in (str(last), f".{last}.crc"):
        if (commits / name).exists():
            os.remove(commits / name)
    produce(kafka, source, [(i % 2, None, b"r%d" % i) for i in range(600, 800)])

    q = start(availableNow=True)
    q.awaitTermination(300)
    assert q.exception() is None
    rerun = [p for p in q.recentProgress if p["batchId"] == last]
    assert rerun and rerun[0]["numInputRows"] > 0        # Spark really ran the committed batch again
    got = Counter(_read_committed(kafka.bootstrap, out, 2))
    expected = {b"r%d" % i for i in range(800)}
    assert set(got) == expected and set(got.values()) == {1}, \
        f"{len(expected - set(got))} missing, {sum(1 for v in got.values() if v > 1)} duplicated"


def _replicated_topic(cluster: Any, partitions: int, prefix: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkalite.client import KafkaClient

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, 3, config={"min.insync.replicas": "2"})], operation_timeout=30)
    futures[name].result(60)
    with KafkaClient(cluster.bootstrap) as client:
        def ready() -> bool:
            t = client.metadata([name]).topics.get(name)
            return t is not None and len(t.partitions) == partitions and all(
                p.leader >= 0 and len(p.isr) == 3 for p in t.partitions.values())
        wait_for(ready, 60, f"leaders and full ISRs for {name}")
    return name


def _leader(cluster: Any, topic: str, partition: int) -> int:
    from kafkalite.client import KafkaClient

    with KafkaClient(cluster.bootstrap) as client:
        return int(client.metadata([topic]).topics[topic].partitions[partition].leader)


def test_exactly_once_survives_the_output_leader_killed_mid_batch(spark: Any, cluster_factory: Any,
                                                                  tmp_path: Path) -> None:
    """Three brokers, everything replicated three times (the transaction log and the marker
    topic too); kill -9 the leader of an output partition while a micro-batch is in flight: its
    transaction goes on with the new leader (or is aborted and the batch run again), and the
    query ends with every input record in the output once for read_committed readers."""
    cluster = cluster_factory(3, {"default.replication.factor": "3", "min.insync.replicas": "2",
                                  "transaction.state.log.replication.factor": "3",
                                  "transaction.state.log.min.isr": "2", "offsets.topic.replication.factor": "3",
                                  "unclean.leader.election.enable": "false"})
    source, out = _replicated_topic(cluster, 2, "lk-in"), _replicated_topic(cluster, 2, "lk-out")
    total = 3000
    produce(cluster, source, [(i % 2, None, b"r%d" % i) for i in range(total)], acks="all")
    ckpt = tmp_path / "ckpt"

    def batches(log: str) -> list[int]:
        d = ckpt / log
        return sorted(int(p.name) for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []

    def in_flight(after: int) -> bool:
        offsets, commits = batches("offsets"), batches("commits")
        return bool(offsets) and offsets[-1] > after and (not commits or offsets[-1] > commits[-1])

    def start() -> Any:
        df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "200").load())
        return (df.select("key", "value").writeStream.format("kafkalite")
                .option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", out)
                .option("deliveryGuarantee", "exactly_once").option("checkpointLocation", str(ckpt))
                .trigger(availableNow=True).start())

    q = start()
    try:
        wait_for(lambda: len(batches("commits")) >= 2, 180, "two committed micro-batches")
        wait_for(lambda: in_flight(batches("commits")[-1]), 60, "a micro-batch in flight", 0.005)
        victim = cluster.broker(_leader(cluster, out, 0))
        victim.kill()                                              # kill -9 the output leader mid-batch
        victim.wait(30)
        killed_in = batches("offsets")[-1]
        q.awaitTermination(300)
    finally:
        q.stop()
    assert killed_in < total // 200 - 1, "the broker died before the last batch"
    print(f"leader of {out}-0 killed in batch {killed_in}: the query "
          f"{'went on with the new leader' if q.exception() is None else 'failed; restarted from its checkpoint'}")
    if q.exception() is not None:             # the sink gave up on the dead leader: run it again
        q = start()
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()
    got = Counter(_read_committed(cluster.bootstrap, out, 2))
    expected = {b"r%d" % i for i in range(total)}
    assert set(got) == expected and set(got.values()) == {1}, \
        f"{len(expected - set(got))} missing, {sum(1 for v in got.values() if v > 1)} duplicated"


def test_at_least_once_writes_through_an_idempotent_producer(spark: Any, kafka: Any) -> None:
    """The default guarantee: each task's producer is idempotent (acks=all), so a retried
    produce request is deduplicated by the broker: every stored batch carries a producer id and
    per-producer sequence numbers that run from 0 without gap or overlap, and no batch is
    transactional. The 600 rows are there once each."""
    from kafkalite.client import KafkaClient, TopicPartition
    from kafkalite.records.batch import scan_valid_prefix

    topic = new_topic(kafka, 2, "idem")
    df = spark.createDataFrame([(f"k{i}", f"v{i}", i % 2) for i in range(600)], "key string, value string, partition int")
    (df.repartition(3).write.format("kafkalite").mode("append").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("topic", topic).option("kafka.batch.size", "2048").save())
    sequences: dict[tuple[int, int], list[tuple[int, int]]] = {}
    with KafkaClient(kafka.bootstrap) as client:
        for partition in range(2):
            fetched = client.fetch(TopicPartition(topic, partition), 0, max_bytes=8 << 20)
            infos, _ = scan_valid_prefix(bytes(fetched.records))
            assert infos and fetched.high_watermark == sum(i.last_offset_delta + 1 for i in infos)
            for info in infos:
                assert info.has_producer_id and not info.is_transactional, info
                sequences.setdefault((info.producer_id, partition), []).append(
                    (info.base_sequence, info.last_sequence))
    assert len({pid for pid, _ in sequences}) >= 2                     # one producer per Spark task
    for runs in sequences.values():
        expected_next = 0
        for first, last in runs:
            assert first == expected_next, runs                          # no gap, no overlap
            expected_next = last + 1
    got = Counter(r.v for r in _read(spark, kafka, topic).selectExpr("cast(value as string) v").collect())
    assert set(got) == {f"v{i}" for i in range(600)} and set(got.values()) == {1}
