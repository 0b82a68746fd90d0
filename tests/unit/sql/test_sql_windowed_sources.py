"""Windowed sources (issue 30): ``CREATE STREAM|TABLE ... WITH (WINDOW_TYPE=..., WINDOW_SIZE=...)``
over a topic of windowed keys. The WITH properties and their refusals in ksqlDB's words, Kafka
Streams' windowed key bytes both ways, the plan of queries over such sources (WINDOWSTART and
WINDOWEND, ``SELECT *``, a projection keeping its window in its output's keys, ksqlDB's refusals)
against the engine's Spark double, and a pull query answered from the table's topic."""
from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql import windowed
from kafkalite.sql.ast import Window
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.queries import StateStore, decode_output
from tests.unit.sql.test_sql_engine_statements import _spark, engine  # noqa: F401  (the fixture)

SOURCES = ("CREATE STREAM tws (id STRING KEY, n BIGINT) WITH (KAFKA_TOPIC='tw', VALUE_FORMAT='JSON', "
           "WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');"
           "CREATE STREAM sws (id STRING KEY, n BIGINT) WITH (KAFKA_TOPIC='sw', VALUE_FORMAT='JSON', "
           "window_type='Session');"
           "CREATE TABLE twt (id STRING PRIMARY KEY, n BIGINT, top DOUBLE) WITH (KAFKA_TOPIC='tw', "
           "VALUE_FORMAT='JSON', WINDOW_TYPE='hopping', WINDOW_SIZE='2 MINUTES');")


@pytest.mark.parametrize("props, window", [
    ({"WINDOW_TYPE": "TUMBLING", "WINDOW_SIZE": "1 MINUTE"}, Window("TUMBLING", 60_000)),
    ({"WINDOW_TYPE": "hopping", "WINDOW_SIZE": "30 seconds"}, Window("HOPPING", 30_000)),
    ({"WINDOW_TYPE": "Session"}, Window("SESSION", 0)),
    ({"WINDOW_TYPE": "TUMBLING", "WINDOW_SIZE": "2 HOURS"}, Window("TUMBLING", 7_200_000)),
    ({"WINDOW_TYPE": "TUMBLING", "WINDOW_SIZE": "500 MILLISECONDS"}, Window("TUMBLING", 500)),
    ({}, None),
])
def test_window_properties(props: dict[str, Any], window: Window | None) -> None:
    assert windowed.window_of(props, "x") == window


@pytest.mark.parametrize("props, message", [
    ({"WINDOW_TYPE": "TUMBLING"}, "TUMBLING windows require 'WINDOW_SIZE' to be provided in the WITH clause. "
                                  "For example: 'WINDOW_SIZE'='10 SECONDS'"),
    ({"WINDOW_TYPE": "HOPPING"}, "HOPPING windows require 'WINDOW_SIZE' to be provided in the WITH clause. "),
    ({"WINDOW_TYPE": "SESSION", "WINDOW_SIZE": "1 SECOND"}, "'WINDOW_SIZE' should not be set for SESSION windows."),
    ({"WINDOW_SIZE": "1 SECOND"}, "'WINDOW_SIZE' should not be set for SESSION windows."),
    ({"WINDOW_TYPE": "SLIDING", "WINDOW_SIZE": "1 SECOND"},
     "Invalid value SLIDING for configuration WINDOW_TYPE: String must be one of: SESSION, HOPPING, TUMBLING"),
    ({"WINDOW_TYPE": "HOPPING", "WINDOW_SIZE": "30 bobs"},
     "Configuration WINDOW_SIZE is invalid: Invalid duration: '30 bobs'. Unknown time unit: 'BOBS'\n"
     "Supported time units are: NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS"),
    ({"WINDOW_TYPE": "HOPPING", "WINDOW_SIZE": "30"},
     "Configuration WINDOW_SIZE is invalid: Invalid duration: '30'. Expected 2 tokens, got: 1"),
    ({"WINDOW_TYPE": "HOPPING", "WINDOW_SIZE": "x SECONDS"},
     "Configuration WINDOW_SIZE is invalid: Invalid duration: 'x SECONDS'. Not numeric: 'x'"),
])
def test_window_property_refusals(props: dict[str, Any], message: str) -> None:
    with pytest.raises(KsqlError) as info:
        windowed.window_of(props, "CREATE ...;")
    assert info.value.message.startswith(message) and info.value.statement == "CREATE ...;"


