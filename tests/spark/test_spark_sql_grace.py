"""Late records and the grace period of a windowed aggregate (issue 30), with a JSON and an AVRO
topic, in one engine on the shared local[2] session, broker and schema registry.

A ``CREATE TABLE ... AS SELECT ... WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 5 SECONDS)
... EMIT CHANGES`` (and, over JSON, the same HOPPING with ADVANCE BY 5 SECONDS, where a record can
be too late for one of its windows and in time for the other) reads records produced out of
event-time order (the record timestamp is the event time), and its output topic is compared with
a plain-Python oracle of Kafka Streams' rule
(``KStreamWindowAggregate``): stream time is the largest timestamp seen so far, this record's
included; a window ``[start, end)`` takes the record only while ``end > stream time - grace``, so
a record is dropped when ``end + grace <= stream time`` at its arrival, equality included.

Spark's watermark (the engine's ``withWatermark("ROWTIME", grace)``) advances between
micro-batches, not per record, so the input comes in stages, each produced once the output is the
oracle's for the stages before it (each stage's last record is one the oracle counts, so the
output shows when the whole stage has been read). Within a stage no record is late relative to an
earlier one of the same stage, so both rules agree. The stages: records in order; then two beyond
the grace period and one late by 7 s but within it; then one that moves stream time to exactly a
window's end + grace; then a record for that window (dropped: the inequality's boundary), one for
an older window and a late one for an open window. The oracle's counts with the late records kept
differ from those with them dropped, so the test fails if the engine kept them (or dropped the
ones within the grace period). The same input through EMIT FINAL: each window written once, when
closed, with what the oracle counts.

The engine commits every 3 s here (ksqlDB's default is 2 s; the other Spark SQL tests use 0.5 s):
a late stage then arrives before the engine's next, empty, micro-batch, as records a second or two
behind the one that closed their window do, which Spark alone filtered with the watermark of the
micro-batch before and so counted (``Engine._start_stream``).
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any, Iterator

import pytest

from kafkalite.registry.client import RegistryClient
from kafkalite.sql.engine import Engine
from tests.spark.conftest import engine_wait, running_engine, sql_config
from tests.spark.test_spark_sql_format_matrix import T0, Topics, _latest
from tests.support.waiting import wait_for

SIZE, GRACE = 10_000, 5_000
#: the windows per kind: (ksqlDB's clause, advance)
WINDOWS = {"TUMBLING": ("TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 5 SECONDS)", SIZE),
           "HOPPING": ("HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS, GRACE PERIOD 5 SECONDS)", 5_000)}
#: (uid, event time after T0) per stage, in the order produced; each stage's last record is one
#: the oracle counts, in a window whose output it changes
STAGES = [
    [("u0", 1_000), ("u1", 2_000), ("u0", 8_000), ("u1", 12_000), ("u0", 14_000), ("u1", 23_000)],
    [("u0", 5_000), ("u1", 9_999), ("u1", 16_000)],       # [0, 10 s) closed at 15 s; [10 s, 20 s) open
    [("u0", 25_000)],                                     # stream time = 20 s + grace: [10 s, 20 s) closes
    [("u1", 19_000), ("u0", 15_000), ("u0", 21_000)],
]


def _amount(ts: int) -> float:
    return ts / 1000


def _starts(ts: int, advance: int) -> range:
    """The starts of the windows of SIZE every ``advance`` that hold ``ts`` (aligned to 0)."""
    return range(ts - ts % advance - SIZE + advance, ts + 1, advance)


def _ksql_windows(arrivals: list[tuple[str, int]], advance: int, keep_late: bool = False
                  ) -> tuple[dict[tuple[str, int], dict[str, Any]], list[tuple[str, int, int]]]:
    """ksqlDB's windowed COUNT(*) and SUM(amount) per (uid, window start) over ``arrivals`` in
    the order they arrive, and the (uid, record time, window start) left out as late;
    ``keep_late`` counts every record (what a wrong late rule gives)."""
    stream_time = -1
    out: dict[tuple[str, int], dict[str, Any]] = defaultdict(lambda: {"N": 0, "TOTAL": 0.0})
    dropped = []
    for uid, ts in arrivals:
        stream_time = max(stream_time, ts)
        for start in _starts(ts, advance):
            if keep_late or start + SIZE > stream_time - GRACE:
                out[(uid, start)]["N"] += 1
                out[(uid, start)]["TOTAL"] += _amount(ts)
            else:
                dropped.append((uid, ts, start))
    return dict(out), dropped


def _dropped_per_stage(advance: int) -> list[tuple[str, int, int]]:
    """What a rule applied per stage leaves out: each record judged against the stream time of
    the stages before its own, as a watermark advanced between micro-batches judges it."""
    dropped, stream_time = [], -1
    for stage in STAGES:
        dropped += [(uid, ts, start) for uid, ts in stage for start in _starts(ts, advance)
                    if start + SIZE <= stream_time - GRACE]
        stream_time = max([stream_time] + [ts for _, ts in stage])
    return dropped


def test_the_oracle_drops_beyond_the_grace_period_only() -> None:
    """The staged input exercises both sides of the rule (records dropped, late records counted,
    the boundary end + grace = stream time dropped; hopping: a record dropped from one window and
    counted in the next), and judging each stage as a whole drops the same records as ksqlDB's
    per-record rule."""
    arrivals = [r for stage in STAGES for r in stage]
    kept, dropped = _ksql_windows(arrivals, SIZE)
    assert dropped == [("u0", 5_000, 0), ("u1", 9_999, 0), ("u1", 19_000, 10_000), ("u0", 15_000, 10_000)]
    assert kept[("u1", 10_000)]["N"] == 2 and kept[("u0", 20_000)]["N"] == 2   # late, within the grace period
    hopped, hop_dropped = _ksql_windows(arrivals, 5_000)
    assert ("u1", 19_000, 10_000) in hop_dropped and hopped[("u1", 15_000)]["N"] == 3    # 16 s, 19 s, 23 s
    for advance, (counts, left_out) in ((SIZE, (kept, dropped)), (5_000, (hopped, hop_dropped))):
        assert _dropped_per_stage(advance) == left_out
        assert counts != _ksql_windows(arrivals, advance, keep_late=True)[0]
        assert not {stage[-1] for stage in STAGES} & {(u, t) for u, t, _ in left_out}  # each stage's last shows


@pytest.fixture(scope="module")
def engine(spark: Any, kafka: Any, schema_registry: Any, tmp_path_factory: Any) -> Iterator[Engine]:
    config = sql_config(kafka.bootstrap, f"grace_{uuid.uuid4().hex[:6]}_", tmp_path_factory.mktemp("sql-grace"),
                        schema_registry_url=schema_registry.url,
                        streams=(("auto.offset.reset", "earliest"), ("commit.interval.ms", "3000")))
    with running_engine(spark, config) as e:
        yield e


@pytest.mark.parametrize("fmt, kind", [("JSON", "TUMBLING"), ("AVRO", "TUMBLING"), ("JSON", "HOPPING")])
def test_late_records_within_and_beyond_the_grace_period(fmt: str, kind: str, engine: Engine, kafka: Any,
                                                         schema_registry: Any) -> None:
    s = f"{fmt.lower()}_{uuid.uuid4().hex[:6]}"
    topics = Topics(fmt, kafka.bootstrap, RegistryClient(schema_registry.url))
    source, sink = f"late-{s}", f"late-counts-{s}"
    formats = "FORMAT='AVRO'" if fmt == "AVRO" else "VALUE_FORMAT='JSON', KEY_FORMAT='JSON'"
    field = "AMOUNT" if fmt == "AVRO" else "amount"
    engine.execute(f"CREATE STREAM late_{s} (uid VARCHAR KEY, amount DOUBLE) WITH (KAFKA_TOPIC='{source}', "
                   f"{formats}, PARTITIONS=1);")
    made = engine.execute(
        f"CREATE TABLE counts_{s} WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS SELECT uid, COUNT(*) AS n, "
        f"SUM(amount) AS total FROM late_{s} WINDOW {WINDOWS[kind][0]} GROUP BY uid EMIT CHANGES;")
    query_id = made[0]["commandStatus"]["queryId"]

    def written() -> dict[tuple[str, int], dict[str, Any]]:
        """The output table: the latest value per (uid, window start)."""
        return {(uid, start): value for (uid, start, _), value in _latest(topics, topics.read(sink)).items()}
    try:
        arrived: list[tuple[str, int]] = []
        for number, stage in enumerate(STAGES, start=1):
            topics.produce(source, [(uid, {field: _amount(ts)}, T0 + ts) for uid, ts in stage], json_key=fmt == "JSON")
            arrived += stage
            want = {(uid, T0 + start): v for (uid, start), v in _ksql_windows(arrived, WINDOWS[kind][1])[0].items()}
            # the stage's last record changes the output, so once the output is the oracle's
            # the whole stage has been read (each Spark task commits its share of a micro-batch
            # on its own: a record dropped wrongly could show a little later, in a later stage)
            wait_for(lambda: written() == want, 120,
                     engine_wait(engine, f"{sink} after stage {number} to be {want}"))

        _settle(engine, query_id)
        assert written() == want
    finally:
        engine.execute(f"TERMINATE {query_id};")


def _settle(engine: Engine, query_id: str) -> None:
    """Wait until the query has read every record produced so far and committed its micro-batches
    (a query that failed meanwhile is restarted by the engine: its successor is asked)."""
    def settled() -> bool:
        try:
            engine.running[query_id].processAllAvailable()
        except Exception:
            return False
        return True
    wait_for(settled, 120, engine_wait(engine, f"{query_id} to read all its input"))


def test_emit_final_writes_each_window_once_without_its_late_records(engine: Engine, kafka: Any,
                                                                    schema_registry: Any) -> None:
    """EMIT FINAL over the same stages (JSON, TUMBLING) and then a record far ahead, which closes
    every window: each window is written once, when closed, with the records the oracle counts.
    A window's output waits for it to close, so each stage is produced once the query has read
    the ones before."""
    s = f"final_{uuid.uuid4().hex[:6]}"
    topics = Topics("JSON", kafka.bootstrap, RegistryClient(schema_registry.url))
    source, sink = f"late-{s}", f"late-final-{s}"
    engine.execute(f"CREATE STREAM late_{s} (uid VARCHAR KEY, amount DOUBLE) WITH (KAFKA_TOPIC='{source}', "
                   "VALUE_FORMAT='JSON', KEY_FORMAT='JSON', PARTITIONS=1);")
    made = engine.execute(
        f"CREATE TABLE final_{s} WITH (KAFKA_TOPIC='{sink}', PARTITIONS=1) AS SELECT uid, COUNT(*) AS n, "
        f"SUM(amount) AS total FROM late_{s} WINDOW {WINDOWS['TUMBLING'][0]} GROUP BY uid EMIT FINAL;")
    query_id = made[0]["commandStatus"]["queryId"]
    ahead = ("u9", 60_000)
    try:
        for stage in STAGES + [[ahead]]:
            topics.produce(source, [(uid, {"amount": _amount(ts)}, T0 + ts) for uid, ts in stage], json_key=True)
            _settle(engine, query_id)
        arrivals = [r for stage in STAGES for r in stage] + [ahead]

        def closed(keep_late: bool) -> dict[tuple[str, int], dict[str, Any]]:
            counts = _ksql_windows(arrivals, SIZE, keep_late)[0]
            return {(uid, T0 + start): v for (uid, start), v in counts.items() if start + SIZE + GRACE <= ahead[1]}
        want = closed(False)
        assert len(want) == 6 and want != closed(True)

        def written() -> list[tuple[bytes, dict[str, Any] | None, int]] | None:
            records = topics.read(sink)
            return records if len(records) >= len(want) else None
        records = wait_for(written, 60, engine_wait(engine, f"the {len(want)} closed windows in {sink}"))
        assert {(uid, start): v for (uid, start, _), v in _latest(topics, records).items()} == want
        assert len(records) == len(want)                  # each window once
    finally:
        engine.execute(f"TERMINATE {query_id};")
