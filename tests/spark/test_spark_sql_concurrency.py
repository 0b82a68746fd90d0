"""Several persistent queries side by side on one engine, as a ksqlDB server runs them (issue 30):
a filtering CSAS, a projecting CSAS, a windowed CTAS, a non-windowed CTAS and a stream-table
LEFT JOIN all started before any of them has finished its first micro-batch, plus a push query;
each output checked against a plain-Python oracle of the same input. Then every query is stopped
(TERMINATE for two, the engine's stop for the rest) while records keep arriving, so that stops
land in the middle of micro-batches: the driver JVM's stderr (where an uncaught error of a stream
thread goes) must hold no ``StackOverflowError`` (spark_integration.session.DRIVER_JAVA_OPTIONS
says why one happened), and no query may have failed (a Python worker that did not connect back
in time would make its query fail and be restarted)."""
from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from confluent_kafka import Producer

from kafkalite.sql.engine import Engine
from tests.spark.conftest import sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for

T0 = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
VIEWS = [(f"u{i % 4}", f"p{i % 3}", float(i * 5), T0 + i * 7_000) for i in range(16)]
USERS = [("u0", "eu"), ("u1", "us"), ("u2", "eu")]             # u3 has no region: null in the join


def _produce(bootstrap: str, topic: str, rows: list[tuple[str, Any, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value, ts in rows:
        p.produce(topic, json.dumps(value).encode(), key.encode(), timestamp=ts)
    assert p.flush(60) == 0


def _read(bootstrap: str, topic: str) -> list[tuple[bytes, dict[str, Any]]]:
    """(raw key, value) of every committed record (the ones readable within a second of silence)."""
    return [(m.key(), json.loads(m.value())) for m in read_committed(bootstrap, topic, quiet_s=1.0)]


@contextlib.contextmanager
def _jvm_stderr(spark: Any, path: Path) -> Iterator[None]:
    """The driver JVM's ``System.err`` into ``path`` meanwhile (then copied to this stderr)."""
    jvm = spark.sparkContext._jvm
    original = jvm.java.lang.System.err
    jvm.java.lang.System.setErr(jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path), True), True))
    try:
        yield
    finally:
        jvm.java.lang.System.setErr(original)
        sys.stderr.write(path.read_text(errors="replace") if path.exists() else "")


def _latest(records: list[tuple[bytes, dict[str, Any]]]) -> dict[bytes, dict[str, Any]]:
    return {k: v for k, v in records}


def test_concurrent_persistent_queries_and_a_push_query_then_clean_stops(spark: Any, kafka: Any,
                                                                         tmp_path: Any) -> None:
    jvm_err = tmp_path / "jvm-stderr.log"
    with _jvm_stderr(spark, jvm_err):
        _run(spark, kafka, tmp_path)
    err = jvm_err.read_text(errors="replace") if jvm_err.exists() else ""
    assert "StackOverflowError" not in err, err[:3000]
    assert "failed to connect back" not in err, err[:3000]


