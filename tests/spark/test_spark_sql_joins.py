"""Joins, INSERT INTO and an aggregating push query in the shared local[2] session, each checked
against a plain-Python oracle on the same input: a stream-stream INNER JOIN ... WITHIN as a CSAS
(every pair of records with the same key at most a minute apart, nothing else), then INSERT INTO
the joined stream from a filter of one side (its records join the output topic), a stream-table
LEFT JOIN against a table with updates and a tombstone (each shipment gets its carrier's latest
name, or null), then ``SELECT id, WINDOWSTART, WINDOWEND, COUNT(*) ... WINDOW TUMBLING ... GROUP BY
id EMIT CHANGES`` streaming counts whose last value per key and window is the oracle's. Every
output record's timestamp is ksqlDB's event time: the later of a joined pair's, the input
record's for INSERT INTO and for the stream-table join. Then a table-table LEFT JOIN (a CTAS
whose output topic, read as a table, is the oracle's join of both tables' final rows before and
after deletes on each side, with a pull query on it), an AVRO stream joined with two tables, and
aggregates over joins (a table-table join, resumed after a restart; a stream-stream join mixed
with a stream-table join, either way round). The queries keep their tables' state: counted, each
table record is read once. A SOURCE TABLE answers a pull query."""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from kafkalite.sql.engine import Engine, _committed_offsets
from tests.spark.conftest import engine_wait, sql_config
from tests.support.records import read_committed
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
    return [(m.key().decode(), json.loads(m.value()), m.timestamp()[1]) for m in read_committed(bootstrap, topic)]


def _join_oracle() -> list[tuple[str, float, str, int]]:
    """Each joined pair with Kafka Streams' output timestamp: the later of the two records'."""
    return sorted((oid, amount, carrier, max(ots, sts)) for oid, amount, ots in ORDERS
                  for sid, carrier, sts in SHIPMENTS if oid == sid and abs(sts - ots) <= 60_000)


def test_stream_stream_join_insert_into_and_aggregating_push_query(spark: Any, kafka: Any, tmp_path: Any) -> None:
    suffix = uuid.uuid4().hex[:6]
    config = sql_config(kafka.bootstrap, f"join_{suffix}_", tmp_path)
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
        wait_for(lambda: joined_rows() == want, 120, engine_wait(engine, "the join to match the oracle"))
        described = engine.execute("DESCRIBE shipped;")[0]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"]) for f in described] == [
            ("ID", "STRING"), ("AMOUNT", "DOUBLE"), ("CARRIER", "STRING")]
        engine.execute(f"TERMINATE {join_id};")                   # one query at a time on local[2]

        inserted = engine.execute("INSERT INTO shipped SELECT id, amount, 'manual' AS carrier FROM orders "
                                  "WHERE amount >= 100;")
        insert_id = inserted[0]["commandStatus"]["queryId"]
        assert insert_id.startswith("INSERTQUERY_")
        manual = sorted((k, a, "manual", ts) for k, a, ts in ORDERS if a >= 100)
        wait_for(lambda: joined_rows() == sorted(want + manual), 120,
                 engine_wait(engine, "INSERT INTO's records in the stream"))
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
        wait_for(lambda: named_rows() == lookups, 120, engine_wait(engine, "the stream-table join to match the oracle"))
        named_id = table_join[0]['commandStatus']['queryId']
        # the query keeps the table's rows: each carrier record was read once, however many micro-batches ran
        assert sum(engine.table_states[named_id][0].reads) == len(CARRIERS)
        engine.execute(f"TERMINATE {named_id};")

        # the same topic as a read-only SOURCE TABLE: its CST_ query materializes it for pull queries
        out = engine.execute(f"CREATE SOURCE TABLE carriers_src (id VARCHAR PRIMARY KEY, name STRING) WITH "
                             f"(KAFKA_TOPIC='{carriers}', VALUE_FORMAT='JSON');")
        assert out[0]["commandStatus"]["queryId"].startswith("CST_CARRIERS_SRC_")
        wait_for(lambda: engine.query("SELECT * FROM carriers_src;").rows == [["c0", "Acme2"]], 120,
                 "the source table's latest rows (c1 deleted) in a pull query")
        # a restarted server resumes the CST_ query: the store is read through Spark up to its last
        # committed batch (the topic's lower-case JSON fields matched as the stream matches them),
        # and what was written while the server was down comes after it
        checkpoint = tmp_path / config.service_id / out[0]["commandStatus"]["queryId"]
        wait_for(lambda: json.loads(_committed_offsets(checkpoint) or "{}").get(carriers) == {"0": len(CARRIERS)},
                 60, "the source table's batch committed in its checkpoint")
        engine.stop()
        _produce(kafka.bootstrap, carriers, [("c1", {"name": "Bolt2"}, T0)])
        engine = Engine(config, spark)
        engine.start()
        wait_for(lambda: engine.query("SELECT * FROM carriers_src;").rows == [["c0", "Acme2"], ["c1", "Bolt2"]], 120,
                 engine_wait(engine, "the resumed source table's rows in a pull query"))
        engine.execute("DROP TABLE carriers_src;")              # its CST_ query goes with it

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


