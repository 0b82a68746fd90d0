"""A continuous pipeline in the shared local[2] session: kafkalite -> Spark (processing-time
trigger, maxOffsetsPerTrigger, kafka.group.id) -> kafkalite sink, running while a producer writes
and a partition is added to the input topic. Checked: every input record reaches the output,
no micro-batch exceeds maxOffsetsPerTrigger and the progress reports show the backlog, the new
partition is read, and the group's committed offsets (the Admin API's and
``kafkalite-consumer-groups --describe``'s view) follow the pipeline: a lag of exactly the
records the next batch has not committed yet."""
from __future__ import annotations

import contextlib
import io
import json
import threading
import uuid
from typing import Any

from kafkalite.cli import consumer_groups
from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.client.admin import Admin
from tests.spark.conftest import new_topic, produce
from tests.support.waiting import wait_for

MAX_PER_TRIGGER = 400
#: how far (in records) the writer lets the pipeline fall behind before it waits
BACKLOG = 1200


def offsets_sum(offsets: Any) -> int:
    """The sum of a progress report's offsets (Spark's JSON, as a string or parsed)."""
    data = json.loads(offsets) if isinstance(offsets, str) else offsets
    return sum(int(o) for parts in data.values() for o in parts.values())


def _latest(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    with KafkaClient(bootstrap) as client:
        answers = client.list_offsets({TopicPartition(topic, p): -1 for p in range(partitions)})
    return {tp.partition: v[0] for tp, v in answers.items()}


def start_pipeline(spark: Any, kafka: Any, source: str, out: str, group: str, checkpoint: str,
                   max_per_trigger: int, trigger: str) -> Any:
    """A topic-to-topic streaming query: the kafkalite source from the earliest offsets, at most
    ``max_per_trigger`` records a batch, committing as ``group``; the kafkalite sink into ``out``."""
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(max_per_trigger)).option("kafka.group.id", group).load())
    return (df.select("key", "value").writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", out)
            .option("checkpointLocation", checkpoint).trigger(processingTime=trigger).start())


def test_continuous_pipeline_with_a_partition_added_mid_run(spark: Any, kafka: Any, tmp_path: Any) -> None:
    source, out = new_topic(kafka, 2, "pipe-in"), new_topic(kafka, 2, "pipe-out")
    group = f"pipeline-{uuid.uuid4().hex[:6]}"
    produce(kafka, source, [(i % 2, None, b"%d" % i) for i in range(2000)])        # a backlog to start with
    q = start_pipeline(spark, kafka, source, out, group, str(tmp_path / "ckpt"), MAX_PER_TRIGGER, "500 milliseconds")
    produced = 2000
    stop = threading.Event()

    def read_so_far() -> int:
        last = q.lastProgress
        return offsets_sum(last["sources"][0]["endOffset"]) if last else 0

    def keep_producing() -> None:
        """100 records every 0.25 s while the pipeline is less than BACKLOG behind: it writes all
        through the run, yet never faster than the pipeline reads on a loaded machine (unpaced, it
        once wrote 34,600 records while the batches read ~100 a second, and the end never came)."""
        nonlocal produced
        while not stop.is_set():
            if produced - read_so_far() < BACKLOG:
                produce(kafka, source, [(i % 2, None, b"%d" % i) for i in range(produced, produced + 100)])
                produced += 100
            stop.wait(0.25)

    writer = threading.Thread(target=keep_producing, daemon=True)
    try:
        writer.start()
        wait_for(lambda: len(q.recentProgress) >= 4, 120, "four micro-batches")
        with Admin(kafka.bootstrap) as admin:
            assert admin.create_partitions({source: 3})[source] is None
        with KafkaClient(kafka.bootstrap) as client:
            wait_for(lambda: len(client.metadata([source]).topics[source].partitions) == 3 and all(
                p.leader >= 0 for p in client.metadata([source]).topics[source].partitions.values()),
                60, "the new partition's leader")
        produce(kafka, source, [(2, None, b"p2-%d" % i) for i in range(300)])
        wait_for(lambda: produced >= 5000, 120, "5000 records produced while the query runs")
        stop.set()
        writer.join(60)
        total = produced + 300
        wait_for(lambda: sum(_latest(kafka.bootstrap, out, 2).values()) >= total, 180, lambda: (
            f"every record through the pipeline: {sum(_latest(kafka.bootstrap, out, 2).values())} of {total} "
            f"in the output, source at {_latest(kafka.bootstrap, source, 3)}, last batches "
            f"{[(p['batchId'], p['numInputRows'], p['sources'][0]['endOffset']) for p in q.recentProgress[-3:]]}, "
            f"{len(q.recentProgress)} in all, exception {q.exception()}"))
        before_tick = _latest(kafka.bootstrap, source, 3)
        produce(kafka, source, [(0, None, b"tick")])     # the next batch commits the previous one's offsets
        with Admin(kafka.bootstrap) as admin:
            committed = wait_for(lambda: (lambda c: c if c == {TopicPartition(source, p): o for p, o in
                                                               before_tick.items()} else None)(
                admin.list_group_offsets(group)), 120, "the group's offsets at the end of the data")
        latest = _latest(kafka.bootstrap, source, 3)
        assert {tp.partition: latest[tp.partition] - o for tp, o in committed.items()} == {0: 1, 1: 0, 2: 0}
        # the same lag as an operator sees it: kafkalite-consumer-groups --describe (its main function);
        # it stays put, as no batch runs (and commits) until more records come
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert consumer_groups.main(["--bootstrap-server", kafka.bootstrap, "--describe", "--group", group]) == 0
        described = {int(cols[2]): (int(cols[3]), int(cols[4]), cols[5]) for cols in
                     (line.split() for line in printed.getvalue().splitlines()) if cols[:2] == [group, source]}
        assert described == {p: (before_tick[p], latest[p], str(latest[p] - before_tick[p])) for p in range(3)}, \
            printed.getvalue()
        assert [described[p][2] for p in range(3)] == ["1", "0", "0"]
        wait_for(lambda: sum(_latest(kafka.bootstrap, out, 2).values()) >= total + 1, 120, "the tick's batch")
    finally:
        stop.set()
        q.stop()
    assert q.exception() is None
    progress = q.recentProgress
    rows = [p["numInputRows"] for p in progress]
    assert max(rows) == MAX_PER_TRIGGER and all(r <= MAX_PER_TRIGGER for r in rows)
    # reportLatestOffset: a batch that left a backlog shows the source's latest offsets past its end
    assert any(offsets_sum(p["sources"][0]["latestOffset"]) > offsets_sum(p["sources"][0]["endOffset"])
               for p in progress if p["sources"][0].get("latestOffset"))
    got = [r.v for r in spark.read.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
           .option("subscribe", out).load().selectExpr("cast(value as string) v").collect()]
    assert len(got) == len(set(got)) == total + 1
    assert set(got) == {str(i) for i in range(produced)} | {f"p2-{i}" for i in range(300)} | {"tick"}


