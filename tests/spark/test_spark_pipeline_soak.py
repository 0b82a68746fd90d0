"""A continuous pipeline for minutes, not seconds: kafkalite -> Spark (processing-time trigger,
``maxOffsetsPerTrigger``, ``kafka.group.id``) -> kafkalite sink, while a producer writes at a
steady rate for three minutes. Sampled every few seconds: the backlog Spark's progress reports
(the source's ``latestOffset`` past the batch's ``endOffset``) and the group's lag as
``kafkalite-consumer-groups --describe`` computes it (the log end minus the committed offset).
Checked: the lag stays bounded (below a fixed ceiling, and the last minute no higher than the
first plus a margin: a pipeline that falls behind shows a lag that grows with time), no
micro-batch exceeds ``maxOffsetsPerTrigger``, and every record reaches the output once.

The trigger is every 2 s, not every second: most of a micro-batch's cost is per batch, not per
record, and the other test tier runs beside the Spark tests on the same two cores. Measured over
the three minutes (this test's processes: pytest, broker, Spark's JVM and Python workers), a 1 s
trigger used 0.75 of a core, a 2 s trigger 0.50. The group lag in the samples went from 350-500
records to 450-850; the ceiling is unchanged: a batch in flight and one not yet committed are
about 4 s of input, far below it."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from kafkalite.client import TopicPartition
from kafkalite.client.admin import Admin
from tests.spark.conftest import new_topic, produce
from tests.spark.test_spark_pipeline import _latest, offsets_sum, start_pipeline
from tests.support.waiting import wait_for

RUN_S = 180.0
RATE = 200                  # records/s, in 50-record bursts
MAX_PER_TRIGGER = 1000
TRIGGER = "2 seconds"
#: a pipeline keeping up holds a batch in flight and one not yet committed: a few seconds of input
LAG_CEILING = RATE * 30


def test_pipeline_keeps_up_for_minutes(spark: Any, kafka: Any, tmp_path: Any) -> None:
    source, out = new_topic(kafka, 2, "soak-in"), new_topic(kafka, 2, "soak-out")
    group = f"soak-{uuid.uuid4().hex[:6]}"
    # records for the first micro-batch: it starts the sink's Python workers too, and its progress
    # comes at once (an empty source's second progress report waits for Spark's no-data interval, 10 s)
    produced = produce(kafka, source, [(i % 2, None, b"%d" % i) for i in range(50)])
    q = start_pipeline(spark, kafka, source, out, group, str(tmp_path / "ckpt"), MAX_PER_TRIGGER, TRIGGER)
    stop = threading.Event()

    def keep_producing() -> None:
        nonlocal produced
        start = time.monotonic()
        while not stop.is_set():
            produce(kafka, source, [(i % 2, None, b"%d" % i) for i in range(produced, produced + 50)])
            produced += 50
            stop.wait(max(0.0, start + produced / RATE - time.monotonic()))       # a steady rate

    samples: list[tuple[float, int, int]] = []          # (seconds in, group lag, progress backlog)
    writer = threading.Thread(target=keep_producing, daemon=True)
    try:
        # the first batches start Spark's Python workers (tens of seconds on a loaded machine): the
        # steady state is measured from there
        wait_for(lambda: len(q.recentProgress) >= 2, 240, "the query's first two micro-batches")
        began = time.monotonic()
        writer.start()
        with Admin(kafka.bootstrap) as admin:
            while time.monotonic() - began < RUN_S:
                assert q.exception() is None and q.isActive, q.exception()
                ends = _latest(kafka.bootstrap, source, 2)
                committed = admin.list_group_offsets(group)
                lag = sum(end - committed.get(TopicPartition(source, p), 0) for p, end in ends.items())
                progress = q.lastProgress
                backlog = (offsets_sum(progress["sources"][0]["latestOffset"]) -
                           offsets_sum(progress["sources"][0]["endOffset"])) \
                    if progress and progress["sources"][0].get("latestOffset") else 0
                samples.append((time.monotonic() - began, lag, backlog))
                time.sleep(5)           # the sampling period of a lag monitor, not a wait for a state
        stop.set()
        writer.join(60)
        wait_for(lambda: sum(_latest(kafka.bootstrap, out, 2).values()) >= produced, 180,
                 "every record through the pipeline")
    finally:
        stop.set()
        q.stop()
    assert q.exception() is None
    print(f"{produced} records in {RUN_S:.0f} s; (s, group lag, backlog) samples: {samples}")
    assert produced >= RATE * RUN_S * 0.8, f"the producer fell short of its rate: {produced}"
    steady = [s for s in samples if s[0] >= 20]                      # past the query's first batches
    assert len(steady) >= 20, samples
    assert max(lag for _, lag, _ in steady) <= LAG_CEILING, steady
    first = [lag for t, lag, _ in steady if t < 80]
    last = [lag for t, lag, _ in steady if t >= RUN_S - 60]
    assert sum(last) / len(last) <= sum(first) / len(first) + RATE * 5, (first, last)
    rows = [p["numInputRows"] for p in q.recentProgress]
    assert rows and all(r <= MAX_PER_TRIGGER for r in rows)
    got = [r.v for r in spark.read.format("kafkalite").option("kafka.bootstrap.servers", kafka.bootstrap)
           .option("subscribe", out).load().selectExpr("cast(value as string) v").collect()]
    assert len(got) == len(set(got)) == produced and set(got) == {str(i) for i in range(produced)}
