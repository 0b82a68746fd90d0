"""A stream-stream join after a stream-table join whose ON names a table column (issue 30):
ksqlDB repartitions the stream-table join's output by that column; here the stream-table join is
a query of its own writing every column as ``ALIAS_COL`` to an internal topic, which the
stream-stream join reads as a stream. Planned and compiled against the engine's Spark double:
both queries' SQL, the output's columns and key, the internal topic's life (TERMINATE, a push
query's close); an aggregate over such joins as a third query over a second internal topic."""
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


AGGREGATE = ("CREATE TABLE n AS SELECT t.v AS tv, COUNT(*) AS c, SUM(o.v) AS total FROM s JOIN t ON s.id = t.id "
             "JOIN o WITHIN 1 SECOND ON t.v = o.v WHERE s.v > 1 GROUP BY t.v;")


def test_an_aggregate_over_such_joins_is_three_queries_through_two_internal_topics(
        engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    RecordingAdmin.deleted = []
    assert engine.execute(AGGREGATE)[0]["commandStatus"]["queryId"] == "CTAS_N_3"
    first, second = "_confluent-ksql-default_query_CTAS_N_3_JOIN-Join-repartition", \
        "_confluent-ksql-default_query_CTAS_N_3-Join-repartition"
    plan, sql = engine.plans["CTAS_N_3"]
    join, join_sql = engine.plans["CTAS_N_3_JOIN"]
    table_join, _ = engine.plans["CTAS_N_3_JOIN_JOIN"]
    # the stream-table join -> the stream-stream join on the table's column (WHERE there) -> the aggregate
    assert (plan.upstream, join.upstream, table_join.sink.topic, join.sink.topic) == (join, table_join, first, second)
    assert "ON (`CTAS_N_3_JOIN_JOIN`.`T_V` = `O`.`V`)" in join_sql and join_sql.endswith(
        "WHERE (`CTAS_N_3_JOIN_JOIN`.`S_V` > 1)")
    assert sql == ("SELECT `T_V` AS `TV`, count(*) AS `C`, sum(`O_V`) AS `TOTAL`, max(`ROWTIME`) AS `__rowtime` "
                   "FROM ksql_ctas_n_3 GROUP BY `T_V`")
    assert [(c.name, c.key) for c in plan.sink.columns] == [("TV", True), ("C", False), ("TOTAL", False)]
    assert (join.owner, table_join.owner) == ("CTAS_N_3", "CTAS_N_3")    # restarted while CTAS_N_3 lives
    assert set(engine.running) == {"CTAS_N_3", "CTAS_N_3_JOIN", "CTAS_N_3_JOIN_JOIN"}
    assert engine.internal_topics == {"CTAS_N_3": second, "CTAS_N_3_JOIN": first}
    assert plan.source_names == ("S", "T", "O") and engine.metastore.readers_and_writers("O") == (["CTAS_N_3"], [])
    engine.execute("TERMINATE CTAS_N_3;")
    assert not engine.running and sorted(RecordingAdmin.deleted) == sorted([first, second])


def test_a_push_aggregate_over_such_joins_cleans_up_both_topics(engine: Engine, monkeypatch: Any,
                                                                 tmp_path: Any) -> None:
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    RecordingAdmin.deleted = []
    engine.config = engine.config.__class__(listeners=engine.config.listeners, state_dir=str(tmp_path))
    tq = engine.query("SELECT t.v AS tv, COUNT(*) AS c FROM s JOIN t ON s.id = t.id JOIN o WITHIN 1 SECOND "
                      "ON t.v = o.v GROUP BY t.v EMIT CHANGES;", {"auto.offset.reset": "earliest"})
    assert tq.column_names == ["TV", "C"]
    assert set(engine.running) == {f"{tq.id}_JOIN", f"{tq.id}_JOIN_JOIN"}
    tq.close()
    assert not engine.running
    assert sorted(RecordingAdmin.deleted) == sorted([f"_confluent-ksql-default_{tq.id}-Join-repartition",
                                                     f"_confluent-ksql-default_{tq.id}_JOIN-Join-repartition"])


def test_a_replay_rebuilds_the_three_queries(engine: Engine) -> None:
    engine.execute(AGGREGATE)
    again = Engine(engine.config, FakeSpark())
    again.commands = engine.commands
    assert again.start() == 4
    assert set(again.running) == {"CTAS_N_3", "CTAS_N_3_JOIN", "CTAS_N_3_JOIN_JOIN"}
    assert again.plans["CTAS_N_3_JOIN"][1] == engine.plans["CTAS_N_3_JOIN"][1]
