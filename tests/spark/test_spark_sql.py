"""The SQL engine end to end in the shared local[2] session: a JSON stream, a windowed aggregate
(CREATE TABLE ... AS SELECT ... WINDOW TUMBLING ... GROUP BY) and a filtering CSAS run as Spark
queries writing through the kafkalite sink; the table's last value per (truck, window) equals a
plain-Python oracle on the same input. Then the engine is stopped, more input arrives, and a new
engine with the same ksql.service.id replays the command topic: same streams, tables and query
ids, the queries resume from their checkpoints (the table's state store rebuilt from its topic, so a
pull query answers the windows closed before the restart), and the oracle over all input still holds.
Output records carry event time as ksqlDB's do: a window's the latest of its records', a filtered
record its input's."""
from __future__ import annotations

import json
import struct
import time
import uuid
from collections import defaultdict
from typing import Any

from confluent_kafka import Producer

from kafkalite.sql.engine import Engine
from tests.spark.conftest import engine_wait, sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for

WINDOW_MS = 10_000
# an hour ago on a window boundary: recent enough that retention (7 days) keeps the records
T0 = (int(time.time() * 1000) // WINDOW_MS) * WINDOW_MS - 3_600_000


def _produce(bootstrap: str, topic: str, rows: list[tuple[str, float, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for truck, speed, ts in rows:
        p.produce(topic, json.dumps({"truck": truck, "speed": speed}).encode(), truck.encode(), timestamp=ts)
    assert p.flush(60) == 0


def _rows(start: int, n: int) -> list[tuple[str, float, int]]:
    return [(f"t{i % 3}", float((i * 7) % 90), T0 + i * 700) for i in range(start, start + n)]


def _oracle(rows: list[tuple[str, float, int]]) -> dict[tuple[str, int], tuple[float, int, float]]:
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for truck, speed, ts in rows:
        if speed > 5:
            groups[(truck, ts - ts % WINDOW_MS)].append(speed)
    return {k: (sum(v) / len(v), len(v), max(v)) for k, v in groups.items()}


def _timed(oracle: dict[tuple[str, int], tuple[float, int, float]],
           rows: list[tuple[str, float, int]]) -> dict[tuple[str, int], tuple[float, int, float, int]]:
    """The oracle's rows with the output timestamp Kafka Streams gives an aggregate: the latest
    timestamp of the records that formed it."""
    latest: dict[tuple[str, int], int] = {}
    for truck, speed, ts in rows:
        if speed > 5:
            key = (truck, ts - ts % WINDOW_MS)
            latest[key] = max(latest.get(key, ts), ts)
    return {k: v + (latest[k],) for k, v in oracle.items()}


def _table(bootstrap: str, topic: str, partitions: int) -> dict[tuple[str, int], tuple[float, int, float, int]]:
    """The last value and its record's timestamp per windowed key (Kafka Streams' key bytes +
    8-byte window start)."""
    out: dict[tuple[str, int], tuple[float, int, float, int]] = {}
    for m in read_committed(bootstrap, topic, partitions, 3.0):
        key = m.key()
        start = struct.unpack(">q", key[-8:])[0]
        v = json.loads(m.value())
        out[(key[:-8].decode(), start)] = (v["AVG_SPEED"], v["N"], v["TOP"], m.timestamp()[1])
    return out


def _fast_alerts(bootstrap: str, topic: str) -> list[tuple[str, float, int]]:
    return [(m.key().decode(), json.loads(m.value())["SPEED_KMH"], m.timestamp()[1])
            for m in read_committed(bootstrap, topic, 2, 3.0)]


def test_windowed_aggregate_matches_an_oracle_and_survives_a_restart(spark: Any, kafka: Any, tmp_path: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    config = sql_config(kafka.bootstrap, f"test_{suffix}_", tmp_path)
    gps, speeds, alerts = f"gps-{suffix}", f"speeds-{suffix}", f"alerts-{suffix}"
    first = _rows(0, 120)
    engine = Engine(config, spark)
    try:
        assert engine.start() == 0
        created = engine.execute(
            f"CREATE STREAM trucks (truck VARCHAR KEY, speed DOUBLE) "
            f"WITH (KAFKA_TOPIC='{gps}', VALUE_FORMAT='JSON', PARTITIONS=2);")
        assert created[0]["commandStatus"]["message"] == "Stream created"
        _produce(kafka.bootstrap, gps, first)
        table = engine.execute(
            f"CREATE TABLE speeds WITH (KAFKA_TOPIC='{speeds}', PARTITIONS=2) AS "
            "SELECT truck, AVG(speed) AS avg_speed, COUNT(*) AS n, MAX(speed) AS top FROM trucks "
            "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 HOUR) WHERE speed > 5 GROUP BY truck EMIT CHANGES;")
        speeds_id = table[0]["commandStatus"]["queryId"]
        assert speeds_id == "CTAS_SPEEDS_1"          # named after its command's sequence number
        want = _timed(_oracle(first), first)
        wait_for(lambda: _table(kafka.bootstrap, speeds, 2) == want, 150,
                 engine_wait(engine, "the windowed table to match the oracle"))
        shown = engine.execute("SHOW QUERIES; SHOW TABLES; DESCRIBE speeds;")
        assert {q["id"] for q in shown[0]["queries"]} == {speeds_id}
        assert shown[1]["tables"] == [{"type": "TABLE", "name": "SPEEDS", "topic": speeds, "keyFormat": "KAFKA",
                                       "valueFormat": "JSON", "isWindowed": True}]
        assert [f["name"] for f in shown[2]["sourceDescription"]["fields"]] == ["TRUCK", "AVG_SPEED", "N", "TOP"]
    finally:
        engine.stop()

    more = _rows(120, 60)
    _produce(kafka.bootstrap, gps, more)
    again = Engine(config, spark)                   # a restarted server: same service id, same command topic
    try:
        assert again.start() == 2
        assert set(again.running) == {speeds_id}
        assert sorted(again.metastore.sources) == ["SPEEDS", "TRUCKS"]
        # the resumed table's state store was rebuilt from its topic: a pull query answers the
        # windows closed before the restart (those `more` cannot touch) with their aggregates
        pulled = again.query("SELECT * FROM speeds WHERE truck = 't0' AND WINDOWSTART < "
                             f"{T0 + 80_000};")
        assert pulled.column_names == ["TRUCK", "WINDOWSTART", "WINDOWEND", "AVG_SPEED", "N", "TOP"]
        closed = {k: v for k, v in _oracle(first).items() if k[0] == "t0" and k[1] < T0 + 80_000}
        assert closed and {(r[0], r[1]): (r[3], r[4], r[5]) for r in pulled.rows} == closed
        assert all(r[2] == r[1] + WINDOW_MS for r in pulled.rows)
        want = _timed(_oracle(first + more), first + more)
        wait_for(lambda: _table(kafka.bootstrap, speeds, 2) == want, 150,
                 engine_wait(again, "the table after the restart"))
        # one query at a time on local[2]: the table's query ends, a filtering stream starts
        terminated = again.execute(f"TERMINATE {speeds_id};")
        assert terminated[0]["commandStatus"]["message"] == "Query terminated." and not again.running
        fast = again.execute(f"CREATE STREAM fast WITH (KAFKA_TOPIC='{alerts}') AS SELECT truck, "
                             "speed * 1.609 AS speed_kmh FROM trucks WHERE speed >= 80 PARTITION BY truck;")
        assert fast[0]["commandStatus"]["queryId"] == "CSAS_FAST_3"
        expected = sorted((t, s * 1.609, ts) for t, s, ts in first + more if s >= 80)    # each input's time
        wait_for(lambda: sorted(_fast_alerts(kafka.bootstrap, alerts)) == expected, 150,
                 engine_wait(again, "the alerts stream"))
    finally:
        again.stop()
