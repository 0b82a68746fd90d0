"""Joins, INSERT INTO and an aggregating push query in the shared local[2] session, each checked
against a plain-Python oracle on the same input: a stream-stream INNER JOIN ... WITHIN as a CSAS
(every pair of records with the same key at most a minute apart, nothing else), then INSERT INTO
the joined stream from a filter of one side (its records join the output topic), a stream-table
LEFT JOIN against a table with updates and a tombstone (each shipment gets its carrier's latest
name, or null), then ``SELECT id, WINDOWSTART, WINDOWEND, COUNT(*) ... WINDOW TUMBLING ... GROUP BY
id EMIT CHANGES`` streaming counts whose last value per key and window is the oracle's. Every
output record's timestamp is ksqlDB's event time: the later of a joined pair's, the input
record's for INSERT INTO and for the stream-table join."""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition as CTP

from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from tests.support.waiting import wait_for

T0 = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
ORDERS = [(f"o{i}", float(10 * i), T0 + i * 20_000) for i in range(12)] + [("o1", 99.0, T0 + 50_000)]
SHIPMENTS = [(f"o{i}", f"c{i % 3}", T0 + i * 20_000 + (45_000 if i % 4 else 90_000)) for i in range(0, 12, 2)]


CARRIERS = [("c0", "Acme"), ("c1", "Bolt"), ("c0", "Acme2"), ("c1", None)]      # None: a tombstone


def _produce(bootstrap: str, topic: str, rows: list[tuple[str, Any, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value, ts in rows:
        p.produce(topic, None if value is None else json.dumps(value).encode(), key.encode(), timestamp=ts)
    assert p.flush(60) == 0


def _read(bootstrap: str, topic: str) -> list[tuple[str, dict[str, Any], int]]:
    """(key, value, the record's timestamp) of every committed record."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([CTP(topic, 0, 0)])
    out = []
    try:
        while True:
            msgs = c.consume(1000, 2.0)
            if not msgs:
                return out
            out += [(m.key().decode(), json.loads(m.value()), m.timestamp()[1]) for m in msgs if m.error() is None]
    finally:
        c.close()


def _join_oracle() -> list[tuple[str, float, str, int]]:
    """Each joined pair with Kafka Streams' output timestamp: the later of the two records'."""
    return sorted((oid, amount, carrier, max(ots, sts)) for oid, amount, ots in ORDERS
                  for sid, carrier, sts in SHIPMENTS if oid == sid and abs(sts - ots) <= 60_000)


def test_stream_stream_join_insert_into_and_aggregating_push_query(spark: Any, kafka: Any, tmp_path: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    config = KsqlConfig(bootstrap_servers=kafka.bootstrap, service_id=f"join_{suffix}_", state_dir=str(tmp_path),
                        streams=(("auto.offset.reset", "earliest"), ("commit.interval.ms", "500")))
    orders, shipments, shipped = f"orders-{suffix}", f"shipments-{suffix}", f"shipped-{suffix}"
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE STREAM orders (id VARCHAR KEY, amount DOUBLE) WITH (KAFKA_TOPIC='{orders}', "
                       f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM shipments (id VARCHAR KEY, carrier STRING) "
                       f"WITH (KAFKA_TOPIC='{shipments}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, orders, [(k, {"amount": a}, ts) for k, a, ts in ORDERS])
        _produce(kafka.bootstrap, shipments, [(k, {"carrier": c}, ts) for k, c, ts in SHIPMENTS])
        joined = engine.execute(
            f"CREATE STREAM shipped WITH (KAFKA_TOPIC='{shipped}') AS SELECT o.id AS id, amount, carrier "
            "FROM orders o JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 1 MINUTE ON o.id = s.id;")
        join_id = joined[0]["commandStatus"]["queryId"]
        want = _join_oracle()
        assert want and len(want) < len(SHIPMENTS) + 1               # some pairs fall outside WITHIN

        # every output record carries event time (ksqlDB's), not the time the sink wrote it
        def joined_rows() -> list[tuple[str, float, str, int]]:
            return sorted((k, v["AMOUNT"], v["CARRIER"], ts) for k, v, ts in _read(kafka.bootstrap, shipped))
        wait_for(lambda: joined_rows() == want, 120, "the join to match the oracle")
        described = engine.execute("DESCRIBE shipped;")[0]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"]) for f in described] == [
            ("ID", "STRING"), ("AMOUNT", "DOUBLE"), ("CARRIER", "STRING")]
        engine.execute(f"TERMINATE {join_id};")                   # one query at a time on local[2]

        inserted = engine.execute("INSERT INTO shipped SELECT id, amount, 'manual' AS carrier FROM orders "
                                  "WHERE amount >= 100;")
        insert_id = inserted[0]["commandStatus"]["queryId"]
        assert insert_id.startswith("INSERTQUERY_")
        manual = sorted((k, a, "manual", ts) for k, a, ts in ORDERS if a >= 100)
        wait_for(lambda: joined_rows() == sorted(want + manual), 120, "INSERT INTO's records in the stream")
        engine.execute(f"TERMINATE {insert_id};")

        carriers, named = f"carriers-{suffix}", f"named-{suffix}"
        engine.execute(f"CREATE TABLE carriers (id VARCHAR PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='{carriers}', "
                       "VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, carriers, [(k, None if n is None else {"name": n}, T0) for k, n in CARRIERS])
        latest: dict[str, str | None] = {}
        for k, n in CARRIERS:
            latest[k] = n
        table_join = engine.execute(
            f"CREATE STREAM named WITH (KAFKA_TOPIC='{named}') AS SELECT s.carrier AS carrier, s.id AS shipment, "
            "c.name AS name FROM shipments s LEFT JOIN carriers c ON s.carrier = c.id;")
        lookups = sorted((c, sid, latest.get(c), ts) for sid, c, ts in SHIPMENTS)     # the stream record's time
        assert {n for _, _, n, _ in lookups} == {"Acme2", None}            # updated, tombstoned and missing keys

        def named_rows() -> list[tuple[str, str, str | None, int]]:
            return sorted((k, v["SHIPMENT"], v["NAME"], ts) for k, v, ts in _read(kafka.bootstrap, named))
        wait_for(lambda: named_rows() == lookups, 120, "the stream-table join to match the oracle")
        engine.execute(f"TERMINATE {table_join[0]['commandStatus']['queryId']};")

        counts: dict[tuple[str, int, int], int] = {}
        seen = threading.Event()
        oracle: dict[tuple[str, int, int], int] = {}
        for k, _, ts in ORDERS:
            start = ts - ts % 60_000
            oracle[(k, start, start + 60_000)] = oracle.get((k, start, start + 60_000), 0) + 1
        tq = engine.query("SELECT id, WINDOWSTART, WINDOWEND, COUNT(*) AS n FROM orders "
                          "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id EMIT CHANGES;", {"auto.offset.reset": "earliest"})
        assert (tq.column_names, tq.column_types) == (["ID", "WINDOWSTART", "WINDOWEND", "N"],
                                                      ["STRING", "BIGINT", "BIGINT", "BIGINT"])

        def rows(batch: list[list[Any]]) -> None:
            counts.update({(r[0], r[1], r[2]): r[3] for r in batch})
            if counts == oracle:
                seen.set()
        tq.listen(rows)
        assert seen.wait(60), counts
        engine.close_query(tq.id)
    finally:
        engine.stop()
