"""The ``kafkalite`` data source in a real local[2] Spark session against a real broker.

All tests share one SparkSession and one broker (tests/spark/conftest.py); each uses its own
topics and groups. Checks run as Spark aggregations where the data is large, so the assertions
cover every row without collecting a million of them into the driver.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import pytest
from pyspark.errors import AnalysisException, PythonException, StreamingQueryException
from pyspark.sql import functions as F

from kafkalite.client import KafkaClient, TopicPartition
from spark_integration import commit_ranges
from tests.spark.conftest import new_topic, produce
from tests.support.waiting import wait_for

N_BIG = 1_000_000
PARTS = 10


def _reader(spark, kafka, **options):
    r = spark.read.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


@pytest.fixture(scope="module")
def big_topic(kafka):
    """1,000,000 records over 10 partitions: record i has key str(i), partition i % 10, and a
    100-byte value that starts with its key, so each row says where it must be."""
    topic = new_topic(kafka, PARTS, "big")
    pad = b"." * 100

    def records():
        for i in range(N_BIG):
            k = b"%d" % i
            yield i % PARTS, k, (k + b"|" + pad)[:100]
    produce(kafka, topic, records())
    return topic


def test_million_records_exact_row_set(spark, kafka, big_topic):
    """Every produced record is read exactly once, in its partition, at offset i // 10."""
    df = _reader(spark, kafka, subscribe=big_topic).load()
    k = F.col("key").cast("string").cast("long")
    stats = df.agg(
        F.count("*").alias("n"), F.countDistinct("key").alias("keys"), F.min(k).alias("lo"), F.max(k).alias("hi"),
        F.sum(F.when((F.col("partition") != k % PARTS) | (F.col("offset") != F.floor(k / PARTS)), 1)
              .otherwise(0)).alias("misplaced"),
        F.sum(F.when(F.substring_index(F.col("value").cast("string"), "|", 1) != F.col("key").cast("string"), 1)
              .otherwise(0)).alias("bad_values"),
        F.sum(F.when(F.length("value") != 100, 1).otherwise(0)).alias("bad_lengths"),
        F.countDistinct("topic").alias("topics"), F.sum(F.col("timestamp").isNull().cast("int")).alias("no_ts"),
        F.max("timestampType").alias("tt"),
    ).collect()[0]
    assert (stats.n, stats.keys, stats.lo, stats.hi) == (N_BIG, N_BIG, 0, N_BIG - 1)
    assert (stats.misplaced, stats.bad_values, stats.bad_lengths, stats.topics, stats.no_ts, stats.tt) == \
        (0, 0, 0, 1, 0, 0)


def test_min_partitions_splits_tasks_without_changing_rows(spark, kafka, big_topic):
    """minPartitions=20 over 10 equal ranges gives 20 Spark tasks over the same offsets."""
    ending = json.dumps({big_topic: {str(p): 2000 for p in range(PARTS)}})
    df = _reader(spark, kafka, subscribe=big_topic, endingOffsets=ending, minPartitions="20").load()
    assert df.rdd.getNumPartitions() == 20
    row = df.agg(F.count("*").alias("n"), F.countDistinct("partition", "offset").alias("d")).collect()[0]
    assert (row.n, row.d) == (PARTS * 2000, PARTS * 2000)


def test_offsets_json_assign_and_headers(spark, kafka):
    """assign + startingOffsets/endingOffsets JSON read exactly that range; headers null vs present."""
    topic = new_topic(kafka, 2)
    produce(kafka, topic, [(i % 2, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)] if i % 4 == 0 else None)
                           for i in range(40)])
    df = _reader(spark, kafka, assign=json.dumps({topic: [1]}), includeHeaders="true",
                 startingOffsets=json.dumps({topic: {"1": 3}}), endingOffsets=json.dumps({topic: {"1": -1}})).load()
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(3, 20))
    assert all(r.partition == 1 and r.key == b"k%d" % (2 * r.offset + 1) for r in rows)
    assert all(r.headers is None for r in rows)        # odd i never got headers
    df0 = _reader(spark, kafka, assign=json.dumps({topic: [0]}), includeHeaders="true").load()
    by_offset = {r.offset: r for r in df0.collect()}
    assert [(h.key, h.value) for h in by_offset[2].headers] == [("n", b"4")] and by_offset[1].headers is None
    # timestamps: everything was produced after 0 and before the year 2100 (ListOffsets by time)
    assert _reader(spark, kafka, subscribe=topic, startingTimestamp="0").load().count() == 40
    with pytest.raises(AnalysisException, match="No offset matched the timestamp 4102444800000"):
        _reader(spark, kafka, subscribe=topic, startingTimestamp="4102444800000").load().count()
    late = _reader(spark, kafka, subscribe=topic, startingTimestamp="4102444800000",
                   startingOffsetsByTimestampStrategy="latest").load()
    assert late.count() == 0


