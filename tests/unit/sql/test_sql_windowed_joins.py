"""Joins of windowed sources (issue 30), planned and compiled against the engine's Spark double:
Kafka Streams joins windowed keys, so rows meet on the key AND the window (a session's bounds
exactly); a stream-stream join of windowed streams is a persistent query whose output keys keep
the left source's window; a windowed stream meets a windowed table in a push query; ksqlDB's
refusals otherwise, in its words."""
from __future__ import annotations

import pytest

from kafkalite.sql.ast import Window
from kafkalite.sql.engine import Engine, TableJoin
from kafkalite.sql.errors import KsqlError
from tests.unit.sql.test_sql_engine_statements import _spark, engine  # noqa: F401  (the fixture)

SOURCES = ("CREATE STREAM clicks_w (usr STRING KEY, n BIGINT) WITH (KAFKA_TOPIC='cw', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');"
           "CREATE STREAM views_w (usr STRING KEY, m BIGINT, page STRING) WITH (KAFKA_TOPIC='vw', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='HOPPING', WINDOW_SIZE='1 MINUTE');"
           "CREATE STREAM visits_s (usr STRING KEY, k BIGINT) WITH (KAFKA_TOPIC='vs', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='SESSION');"
           "CREATE STREAM logins_s (usr STRING KEY, j BIGINT) WITH (KAFKA_TOPIC='ls', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='SESSION');"
           "CREATE TABLE limits_w (usr STRING PRIMARY KEY, top BIGINT) WITH (KAFKA_TOPIC='lw', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');")


def test_a_join_of_windowed_streams_matches_key_and_window(engine: Engine) -> None:
    engine.execute(SOURCES)
    out = engine.execute("CREATE STREAM both_w AS SELECT c.usr AS usr, c.n, v.m FROM clicks_w c JOIN views_w v "
                         "WITHIN 1 MINUTE ON c.usr = v.usr;")
    query_id = out[0]["commandStatus"]["queryId"]
    plan, sql = engine.plans[query_id]
    assert (" INNER JOIN ksql_" + query_id.lower() + "_1 AS `V` ON (`C`.`USR` = `V`.`USR`) AND `C`.`WINDOWSTART` = "
            "`V`.`WINDOWSTART` AND `V`.`ROWTIME` >= `C`.`ROWTIME` - INTERVAL 60000 MILLISECONDS") in sql
    # the output's keys are windowed as the left source's: key bytes + the window start
    assert plan.sink.window == Window("TUMBLING", 60_000)
    assert engine.execute("DESCRIBE both_w;")[0]["sourceDescription"]["windowType"] == "TUMBLING"
    assert "`C`.`WINDOWSTART` AS `__windowstart`, `C`.`WINDOWEND` AS `__windowend` FROM " in sql
    assert engine._key_sql(plan) == ("concat(CAST(CAST(`USR` AS STRING) AS BINARY), unhex(lpad(hex(`__windowstart`), "
                                     "16, '0'))) AS key")


def test_a_join_of_session_windowed_streams_matches_both_bounds(engine: Engine) -> None:
    engine.execute(SOURCES)
    tq = engine.query("SELECT a.usr, a.k, b.j, a.WINDOWEND AS e FROM visits_s a LEFT JOIN logins_s b WITHIN 10 SECONDS "
                      "ON a.usr = b.usr EMIT CHANGES;")
    assert tq.column_names == ["USR", "K", "J", "E"]
    tq.close()
    sql = _spark(engine).sql_texts[-1]
    assert " LEFT OUTER JOIN " in sql and "ON (`A`.`USR` = `B`.`USR`) AND `A`.`WINDOWSTART` = `B`.`WINDOWSTART` AND " \
        "`A`.`WINDOWEND` = `B`.`WINDOWEND` AND " in sql


def test_a_windowed_stream_meets_a_windowed_table_in_a_push_query(engine: Engine) -> None:
    engine.execute(SOURCES)
    statement = "SELECT c.usr, c.n, l.top FROM clicks_w c LEFT JOIN limits_w l ON c.usr = l.usr EMIT CHANGES;"
    tq = engine.query(statement)
    assert (tq.column_names, tq.column_types) == (["USR", "N", "TOP"], ["STRING", "BIGINT", "BIGINT"])
    tq.close()
    from kafkalite.sql.parser import parse
    plan = engine._plan(parse(statement)[0].statement, statement, {}, "transient_CW_1")  # type: ignore[arg-type]
    compiled, sql = engine._compile(plan)
    assert isinstance(compiled, TableJoin)
    assert sql.endswith("LEFT OUTER JOIN ksql_transient_cw_1_table AS `L` ON (`C`.`USR` = `L`.`USR`) AND "
                        "`C`.`WINDOWSTART` = `L`.`WINDOWSTART`")


@pytest.mark.parametrize("statement, message", [
    ("CREATE STREAM x AS SELECT c.usr, v.m FROM clicks_w c JOIN views_w v WITHIN 1 MINUTE ON c.n = v.m;",
     "Implicit repartitioning of windowed sources is not supported. See https://github.com/confluentinc/ksql/"
     "issues/4385."),
    ("SELECT c.usr, v.page FROM clicks_w c JOIN views_w v WITHIN 1 MINUTE ON c.usr = v.page EMIT CHANGES;",
     "Implicit repartitioning of windowed sources is not supported."),
    ("CREATE STREAM x AS SELECT c.usr, s.k FROM clicks_w c JOIN visits_s s WITHIN 1 MINUTE ON c.usr = s.usr;",
     "Incompatible windowed sources.\nLeft source: TUMBLING\nRight source: SESSION\n"),
    ("CREATE STREAM x AS SELECT c.usr, t.v FROM clicks_w c JOIN t ON c.usr = t.id;",
     "Can not join windowed source to non-windowed source.\nC is TUMBLING windowed\nT is not windowed"),
    ("CREATE STREAM x AS SELECT c.usr, l.top FROM clicks_w c JOIN limits_w l ON c.usr = l.usr;",
     "KSQL does not support persistent queries on windowed tables."),
])
def test_windowed_join_refusals(engine: Engine, statement: str, message: str) -> None:
    engine.execute(SOURCES)
    before = len(engine.commands.log)                              # type: ignore[attr-defined]
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    assert info.value.message.startswith(message), info.value.message
    assert len(engine.commands.log) == before                      # type: ignore[attr-defined]
