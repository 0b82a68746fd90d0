"""Continuous-pipeline options of the streaming reader without a SparkSession: Spark's
``minOffsetsPerTrigger``/``maxTriggerDelay`` rules and time strings, the group a query commits
to, and the driver-side reader holding a trigger back (and reporting the backlog) against the
shared broker."""
from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_integration.options import duration_ms, parse_options
from spark_integration.planning import delay_batch
from spark_integration.source import KafkaliteStreamReader
from tests.spark.conftest import new_topic, produce

BS = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}


def test_trigger_options_and_time_strings() -> None:
    assert [duration_ms(t, "x") for t in ("15m", "30s", "500ms", "2 min", "1h", "250", "1d")] == \
        [900000, 30000, 500, 120000, 3600000, 250, 86400000]
    with pytest.raises(ValueError, match="'maxTriggerDelay': expected a duration"):
        parse_options({**BS, "maxTriggerDelay": "soon"}, streaming=True)
    with pytest.raises(ValueError, match=r"minOffsetPerTrigger\(10\) is higher than the maxOffsetsPerTrigger\(5\)"):
        parse_options({**BS, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, streaming=True)
    opts = parse_options({**BS, "minOffsetsPerTrigger": "7", "maxTriggerDelay": "2s", "kafka.group.id": "g"},
                         streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms, opts.commit_group_id) == (7, 2000, "g")
    assert parse_options({**BS, "groupId": "a", "kafka.group.id": "b"}, streaming=True).commit_group_id == "a"
    assert parse_options(BS, streaming=True).commit_group_id is None


@pytest.mark.parametrize("new, minimum, delay, now, last, held", [
    (5, None, 1000, 10_000, 9_999, False),     # no minimum: never held
    (5, 10, 1000, 10_000, 0, False),           # first trigger is never held
    (5, 10, 1000, 10_000, 9_500, True),        # too few, too soon
    (10, 10, 1000, 10_000, 9_500, False),      # enough records
    (5, 10, 1000, 10_000, 9_000, False),       # maxTriggerDelay passed
])
def test_delay_batch(new: int, minimum: int | None, delay: int, now: int, last: int, held: bool) -> None:
    assert delay_batch(new, minimum, delay, now, last) is held


def test_reader_holds_small_batches_back_and_reports_the_backlog(kafka: Any) -> None:
    topic = new_topic(kafka, 2, "hold")
    produce(kafka, topic, [(i % 2, None, b"%d" % i) for i in range(40)])
    opts = parse_options({"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": topic,
                          "startingOffsets": "earliest", "minOffsetsPerTrigger": "30",
                          "maxTriggerDelay": "1h"}, streaming=True)
    reader = KafkaliteStreamReader(opts)
    start = reader.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    first = reader.latestOffset(start, ReadMaxRows(30))            # the first trigger runs: 30 of 40
    assert sum(first[topic].values()) == 30
    assert reader.reportLatestOffset() == {topic: {"0": 20, "1": 20}}
    assert reader.latestOffset(first, ReadAllAvailable()) == first   # 10 new < 30 within the delay: held
    produce(kafka, topic, [(i % 2, None, b"%d" % i) for i in range(40, 80)])
    after = reader.latestOffset(first, ReadAllAvailable())
    assert sum(after[topic].values()) == 80 and reader.reportLatestOffset() == after
    reader.stop()
