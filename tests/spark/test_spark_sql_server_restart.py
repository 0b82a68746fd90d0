"""ksqlDB's promise for its state, on real ``kafkalite-sql-server`` processes: statements live in
the command topic, so a second server with the same ``ksql.service.id`` rebuilds every persistent
query and resumes it from its checkpoint, and the outputs are written exactly once.

A first server (tests/support/sql_server.py) runs a filtering, projecting CSAS over a JSON stream
while a producer writes to it without pause. In the middle of a micro-batch (one Spark has logged
in its checkpoint's ``offsets/`` but not in ``commits/``) the server's whole process group is
killed with SIGKILL: the Python server, its Spark driver JVM and its Python workers, so nothing is
flushed or stopped on the way out. A second server, with the same service id, another listener
port and a directory of its own, but the same ``ksql.streams.state.dir`` (Spark's checkpoints are
files there, so the design asks for storage every server can reach: docs/sql.md), replays the
command topic; ``SHOW QUERIES`` over REST lists the query under its first id, RUNNING; it commits
the interrupted micro-batch again while the producer still writes. Then the producer stops, and a
``read_committed`` reader finds in the CSAS's topic every input record that passes the filter
exactly once: an exact Counter over records that carry a unique sequence number, so a duplicate
cannot hide. (One query only: a second one, a CTAS, doubled the test's time on a loaded machine,
where its source's Python process also missed Spark's fixed 10 s to connect back again and again;
tests/spark/test_spark_sql.py and test_spark_sql_restart.py check a resumed CTAS against an oracle.)
"""
from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.spark.test_spark_standalone import _batches, _mid_batch
from tests.support.records import read_committed
from tests.support.sql_rest import ksql_call
from tests.support.sql_server import SqlServerFactory
from tests.support.waiting import wait_for

TRUCKS = 4


def _reading(i: int) -> tuple[str, int, int]:
    """Input record ``i``: (truck, sequence number, speed)."""
    return f"t{i % TRUCKS}", i, (i * 37) % 100


class _Feed(threading.Thread):
    """Writes readings ``0, 1, 2, ...`` to ``topic`` until stopped (up to 100 a second, acks=all);
    :attr:`delivered` holds every reading the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="feed", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self.topic = topic
        self.delivered: list[tuple[str, int, int]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            reading = _reading(i)
            truck, seq, speed = reading

            def done(err: Any, _msg: Any, reading: tuple[str, int, int] = reading) -> None:
                if err is None:
                    self.delivered.append(reading)
                else:
                    self.errors.append(str(err))
            self.producer.produce(self.topic, json.dumps({"seq": seq, "speed": speed}).encode(), truck.encode(),
                                  on_delivery=done)
            i += 1
            self.producer.poll(0.01)            # also paces the feed: at most 100 readings a second

    def stop(self) -> list[tuple[str, int, int]]:
        self.halt.set()
        self.join(30)
        assert self.producer.flush(60) == 0 and not self.errors, self.errors[:3]
        del self.producer                       # its librdkafka threads go now, not when the broker does
        return list(self.delivered)


def _ksql(url: str, statement: str) -> Any:
    code, body = ksql_call(url + "/ksql", {"ksql": statement, "streamsProperties": {}}, timeout=300)
    assert code == 200, body
    return body


def _fast(bootstrap: str, topic: str) -> Counter[tuple[str, int, int]]:
    return Counter((m.key().decode(), json.loads(m.value())["SEQ"], json.loads(m.value())["DOUBLED"])
                   for m in read_committed(bootstrap, topic, 2, 3.0))


def test_second_server_resumes_the_queries_after_a_kill_with_nothing_lost_or_doubled(
        kafka: Any, sql_server_factory: SqlServerFactory, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    service = f"restart_{suffix}_"
    gps, fast = f"rs-gps-{suffix}", f"rs-fast-{suffix}"
    props = {"ksql.service.id": service, "ksql.streams.auto.offset.reset": "earliest",
             "ksql.streams.commit.interval.ms": "500", "ksql.streams.state.dir": str(tmp_path / "state"),
             "ksql.query.retry.backoff.initial.ms": "1000", "ksql.query.retry.backoff.max.ms": "4000"}
    first = sql_server_factory(kafka.bootstrap, props, timeout=120)
    _ksql(first.url, f"CREATE STREAM trucks (truck VARCHAR KEY, seq INT, speed INT) "
                     f"WITH (KAFKA_TOPIC='{gps}', VALUE_FORMAT='JSON', PARTITIONS=2);")
    feed = _Feed(kafka.bootstrap, gps)
    feed.start()
    try:
        created = _ksql(first.url, f"CREATE STREAM fast WITH (KAFKA_TOPIC='{fast}', PARTITIONS=2) AS SELECT truck, "
                                   "seq, speed * 2 AS doubled FROM trucks WHERE speed > 50;")
        query_id = created[0]["commandStatus"]["queryId"]
        assert query_id == "CSAS_FAST_1", created
        checkpoint = tmp_path / "state" / service / query_id

        def in_flight() -> bool:
            assert first.alive, first.tail()
            done = _batches(checkpoint, "commits")
            return bool(done) and _mid_batch(checkpoint, done[-1])
        wait_for(in_flight, 240, lambda: f"the CSAS mid-batch after a committed one (log: {first.tail()})", 0.01)
        killed_at = _batches(checkpoint, "offsets")[-1]
        assert first.pid is not None
        os.killpg(first.pid, signal.SIGKILL)     # kill -9: the server, its Spark JVM and Python workers
        first.wait(30)
        assert _batches(checkpoint, "commits")[-1] < killed_at, "the kill interrupted a micro-batch"

        second = sql_server_factory(kafka.bootstrap, props, timeout=180)
        assert (second.port, second.dir) != (first.port, first.dir)
        shown = _ksql(second.url, "SHOW QUERIES;")[0]["queries"]
        assert [(q["id"], q["state"], q["sinkKafkaTopics"]) for q in shown] == [(query_id, "RUNNING", [fast])], shown
        assert "has no checkpoint" not in second.log_path.read_text()     # it found the first one's
        # the resumed CSAS commits the interrupted batch while the feed still writes
        wait_for(lambda: _batches(checkpoint, "commits")[-1] >= killed_at, 240,
                 lambda: f"the resumed CSAS to commit batches (log: {second.tail()})", 0.1)
    finally:
        delivered = feed.stop()

    want_fast = Counter((t, seq, speed * 2) for t, seq, speed in delivered if speed > 50)
    wait_for(lambda: set(_fast(kafka.bootstrap, fast)) >= set(want_fast), 180,
             lambda: f"every fast reading in {fast} (log: {second.tail()})", 0.5)
    got = _fast(kafka.bootstrap, fast)
    doubled = {r: n for r, n in got.items() if n > 1}
    assert got == want_fast, (f"{len(delivered)} readings, {sum(want_fast.values())} fast: "
                              f"{len(set(want_fast) - set(got))} missing, {len(doubled)} written more than once "
                              f"({sorted(doubled.items())[:5]}), {len(set(got) - set(want_fast))} unexpected")