def test_a_create_with_a_bad_window_is_refused_before_it_is_logged(engine: Engine) -> None:
    before = len(engine.commands.log)                                        # type: ignore[attr-defined]
    statement = ("CREATE STREAM bad (id STRING KEY, n BIGINT) WITH (KAFKA_TOPIC='w', VALUE_FORMAT='JSON', "
                 "WINDOW_TYPE='TUMBLING');")
    with pytest.raises(KsqlError, match="TUMBLING windows require 'WINDOW_SIZE'") as info:
        engine.execute(statement)
    assert info.value.statement == statement and info.value.body()["error_code"] == 40001
    assert len(engine.commands.log) == before and engine.metastore.get("BAD") is None   # type: ignore[attr-defined]


@pytest.mark.parametrize("window, start, end", [
    (Window("TUMBLING", 60_000), 1_700_000_040_000, 1_700_000_100_000),
    (Window("HOPPING", 120_000), 0, 120_000),
    (Window("SESSION", 0), 1_700_000_000_123, 1_700_000_009_999),
])
def test_windowed_keys_round_trip_as_kafka_streams_writes_them(window: Window, start: int, end: int) -> None:
    data = windowed.encode_key(b"truck-1", window, start, end)
    if window.kind == "SESSION":       # SessionKeySchema: key, end, start
        assert data == b"truck-1" + end.to_bytes(8, "big") + start.to_bytes(8, "big")
    else:                              # WindowKeySchema: key, start (the end is start + size)
        assert data == b"truck-1" + start.to_bytes(8, "big")
    assert windowed.decode_key(data, window) == (b"truck-1", start, end)
    with pytest.raises(ValueError):
        windowed.decode_key(b"short", window)


def test_an_output_record_with_a_windowed_key_reads_back_into_a_row(engine: Engine) -> None:
    engine.execute(SOURCES)
    table = engine.metastore.require("TWT")
    store = StateStore(["ID"], True, ["ID", "WINDOWSTART", "WINDOWEND", "N", "TOP"],
                       ["STRING", "BIGINT", "BIGINT", "BIGINT", "DOUBLE"])
    key = windowed.encode_key(b"t1", Window("HOPPING", 120_000), 60_000)
    row = decode_output(key, json.dumps({"N": 3, "TOP": 88.5}).encode(), table, store, table.window)
    assert row == {"ID": "t1", "WINDOWSTART": 60_000, "WINDOWEND": 180_000, "N": 3, "TOP": 88.5}
    assert decode_output(key, None, table, store, table.window) == {"ID": "t1", "WINDOWSTART": 60_000,
                                                                    "WINDOWEND": 180_000, "__deleted": True}
    assert decode_output(b"abc", b"{}", table, store, table.window) is None       # too short for a window


def test_windowed_sources_are_described_as_windowed(engine: Engine) -> None:
    engine.execute(SOURCES)
    shown = {s["name"]: s["isWindowed"] for s in engine.execute("SHOW STREAMS;")[0]["streams"]}
    assert shown == {"S": False, "O": False, "TWS": True, "SWS": True}
    described = {n: engine.execute(f"DESCRIBE {n};")[0]["sourceDescription"] for n in ("TWS", "SWS", "TWT")}
    assert {n: d["windowType"] for n, d in described.items()} == {"TWS": "TUMBLING", "SWS": "SESSION",
                                                                  "TWT": "HOPPING"}
    assert engine.metastore.require("TWS").window == Window("TUMBLING", 60_000)
    # the window is part of the logged statement, so a replay rebuilds it
    assert "WINDOW_SIZE='1 MINUTE'" in engine.commands.log[3].statement    # type: ignore[attr-defined]