ACCOUNTS = [("a1", "Ann", T0), ("a2", "Bob", T0 + 1_000), ("a3", "Cy", T0 + 2_000), ("a4", "Di", T0 + 3_000),
            ("a2", "Bobby", T0 + 4_000)]
LIMITS = [("a1", 10, T0 + 500), ("a3", 30, T0 + 5_000), ("a5", 50, T0 + 6_000), ("a1", 11, T0 + 7_000)]


def _materialize(records: list[tuple[str, Any, int]]) -> dict[str, tuple[dict[str, Any], int]]:
    """An output table as a reader of its topic sees it: the latest record per key, a tombstone deleting."""
    table: dict[str, tuple[dict[str, Any], int]] = {}
    for key, value, ts in records:
        if value is None:
            table.pop(key, None)
        else:
            table[key] = (value, ts)
    return table


def _read_table(bootstrap: str, topic: str) -> list[tuple[str, Any, int]]:
    """(key, value or None for a tombstone, timestamp) of every committed record, in order."""
    return [(m.key().decode(), None if m.value() is None else json.loads(m.value()), m.timestamp()[1])
            for m in read_committed(bootstrap, topic)]


def _left_join_oracle(accounts: list[tuple[str, Any, int]],
                      limits: list[tuple[str, Any, int]]) -> dict[str, tuple[dict[str, Any], int]]:
    """accounts LEFT JOIN limits on the tables' final rows (a None value deletes), each row with
    Kafka Streams' timestamp: the later of the joined rows'."""
    acc = {k: (v, ts) for k, v, ts in accounts}
    lim = {k: (v, ts) for k, v, ts in limits}
    acc = {k: x for k, x in acc.items() if x[0] is not None}
    lim = {k: x for k, x in lim.items() if x[0] is not None}
    return {k: ({"NAME": name, "LIM": lim[k][0] if k in lim else None}, max(ts, lim[k][1] if k in lim else ts))
            for k, (name, ts) in acc.items()}