def test_subscribe_pattern_picks_up_a_topic_created_while_the_query_runs(spark: Any, kafka: Any) -> None:
    """subscribePattern under a processing-time trigger: a matching topic created while the query
    runs is found on a later trigger (each one asks the brokers' metadata again, as Spark's Kafka
    source does) and read from its earliest offset; a topic the pattern does not match is not."""
    uid = uuid.uuid4().hex[:6]
    first = new_topic(kafka, 2, f"pat{uid}")
    produce(kafka, first, [(i % 2, None, b"a%d" % i) for i in range(100)])
    name = f"pattern_{uid}"
    q = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
         .option("subscribePattern", f"^pat{uid}-").option("startingOffsets", "earliest").load()
         .selectExpr("topic", "cast(value as string) v").writeStream.format("memory").queryName(name)
         .trigger(processingTime="500 milliseconds").start())

    def rows() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for r in spark.table(name).collect():
            out.setdefault(r.topic, set()).add(r.v)
        return out
    try:
        wait_for(lambda: len(rows().get(first, ())) == 100, 120, "the first topic's records", 0.5)
        batches_before = len(q.recentProgress)
        second, other = new_topic(kafka, 3, f"pat{uid}"), new_topic(kafka, 1, f"other{uid}")
        produce(kafka, second, [(i % 3, None, b"b%d" % i) for i in range(90)])
        produce(kafka, other, [(0, None, b"c%d" % i) for i in range(10)])
        produce(kafka, first, [(i % 2, None, b"a%d" % i) for i in range(100, 120)])
        wait_for(lambda: len(rows().get(second, ())) == 90 and len(rows()[first]) == 120, 120,
                 lambda: f"the new topic's records (read so far: { {t: len(v) for t, v in rows().items()} })", 0.5)
        got = rows()
    finally:
        q.stop()
    assert q.exception() is None
    assert got == {first: {f"a{i}" for i in range(120)}, second: {f"b{i}" for i in range(90)}}
    assert spark.table(name).count() == 210                    # each record once
    assert len(q.recentProgress) > batches_before               # found on a later trigger of the same run
