"""A table's state kept by its queries across micro-batches, without brokers or Spark: the latest
row per key applied once per record (``TableState``), the groups of an aggregate over a table
(``GroupIndex``), and the table aggregate's micro-batches, whose work is counted: what each batch
reads from the table's topic and which rows it hands Spark to aggregate follow its changes, not
the table's size; a query resumed from its checkpoint reads the table up to where its next batch
starts. A stream-table join's micro-batches likewise read only the table's new records and hand
Spark only the rows its stream records look up."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from kafkalite.sql import engine as engine_module
from kafkalite.sql.engine import Engine, TableAggregate
from kafkalite.sql.queries import StateStore
from kafkalite.sql.table_state import GroupIndex, TableState
from tests.unit.sql.test_sql_engine_statements import engine  # noqa: F401  (the fixture)


def rec(key: str, offset: int, partition: int = 0, **values: Any) -> dict[str, Any]:
    return {"ID": key, **values, "ROWTIME": 1000 + offset, "ROWPARTITION": partition, "ROWOFFSET": offset,
            "__tombstone": not values}


def test_table_state_applies_each_record_once_in_offset_order() -> None:
    state = TableState(["ID"], False)
    changes = state.apply([rec("a", 1, V=2), rec("a", 0, V=1), rec("b", 2, V=3), rec("d", 0, partition=1, V=9)])
    assert {k: (b, a and a["V"]) for k, (b, a) in changes.items()} == {("a",): (None, 2), ("b",): (None, 3),
                                                                       ("d",): (None, 9)}
    assert state.positions == {0: 3, 1: 1} and state.reads == [4]
    # a record read again (an overlapping read) changes nothing; a tombstone deletes; a key that
    # comes and goes within one batch is no change
    changes = state.apply([rec("a", 1, V=2), rec("a", 3), rec("c", 4, V=5), rec("c", 5)])
    assert list(changes) == [("a",)] and changes[("a",)][0]["V"] == 2 and changes[("a",)][1] is None
    assert sorted(state.rows) == [("b",), ("d",)] and state.reads == [4, 4]
    assert json.loads(state.starting_offsets("t", [1, 0, 2])) == {"t": {"0": 6, "1": 1, "2": -2}}


def test_a_source_tables_store_applies_records_in_offset_order_per_partition(tmp_path: Path) -> None:
    """A SOURCE TABLE's micro-batch: records applied in offset order per partition whatever order
    Spark hands them in, a tombstone deleting its key; a resumed query starts where the last
    committed batch of its checkpoint ended (a planned, uncommitted batch runs again)."""
    store = StateStore(["ID"], False, ["ID", "NAME"], ["STRING", "STRING"])
    store.update([{"ID": "u2", "NAME": "b"}])

    def rec(partition: int, offset: int, key: str, name: str | None) -> dict[str, Any]:
        return {"ROWPARTITION": partition, "ROWOFFSET": offset, "ID": key, "NAME": name,
                "ROWTIME": 0, "__tombstone": name is None}
    batch = [rec(0, 4, "u2", None), rec(0, 2, "u1", "older"), rec(1, 0, "u3", "c"), rec(0, 3, "u1", "newer")]
    assert store.apply_records(batch) == 4
    assert store.scan(lambda r: True) == [["u1", "newer"], ["u3", "c"]]

    checkpoint = tmp_path / "CST_T_0"
    assert engine_module._committed_offsets(checkpoint) is None                 # never ran
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    for batch_id, offset in ((0, 2), (1, 5), (2, 9)):
        (checkpoint / "offsets" / str(batch_id)).write_text(f'v1\n{{}}\n{{"t": {{"0": {offset}}}}}\n')
    assert engine_module._committed_offsets(checkpoint) is None                 # planned, none committed
    for batch_id in (0, 1):
        (checkpoint / "commits" / str(batch_id)).write_text("v1\n{}\n")
    assert engine_module._committed_offsets(checkpoint) == '{"t": {"0": 5}}'   # batch 2 runs again from 5


def test_group_index_moves_keys_between_groups() -> None:
    index = GroupIndex()
    assert index.move(("k1",), ("a",)) is None and index.move(("k2",), ("a",)) is None
    assert index.move(("k1",), ("b",)) == ("a",) and index.keys_in([("a",), ("b",)]) == [("k2",), ("k1",)]
    assert index.move(("k2",), None) == ("a",) and ("a",) not in index.members


SCHEMA = StructType([StructField("ID", StringType()), StructField("W", IntegerType()), StructField("TID", StringType()),
                     StructField("ROWTIME", LongType()), StructField("ROWPARTITION", IntegerType()),
                     StructField("ROWOFFSET", LongType()), StructField("__tombstone", BooleanType())])
OUT = StructType([StructField("Z", StringType()), StructField("N", LongType()), StructField("TOTAL", LongType()),
                  StructField("__rowtime", LongType()), StructField("__having", BooleanType())])


class Row(dict):  # type: ignore[type-arg]
    def asDict(self) -> dict[str, Any]:
        return dict(self)


class Session:
    """The Spark session of a micro-batch, answering the aggregate's three SQL texts in Python
    (``COUNT(*)``, ``SUM(w)`` per ``tid`` with ``HAVING COUNT(*) < 3``) over the views the engine
    makes; it records the rows handed to each view."""

    def __init__(self, agg: TableAggregate) -> None:
        self.agg = agg
        self.views: dict[str, list[dict[str, Any]]] = {}
        self.handed: dict[str, list[int]] = {}

    def createDataFrame(self, rows: list[tuple[Any, ...]], schema: Any) -> Any:
        names = [f.name for f in schema.fields]
        if names[-1] == "__tombstone" and names[0] == "Z":    # the rows the engine writes
            return sorted(rows)
        session, frame = self, [dict(zip(names, r)) for r in rows]

        class View:
            def createOrReplaceTempView(self, name: str) -> None:
                session.views[name] = frame
                session.handed.setdefault(name.rsplit("_", 1)[1], []).append(len(frame))
        return View()

    def sql(self, text: str) -> Any:
        view = self.agg.view
        if text == self.agg.groups:
            rows: list[Any] = [(r["TID"],) for r in self.views[f"{view}_changed"]]
        elif text == self.agg.sql:
            groups: dict[str, list[dict[str, Any]]] = {}
            for r in self.views[f"{view}_table"]:
                groups.setdefault(r["TID"], []).append(r)
            ws = {t: [r["W"] for r in g if r["W"] is not None] for t, g in groups.items()}
            rows = [Row(Z=t, N=len(g), TOTAL=sum(ws[t]) if ws[t] else None,
                        __rowtime=max(r["ROWTIME"] for r in g), __having=len(g) < 3) for t, g in groups.items()]
        else:
            key = next(k for k in "abcdefg" if text == self.agg.emptied((k,)))
            rows = [Row(Z=key, N=0, TOTAL=0, __rowtime=None, __having=True)]
        return type("R", (), {"collect": lambda _: rows, "schema": OUT})()


class Batch:
    def __init__(self, session: Session, records: list[dict[str, Any]]) -> None:
        self.sparkSession, self.schema, self.records = session, SCHEMA, [Row(r) for r in records]

    def collect(self) -> list[Row]:
        return self.records


def u(key: str, offset: int, tid: str | None = None, w: int | None = None) -> dict[str, Any]:
    return rec(key, offset, W=w, TID=tid) if tid is not None else rec(key, offset)


AGGREGATE = ("CREATE TABLE u (id STRING PRIMARY KEY, w INT, tid STRING) WITH (KAFKA_TOPIC='u', VALUE_FORMAT='JSON');"
             "CREATE TABLE per_tid AS SELECT tid AS z, COUNT(*) AS n, SUM(w) AS total FROM u GROUP BY tid "
             "HAVING COUNT(*) < 3;")


def _aggregate(engine: Engine, checkpoint: Path | None = None) -> tuple[Any, Session, list[Any], Any]:
    engine.execute(AGGREGATE)
    plan, _ = engine.plans["CTAS_PER_TID_4"]
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, TableAggregate)
    store = engine._table_aggregate_store(plan, True)
    writes: list[Any] = []
    each = engine._table_aggregate_batch(plan, compiled, store, lambda rows, batch_id, tombstones: writes.append(
        (rows, batch_id)), checkpoint)
    return each, Session(compiled), writes, store


def test_a_table_aggregate_batch_aggregates_only_the_groups_its_changes_touch(engine: Engine) -> None:
    each, session, writes, store = _aggregate(engine)
    state = engine.table_states["CTAS_PER_TID_4"][0]
    # the first batch: the table as it is (100 rows in 50 other groups, and a, b), every group written
    table = [u(f"k{i}", i, f"g{i % 50}", 1) for i in range(100)]
    each(Batch(session, table + [u("a1", 100, "a", 3), u("a2", 101, "a", 4), u("b1", 102, "b", 1)]), 0)
    rows, batch_id = writes[-1]
    assert batch_id == 0 and len(rows) == 52 and ("a", 2, 7, 1101, True, False) in rows
    assert state.reads == [103] and session.handed["table"] == [103]
    # a's rows both move to b (b now has 3: HAVING deletes it), a keeps its undone row, c is new:
    # three records read, and only the rows of groups a, b and c aggregated
    each(Batch(session, [u("a1", 103, "b", 3), u("a2", 104, "b", 4), u("c1", 105, "c")]), 1)
    assert writes[-1] == ([("a", 0, 0, 1105, True, False), ("b", 3, 8, 1104, False, True),
                           ("c", 1, None, 1105, True, False)], 1)
    assert state.reads[-1] == 3 and session.handed["table"][-1] == 4 and session.handed["changed"][-1] == 3
    assert store.scan(lambda r: r["Z"] in ("a", "b", "c")) == [["a", 0, 0], ["c", 1, None]]
    # a tombstone: its group has no row left, so it keeps its undone row; nothing else is aggregated
    each(Batch(session, [u("c1", 106)]), 2)
    assert writes[-1] == ([("c", 0, 0, 1106, True, False)], 2) and session.handed["table"][-1] == 0
    # records applied already (a batch overlapping the state) change nothing and write nothing
    each(Batch(session, [u("c1", 106), u("a1", 103, "b", 3)]), 3)
    assert len(writes) == 3 and state.reads[-1] == 2
    # a row changing within its group: only that group's two rows are aggregated again
    each(Batch(session, [u("k7", 107, "g7", 5)]), 4)
    assert writes[-1] == ([("g7", 2, 6, 1107, True, False)], 4) and session.handed["table"][-1] == 2
    assert engine.query("SELECT * FROM per_tid WHERE z = 'g7';").rows == [["g7", 2, 6]]


def test_a_resumed_table_aggregate_reads_the_table_up_to_its_checkpoint(
        engine: Engine, monkeypatch: Any, tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "6").write_text('v1\n{"batchWatermarkMs":0}\n{"u":{"0":3}}\n')
    reads: list[str | None] = []

    def read_changes(self: Engine, session: Any, table: Any, state: TableState, until: str | None = None) -> Any:
        reads.append(until)           # the table's topic up to where batch 7 starts
        state.apply([u("a1", 0, "a", 3), u("a2", 1, "a", 4), u("b1", 2, "b", 1)])
        return SCHEMA
    monkeypatch.setattr(Engine, "_read_changes", read_changes)
    each, session, writes, store = _aggregate(engine, tmp_path)
    store.update([{"Z": "a", "N": 2, "TOTAL": 7}, {"Z": "b", "N": 1, "TOTAL": 1}])   # as restored from its topic
    each(Batch(session, [u("b1", 3, "a", 1)]), 7)
    assert reads == ['{"u":{"0":3}}']
    assert writes == [([("a", 3, 8, 1003, False, True), ("b", 0, 0, 1003, True, False)], 7)]
    assert session.handed["table"] == [3]
    each(Batch(session, [u("a2", 4)]), 8)                 # later batches read nothing more up front
    assert reads == ['{"u":{"0":3}}'] and writes[-1] == ([("a", 2, 4, 1003, True, False)], 8)


class JoinSession:
    """The session of a stream-table join's micro-batch: the stream's records, the look-up of its
    join column, and the table rows handed to Spark."""

    def __init__(self, stream: list[dict[str, Any]]) -> None:
        self.stream, self.handed, self.texts = stream, [], []   # type: ignore[var-annotated]
        self.sparkSession = self

    def persist(self) -> None:
        pass

    def unpersist(self) -> None:
        pass

    def createOrReplaceTempView(self, name: str) -> None:
        assert name.endswith("_stream")

    def createDataFrame(self, rows: list[tuple[Any, ...]], schema: Any) -> Any:
        handed = self.handed

        class View:
            def createOrReplaceTempView(self, name: str) -> None:
                handed.append(sorted(r[0] for r in rows))
        return View()

    def sql(self, text: str) -> Any:
        self.texts.append(text)
        looked_up = sorted({(r["ID"],) for r in self.stream}) if text.startswith("SELECT DISTINCT") else []
        return type("R", (), {"collect": lambda _: looked_up})()


def test_a_stream_table_join_reads_the_tables_new_records_and_hands_spark_the_looked_up_rows(
        engine: Engine, monkeypatch: Any) -> None:
    pending = [rec(f"k{i}", i, V=i) for i in range(100)]
    tschema = StructType([StructField("ID", StringType()), StructField("V", IntegerType())])

    def read_changes(self: Engine, session: Any, table: Any, state: TableState, until: str | None = None) -> Any:
        state.apply(pending)                          # what the table's topic holds past the state's positions
        pending.clear()
        return tschema
    monkeypatch.setattr(Engine, "_read_changes", read_changes)
    engine.execute("CREATE STREAM e AS SELECT s.id AS id, t.v AS tv FROM s LEFT JOIN t ON s.id = t.id;")
    plan, sql = engine.plans["CSAS_E_3"]
    compiled, _ = engine._compile(plan)
    state = engine.table_states["CSAS_E_3"][0]
    session = JoinSession([{"ID": "k1"}, {"ID": "k2"}, {"ID": "k1"}, {"ID": "zz"}])
    compiled.per_batch(session)
    assert session.handed == [["k1", "k2"]] and state.reads == [100] and session.texts[-1] == sql
    pending += [rec("k1", 100, V=-1), rec("k2", 101)]                 # an update and a tombstone
    for ids, handed in ((["k1"], ["k1"]), (["k2", "k3"], ["k3"])):
        session = JoinSession([{"ID": i} for i in ids])
        compiled.per_batch(session)
        assert session.handed == [handed]
    assert state.reads == [100, 2, 0] and state.rows[("k1",)]["V"] == -1 and ("k2",) not in state.rows