def test_a_push_query_over_a_windowed_stream_decodes_the_window(engine: Engine) -> None:
    engine.execute(SOURCES)
    tq = engine.query("SELECT * FROM sws WHERE WINDOWEND - WINDOWSTART > 1000 EMIT CHANGES;")
    # SELECT * of a windowed source: the keys, the window bounds, the values
    assert tq.column_names == ["ID", "WINDOWSTART", "WINDOWEND", "N"]
    tq.close()
    sql = _spark(engine).sql_texts[-1]
    assert sql.startswith("SELECT `ID` AS `ID`, `WINDOWSTART` AS `WINDOWSTART`, `WINDOWEND` AS `WINDOWEND`, `N` AS")
    assert sql.endswith("WHERE ((`WINDOWEND` - `WINDOWSTART`) > 1000)")


def test_a_projection_of_a_windowed_stream_keeps_its_window(engine: Engine) -> None:
    engine.execute(SOURCES)
    out = engine.execute("CREATE STREAM starts AS SELECT * FROM sws WHERE WINDOWSTART = WINDOWEND;")
    assert out[0]["commandStatus"]["queryId"] == "CSAS_STARTS_6"
    plan, sql = engine.plans["CSAS_STARTS_6"]
    # a persistent query's SELECT *: the window stays in the key (ksqlDB's FinalProjectNode)
    assert [c.name for c in plan.sink.columns] == ["ID", "N"]
    assert plan.sink.window == Window("SESSION", 0)
    assert engine.execute("DESCRIBE starts;")[0]["sourceDescription"]["windowType"] == "SESSION"
    assert sql.endswith("`WINDOWSTART` AS `__windowstart`, `WINDOWEND` AS `__windowend` FROM ksql_csas_starts_6 "
                        "WHERE (`WINDOWSTART` = `WINDOWEND`)")
    # written back as the source's keys are: key bytes, end, start
    assert engine._key_sql(plan) == ("concat(CAST(CAST(`ID` AS STRING) AS BINARY), unhex(lpad(hex(`__windowend`), "
                                     "16, '0')), unhex(lpad(hex(`__windowstart`), 16, '0'))) AS key")
    engine.execute("CREATE STREAM fast AS SELECT id, n * 2 AS dbl, WINDOWSTART AS ws FROM tws;")
    plan, _ = engine.plans["CSAS_FAST_7"]
    assert [c.name for c in plan.sink.columns] == ["ID", "DBL", "WS"]
    assert engine._key_sql(plan) == ("concat(CAST(CAST(`ID` AS STRING) AS BINARY), unhex(lpad(hex(`__windowstart`), "
                                     "16, '0'))) AS key")


def test_an_aggregate_over_a_windowed_stream_rekeys_it(engine: Engine) -> None:
    engine.execute(SOURCES)
    engine.execute("CREATE TABLE totals AS SELECT id, SUM(n) AS total FROM tws GROUP BY id;")
    assert engine.metastore.require("TOTALS").window is None
    engine.execute("CREATE TABLE per_hour AS SELECT id, SUM(n) AS total FROM tws WINDOW TUMBLING (SIZE 1 HOUR) "
                   "GROUP BY id;")
    assert engine.metastore.require("PER_HOUR").window == Window("TUMBLING", 3_600_000)


@pytest.mark.parametrize("statement, message", [
    ("CREATE STREAM re AS SELECT * FROM tws PARTITION BY n;",
     "Implicit repartitioning of windowed sources is not supported. See https://github.com/confluentinc/ksql/issues/"
     "4385."),
    ("CREATE TABLE y AS SELECT id, n FROM twt;", "KSQL does not support persistent queries on windowed tables."),
    ("CREATE TABLE y AS SELECT id, COUNT(*) AS c FROM twt GROUP BY id;",
     "KSQL does not support persistent queries on windowed tables."),
    ("INSERT INTO tws (id, n) VALUES ('a', 1);", "Cannot insert values into windowed stream/table!"),
    ("CREATE STREAM j AS SELECT s.id, tws.n FROM s JOIN tws WITHIN 1 MINUTE ON s.id = tws.id;",
     "Can not join windowed source to non-windowed source.\nS is not windowed\nTWS is TUMBLING windowed"),
    ("SELECT * FROM twt JOIN t ON twt.id = t.id EMIT CHANGES;",
     "Can not join windowed source to non-windowed source.\nTWT is HOPPING windowed\nT is not windowed"),
    ("SELECT id, COUNT(*) AS n FROM tws GROUP BY id;",
     "Pull queries don't support GROUP BY clauses. See https://cnfl.io/queries for more info.\n"
     "Add EMIT CHANGES if you intended to issue a push query."),
    ("INSERT INTO tws SELECT id, n FROM sws;", "Incompatible key format between results and sink: the sink TWS is "
                                               "TUMBLING windowed, the results are SESSION windowed."),
    ("INSERT INTO tws SELECT id, CAST(v AS BIGINT) AS n FROM s;",
     "Incompatible key format between results and sink: the sink TWS is TUMBLING windowed, the results are not "
     "windowed."),
])
def test_windowed_source_refusals(engine: Engine, statement: str, message: str) -> None:
    engine.execute(SOURCES)
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    assert info.value.message.startswith(message), info.value.message


