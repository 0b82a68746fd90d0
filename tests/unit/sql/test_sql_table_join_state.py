"""A table-table join's state kept across micro-batches, without brokers or Spark: each side's
latest row per key (``TableState``) updated by the batch's own records only, Spark handed only the
rows the batch's changed keys touch (counted per batch: they follow the changes, not the tables'
size), and the output topic, read as a table, equal after every batch to a plain-Python join of
both tables as they are (INNER, LEFT and FULL OUTER on the key, LEFT and INNER foreign-key joins),
through updates, tombstones on either side, rows that stop matching and a foreign key that moves;
then a restart from the checkpoint, which reads each side up to the checkpoint's offsets first."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from kafkalite.sql.engine import Engine, QueryPlan, TableTableJoin
from kafkalite.sql.queries import StateStore
from kafkalite.sql.table_state import TableState
from tests.unit.sql.conftest import ClientDouble
from tests.unit.sql.test_sql_engine_statements import engine  # noqa: F401  (the fixture)

TABLES = ("CREATE TABLE a (id STRING PRIMARY KEY, w INT, tid STRING) WITH (KAFKA_TOPIC='a', VALUE_FORMAT='JSON');"
          "CREATE TABLE b (id STRING PRIMARY KEY, z STRING) WITH (KAFKA_TOPIC='b', VALUE_FORMAT='JSON');")
META = [StructField(n, t) for n, t in (("ROWTIME", LongType()), ("ROWPARTITION", IntegerType()),
                                       ("ROWOFFSET", LongType()), ("__tombstone", BooleanType()))]
SIDES = [StructType([StructField("ID", StringType()), StructField("W", IntegerType()),
                     StructField("TID", StringType())] + META),
         StructType([StructField("ID", StringType()), StructField("Z", StringType())] + META)]
TOPICS = ["a", "b"]

# (statement, kind, the left column joined to b's key, the output's key column)
QUERIES = {
    "inner": ("CREATE TABLE j AS SELECT a.id AS id, a.w AS w, b.z AS z FROM a JOIN b ON a.id = b.id;",
              "INNER", "ID", "ID"),
    "left": ("CREATE TABLE j AS SELECT a.id AS id, a.w AS w, b.z AS z FROM a LEFT JOIN b ON a.id = b.id;",
             "LEFT", "ID", "ID"),
    "full": ("CREATE TABLE j AS SELECT ROWKEY AS id, a.w AS w, b.z AS z FROM a FULL OUTER JOIN b ON a.id = b.id;",
             "FULL", "ID", "ID"),
    "foreign": ("CREATE TABLE j AS SELECT a.id AS id, a.w AS w, b.z AS z FROM a LEFT JOIN b ON a.tid = b.id;",
                "LEFT", "TID", "ID"),
    "foreign_inner": ("CREATE TABLE j AS SELECT a.id AS id, a.w AS w, b.z AS z FROM a JOIN b ON a.tid = b.id;",
                      "INNER", "TID", "ID"),
}


class Row(dict):  # type: ignore[type-arg]
    def asDict(self) -> dict[str, Any]:
        return dict(self)


def join(kind: str, on: str, left: list[dict[str, Any]], right: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """The oracle (and the double's Spark SQL): ``key -> (w, z, rowtime)`` of the join's rows."""
    by_id = {r["ID"]: r for r in right}
    out: dict[str, tuple[Any, ...]] = {}
    matched = set()
    for r in left:
        partner = by_id.get(r[on])
        if partner is None and kind == "INNER":
            continue
        if partner is not None:
            matched.add(partner["ID"])
        out[r["ID"]] = (r["W"], partner and partner["Z"], max(r["ROWTIME"], partner["ROWTIME"] if partner else 0))
    if kind == "FULL":
        out.update({r["ID"]: (None, r["Z"], r["ROWTIME"]) for r in right if r["ID"] not in matched})
    return out


class Session:
    """A micro-batch's Spark session: the views of each side's rows handed to it (counted), the
    join evaluated in Python over them, the candidates' literals read back, the rows written."""

    def __init__(self, kind: str, on: str, view: str) -> None:
        self.kind, self.on, self.view = kind, on, view
        self.views: dict[str, list[dict[str, Any]]] = {}
        self.handed: list[tuple[int, int]] = []
        self.written: list[tuple[Any, ...]] = []
        self.out = StructType([StructField("ID", StringType()), StructField("W", IntegerType()),
                               StructField("Z", StringType()), StructField("__rowtime", LongType())])

    def createDataFrame(self, rows: list[tuple[Any, ...]], schema: Any) -> Any:
        names = [f.name for f in schema.fields]
        if names[-1] == "__tombstone" and names[0] == "ID" and "Z" in names and "__rowtime" in names:
            self.written += rows                          # the output's records
            return rows
        session, frame = self, [dict(zip(names, r)) for r in rows]

        class View:
            def createOrReplaceTempView(self, name: str) -> None:
                session.views[name] = frame
        return View()

    def sql(self, text: str) -> Any:
        if text.startswith("SELECT explode(array("):
            keys = json.loads("[" + text[len("SELECT explode(array("):-len(")) AS `__key`")].replace("'", '"') + "]")
            return type("C", (), {"collect": lambda _: [(k,) for k in keys]})()
        left, right = self.views[f"{self.view}_t0"], self.views[f"{self.view}_t1"]
        self.handed.append((len(left), len(right)))
        rows = [Row(ID=k, W=w, Z=z, __rowtime=t) for k, (w, z, t) in join(self.kind, self.on, left, right).items()]
        return type("R", (), {"collect": lambda _: rows, "schema": self.out})()


class Topics:
    """Both tables' topics (one partition each) and the join's output topic read as a table."""

    def __init__(self) -> None:
        self.records: list[list[dict[str, Any]]] = [[], []]
        self.output: dict[str, tuple[Any, ...]] = {}

    def put(self, side: int, key: str, **values: Any) -> Row:
        offset = len(self.records[side])
        cols = [f.name for f in SIDES[side].fields if f not in META]
        record = {**{c: values.get(c.lower()) for c in cols}, "ID": key, "ROWTIME": 1000 + 10 * offset + side,
                  "ROWPARTITION": 0, "ROWOFFSET": offset, "__tombstone": not values}
        self.records[side].append(record)
        return Row(__side=side, __key=key, ROWTIME=record["ROWTIME"], **{f"__row{side}": Row(record)})

    def table(self, side: int) -> list[dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for r in self.records[side]:
            if r["__tombstone"]:
                rows.pop(r["ID"], None)
            else:
                rows[r["ID"]] = r
        return list(rows.values())

    def write(self, rows: list[tuple[Any, ...]]) -> None:
        for key, w, z, _, tombstone in rows:
            if tombstone:
                assert key in self.output              # a tombstone only for a row the table has
                self.output.pop(key)
            else:
                self.output[key] = (w, z)


class Batch:
    def __init__(self, session: Session, rows: list[Row]) -> None:
        self.sparkSession, self.rows = session, rows
        self.schema = StructType([StructField("__row0", SIDES[0]), StructField("__row1", SIDES[1])])

    def collect(self) -> list[Row]:
        return self.rows


class Query:
    """The join compiled and run batch by batch as ``Engine._run`` runs it (a restart: again)."""

    def __init__(self, engine: Engine, name: str, topics: Topics) -> None:
        self.engine, self.topics = engine, topics
        _, self.kind, self.on, _ = QUERIES[name]
        self.plan: QueryPlan = engine.plans["CTAS_J_5"][0]
        compiled, _ = engine._compile(self.plan)
        assert isinstance(compiled, TableTableJoin)
        self.each = engine._table_join_batch(self.plan, compiled, lambda frame, batch_id, tombstones: None)
        self.states: list[TableState] = engine.table_states["CTAS_J_5"]

    def run(self, batch_id: int, rows: list[Row]) -> Session:
        session = Session(self.kind, self.on, "ksql_ctas_j_5")
        self.each(Batch(session, rows), batch_id)
        self.topics.write(session.written)
        expected = join(self.kind, self.on, self.topics.table(0), self.topics.table(1))
        assert self.topics.output == {k: (w, z) for k, (w, z, _) in expected.items()}, batch_id
        assert self.engine.stores["J"].scan(lambda r: True) == sorted([k, w, z] for k, (w, z) in self.topics.output.items())
        return session


@pytest.fixture
def started(engine: Engine, tmp_path: Path, monkeypatch: Any) -> Callable[[str], tuple[Query, Topics]]:
    engine.config = dataclasses.replace(engine.config, state_dir=str(tmp_path))

    def start(name: str) -> tuple[Query, Topics]:
        engine.execute(TABLES + QUERIES[name][0])
        topics = Topics()
        store = engine.stores.get("J")
        assert store is not None

        def restore(self: Engine, plan: QueryPlan, into: StateStore) -> None:   # the output topic so far
            into.update([{"ID": k, "W": w, "Z": z} for k, (w, z) in topics.output.items()])
        monkeypatch.setattr(Engine, "_restore_store", restore)
        return Query(engine, name, topics), topics
    return start


@pytest.mark.parametrize("name", ["inner", "left", "full"])
def test_a_primary_key_join_applies_each_batch_and_hands_spark_the_changed_keys_rows(
        started: Callable[[str], tuple[Query, Topics]], name: str) -> None:
    query, topics = started(name)
    # the first batch: the tables as they are (50 keys on both sides, 50 on one side only)
    first = [topics.put(0, f"k{i}", w=i, tid="x") for i in range(100)] + \
        [topics.put(1, f"k{i}", z=f"z{i}") for i in range(50, 150)]
    session = query.run(0, first)
    assert [s.reads for s in query.states] == [[100], [100]] and session.handed == [(100, 100)]
    # an update on each side, a left row deleted that had a partner, a right row deleted that had
    # one, a right row that appears for a left row without one, a key that comes and goes
    batch = [topics.put(0, "k60", w=-60), topics.put(1, "k70", z="new"), topics.put(0, "k55"),
             topics.put(1, "k65"), topics.put(1, "k10", z="late"), topics.put(0, "q", w=1), topics.put(0, "q")]
    session = query.run(1, batch)
    # six changed keys (q's records are read, and it has no row): only their rows reach Spark
    assert [s.reads[-1] for s in query.states] == [4, 3] and session.handed == [(4, 4)]
    # the right rows of a deleted left row, then the left row again, alone on the left
    session = query.run(2, [topics.put(1, "k55"), topics.put(0, "k55", w=55)])
    assert session.handed == [(1, 0)]
    # both sides of a key gone in one batch
    query.run(3, [topics.put(0, "k80"), topics.put(1, "k80")])
    assert sum(query.states[0].reads) + sum(query.states[1].reads) == len(topics.records[0]) + len(topics.records[1])


@pytest.mark.parametrize("name", ["foreign", "foreign_inner"])
def test_a_foreign_key_join_reaches_every_left_row_pointing_at_a_changed_right_row(
        started: Callable[[str], tuple[Query, Topics]], name: str) -> None:
    query, topics = started(name)
    first = [topics.put(0, f"u{i}", w=i, tid=f"g{i % 10}") for i in range(100)] + \
        [topics.put(1, f"g{i}", z=f"z{i}") for i in range(8)]          # g8, g9 have no right row
    session = query.run(0, first)
    assert session.handed == [(100, 8)]
    # g3 changes: its 10 left rows are joined again with it, nothing else
    session = query.run(1, [topics.put(1, "g3", z="three")])
    assert session.handed == [(10, 1)] and [s.reads[-1] for s in query.states] == [0, 1]
    # g4 deleted (its left rows keep a null z), g9 appears, u5 moves from g5 to g9, u6 deleted
    session = query.run(2, [topics.put(1, "g4"), topics.put(1, "g9", z="nine"), topics.put(0, "u5", w=5, tid="g9"),
                            topics.put(0, "u6")])
    assert session.handed == [(21, 1)]          # g9's 10 rows and u5, g4's 10 rows (u6 is gone); g9
    # a left row pointing at a key the right table never had
    session = query.run(3, [topics.put(0, "u7", w=7, tid="nowhere")])
    assert session.handed == [(1, 0)]


def test_a_resumed_join_reads_each_side_up_to_its_checkpoint_first(
        started: Callable[[str], tuple[Query, Topics]], engine: Engine, monkeypatch: Any) -> None:
    query, topics = started("foreign")
    query.run(0, [topics.put(0, f"u{i}", w=i, tid=f"g{i % 3}") for i in range(9)] +
              [topics.put(1, f"g{i}", z=f"z{i}") for i in range(3)])
    query.run(1, [topics.put(1, "g1", z="one"), topics.put(0, "u0", w=0, tid="g2")])
    # the server stops; Spark's offset log holds where batch 2 starts (one line per source)
    checkpoint = Path(engine.config.state_dir) / engine.config.service_id / "CTAS_J_5"
    (checkpoint / "offsets").mkdir(parents=True)
    ends = [len(r) for r in topics.records]
    (checkpoint / "offsets" / "1").write_text('v1\n{"batchWatermarkMs":0}\n' + "\n".join(
        json.dumps({t: {"0": n}}) for t, n in zip(TOPICS, ends)) + "\n")
    pending = [topics.put(1, "g2", z="two"), topics.put(0, "u1")]          # written while it was down
    reads: list[str | None] = []

    def read_changes(self: Engine, session: Any, table: Any, state: TableState, until: str | None = None) -> Any:
        reads.append(until)
        side = TOPICS.index(table.topic)
        state.apply([r for r in topics.records[side] if r["ROWOFFSET"] < json.loads(until or "{}")[table.topic]["0"]])
        return SIDES[side]
    monkeypatch.setattr(Engine, "_read_changes", read_changes)
    resumed = Query(engine, "foreign", topics)
    session = resumed.run(2, pending)
    assert reads == ['{"a": {"0": 10}}', '{"b": {"0": 4}}']      # each side up to the checkpoint, once
    # g2's three left rows (u0 moved there before the restart) and u1's tombstone: nothing more
    assert session.handed == [(4, 1)] and [s.reads for s in resumed.states] == [[1], [1]]
    resumed.run(3, [topics.put(1, "g0")])
    assert reads == ['{"a": {"0": 10}}', '{"b": {"0": 4}}']


def test_a_join_starting_at_latest_reads_the_tables_up_to_its_start_and_writes_what_changes_after(
        started: Callable[[str], tuple[Query, Topics]], engine: Engine, monkeypatch: Any) -> None:
    topics = Topics()
    for i in range(5):
        topics.put(0, f"k{i}", w=i, tid="x")
        topics.put(1, f"k{i}", z=f"z{i}")
    starts = {"a": '{"a": {"0": 5}}', "b": '{"b": {"0": 5}}'}
    monkeypatch.setattr(Engine, "_join_start", lambda self, table, reset, checkpoint, index: starts[table.topic])
    reads: list[str | None] = []

    def read_changes(self: Engine, session: Any, table: Any, state: TableState, until: str | None = None) -> Any:
        reads.append(until)
        side = TOPICS.index(table.topic)
        state.apply([r for r in topics.records[side] if r["ROWOFFSET"] < json.loads(until or "{}")[table.topic]["0"]])
        return SIDES[side]
    monkeypatch.setattr(Engine, "_read_changes", read_changes)
    query, _ = started("inner")
    query.topics = topics
    session = Session("INNER", "ID", "ksql_ctas_j_5")
    query.each(Batch(session, [topics.put(1, "k2", z="two")]), 0)
    topics.write(session.written)
    # the stream starts where the tables were read to: the first batch writes only k2's new row
    assert reads == [starts["a"], starts["b"]] and session.handed == [(1, 1)]
    assert topics.output == {"k2": (2, "two")}


def test_a_join_starts_at_the_last_stable_offsets_kept_with_its_checkpoint(
        engine: Engine, tmp_path: Path, monkeypatch: Any) -> None:
    from kafkalite.sql import engine as engine_mod
    monkeypatch.undo()                                # the fixture's stand-in for _join_start
    asked: list[tuple[dict[Any, int], int]] = []

    class Client(ClientDouble):
        def partitions_for(self, topic: str) -> list[int]:
            return [1, 0]

        def list_offsets(self, requests: dict[Any, int], isolation_level: int = 0) -> dict[Any, tuple[int, int]]:
            asked.append((requests, isolation_level))
            return {tp: (7 + tp.partition, -1) for tp in requests}
    monkeypatch.setattr(engine_mod, "KafkaClient", Client)
    table = engine.metastore.require("T")
    assert engine._join_start(table, "earliest", tmp_path, 0) is None and asked == []
    first = engine._join_start(table, "latest", tmp_path, 0)
    assert json.loads(first or "") == {"t": {"0": 7, "1": 8}}
    assert [(sorted((tp.topic, tp.partition) for tp in r), level) for r, level in asked] == [
        ([("t", 0), ("t", 1)], 1)]                    # the latest offsets, read_committed (last stable)
    # a first batch Spark runs again starts where it did: the kept offsets, not the end now
    assert engine._join_start(table, "latest", tmp_path, 0) == first and len(asked) == 1
    assert engine._join_start(table, "latest", None, 0) == first and len(asked) == 2   # a push query asks
