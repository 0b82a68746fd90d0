"""Table-table joins (primary-key, FULL OUTER's synthetic ROWKEY, foreign-key), n-way
stream-table joins and pull queries on windowed tables, planned and compiled against the Spark
double of the engine's statement tests; a table-table join's micro-batch (rows, tombstones,
state store) run on recorded rows; ksqlDB 0.29's refusals in its words."""
from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine, TableTableJoin
from kafkalite.sql.errors import KsqlError
from tests.unit.sql.test_sql_engine_statements import Frame, _spark, engine  # noqa: F401  (the fixture)
from tests.unit.sql.conftest import RecordingAdmin

TABLES = ("CREATE TABLE u (id STRING PRIMARY KEY, w INT, tid STRING) WITH (KAFKA_TOPIC='u', VALUE_FORMAT='JSON');"
          "CREATE TABLE n (num INT PRIMARY KEY, v INT) WITH (KAFKA_TOPIC='n', VALUE_FORMAT='JSON');"
          "CREATE TABLE x (id STRING PRIMARY KEY, z STRING) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON');")


def test_primary_key_table_table_join_plan(engine: Engine, monkeypatch: Any) -> None:
    engine.execute(TABLES)
    monkeypatch.setattr(type(_spark(engine)), "createDataFrame", lambda self, rows, schema: Frame(self), raising=False)
    out = engine.execute("CREATE TABLE tu AS SELECT t.id AS id, t.v AS v, u.w AS w FROM t LEFT JOIN u ON t.id = u.id "
                         "WHERE u.w IS NULL OR u.w > 0;")
    assert out[0]["commandStatus"]["queryId"] == "CTAS_TU_6"
    plan, sql = engine.plans["CTAS_TU_6"]
    assert sql == ("SELECT `T`.`ID` AS `ID`, `T`.`V` AS `V`, `U`.`W` AS `W`, greatest(`T`.`ROWTIME`, `U`.`ROWTIME`) "
                   "AS `__rowtime` FROM ksql_ctas_tu_6_t0 AS `T` LEFT OUTER JOIN ksql_ctas_tu_6_t1 AS `U` ON "
                   "(`T`.`ID` = `U`.`ID`) WHERE (((`U`.`W` IS NULL) OR (`U`.`W` > 0))) AND "
                   "(CAST(`T`.`ID` AS STRING) IN (SELECT `__key` FROM ksql_ctas_tu_6_changes WHERE `__side` = 0) OR "
                   "CAST(`U`.`ID` AS STRING) IN (SELECT `__key` FROM ksql_ctas_tu_6_changes WHERE `__side` = 1) OR "
                   "CAST(`T`.`ID` AS STRING) IN (SELECT `__key` FROM ksql_ctas_tu_6_changes WHERE `__side` = 1))")
    tu = engine.metastore.require("TU")
    assert (tu.kind, [(c.name, str(c.type), c.key) for c in tu.columns]) == (
        "TABLE", [("ID", "STRING", True), ("V", "INT", False), ("W", "INT", False)])
    assert engine.metastore.readers_and_writers("U") == (["CTAS_TU_6"], [])
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, TableTableJoin)
    assert compiled.candidates_sql == "SELECT `__key` FROM ksql_ctas_tu_6_changes"
    spark = _spark(engine)
    before = len(spark.sql_texts)
    from pyspark.sql.types import StringType, StructField, StructType
    side = StructType([StructField("ID", StringType())])
    schema = StructType([StructField("__row0", side), StructField("__row1", side)])
    compiled.per_batch(type("B", (), {"collect": lambda _: [], "sparkSession": spark, "schema": schema})())
    # the tables' rows are kept by the query (no topic read again): only the join runs
    assert spark.sql_texts[before:] == [
        re.sub(r"\(SELECT `__key` FROM ksql_ctas_tu_6_changes WHERE `__side` = \d\)", "(NULL)", sql)]
    assert engine.stores["TU"].column_names == ["ID", "V", "W"]
    # the output's key is either side's key column
    engine.execute("CREATE TABLE ut AS SELECT u.id AS uid, t.v AS v FROM t JOIN u ON t.id = u.id;")
    assert [c.name for c in engine.metastore.require("UT").key_columns] == ["UID"]


