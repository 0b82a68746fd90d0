"""Joins beyond one shape (issue 30): n-way joins mixing stream-stream and stream-table joins,
windowed sources (ksqlDB's refusals in its words), aggregations over table-table joins and over
joins in push queries, and the internal topics such queries make; planned and compiled against
the Spark double of the engine's statement tests, micro-batches run on recorded rows."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine, TableJoin
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse
from tests.unit.sql.test_sql_engine_statements import Frame, _spark, engine  # noqa: F401  (the fixture)
from tests.unit.sql.conftest import RecordingAdmin

WINDOWED = ("CREATE TABLE tw AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;"
            "CREATE TABLE hw AS SELECT id, SUM(v) AS sv FROM o WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE) "
            "GROUP BY id;"
            "CREATE TABLE sw AS SELECT id, COUNT(*) AS n FROM o WINDOW SESSION (30 SECONDS) GROUP BY id;")


def test_stream_stream_join_then_stream_table_join(engine: Engine, monkeypatch: Any) -> None:
    out = engine.execute("CREATE STREAM m AS SELECT s.id AS id, o.v AS ov, t.v AS tv FROM s JOIN o WITHIN 1 MINUTE "
                         "ON s.id = o.id LEFT JOIN t ON o.id = t.id WHERE t.v IS NULL OR s.v < t.v;")
    assert out[0]["commandStatus"]["queryId"] == "CSAS_M_3"
    plan, sql = engine.plans["CSAS_M_3"]
    spark = _spark(engine)
    # the streams join in Spark, each stream's row one struct named by its alias ...
    streams_sql = next(t for t in spark.sql_texts if t.startswith("SELECT struct("))
    assert streams_sql == ("SELECT struct(`S`.*) AS `S`, struct(`O`.*) AS `O` FROM ksql_csas_m_3_0 AS `S` INNER JOIN "
                           "ksql_csas_m_3_1 AS `O` ON (`S`.`ID` = `O`.`ID`) AND `O`.`ROWTIME` >= `S`.`ROWTIME` - "
                           "INTERVAL 60000 MILLISECONDS AND `O`.`ROWTIME` <= `S`.`ROWTIME` + INTERVAL 60000 MILLISECONDS")
    # ... and each micro-batch of that join meets the table as it is, WHERE last, the streams' time kept
    assert sql == ("SELECT `S`.`ID` AS `ID`, `O`.`V` AS `OV`, `T`.`V` AS `TV`, greatest(`S`.`ROWTIME`, "
                   "`O`.`ROWTIME`) AS `__rowtime` FROM ksql_csas_m_3_stream AS `__streams` LEFT OUTER JOIN "
                   "ksql_csas_m_3_table AS `T` ON (`O`.`ID` = `T`.`ID`) WHERE ((`T`.`V` IS NULL) OR (`S`.`V` < `T`.`V`))")
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, TableJoin)
    monkeypatch.setattr(Engine, "_read_changes", lambda self, session, table, state, until=None: Frame(spark).schema)
    before = len(spark.sql_texts)
    compiled.per_batch(Frame(spark))
    assert spark.sql_texts[before:] == ["SELECT DISTINCT `O`.`ID` FROM ksql_csas_m_3_stream AS `__streams`", sql]
    assert engine.metastore.readers_and_writers("T") == (["CSAS_M_3"], [])
    assert [c.name for c in engine.metastore.require("M").key_columns] == ["ID"]


def test_stream_table_join_then_stream_stream_join(engine: Engine) -> None:
    engine.execute("CREATE STREAM m2 AS SELECT s.id AS id, t.v AS tv, o.v AS ov FROM s LEFT JOIN t ON s.id = t.id "
                   "JOIN o WITHIN (10 SECONDS, 20 SECONDS) ON s.id = o.id;")
    plan, sql = engine.plans["CSAS_M2_3"]
    assert "FROM ksql_csas_m2_3_stream AS `__streams` LEFT OUTER JOIN ksql_csas_m2_3_table AS `T` ON " \
           "(`S`.`ID` = `T`.`ID`)" in sql
    assert any(t.startswith("SELECT struct(`S`.*) AS `S`, struct(`O`.*) AS `O` FROM ksql_csas_m2_3_0 AS `S` INNER "
                            "JOIN ksql_csas_m2_3_1 AS `O`") for t in _spark(engine).sql_texts)
    assert plan.source_names == ("S", "T", "O")
    # a push query mixes them too
    tq = engine.query("SELECT s.id, t.v AS tv, o.v AS ov FROM s JOIN o WITHIN 1 SECOND ON s.id = o.id JOIN t ON "
                      "s.id = t.id EMIT CHANGES;")
    assert (tq.column_names, tq.column_types) == (["ID", "TV", "OV"], ["STRING", "INTEGER", "INTEGER"])
    tq.close()


def refusal(engine: Engine, sources: str, statement: str) -> str:
    """The statement error of ``statement`` (a pull/push query or another statement) after ``sources``."""
    engine.execute(sources)
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    return info.value.message


@pytest.mark.parametrize("statement, message", [
    ("CREATE STREAM x AS SELECT s.id, tw.n FROM s JOIN tw ON s.id = tw.id;",
     "Can not join windowed source to non-windowed source.\nS is not windowed\nTW is TUMBLING windowed"),
    ("SELECT * FROM tw JOIN t ON tw.id = t.id EMIT CHANGES;",
     "Can not join windowed source to non-windowed source.\nTW is TUMBLING windowed\nT is not windowed"),
    ("SELECT * FROM tw JOIN sw ON tw.id = sw.id EMIT CHANGES;",
     "Incompatible windowed sources.\nLeft source: TUMBLING\nRight source: SESSION\nSession windowed sources can "
     "only be joined to other session windowed sources, and may still not result in expected behaviour as session "
     "bounds must be an exact match for the join to work\nHopping and tumbling windowed sources can only be joined "
     "to other hopping and tumbling windowed sources"),
    ("CREATE TABLE y AS SELECT tw.id AS id, tw.n, hw.sv FROM tw JOIN hw ON tw.id = hw.id;",
     "KSQL does not support persistent queries on windowed tables."),
    ("CREATE TABLE y AS SELECT id, n FROM tw WHERE n > 1;",
     "KSQL does not support persistent queries on windowed tables."),
])
def test_windowed_and_mixed_join_refusals(engine: Engine, statement: str, message: str) -> None:
    got = refusal(engine, WINDOWED, statement)
    assert got == message or got.startswith(message), got


def test_a_push_query_joins_windowed_tables_by_key_and_window(engine: Engine) -> None:
    engine.execute(WINDOWED)
    spark = _spark(engine)
    before = len(spark.sql_texts)
    statement = ("SELECT tw.id AS id, tw.WINDOWSTART AS ws, tw.n AS n, hw.sv AS sv FROM tw LEFT JOIN hw "
                 "ON tw.id = hw.id EMIT CHANGES;")
    tq = engine.query(statement)
    assert (tq.column_names, tq.column_types) == (["ID", "WS", "N", "SV"], ["STRING", "BIGINT", "BIGINT", "INTEGER"])
    plan = engine._plan(parse(statement)[0].statement, statement, {}, "transient_TW_1")  # type: ignore[arg-type]
    compiled, sql = engine._compile(plan)
    # the same key in the same window: Kafka Streams joins windowed keys
    assert " LEFT OUTER JOIN ksql_transient_tw_1_t1 AS `HW` ON (`TW`.`ID` = `HW`.`ID`) AND `TW`.`WINDOWSTART` = " \
           "`HW`.`WINDOWSTART` WHERE " in sql
    assert "concat(CAST(`TW`.`ID` AS STRING), '@', CAST(`TW`.`WINDOWSTART` AS STRING)) IN (SELECT `__key` FROM " \
           "ksql_transient_tw_1_changes WHERE `__side` = 0)" in sql
    assert sql.startswith("SELECT `TW`.`ID` AS `ID`, `TW`.`WINDOWSTART` AS `WS`, ")
    from pyspark.sql.types import StringType, StructField, StructType
    side = StructType([StructField("ID", StringType())])
    schema = StructType([StructField("__row0", side), StructField("__row1", side)])
    before = len(spark.sql_texts)
    compiled.per_batch(type("B", (), {"collect": lambda _: [], "sparkSession": spark, "schema": schema})())
    # each table's latest rows per key and window are kept by the query: no topic is read again
    assert spark.sql_texts[before:] == [sql.replace("(SELECT `__key` FROM ksql_transient_tw_1_changes WHERE `__side` = 0)",
                                                    "(NULL)").replace(
        "(SELECT `__key` FROM ksql_transient_tw_1_changes WHERE `__side` = 1)", "(NULL)")]
    assert [s.windowed for s in engine.table_states["transient_TW_1"]] == [True, True]
    tq.close()


def test_windowed_keys_are_decoded_as_kafka_streams_writes_them() -> None:
    from kafkalite.sql.ast import Window
    tumbling = engine_mod.join_rules.windowed_key("key", Window("TUMBLING", 60_000))
    assert tumbling == ["substring(key, 1, length(key) - 8) AS key",
                        "CAST(conv(hex(substring(key, length(key) - 7, 8)), 16, 10) AS BIGINT) AS `WINDOWSTART`",
                        "CAST(conv(hex(substring(key, length(key) - 7, 8)), 16, 10) AS BIGINT) + 60000 AS `WINDOWEND`"]
    session = engine_mod.join_rules.windowed_key("key", Window("SESSION", 30_000))
    assert session[0] == "substring(key, 1, length(key) - 16) AS key"
    assert session[2] == "CAST(conv(hex(substring(key, length(key) - 15, 8)), 16, 10) AS BIGINT) AS `WINDOWEND`"


def test_an_aggregating_push_query_over_a_join_runs_its_join_and_cleans_up(engine: Engine, monkeypatch: Any,
                                                                           tmp_path: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    RecordingAdmin.deleted = []
    engine.config = engine.config.__class__(listeners=engine.config.listeners, state_dir=str(tmp_path))
    tq = engine.query("SELECT t.v AS tv, COUNT(*) AS n, SUM(s.v) AS total FROM s JOIN t ON s.id = t.id "
                      "GROUP BY t.v EMIT CHANGES;", {"auto.offset.reset": "earliest"})
    join_id = f"{tq.id}_JOIN"
    topic = f"_confluent-ksql-default_{tq.id}-Join-repartition"
    assert tq.id.startswith("transient_S_") and set(engine.running) == {join_id}
    join, join_sql = engine.plans[join_id]
    # the join reads the sources as the push query asked (earliest) and writes its internal topic ...
    assert (join.sink.topic, join.offset_reset) == (topic, "earliest")
    assert join_sql.endswith("INNER JOIN ksql_transient_s_" + tq.id.split("_")[-1] + "_join_table AS `T` ON "
                             "(`S`.`ID` = `T`.`ID`)")
    # ... which the push query aggregates from its start
    spark = _spark(engine)
    assert spark.sql_texts[-1].startswith("SELECT `T_V` AS `TV`, count(*) AS `N`, sum(`S_V`) AS `TOTAL`")
    assert tq.column_names == ["TV", "N", "TOTAL"]
    checkpoint = tmp_path / engine.config.service_id / join_id
    checkpoint.mkdir(parents=True)                                # the join's checkpoint
    tq.close()
    assert join_id not in engine.running and join_id not in engine.plans
    assert RecordingAdmin.deleted == [topic] and not checkpoint.exists()


TABLES = ("CREATE TABLE u (id STRING PRIMARY KEY, w INT, tid STRING) WITH (KAFKA_TOPIC='u', VALUE_FORMAT='JSON');"
          "CREATE TABLE x (id STRING PRIMARY KEY, z STRING) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON');")


def test_an_aggregate_over_a_table_table_join_is_a_table_aggregate(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    engine.execute(TABLES)
    out = engine.execute("CREATE TABLE per_z AS SELECT x.z AS z, COUNT(*) AS n, SUM(u.w) AS total FROM u LEFT JOIN x "
                         "ON u.tid = x.id WHERE u.w > 0 GROUP BY x.z HAVING COUNT(*) < 3;")
    assert out[0]["commandStatus"]["queryId"] == "CTAS_PER_Z_5"
    plan, sql = engine.plans["CTAS_PER_Z_5"]
    join, join_sql = engine.plans["CTAS_PER_Z_5_JOIN"]
    # the join is a foreign-key table-table join writing a table (keyed by u's key) to the internal topic
    assert join.sink.kind == "TABLE" and [c.name for c in join.sink.key_columns] == ["U_ID"]
    assert join.sink.topic == "_confluent-ksql-default_query_CTAS_PER_Z_5-Join-repartition"
    assert "LEFT OUTER JOIN ksql_ctas_per_z_5_join_t1 AS `X` ON (`U`.`TID` = `X`.`ID`)" in join_sql
    # the aggregate reads it as a table: the table as it is now, grouped, SUM starting from 0
    assert plan.source.kind == "TABLE" and plan.source.topic == join.sink.topic
    assert sql == ("SELECT `X_Z` AS `Z`, count(*) AS `N`, coalesce(sum(`U_W`), 0) AS `TOTAL`, max(`ROWTIME`) AS "
                   "`__rowtime`, (count(*) < 3) AS `__having` FROM ksql_ctas_per_z_5_table GROUP BY `X_Z`")
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, engine_mod.TableAggregate)
    assert compiled.emptied(("z1",)) == ("SELECT 'z1' AS `Z`, count(*) AS `N`, coalesce(sum(`U_W`), 0) AS `TOTAL`, "
                                         "max(`ROWTIME`) AS `__rowtime`, (count(*) < 3) AS `__having` FROM "
                                         "ksql_ctas_per_z_5_table WHERE false")
    assert engine.metastore.require("PER_Z").key_columns[0].name == "Z"
    assert engine.metastore.readers_and_writers("X") == (["CTAS_PER_Z_5"], [])


@pytest.mark.parametrize("statement, message", [
    ("CREATE TABLE a AS SELECT x.z, MAX(u.w) AS m, COLLECT_SET(u.id) AS ids FROM u JOIN x ON u.tid = x.id "
     "GROUP BY x.z;", "The aggregation functions MAX and COLLECT_SET cannot be applied to a table source, only to a "
                      "stream source."),
    ("SELECT x.z, COUNT(*) FROM u JOIN x ON u.tid = x.id WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY x.z EMIT CHANGES;",
     "Windowing not supported for table aggregations."),
    ("CREATE TABLE a AS SELECT tid, LATEST_BY_OFFSET(w) AS w FROM u GROUP BY tid;",
     "The aggregation function LATEST_BY_OFFSET cannot be applied to a table source, only to a stream source."),
])
def test_table_aggregate_refusals(engine: Engine, statement: str, message: str) -> None:
    assert refusal(engine, TABLES, statement) == message


def test_explain_a_table_aggregate(engine: Engine) -> None:
    engine.execute(TABLES)
    out = engine.execute("EXPLAIN SELECT tid, COUNT(*) AS n FROM u GROUP BY tid EMIT CHANGES;")
    assert [f["name"] for f in out[0]["queryDescription"]["fields"]] == ["TID", "N"]


def test_a_table_aggregate_by_an_unprojected_expression_selects_its_key(engine: Engine) -> None:
    engine.execute(TABLES)
    engine.execute("CREATE TABLE by_upper AS SELECT COUNT(*) AS n FROM u GROUP BY UCASE(tid);")
    plan, sql = engine.plans["CTAS_BY_UPPER_5"]
    assert plan.key_names == ["KSQL_KEY_0"]
    assert sql == ("SELECT count(*) AS `N`, upper(`TID`) AS `KSQL_KEY_0`, max(`ROWTIME`) AS `__rowtime` FROM "
                   "ksql_ctas_by_upper_5_table GROUP BY upper(`TID`)")
    compiled, _ = engine._compile(plan)
    assert compiled.emptied(("X",)) == ("SELECT count(*) AS `N`, 'X' AS `KSQL_KEY_0`, max(`ROWTIME`) AS `__rowtime` "
                                        "FROM ksql_ctas_by_upper_5_table WHERE false")


def test_replay_makes_no_internal_topic_for_a_query_terminated_later(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    RecordingAdmin.deleted = []
    engine.execute(TABLES + "CREATE TABLE n1 AS SELECT x.z AS z, COUNT(*) AS n FROM s JOIN x ON s.name = x.id "
                            "GROUP BY x.z; TERMINATE CTAS_N1_5;"
                            "CREATE TABLE n2 AS SELECT x.z AS z, COUNT(*) AS n FROM s JOIN x ON s.name = x.id "
                            "GROUP BY x.z;")
    assert RecordingAdmin.deleted == ["_confluent-ksql-default_query_CTAS_N1_5-Join-repartition"]
    made: list[tuple[str, bool]] = []
    monkeypatch.setattr(Engine, "_ensure_sink_topic",
                        lambda self, plan, text, internal=True: made.append((plan.query_id, internal)))
    again = Engine(engine.config, type(engine.spark)())
    again.commands = engine.commands
    again.start()
    # the terminated query's sink is made again (as ksqlDB replays its CTAS), its internal topic not
    assert made == [("CTAS_N1_5", False), ("CTAS_N2_7", True)]
    assert again.internal_topics == {"CTAS_N2_7": "_confluent-ksql-default_query_CTAS_N2_7-Join-repartition"}
    assert set(again.running) == {"CTAS_N2_7", "CTAS_N2_7_JOIN"}
    assert RecordingAdmin.deleted == ["_confluent-ksql-default_query_CTAS_N1_5-Join-repartition"]   # nothing more