def _produce_at(kafka, topic, records):
    """Produce ``(partition, value, timestamp_ms)``: each record's CreateTime is given."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
    for partition, value, ts in records:
        producer.produce(topic, value, partition=partition, timestamp=ts)
    assert producer.flush(60) == 0


def test_starting_offsets_by_timestamp_per_partition(spark, kafka):
    """startingOffsetsByTimestamp: each partition starts at the first record whose timestamp is at
    or after its own timestamp (batch, and a streaming query's first batch); no match fails, or
    with startingOffsetsByTimestampStrategy=latest starts that partition at its end; a bad JSON
    value and a partition left out fail with the option's error."""
    topic = new_topic(kafka, 2, "by-ts")
    base = (int(time.time()) - 3600) * 1000          # within the topic's 7-day time retention
    _produce_at(kafka, topic, [(p, b"%d-%d" % (p, i), base + 1000 * i) for p in range(2) for i in range(20)])
    starts = json.dumps({topic: {"0": base + 5000, "1": base + 11500}})     # offsets 5 and 12
    expected = sorted([(0, o) for o in range(5, 20)] + [(1, o) for o in range(12, 20)])
    df = _reader(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=starts).load()
    assert sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()) == expected

    name = "by_ts_" + uuid.uuid4().hex[:6]
    q = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribe", topic).option("startingOffsetsByTimestamp", starts).load()
         .select("partition", "offset").writeStream.format("memory").queryName(name)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    assert sorted((r.partition, r.offset) for r in spark.table(name).collect()) == expected

    future = json.dumps({topic: {"0": base + 5000, "1": 4102444800000}})    # 2100: no record matches
    with pytest.raises(AnalysisException, match=f"No offset matched the timestamp 4102444800000 in "
                                                f"startingOffsetsByTimestamp for {topic}-1"):
        _reader(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=future).load().count()
    late = _reader(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=future,
                   startingOffsetsByTimestampStrategy="latest").load()
    assert sorted((r.partition, r.offset) for r in late.select("partition", "offset").collect()) == \
        [(0, o) for o in range(5, 20)]
    bad = json.dumps({topic: {"0": "soon", "1": base}})
    with pytest.raises(AnalysisException, match=re.escape(
            'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, '
            '"1": 123456789}} for option \'startingOffsetsByTimestamp\', got \'' + bad)):
        _reader(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=bad).load()
    with pytest.raises(AnalysisException, match=f"startingOffsetsByTimestamp must give every topic-partition "
                                                f"read; missing {topic}-1"):
        _reader(spark, kafka, subscribe=topic,
                startingOffsetsByTimestamp=json.dumps({topic: {"0": base}})).load().count()


def _lag(kafka, group, topic, parts):
    with KafkaClient(kafka.bootstrap) as c:
        tps = [TopicPartition(topic, p) for p in range(parts)]
        committed = c.offset_fetch(group, tps)
        latest = c.list_offsets({tp: -1 for tp in tps})
        return sum(latest[tp][0] - max(committed[tp][0], 0) for tp in tps)


def test_group_runs_read_disjoint_ranges_whose_union_is_everything(spark, kafka):
    """Two scheduled runs with one groupId: each reads only what the previous one committed past."""
    topic, group = new_topic(kafka, 3), f"g-{uuid.uuid4().hex[:6]}"
    produce(kafka, topic, [(i % 3, b"%d" % i, b"a") for i in range(3000)])
    first = _reader(spark, kafka, subscribe=topic, groupId=group).load()
    produce(kafka, topic, [(i % 3, b"%d" % i, b"late") for i in range(3000, 3300)])  # after planning
    rows1 = {(r.partition, r.offset, r.key) for r in first.select("partition", "offset", "key").collect()}
    assert len(rows1) == 3000 and first.count() == 3000          # the plan is fixed at load()
    assert commit_ranges(spark, first) == {(topic, p): 1000 for p in range(3)}
    assert _lag(kafka, group, topic, 3) == 300

    produce(kafka, topic, [(i % 3, b"%d" % i, b"b") for i in range(3300, 4500)])
    second = _reader(spark, kafka, subscribe=topic, groupId=group).load()
    rows2 = {(r.partition, r.offset, r.key) for r in second.select("partition", "offset", "key").collect()}
    assert len(rows2) == 1500 and not rows1 & rows2
    assert {int(k) for _, _, k in rows1 | rows2} == set(range(4500))
    commit_ranges(spark, second)
    assert _lag(kafka, group, topic, 3) == 0
    assert _reader(spark, kafka, subscribe=topic, groupId=group).load().count() == 0