def test_insert_into_a_windowed_stream_from_one_of_the_same_window(engine: Engine) -> None:
    engine.execute(SOURCES + "CREATE STREAM tws2 (id STRING KEY, n BIGINT) WITH (KAFKA_TOPIC='tw2', "
                   "VALUE_FORMAT='JSON', WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 MINUTE');")
    out = engine.execute("INSERT INTO tws SELECT id, n FROM tws2 WHERE n > 1;")
    plan, _ = engine.plans[out[0]["commandStatus"]["queryId"]]
    assert engine._key_sql(plan).endswith("unhex(lpad(hex(`__windowstart`), 16, '0'))) AS key")


def test_a_projection_partitioned_by_its_own_key_is_not_repartitioned(engine: Engine) -> None:
    engine.execute(SOURCES)
    engine.execute("CREATE STREAM same AS SELECT * FROM tws PARTITION BY id;")
    assert engine.metastore.require("SAME").window == Window("TUMBLING", 60_000)


class Record:
    def __init__(self, key: bytes, value: bytes | None) -> None:
        self.key, self.value = key, value


class TopicDouble:
    """The table's topic at the Consumer/KafkaClient boundary: one partition of records."""
    records: list[Record] = []

    def __init__(self, *a: Any, **kw: Any) -> None:
        self.read = False

    def __enter__(self) -> "TopicDouble":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def partitions_for(self, topic: str) -> list[int]:
        return [0]

    def assign(self, tps: list[Any]) -> None:
        pass

    def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: len(self.records) for tp in tps}

    def seek_to_beginning(self, tps: list[Any]) -> None:
        pass

    def position(self, tp: Any) -> int:
        return len(self.records) if self.read else 0

    def poll(self, timeout_ms: int) -> list[Record]:
        self.read = True
        return list(self.records)

    def close(self, autocommit: bool = True) -> None:
        pass


def test_a_pull_query_over_a_windowed_table_reads_its_topic(engine: Engine, monkeypatch: Any) -> None:
    engine.execute(SOURCES)
    hopping = Window("HOPPING", 120_000)

    def record(key: str, start: int, value: dict[str, Any] | None) -> Record:
        return Record(windowed.encode_key(key.encode(), hopping, start),
                      None if value is None else json.dumps(value).encode())
    TopicDouble.records = [record("t1", 0, {"N": 1, "TOP": 50.0}), record("t1", 60_000, {"N": 1, "TOP": 70.0}),
                           record("t1", 0, {"N": 2, "TOP": 90.0}),           # the window's latest row wins
                           record("t2", 0, {"N": 1, "TOP": 10.0}), record("t2", 0, None)]    # deleted
    monkeypatch.setattr(engine_mod, "Consumer", TopicDouble)
    monkeypatch.setattr(engine_mod, "KafkaClient", TopicDouble)
    tq = engine.query("SELECT * FROM twt WHERE id = 't1';")
    assert tq.column_names == ["ID", "WINDOWSTART", "WINDOWEND", "N", "TOP"]
    assert tq.column_types == ["STRING", "BIGINT", "BIGINT", "BIGINT", "DOUBLE"]
    assert tq.rows == [["t1", 0, 120_000, 2, 90.0], ["t1", 60_000, 180_000, 1, 70.0]]
    tq = engine.query("SELECT id, top FROM twt WHERE id = 't1' AND WINDOWSTART >= 60000;")
    assert tq.rows == [["t1", 70.0]]
    assert engine.query("SELECT * FROM twt WHERE id = 't2';").rows == []