def test_full_outer_table_join_is_keyed_by_the_synthetic_rowkey(engine: Engine) -> None:
    engine.execute(TABLES)
    engine.execute("CREATE TABLE f AS SELECT ROWKEY AS k, t.v AS tv, x.z AS z FROM t FULL OUTER JOIN x ON t.id = x.id;")
    plan, sql = engine.plans["CTAS_F_6"]
    assert sql.startswith("SELECT coalesce(`T`.`ID`, `X`.`ID`) AS `K`, `T`.`V` AS `TV`, `X`.`Z` AS `Z`, ")
    assert " FULL OUTER JOIN ksql_ctas_f_6_t1 AS `X` " in sql
    assert plan.key_names == ["K"] and [c.name for c in engine.metastore.require("F").key_columns] == ["K"]
    with pytest.raises(KsqlError) as info:
        engine.execute("CREATE TABLE g AS SELECT t.v AS tv FROM t FULL OUTER JOIN x ON t.id = x.id;")
    assert info.value.message == (
        "Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\nThe query used to build `G` must "
        "include the join expression ROWKEY in its projection (eg, SELECT ROWKEY...).\nROWKEY was added as a "
        "synthetic key column because the join criteria did not match any source column. This expression must be "
        "included in the projection and may be aliased. ")


def test_foreign_key_join_is_keyed_by_the_left_table(engine: Engine) -> None:
    engine.execute(TABLES)
    engine.execute("CREATE TABLE fk AS SELECT u.id AS id, u.w AS w, x.z AS z FROM u LEFT JOIN x ON u.tid = x.id;")
    plan, sql = engine.plans["CTAS_FK_6"]
    assert plan.key_names == ["ID"]
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, TableTableJoin)
    # a changed right key reaches every left row that points at it, joined or not
    assert compiled.candidates_sql == (
        "SELECT `__key` FROM ksql_ctas_fk_6_changes WHERE `__side` = 0 UNION SELECT CAST(`U`.`ID` AS STRING) FROM "
        "ksql_ctas_fk_6_t0 AS `U` WHERE CAST(`U`.`TID` AS STRING) IN (SELECT `__key` FROM ksql_ctas_fk_6_changes "
        "WHERE `__side` = 1)")
    assert "CAST(`U`.`TID` AS STRING) IN (SELECT `__key` FROM ksql_ctas_fk_6_changes WHERE `__side` = 1)" in sql


@pytest.mark.parametrize("statement, message", [
    ("CREATE TABLE a AS SELECT t.id, x.z FROM t JOIN x ON t.id = x.z;", "Invalid join condition: table-table joins "
     "require to join on the primary key of the right input table. Got T.ID = X.Z."),
    ("CREATE TABLE a AS SELECT u.id, x.z FROM u FULL OUTER JOIN x ON u.tid = x.id;", "Invalid join type: full-outer "
     "join not supported for foreign-key table-table join. Got U [FULL] OUTER JOIN X."),
    ("CREATE TABLE a AS SELECT t.id, x.z FROM t JOIN u ON t.id = u.id JOIN x ON u.tid = x.id;", "Invalid join "
     "condition: foreign-key table-table joins are not supported as part of n-way joins. Got U.TID = X.ID."),
    ("CREATE TABLE a AS SELECT t.id, n.v AS nv FROM t JOIN n ON t.id = n.num;", "Invalid join condition: types don't "
     "match. Got T.ID{STRING} = N.NUM{INTEGER}."),
    ("CREATE TABLE a AS SELECT u.w, x.z FROM u JOIN x ON u.tid = x.id;", "Primary key column missing in projection. "
     "For foreign-key table-table joins, the projection must include all primary key columns from the left input "
     "table (U). Missing column: `ID`."),
    ("CREATE TABLE a AS SELECT t.v AS tv FROM t JOIN x ON t.id = x.id;", "Key missing from projection (ie, SELECT). "
     "See https://cnfl.io/2LV7ouS.\nThe query used to build `A` must include the join expressions T.ID or X.ID in "
     "its projection (eg, SELECT T.ID...)."),
    ("CREATE STREAM a AS SELECT t.id, x.z FROM t JOIN x ON t.id = x.id;", "Invalid result type. Your SELECT query "
     "produces a TABLE."),
    ("SELECT * FROM t JOIN s ON t.id = s.id EMIT CHANGES;", "Invalid join order: table-stream joins are not "
     "supported; only stream-table joins. Got T [INNER] JOIN S."),
    ("SELECT * FROM s JOIN t ON s.id = t.id JOIN u ON s.name = u.w EMIT CHANGES;", "Invalid join condition: "
     "stream-table joins require to join on the table's primary key. Got S.NAME = U.W."),
])
def test_table_join_refusals(engine: Engine, statement: str, message: str) -> None:
    engine.execute(TABLES)
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    assert info.value.message.startswith(message), info.value.message


