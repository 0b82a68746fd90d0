"""A stream-stream join after a stream-table join whose ON names a table column (issue 30):
ksqlDB repartitions the stream-table join's output by that column; here the stream-table join is
a query of its own writing every column as ``ALIAS_COL`` to an internal topic, which the
stream-stream join reads as a stream. Planned and compiled against the engine's Spark double:
both queries' SQL, the output's columns and key, the internal topic's life (TERMINATE, a push
query's close), and the refusal that remains for an aggregate over such joins."""
from __future__ import annotations

from typing import Any

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine
from tests.unit.sql.conftest import RecordingAdmin
from tests.unit.sql.test_sql_engine_statements import FakeSpark, _spark, engine  # noqa: F401  (the fixture)

STATEMENT = ("CREATE STREAM m AS SELECT s.id AS id, s.name, t.v AS tv, o.id AS oid FROM s JOIN t ON s.id = t.id "
             "JOIN o WITHIN 1 SECOND ON t.v = o.v WHERE s.v > 1;")


def test_the_stream_table_join_feeds_the_stream_stream_join_through_an_internal_topic(
        engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    RecordingAdmin.deleted = []
    out = engine.execute(STATEMENT)
    assert out[0]["commandStatus"]["queryId"] == "CSAS_M_3"
    plan, sql = engine.plans["CSAS_M_3"]
    topic = "_confluent-ksql-default_query_CSAS_M_3-Join-repartition"
    join, join_sql = engine.plans["CSAS_M_3_JOIN"]
    assert (join.sink.topic, plan.upstream) == (topic, join) and set(engine.running) == {"CSAS_M_3", "CSAS_M_3_JOIN"}
    # the stream-table join writes every column of both sides, with the stream's event time ...
    assert join_sql == ("SELECT `S`.`ID` AS `S_ID`, `S`.`V` AS `S_V`, `S`.`NAME` AS `S_NAME`, `T`.`ID` AS `T_ID`, "
                        "`T`.`V` AS `T_V`, `S`.`ROWTIME` AS `__rowtime` FROM ksql_csas_m_3_join_stream AS `S` "
                        "INNER JOIN ksql_csas_m_3_join_table AS `T` ON (`S`.`ID` = `T`.`ID`)")
    # ... and the stream-stream join reads it from the start, on the table's column, WHERE after
    assert plan.offset_reset == "earliest"
    assert sql == ("SELECT `CSAS_M_3_JOIN`.`S_ID` AS `ID`, `CSAS_M_3_JOIN`.`S_NAME` AS `NAME`, `CSAS_M_3_JOIN`.`T_V` "
                   "AS `TV`, `O`.`ID` AS `OID`, greatest(`CSAS_M_3_JOIN`.`ROWTIME`, `O`.`ROWTIME`) AS `__rowtime` "
                   "FROM ksql_csas_m_3_0 AS `CSAS_M_3_JOIN` INNER JOIN ksql_csas_m_3_1 AS `O` ON "
                   "(`CSAS_M_3_JOIN`.`T_V` = `O`.`V`) AND `O`.`ROWTIME` >= `CSAS_M_3_JOIN`.`ROWTIME` - INTERVAL "
                   "1000 MILLISECONDS AND `O`.`ROWTIME` <= `CSAS_M_3_JOIN`.`ROWTIME` + INTERVAL 1000 MILLISECONDS "
                   "WHERE (`CSAS_M_3_JOIN`.`S_V` > 1)")
    # keyed by the join column, typed from the sources; JSON as its source
    assert [(c.name, str(c.type), c.key) for c in plan.sink.columns] == [
        ("TV", "INT", True), ("ID", "STRING", False), ("NAME", "STRING", False), ("OID", "STRING", False)]
    assert plan.sink.value_format == "JSON" and plan.source_names == ("S", "T", "O")
    assert engine.metastore.readers_and_writers("O") == (["CSAS_M_3"], [])
    assert engine.metastore.readers_and_writers("T") == (["CSAS_M_3"], [])
    engine.execute("TERMINATE CSAS_M_3;")
    assert not engine.running and RecordingAdmin.deleted == [topic]


def test_a_push_query_of_such_joins_selects_every_column_and_cleans_up(engine: Engine, monkeypatch: Any,
                                                                       tmp_path: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    RecordingAdmin.deleted = []
    engine.config = engine.config.__class__(listeners=engine.config.listeners, state_dir=str(tmp_path))
    tq = engine.query("SELECT * FROM s JOIN t ON s.id = t.id JOIN o WITHIN 1 SECOND ON t.v = o.v EMIT CHANGES;",
                      {"auto.offset.reset": "earliest"})
    assert tq.column_names == ["S_ID", "S_V", "S_NAME", "T_ID", "T_V", "O_ID", "O_V"]
    join_id = f"{tq.id}_JOIN"
    assert set(engine.running) == {join_id} and engine.plans[join_id][0].offset_reset == "earliest"
    assert "ON (`" + join_id + "`.`T_V` = `O`.`V`)" in _spark(engine).sql_texts[-1]
    tq.close()
    assert join_id not in engine.running
    assert RecordingAdmin.deleted == [f"_confluent-ksql-default_{tq.id}-Join-repartition"]


def test_a_replay_rebuilds_both_queries(engine: Engine) -> None:
    engine.execute(STATEMENT)
    again = Engine(engine.config, FakeSpark())           # the fixture's topic doubles are on the class
    again.commands = engine.commands
    assert again.start() == 4
    assert set(again.running) == {"CSAS_M_3", "CSAS_M_3_JOIN"}
    assert again.plans["CSAS_M_3"][1] == engine.plans["CSAS_M_3"][1]