def test_data_loss_names_topic_partition_and_offsets(spark, kafka):
    """A start deleted by retention fails clearly; failOnDataLoss=false reads what is left."""
    topic = new_topic(kafka, 1, "ret", {"segment.bytes": "5000", "retention.bytes": "5000"})
    produce(kafka, topic, [(0, b"k", b"x" * 200) for _ in range(100)], **{"batch.size": 2500, "linger.ms": 5})
    with KafkaClient(kafka.bootstrap) as c:
        tp = TopicPartition(topic, 0)
        low = wait_for(lambda: c.list_offsets({tp: -2})[tp][0], 60, "retention to delete old segments")
        high = c.list_offsets({tp: -1})[tp][0]
    assert 0 < low < high == 100        # retention by size keeps the newest segments
    explicit = json.dumps({topic: {"0": 0}})
    with pytest.raises(AnalysisException, match=rf"Offsets \[0, \d+\) of {topic}-0 are no longer available"):
        _reader(spark, kafka, subscribe=topic, startingOffsets=explicit).load().count()
    with pytest.raises(AnalysisException, match=rf"Offsets \[0, \d+\) of {topic}-0 are no longer available"):
        _commit_and_load(spark, kafka, topic)
    df = _reader(spark, kafka, subscribe=topic, startingOffsets=explicit, failOnDataLoss="false").load()
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets == list(range(low, 100))


def _commit_and_load(spark, kafka, topic):
    """A group whose committed offset (0) was deleted since: the error comes at load()."""
    group = "lossy-" + uuid.uuid4().hex[:6]
    with KafkaClient(kafka.bootstrap) as c:
        c.offset_commit(group, {TopicPartition(topic, 0): 0})
    return _reader(spark, kafka, subscribe=topic, groupId=group).load()


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "latest"}, "'auto.offset.reset' is not supported"),
    ({"subscribe": "a", "minPartitions": "-3"}, "'minPartitions', must be a positive integer"),
])
def test_bad_options_fail_at_load(spark, kafka, options, message):
    """Option errors surface at load() as an AnalysisException carrying Spark's sentence."""
    with pytest.raises(AnalysisException, match=message):
        _reader(spark, kafka, **options).load()


def test_streaming_available_now_with_max_offsets_and_restart(spark, kafka, tmp_path):
    """availableNow honours maxOffsetsPerTrigger; a restart from the checkpoint reads only new rows;
    with groupId, processed offsets reach the group (a run's last batch when the next run starts)."""
    topic, group = new_topic(kafka, 2), f"sg-{uuid.uuid4().hex[:6]}"
    produce(kafka, topic, [(i % 2, b"%d" % i, b"v") for i in range(1000)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run():
        df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "300").option("groupId", group).load())
        q = (df.selectExpr("cast(key as string) k", "partition", "offset").writeStream.format("parquet")
             .option("path", str(out)).option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        q.awaitTermination(120)
        return [p["numInputRows"] for p in q.recentProgress]

    progress = run()
    assert sum(progress) == 1000 and max(progress) <= 300 and len([p for p in progress if p]) >= 4
    produce(kafka, topic, [(i % 2, b"%d" % i, b"v") for i in range(1000, 1250)])
    assert sum(run()) == 250
    assert 1000 <= 1250 - _lag(kafka, group, topic, 2) <= 1250   # committed: at least run 1's end
    keys = [int(r.k) for r in spark.read.parquet(str(out)).collect()]
    assert sorted(keys) == list(range(1250))


def test_streaming_rejects_ending_offsets(spark, kafka):
    """endingOffsets is a batch-only option."""
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
          .option("subscribe", "x").option("endingOffsets", "latest").load())
    with pytest.raises((AnalysisException, StreamingQueryException, PythonException),
                       match="endingOffsets option not valid in streaming queries"):
        q = df.writeStream.format("memory").queryName("bad_" + uuid.uuid4().hex[:6]).start()
        q.awaitTermination(60)


def test_truck_gps_example_counts_and_commits(spark, kafka, tmp_path):
    """The example job: per-truck counts and last positions per run, then the group's lag is 0."""
    from spark_integration.examples.truck_gps import produce_demo, run

    topic, group, out = f"trucks-{uuid.uuid4().hex[:6]}", f"report-{uuid.uuid4().hex[:6]}", str(tmp_path / "out")
    produce_demo(kafka.bootstrap, 500, topic)          # 25 trucks x 20 reports
    first = run(spark, kafka.bootstrap, group, out, topic)
    assert first["records"] == 500 and _lag(kafka, group, topic, 10) == 0
    described = subprocess.run([sys.executable, "-m", "kafkalite.cli.consumer_groups", "--bootstrap-server",
                                kafka.bootstrap, "--describe", "--group", group],
                               capture_output=True, text=True, timeout=120)
    assert described.returncode == 0, described.stderr
    lags = [line.split()[5] for line in described.stdout.splitlines() if line.startswith(group + " ")]
    assert lags == ["0"] * 10, described.stdout          # kafkalite-consumer-groups --describe: lag 0
    rows = spark.read.parquet(out).where(F.col("run_id") == first["run_id"]).collect()
    assert len(rows) == 25 and {r.reports for r in rows} == {20}
    assert all(abs(r.last_lat - (51.0 + 0.019)) < 1e-9 for r in rows)     # the 20th report is the last
    produce_demo(kafka.bootstrap, 50, topic)
    second = run(spark, kafka.bootstrap, group, out, topic)
    assert second["records"] == 50
    assert spark.read.parquet(out).where(F.col("run_id") == second["run_id"]).agg(F.sum("reports")).first()[0] == 50
    assert run(spark, kafka.bootstrap, group, out, topic)["records"] == 0