def test_a_stream_joined_with_two_tables(engine: Engine, monkeypatch: Any) -> None:
    engine.execute(TABLES)
    engine.execute("CREATE STREAM e2 AS SELECT s.id AS id, t.v AS tv, u.w AS w, x.z AS z FROM s JOIN t ON s.id = t.id "
                   "LEFT JOIN u ON t.id = u.id LEFT JOIN x ON u.tid = x.id;")
    plan, sql = engine.plans["CSAS_E2_6"]
    assert sql == ("SELECT `S`.`ID` AS `ID`, `T`.`V` AS `TV`, `U`.`W` AS `W`, `X`.`Z` AS `Z`, `S`.`ROWTIME` AS "
                   "`__rowtime` FROM ksql_csas_e2_6_stream AS `S` INNER JOIN ksql_csas_e2_6_table AS `T` ON "
                   "(`S`.`ID` = `T`.`ID`) LEFT OUTER JOIN ksql_csas_e2_6_table1 AS `U` ON (`T`.`ID` = `U`.`ID`) "
                   "LEFT OUTER JOIN ksql_csas_e2_6_table2 AS `X` ON (`U`.`TID` = `X`.`ID`)")
    assert plan.source_names == ("S", "T", "U", "X")
    compiled, _ = engine._compile(plan)
    spark = _spark(engine)
    monkeypatch.setattr(Engine, "_read_changes", lambda self, session, table, state, until=None: Frame(spark).schema)
    before = len(spark.sql_texts)
    compiled.per_batch(Frame(spark))
    # each table's rows looked up by the stream's or an earlier table's looked-up rows, then the join
    assert spark.sql_texts[before:] == [
        "SELECT DISTINCT `S`.`ID` FROM ksql_csas_e2_6_stream AS `S`",
        "SELECT DISTINCT `T`.`ID` FROM ksql_csas_e2_6_table AS `T`",
        "SELECT DISTINCT `U`.`TID` FROM ksql_csas_e2_6_table1 AS `U`", sql]


class Row(dict):  # type: ignore[type-arg]
    def asDict(self) -> dict[str, Any]:
        return dict(self)


class Batch:
    """A micro-batch of both tables' records (each side's row as ``__row<i>``), its session and
    the frames the join hands back."""

    def __init__(self, changes: list[Row], joined: list[Row], candidates: list[str]) -> None:
        from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType
        self.changes, self.joined, self.candidates = changes, joined, candidates
        self.out = StructType([StructField("ID", StringType()), StructField("V", IntegerType()),
                               StructField("__rowtime", TimestampType())])
        self.schema = StructType([StructField("__row0", StructType([StructField("ID", StringType())])),
                                  StructField("__row1", StructType([StructField("ID", StringType())]))])
        self.sparkSession = self
        self.written: list[tuple[Any, ...]] = []
        self.texts: list[str] = []
        self.handed: list[list[Any]] = []

    def collect(self) -> list[Any]:
        return self.changes

    def sql(self, text: str) -> Any:
        self.texts.append(text)
        if text.startswith("SELECT explode(array("):      # the keys whose row may change, as literals
            assert text == "SELECT explode(array(" + ", ".join(f"'{k}'" for k in self.candidates) + ")) AS `__key`"
            return type("C", (), {"collect": lambda _: [(k,) for k in self.candidates]})()
        return type("R", (), {"collect": lambda _: self.joined, "schema": self.out})()

    def createDataFrame(self, rows: list[tuple[Any, ...]], schema: Any) -> Any:
        if [f.name for f in schema.fields] == ["ID"]:       # a side's rows the batch's keys touch
            self.handed.append(sorted(rows))
            return type("V", (), {"createOrReplaceTempView": lambda _, name: None})()
        assert [f.name for f in schema.fields] == ["ID", "V", "__rowtime", "__tombstone"]
        self.written = rows
        return rows


def change(side: int, key: str, offset: int, at: Any, tombstone: bool = False) -> Row:
    row = Row(ID=key, ROWPARTITION=0, ROWOFFSET=offset, __tombstone=tombstone)
    return Row(__side=side, __key=key, ROWTIME=at, **{f"__row{side}": row})


