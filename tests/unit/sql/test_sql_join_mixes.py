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
from tests.unit.sql.test_sql_engine_statements import Frame, _spark, engine  # noqa: F401  (the fixture)

WINDOWED = ("CREATE TABLE tw AS SELECT id, COUNT(*) AS n FROM s WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;"
            "CREATE TABLE hw AS SELECT id, SUM(v) AS sv FROM o WINDOW HOPPING (SIZE 2 MINUTES, ADVANCE BY 1 MINUTE) "
            "GROUP BY id;"
            "CREATE TABLE sw AS SELECT id, COUNT(*) AS n FROM o WINDOW SESSION (30 SECONDS) GROUP BY id;")


def test_stream_stream_join_then_stream_table_join(engine: Engine) -> None:
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
    before = len(spark.sql_texts)
    compiled.per_batch(Frame(spark))
    assert spark.sql_texts[before:][-1] == sql and len(spark.sql_texts[before:]) == 2     # the table, then the join
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


@pytest.mark.parametrize("statement, message", [
    ("SELECT * FROM s JOIN t ON s.id = t.id JOIN o WITHIN 1 SECOND ON t.v = o.v EMIT CHANGES;",
     "A stream-stream join on a column of a joined table (T.V) is not supported by this server yet"),
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
    engine.execute(WINDOWED)
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    assert info.value.message == message or info.value.message.startswith(message), info.value.message