def _run(spark: Any, kafka: Any, tmp_path: Any) -> None:
    s = uuid.uuid4().hex[:6]
    config = sql_config(kafka.bootstrap, f"conc_{s}_", tmp_path)
    t = {n: f"{n}-{s}" for n in ("views", "users", "big", "upper", "counts", "pages", "enriched")}
    engine = Engine(config, spark)
    stopped = False
    feeding = threading.Event()                        # set: the feeder of the stop phase ends
    try:
        engine.start()
        engine.execute(
            f"CREATE STREAM views (uid VARCHAR KEY, page STRING, amount DOUBLE) WITH (KAFKA_TOPIC='{t['views']}', "
            f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE TABLE users (uid VARCHAR PRIMARY KEY, region STRING) "
            f"WITH (KAFKA_TOPIC='{t['users']}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, t["users"], [(u, {"region": r}, T0 - 1_000) for u, r in USERS])
        _produce(kafka.bootstrap, t["views"], [(u, {"page": p, "amount": a}, ts) for u, p, a, ts in VIEWS])
        # every query is started before any has run its first micro-batch: they plan, start their
        # Python workers and commit side by side
        started = engine.execute(
            f"CREATE STREAM big WITH (KAFKA_TOPIC='{t['big']}') AS SELECT uid, page, amount FROM views "
            "WHERE amount > 30 EMIT CHANGES;"
            f"CREATE STREAM upper_views WITH (KAFKA_TOPIC='{t['upper']}') AS SELECT uid, UCASE(page) AS upage "
            "FROM views EMIT CHANGES;"
            f"CREATE TABLE counts WITH (KAFKA_TOPIC='{t['counts']}') AS SELECT uid, COUNT(*) AS n, SUM(amount) "
            "AS total FROM views WINDOW TUMBLING (SIZE 1 MINUTE, GRACE PERIOD 1 HOUR) GROUP BY uid EMIT CHANGES;"
            f"CREATE TABLE pages WITH (KAFKA_TOPIC='{t['pages']}') AS SELECT page, COUNT(*) AS n FROM views "
            "GROUP BY page EMIT CHANGES;"
            f"CREATE STREAM enriched WITH (KAFKA_TOPIC='{t['enriched']}') AS SELECT v.uid AS uid, page, region "
            "FROM views v LEFT JOIN users u ON v.uid = u.uid EMIT CHANGES;")
        ids = [e["commandStatus"]["queryId"] for e in started]
        assert len(ids) == 5 and all(engine.running[q].isActive for q in ids)

        # a push query beside them: it starts from the latest offsets, so its rows are the later ones
        push = engine.query("SELECT uid, amount FROM views WHERE amount >= 1000 EMIT CHANGES;")
        pushed: list[list[Any]] = []
        got = threading.Lock()

        def rows(batch: list[list[Any]]) -> None:
            with got:
                pushed.extend(batch)
        push.listen(rows)
        later = [("u9", {"page": "p9", "amount": 1000.0 + i}, T0 + 200_000 + i) for i in range(3)]
        _produce(kafka.bootstrap, t["views"], later)
        wait_for(lambda: sorted(map(tuple, pushed)) == [("u9", 1000.0 + i) for i in range(3)], 180,
                 "the push query's rows")
        views = VIEWS + [(u, v["page"], v["amount"], ts) for u, v, ts in later]

        # each output against its oracle
        want_big = sorted((u, p, a) for u, p, a, _ in views if a > 30)
        wait_for(lambda: sorted((k.decode(), v["PAGE"], v["AMOUNT"]) for k, v in _read(kafka.bootstrap, t["big"]))
                 == want_big, 180, "the filtering CSAS")
        want_upper = sorted((u, p.upper()) for u, p, _, _ in views)
        wait_for(lambda: sorted((k.decode(), v["UPAGE"]) for k, v in _read(kafka.bootstrap, t["upper"]))
                 == want_upper, 180, "the projecting CSAS")
        want_pages: dict[str, int] = {}
        for _, p, _, _ in views:
            want_pages[p] = want_pages.get(p, 0) + 1
        wait_for(lambda: {k.decode(): v["N"] for k, v in _latest(_read(kafka.bootstrap, t["pages"])).items()}
                 == want_pages, 180, "the non-windowed CTAS")
        regions = dict(USERS)
        want_enriched = sorted((u, p, regions.get(u)) for u, p, _, _ in views)
        wait_for(lambda: sorted((k.decode(), v["PAGE"], v["REGION"]) for k, v in _read(kafka.bootstrap, t["enriched"]))
                 == want_enriched, 180, "the stream-table join")
        want_counts: dict[tuple[str, int], tuple[int, float]] = {}
        for u, _, a, ts in views:
            n, total = want_counts.get((u, ts - ts % 60_000), (0, 0.0))
            want_counts[(u, ts - ts % 60_000)] = (n + 1, total + a)

        def counts() -> dict[tuple[str, int], tuple[int, float]]:
            pulled = {}
            for u in sorted({u for u, _ in want_counts}):
                for row in engine.query(f"SELECT WINDOWSTART, n, total FROM counts WHERE uid = '{u}';").rows:
                    pulled[(u, row[0])] = (row[1], row[2])
            return pulled
        wait_for(lambda: counts() == want_counts, 180, "the windowed CTAS (pull queries on its state)")
        assert len(_latest(_read(kafka.bootstrap, t["counts"]))) == len(want_counts)

        # stops: the push query closed, two queries terminated while the others run, then the rest,
        # while records keep coming (so that the stops interrupt micro-batches in their foreachBatch)

        def feed() -> None:
            p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
            i = 0
            while not feeding.is_set():
                p.produce(t["views"], json.dumps({"page": "late", "amount": 1.0}).encode(), f"u{i % 4}".encode(),
                          timestamp=T0 + 400_000 + i)
                p.poll(0)
                i += 1
                feeding.wait(0.02)
            p.flush(30)
        feeder = threading.Thread(target=feed, name="feeder", daemon=True)
        feeder.start()
        wait_for(lambda: any(engine.running[q].status["isTriggerActive"] for q in ids[1:4]), 60,
                 "a micro-batch of the fed records")
        assert engine.close_query(push.id)
        engine.execute(f"TERMINATE {ids[0]}; TERMINATE {ids[4]};")
        assert ids[0] not in engine.running and ids[4] not in engine.running
        assert all(engine.running[q].isActive for q in ids[1:4])
        states = {q: engine.metastore.queries[q].state for q in ids}
        assert states == {ids[0]: "TERMINATED", ids[1]: "RUNNING", ids[2]: "RUNNING", ids[3]: "RUNNING",
                          ids[4]: "TERMINATED"}, states
        engine.stop()
        stopped = True
        feeding.set()
        feeder.join()
        assert engine.running == {} and engine.transient == {}
        assert not any(q.isActive for q in spark.streams.active if q.name in ids)
        assert engine.restarts == {}, engine.restarts             # no query failed and was restarted
    finally:
        feeding.set()
        if not stopped:
            engine.stop()