def test_table_join_batch_writes_rows_and_tombstones_and_keeps_the_store(engine: Engine) -> None:
    engine.execute("CREATE TABLE x (id STRING PRIMARY KEY, z STRING) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON');"
                   "CREATE TABLE j AS SELECT t.id AS id, t.v AS v FROM t JOIN x ON t.id = x.id;")
    plan, _ = engine.plans["CTAS_J_4"]
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, TableTableJoin)
    writes: list[tuple[Any, int, bool]] = []
    each = engine._table_join_batch(plan, compiled, lambda frame, batch_id, tombstones: writes.append(
        (frame, batch_id, tombstones)))
    at = datetime.datetime(2026, 1, 1)
    first = Batch([change(0, "a", 0, at), change(1, "b", 0, at), change(1, "a", 1, at)],
                  [Row(ID="a", V=1, __rowtime=at)], ["a", "b"])
    each(first, 0)
    # each side's changed keys are written into the join as literals: the batch is not read again
    assert "CAST(`T`.`ID` AS STRING) IN ('a')" in first.texts[0] and "CAST(`X`.`ID` AS STRING) IN ('a', 'b')" in \
        first.texts[0]
    assert first.handed == [[("a",)], [("a",), ("b",)]]     # each side's rows of the changed keys
    assert writes[-1] == ([("a", 1, at, False)], 0, True)
    assert engine.stores["J"].scan(lambda r: True) == [["a", 1]]
    assert engine.query("SELECT * FROM j WHERE id = 'a';").rows == [["a", 1]]
    later = at + datetime.timedelta(seconds=5)
    # x's row for a is deleted: a no longer joins, so its row is deleted too; b never had one
    second = Batch([change(1, "a", 2, later, True), change(1, "b", 3, later + datetime.timedelta(seconds=1), True)],
                   [], ["a", "b"])
    each(second, 1)
    assert second.handed == [[("a",)], []]                  # t's row a; x has neither left
    assert writes[-1] == ([("a", None, later, True)], 1, True)       # at the time of the change that deleted it
    assert engine.stores["J"].scan(lambda r: True) == []
    assert engine.query("SELECT * FROM j WHERE id = 'a';").rows == []
    assert [s.reads for s in engine.table_states["CTAS_J_4"]] == [[1, 0], [2, 2]]