def test_table_table_left_join_with_updates_tombstones_and_a_pull_query(spark: Any, kafka: Any, tmp_path: Any) -> None:
    """CREATE TABLE ... AS SELECT ... FROM accounts LEFT JOIN limits: the output topic, read as a
    table, is the oracle's join of the two tables' final rows, before and after deletes on each side
    (an account deleted: its row is deleted; a limit deleted: its account's row loses the limit);
    a pull query answers from the join's state; a push query of the join from `latest` joins a
    later change with the tables as they were when it started."""
    suffix = uuid.uuid4().hex[:6]
    accounts, limits, joined = f"accounts-{suffix}", f"limits-{suffix}", f"acct-limits-{suffix}"
    config = sql_config(kafka.bootstrap, f"tt_{suffix}_", tmp_path)
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE TABLE accounts (id VARCHAR PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='{accounts}', "
                       f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE TABLE limits (id VARCHAR PRIMARY KEY, lim INT) "
                       f"WITH (KAFKA_TOPIC='{limits}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, accounts, [(k, {"name": n}, ts) for k, n, ts in ACCOUNTS])
        _produce(kafka.bootstrap, limits, [(k, {"lim": n}, ts) for k, n, ts in LIMITS])
        out = engine.execute(f"CREATE TABLE acct_limits WITH (KAFKA_TOPIC='{joined}') AS SELECT a.id AS id, "
                             "a.name AS name, l.lim AS lim FROM accounts a LEFT JOIN limits l ON a.id = l.id;")
        assert out[0]["commandStatus"]["queryId"].startswith("CTAS_ACCT_LIMITS_")
        want = _left_join_oracle(ACCOUNTS, LIMITS)
        assert want["a2"] == ({"NAME": "Bobby", "LIM": None}, T0 + 4_000) and "a5" not in want

        def table() -> dict[str, tuple[dict[str, Any], int]]:
            return _materialize(_read_table(kafka.bootstrap, joined))
        wait_for(lambda: table() == want, 120, engine_wait(engine, "the table-table join to match the oracle"))
        pulled = engine.query("SELECT * FROM acct_limits WHERE id = 'a1';")
        assert (pulled.column_names, pulled.rows) == (["ID", "NAME", "LIM"], [["a1", "Ann", 11]])

        deletes_a = [("a1", None, T0 + 8_000)]                       # the account goes: so does its row
        deletes_l = [("a3", None, T0 + 9_000), ("a4", 40, T0 + 9_500)]   # a3 loses its limit, a4 gains one
        _produce(kafka.bootstrap, accounts, deletes_a)
        _produce(kafka.bootstrap, limits, [(k, None if n is None else {"lim": n}, ts) for k, n, ts in deletes_l])
        want = _left_join_oracle(ACCOUNTS + deletes_a, LIMITS + deletes_l)
        assert sorted(want) == ["a2", "a3", "a4"] and want["a3"][0]["LIM"] is None
        try:
            wait_for(lambda: table() == want, 120, engine_wait(engine, "the join to follow the deletes"))
        except AssertionError:
            raise AssertionError(f"{table()} != {want}") from None
        assert ("a1", None, T0 + 8_000) in _read_table(kafka.bootstrap, joined)     # a tombstone with event time
        # the join keeps both tables' rows: each record of each side read once, not again per batch
        states = engine.table_states[out[0]["commandStatus"]["queryId"]]
        assert [sum(s.reads) for s in states] == [len(ACCOUNTS) + 1, len(LIMITS) + 2]
        # a push query over the join starting at `latest`: it reads both tables up to where its stream
        # starts (a2's name comes from there), then pushes only the rows the later changes touch
        got: list[list[Any]] = []
        seen = threading.Event()
        tq = engine.query("SELECT a.id AS id, a.name AS name, l.lim AS lim FROM accounts a LEFT JOIN limits l "
                          "ON a.id = l.id EMIT CHANGES;", {"auto.offset.reset": "latest"})

        def pushed(batch: list[list[Any]]) -> None:
            got.extend(batch)
            seen.set()
        tq.listen(pushed)
        _produce(kafka.bootstrap, limits, [("a2", {"lim": 20}, T0 + 10_000)])
        assert seen.wait(60) and got == [["a2", "Bobby", 20]], got
        engine.close_query(tq.id)
        assert engine.query("SELECT * FROM acct_limits WHERE id = 'a1';").rows == []
        assert engine.query("SELECT lim FROM acct_limits WHERE id = 'a4';").rows == [[40]]
    finally:
        engine.stop()


ORDER_SCHEMA = {"type": "record", "name": "Order", "fields": [
    {"name": "acct", "type": "string"}, {"name": "amount", "type": "double"}]}


def test_avro_stream_joined_with_two_tables(spark: Any, kafka: Any, schema_registry: Any, tmp_path: Any) -> None:
    """``FROM orders o JOIN accounts a ON ... LEFT JOIN limits l ON ...`` over an AVRO stream (its
    columns from the registry) and two JSON tables, written as AVRO: each order gets its account's
    latest name (orders of unknown or deleted accounts are dropped) and the account's limit or null.
    Then ``COUNT(*)``/``SUM`` per account name over the join (a CTAS, AVRO): the oracle's counts
    and totals with the latest joined order's time, and a pull query on them."""
    from kafkalite.registry.client import RegistryClient
    from kafkalite.registry.serde import decode, encode, parse_avro

    suffix = uuid.uuid4().hex[:6]
    orders, accounts, limits, out = (f"{n}-{suffix}" for n in ("orders", "accounts", "limits", "enriched"))
    registry = RegistryClient(schema_registry.url)
    schema_id = registry.register(f"{orders}-value", json.dumps(ORDER_SCHEMA))
    parsed = parse_avro(json.dumps(ORDER_SCHEMA))
    config = sql_config(kafka.bootstrap, f"nway_{suffix}_", tmp_path, schema_registry_url=schema_registry.url)
    engine = Engine(config, spark)
    account_rows = ACCOUNTS + [("a4", None, T0 + 3_500)]                # a4 deleted before any order
    order_rows = [(f"o{i}", {"acct": f"a{i % 6}", "amount": 1.5 * i}, T0 + 10_000 + i) for i in range(12)]
    try:
        engine.start()
        engine.execute(f"CREATE TABLE accounts (id VARCHAR PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='{accounts}', "
                       f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE TABLE limits (id VARCHAR PRIMARY KEY, lim INT) "
                       f"WITH (KAFKA_TOPIC='{limits}', VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM orders "
                       f"(id VARCHAR KEY) WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='AVRO', PARTITIONS=1);")
        _produce(kafka.bootstrap, accounts, [(k, None if n is None else {"name": n}, ts) for k, n, ts in account_rows])
        _produce(kafka.bootstrap, limits, [(k, {"lim": n}, ts) for k, n, ts in LIMITS])
        p = Producer({"bootstrap.servers": kafka.bootstrap})
        for k, v, ts in order_rows:
            p.produce(orders, encode(schema_id, parsed, v), k.encode(), timestamp=ts)
        assert p.flush(60) == 0
        engine.execute(f"CREATE STREAM enriched WITH (KAFKA_TOPIC='{out}') AS SELECT o.acct AS acct, o.id AS oid, "
                       "o.amount AS amount, a.name AS name, l.lim AS lim FROM orders o JOIN accounts a ON o.acct = a.id "
                       "LEFT JOIN limits l ON a.id = l.id;")
        names = {k: n for k, n, _ in account_rows}
        lims = {k: n for k, n, _ in LIMITS}
        want = sorted((v["acct"], k, v["amount"], names[v["acct"]], lims.get(v["acct"]), ts) for k, v, ts in order_rows
                      if names.get(v["acct"]) is not None)
        assert {w[0] for w in want} == {"a1", "a2", "a3"}

        def lookup(schema: int) -> Any:
            found = registry.by_id(schema)
            return found, parse_avro(found.schema)

        def enriched() -> list[tuple[Any, ...]]:
            rows = []
            for key, value, ts in _read_raw(kafka.bootstrap, out):
                d = decode(value, lookup)[2]
                rows.append((key, d["OID"], d["AMOUNT"], d["NAME"], d["LIM"], ts))
            return sorted(rows)
        wait_for(lambda: enriched() == want, 150, engine_wait(engine, "the n-way join to match the oracle"))
        engine.execute(f"TERMINATE {engine.metastore.readers_and_writers('ENRICHED')[1][0]};")

        # an aggregate over the join: the join's rows through its internal topic, then counted
        per_name = f"per-name-{suffix}"
        engine.execute(f"CREATE TABLE per_name WITH (KAFKA_TOPIC='{per_name}') AS SELECT a.name AS name, COUNT(*) AS n, "
                       "SUM(o.amount) AS total FROM orders o JOIN accounts a ON o.acct = a.id GROUP BY a.name;")
        totals: dict[str, tuple[int, float, int]] = {}
        for acct, _, amount, name, _, ts in want:
            n, total, latest = totals.get(name, (0, 0.0, 0))
            totals[name] = (n + 1, total + amount, max(latest, ts))

        def counted() -> dict[str, tuple[int, float, int]]:
            table: dict[str, tuple[int, float, int]] = {}
            for key, value, ts in _read_raw(kafka.bootstrap, per_name):
                d = decode(value, lookup)[2]
                table[key] = (d["N"], d["TOTAL"], ts)
            return table
        wait_for(lambda: counted() == totals, 150,
                 engine_wait(engine, "the aggregate over the join to match the oracle"))
        pulled = engine.query("SELECT n, total FROM per_name WHERE name = 'Cy';")
        assert pulled.rows == [[totals["Cy"][0], totals["Cy"][1]]]
    finally:
        engine.stop()


def _read_raw(bootstrap: str, topic: str) -> list[tuple[str, bytes, int]]:
    return [(m.key().decode(), m.value(), m.timestamp()[1]) for m in read_committed(bootstrap, topic)]


TIERS = [("a1", {"name": "Ann", "tier": "gold"}, T0), ("a2", {"name": "Bob", "tier": "silver"}, T0 + 1_000),
         ("a3", {"name": "Cy", "tier": "gold"}, T0 + 2_000), ("a4", {"name": "Di", "tier": "silver"}, T0 + 3_000)]
TIER_LIMITS = [("a1", {"lim": 10}, T0 + 500), ("a2", {"lim": 20}, T0 + 600), ("a4", {"lim": 40}, T0 + 700)]


def _topics(bootstrap: str) -> set[str]:
    return set(Producer({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)


def _tier_oracle(accounts: list[tuple[str, Any, int]], limits: list[tuple[str, Any, int]],
                 before: dict[str, tuple[int, int]] | None = None) -> dict[str, tuple[int, int]]:
    """COUNT(*) and SUM(lim) per tier over accounts LEFT JOIN limits (final rows; None deletes);
    a tier that had rows and has none left keeps (0, 0), as a table aggregate keeps its undone row."""
    acc = {k: v for k, v, _ in accounts}
    lim = {k: v for k, v, _ in limits}
    out = {t: (0, 0) for t in (before or {})}
    for k, v in acc.items():
        if v is not None:
            n, total = out.get(v["tier"], (0, 0))
            out[v["tier"]] = (n + 1, total + ((lim.get(k) or {}).get("lim") or 0))
    return out


def test_table_aggregate_over_table_join_and_push_aggregate_over_mixed_join(spark: Any, kafka: Any,
                                                                             tmp_path: Any) -> None:
    """COUNT/SUM per tier over ``accounts LEFT JOIN limits`` (a CTAS): its output topic, read as a
    table, is the oracle's aggregate before and after an account moves tier and another is deleted
    (its tier's row then counts 0, as ksqlDB's table aggregate), each of its topic's records read
    once, and after a restart that resumes it from its checkpoint; TERMINATE deletes the join's
    internal topic. Then a push query counting per tier over ``orders JOIN shipments WITHIN ...
    JOIN accounts`` (a stream-stream join mixed with a stream-table join, aggregated): its last
    counts are the oracle's, and closing it deletes its internal topic."""
    suffix = uuid.uuid4().hex[:6]
    accounts, limits, per_tier = f"acc-{suffix}", f"lim-{suffix}", f"per-tier-{suffix}"
    orders, shipments = f"ord-{suffix}", f"shp-{suffix}"
    config = sql_config(kafka.bootstrap, f"agg_{suffix}_", tmp_path)
    engine = Engine(config, spark)
    try:
        engine.start()
        engine.execute(f"CREATE TABLE accounts (id VARCHAR PRIMARY KEY, name STRING, tier STRING) WITH (KAFKA_TOPIC="
                       f"'{accounts}', VALUE_FORMAT='JSON', PARTITIONS=1); CREATE TABLE limits (id VARCHAR PRIMARY KEY, "
                       f"lim INT) WITH (KAFKA_TOPIC='{limits}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                       f"CREATE STREAM orders (id VARCHAR KEY, acct STRING) WITH (KAFKA_TOPIC='{orders}', "
                       f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM shipments (id VARCHAR KEY, carrier STRING) "
                       f"WITH (KAFKA_TOPIC='{shipments}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        _produce(kafka.bootstrap, accounts, TIERS)
        _produce(kafka.bootstrap, limits, TIER_LIMITS)
        out = engine.execute(f"CREATE TABLE per_tier WITH (KAFKA_TOPIC='{per_tier}') AS SELECT a.tier AS tier, "
                             "COUNT(*) AS n, SUM(l.lim) AS total FROM accounts a LEFT JOIN limits l ON a.id = l.id "
                             "GROUP BY a.tier;")
        query_id = out[0]["commandStatus"]["queryId"]
        internal = f"_confluent-ksql-agg_{suffix}_query_{query_id}-Join-repartition"
        assert internal in _topics(kafka.bootstrap)

        def table() -> dict[str, tuple[int, int]]:
            rows = _materialize(_read_table(kafka.bootstrap, per_tier))
            return {k: (v["N"], v["TOTAL"]) for k, (v, _) in rows.items()}
        want = _tier_oracle(TIERS, TIER_LIMITS)
        assert want == {"gold": (2, 10), "silver": (2, 60)}
        try:
            wait_for(lambda: table() == want, 240,
                     engine_wait(engine, "the aggregate over the table-table join to match the oracle"))
        except AssertionError:
            raise AssertionError(f"{table()} != {want}") from None
        changes = [("a2", {"name": "Bob", "tier": "gold"}, T0 + 8_000), ("a4", None, T0 + 9_000)]
        _produce(kafka.bootstrap, accounts, changes)
        want = _tier_oracle(TIERS + changes, TIER_LIMITS, want)
        assert want == {"gold": (3, 30), "silver": (0, 0)}
        try:
            wait_for(lambda: table() == want, 240,
                     engine_wait(engine, "the table aggregate to follow the update and the delete"))
        except AssertionError:
            raise AssertionError(f"{table()} != {want}") from None
        assert engine.query("SELECT n, total FROM per_tier WHERE tier = 'gold';").rows == [[3, 30]]
        # the aggregate keeps the joined table's rows: every record of its topic read once, the later
        # micro-batches only the two changes' records, not the table again
        reads = [n for n in engine.table_states[query_id][0].reads if n]
        assert sum(reads) == len(_read_raw(kafka.bootstrap, internal)) and len(reads) >= 2 and reads[-1] <= 2, reads
        # a restarted server resumes the aggregate from its checkpoint: the table's state is read up to
        # it first, then only the new change's record; the output follows the change
        engine.stop()
        written = len(_read_raw(kafka.bootstrap, internal))
        engine = Engine(config, spark)
        engine.start()
        moved = [("a1", {"name": "Ann", "tier": "silver"}, T0 + 10_000)]
        _produce(kafka.bootstrap, accounts, moved)
        want = _tier_oracle(TIERS + changes + moved, TIER_LIMITS, want)
        assert want == {"gold": (2, 20), "silver": (1, 10)}
        try:
            wait_for(lambda: table() == want, 240,
                     engine_wait(engine, "the resumed table aggregate to follow the change"))
        except AssertionError:
            raise AssertionError(f"{table()} != {want}") from None
        reads = engine.table_states[query_id][0].reads          # not the whole topic again
        assert 1 <= sum(reads) < written and len(_read_raw(kafka.bootstrap, internal)) == written + 1, reads
        # nor does the resumed join: both tables read up to its checkpoint first, then the one change
        assert [sum(s.reads) for s in engine.table_states[f"{query_id}_JOIN"]] == [1, 0]
        engine.execute(f"TERMINATE {query_id};")
        wait_for(lambda: internal not in _topics(kafka.bootstrap), 60, "the internal topic to be deleted")

        order_rows = [(f"o{i}", {"acct": f"a{i % 4 + 1}"}, T0 + i * 20_000) for i in range(8)]
        ship_rows = [(f"o{i}", {"carrier": "c"}, T0 + i * 20_000 + (120_000 if i == 5 else 30_000)) for i in range(8)]
        _produce(kafka.bootstrap, orders, order_rows)
        _produce(kafka.bootstrap, shipments, ship_rows)
        tiers = {k: v for k, v, _ in TIERS + changes + moved}
        oracle: dict[str, int] = {}
        for oid, o, ots in order_rows:
            for sid, _, sts in ship_rows:
                account = tiers.get(o["acct"])
                if oid == sid and abs(sts - ots) <= 60_000 and account is not None:
                    oracle[account["tier"]] = oracle.get(account["tier"], 0) + 1
        assert oracle == {"gold": 3, "silver": 2}     # o5's shipment is late, a4's orders find no account
        counts: dict[str, int] = {}
        seen = threading.Event()
        tq = engine.query("SELECT a.tier AS tier, COUNT(*) AS n FROM orders o JOIN shipments s WITHIN 1 MINUTE "
                          "ON o.id = s.id JOIN accounts a ON o.acct = a.id GROUP BY a.tier EMIT CHANGES;",
                          {"auto.offset.reset": "earliest"})
        push_internal = f"_confluent-ksql-agg_{suffix}_{tq.id}-Join-repartition"
        assert push_internal in _topics(kafka.bootstrap)

        def rows(batch: list[list[Any]]) -> None:
            counts.update({r[0]: r[1] for r in batch})
            if counts == oracle:
                seen.set()
        tq.listen(rows)
        assert seen.wait(120), counts
        engine.close_query(tq.id)
        wait_for(lambda: push_internal not in _topics(kafka.bootstrap), 60, "the push query's topic to be deleted")

        # a stream-stream join on the joined table's column, aggregated: three queries, two internal topics
        handed = [(f"x{i}", {"carrier": f"a{i % 4 + 1}"}, T0 + i * 20_000 + 30_000) for i in range(8)]
        _produce(kafka.bootstrap, shipments, handed)
        split: dict[str, int] = {}
        for oid, o, ots in order_rows:
            for _, s, sts in handed:
                account = tiers.get(o["acct"])
                if s["carrier"] == o["acct"] and abs(sts - ots) <= 60_000 and account is not None:
                    split[account["tier"]] = split.get(account["tier"], 0) + 1
        assert split == {"gold": 6, "silver": 3}
        counts.clear()
        seen.clear()
        oracle = split
        tq = engine.query("SELECT a.tier AS tier, COUNT(*) AS n FROM orders o JOIN accounts a ON o.acct = a.id "
                          "JOIN shipments s WITHIN 1 MINUTE ON a.id = s.carrier GROUP BY a.tier EMIT CHANGES;",
                          {"auto.offset.reset": "earliest"})
        split_internal = {f"_confluent-ksql-agg_{suffix}_{tq.id}-Join-repartition",
                          f"_confluent-ksql-agg_{suffix}_{tq.id}_JOIN-Join-repartition"}
        assert split_internal <= _topics(kafka.bootstrap)
        tq.listen(rows)
        assert seen.wait(120), counts
        engine.close_query(tq.id)
        wait_for(lambda: not split_internal & _topics(kafka.bootstrap), 60, "both internal topics to be deleted")
    finally:
        engine.stop()