def test_pull_queries_on_session_and_emit_final_tables(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    engine.execute("CREATE TABLE sess AS SELECT id, COUNT(*) AS n FROM s WINDOW SESSION (30 SECONDS) GROUP BY id;"
                   "CREATE TABLE fin AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id "
                   "EMIT FINAL;")
    for name in ("SESS", "FIN"):
        store = engine.stores[name]
        assert store.windowed and store.column_names == ["ID", "WINDOWSTART", "WINDOWEND", "N"]
        store.update([{"ID": "k", "WINDOWSTART": 1000, "WINDOWEND": 9000, "N": 3}])
    tq = engine.query("SELECT * FROM sess WHERE id = 'k' AND WINDOWSTART >= 1000;")
    assert (tq.column_names, tq.rows) == (["ID", "WINDOWSTART", "WINDOWEND", "N"], [["k", 1000, 9000, 3]])
    assert engine.query("SELECT n FROM fin WHERE id = 'k';").rows == [[3]]


def test_an_aggregate_over_a_join_reads_the_joins_internal_topic(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    RecordingAdmin.deleted = []
    engine.execute("CREATE TABLE x (id STRING PRIMARY KEY, z STRING) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON');")
    out = engine.execute("CREATE TABLE per_z AS SELECT x.z AS z, COUNT(*) AS n, SUM(s.v) FROM s JOIN x ON s.name = x.id "
                         "WHERE s.v > 0 GROUP BY x.z;")
    assert out[0]["commandStatus"]["queryId"] == "CTAS_PER_Z_4"
    plan, sql = engine.plans["CTAS_PER_Z_4"]
    join, join_sql = engine.plans["CTAS_PER_Z_4_JOIN"]
    topic = "_confluent-ksql-default_query_CTAS_PER_Z_4-Join-repartition"
    # the join (with WHERE) writes every column of both sources to the internal topic ...
    assert plan.upstream is join and join.sink.topic == topic and join.owner == "CTAS_PER_Z_4"
    assert [c.name for c in join.sink.columns] == ["S_NAME", "S_ID", "S_V", "X_ID", "X_Z"]
    assert join_sql.endswith("ON (`S`.`NAME` = `X`.`ID`) WHERE (`S`.`V` > 0)")
    # ... which the aggregate reads from the start, naming those columns
    assert (plan.source.topic, plan.offset_reset) == (topic, "earliest")
    assert sql == ("SELECT `X_Z` AS `Z`, count(*) AS `N`, sum(`S_V`) AS `KSQL_COL_2`, max(`ROWTIME`) AS `__rowtime` "
                   "FROM ksql_ctas_per_z_4 GROUP BY `X_Z`")
    per_z = engine.metastore.require("PER_Z")
    assert ([(c.name, c.key) for c in per_z.columns], per_z.value_format) == (
        [("Z", True), ("N", False), ("KSQL_COL_2", False)], "JSON")
    assert engine.metastore.readers_and_writers("X") == (["CTAS_PER_Z_4"], [])
    assert set(engine.running) == {"CTAS_PER_Z_4", "CTAS_PER_Z_4_JOIN"}
    engine.execute("TERMINATE CTAS_PER_Z_4;")                   # both Spark queries stop
    assert engine.running == {}
    assert RecordingAdmin.deleted == [topic]                    # and the internal topic is deleted
    engine.execute("CREATE STREAM plain AS SELECT * FROM s;TERMINATE CSAS_PLAIN_6;")
    assert RecordingAdmin.deleted == [topic]                    # a query without one deletes nothing
    with pytest.raises(KsqlError, match="Column 'NOPE' cannot be resolved"):
        engine.execute("CREATE TABLE bad AS SELECT x.z, COUNT(nope) FROM s JOIN x ON s.name = x.id GROUP BY x.z;")


def test_a_windowed_aggregate_over_a_stream_stream_join(engine: Engine) -> None:
    engine.execute("CREATE TABLE pairs AS SELECT s.id AS id, COUNT(*) AS n FROM s JOIN o WITHIN 1 MINUTE ON s.id = o.id "
                   "WINDOW TUMBLING (SIZE 1 HOUR) GROUP BY s.id HAVING COUNT(*) > 1;")
    plan, sql = engine.plans["CTAS_PAIRS_3"]
    assert plan.upstream is engine.plans["CTAS_PAIRS_3_JOIN"][0]          # Spark's stream-stream join, then
    assert "INNER JOIN ksql_ctas_pairs_3_join_1 AS `O`" in engine.plans["CTAS_PAIRS_3_JOIN"][1]   # the aggregate
    assert sql.endswith("GROUP BY `S_ID`, window(`ROWTIME`, '3600000 milliseconds') HAVING (count(*) > 1)")
    pairs = engine.metastore.require("PAIRS")
    assert pairs.window is not None and [c.name for c in pairs.key_columns] == ["ID"]


def test_a_terminated_table_query_ends_its_pull_queries_with_ksqldbs_answer(engine: Engine, monkeypatch: Any) -> None:
    """ksqlDB answers a pull query only while a query materializes its table (EngineExecutor's
    findMaterializingQuery): once TERMINATE stopped it, the table is refused as not queryable, and
    a windowed one is not read from its topic instead (that is for tables declared over a topic)."""
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    read: list[str] = []
    monkeypatch.setattr(Engine, "_windowed_table_now", lambda self, src: read.append(src.name))
    engine.execute("CREATE TABLE agg AS SELECT id, COUNT(*) AS n FROM s GROUP BY id;"
                   "CREATE TABLE win AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;")
    engine.stores["AGG"].update([{"ID": "k", "N": 3}])
    assert engine.query("SELECT n FROM agg WHERE id = 'k';").rows == [[3]]
    queries = {q["sinks"][0]: q["id"] for q in engine.execute("SHOW QUERIES;")[0]["queries"]}
    engine.execute(f"TERMINATE {queries['AGG']}; TERMINATE {queries['WIN']};")
    for table in ("AGG", "WIN"):
        with pytest.raises(KsqlError) as info:
            engine.query(f"SELECT * FROM {table.lower()} WHERE id = 'k';")
        assert info.value.message == (
            f"The `{table}` table isn't queryable. To derive a queryable table, you can do 'CREATE TABLE "
            f"QUERYABLE_{table} AS SELECT * FROM {table}'. See https://cnfl.io/queries for more info.\n"
            "Add EMIT CHANGES if you intended to issue a push query.")
    assert read == [] and "AGG" not in engine.stores and "WIN" not in engine.stores
