"""CREATE SOURCE STREAM | CREATE SOURCE TABLE (ksqlDB 0.22+) without brokers or Spark: read-only
sources that no query or INSERT writes, a SOURCE TABLE materialized by its own ``CST_`` query so
pull queries work on it, SHOW/DESCRIBE/DROP as ksqlDB words them, and the command-topic replay."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from tests.unit.sql.test_sql_engine_statements import FakeProducer, FakeSpark, Frame, engine  # noqa: F401  (the fixture)


class Row(dict):                                          # type: ignore[type-arg]
    def asDict(self) -> dict[str, Any]:
        return dict(self)


class Batch:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = [Row(r) for r in rows]

    def collect(self) -> list[Row]:
        return self.rows


@pytest.fixture
def batches(monkeypatch: Any) -> list[Callable[[Any, int], None]]:
    """Each foreachBatch function the engine hands Spark, in order."""
    found: list[Callable[[Any, int], None]] = []
    orig = Frame.__getattr__

    def spy(self: Frame, name: str) -> Any:
        if name == "foreachBatch":
            return lambda f: found.append(f) or self
        return orig(self, name)
    monkeypatch.setattr(Frame, "__getattr__", spy)
    return found


SOURCE_TABLE = "CREATE SOURCE TABLE st (id STRING PRIMARY KEY, v INT) WITH (KAFKA_TOPIC='st', VALUE_FORMAT='JSON');"
SOURCE_STREAM = "CREATE SOURCE STREAM ss (id STRING KEY, v INT) WITH (KAFKA_TOPIC='ss', VALUE_FORMAT='JSON');"


def _record(key: str, v: int | None, offset: int, partition: int = 0) -> dict[str, Any]:
    return {"ID": key, "V": v, "ROWTIME": 1000 + offset, "ROWPARTITION": partition, "ROWOFFSET": offset,
            "__tombstone": v is None}


def _pull(e: Engine, text: str) -> list[list[Any]]:
    return e.query(text).rows


def test_a_source_table_is_materialized_by_its_own_query_for_pull_queries(
        engine: Engine, batches: list[Callable[[Any, int], None]]) -> None:
    out = engine.execute(SOURCE_TABLE)
    assert out[0]["commandStatus"] == {"status": "SUCCESS", "message": "Created query with ID CST_ST_3",
                                       "queryId": "CST_ST_3"}
    spark = engine.spark
    assert isinstance(spark, FakeSpark)
    assert spark.options["subscribe"] == "st" and spark.options["startingOffsets"] == "earliest"
    [each_batch] = batches
    # a batch's records apply in offset order: the later row of a key wins, a tombstone deletes
    each_batch(Batch([_record("b", 2, 1), _record("a", 1, 0), _record("c", 3, 2), _record("a", 4, 3)]), 0)
    assert _pull(engine, "SELECT * FROM st;") == [["a", 4], ["b", 2], ["c", 3]]
    each_batch(Batch([_record("b", None, 4), _record("c", 5, 0, partition=1)]), 1)
    assert _pull(engine, "SELECT * FROM st WHERE id = 'c';") == [["c", 5]]
    assert _pull(engine, "SELECT v FROM st;") == [[4], [5]]

    show = engine.execute("SHOW QUERIES;")[0]["queries"]
    assert [(q["id"], q["sinks"], q["sinkKafkaTopics"], q["queryType"]) for q in show] == [
        ("CST_ST_3", [], [], "PERSISTENT")]
    tables = engine.execute("SHOW TABLES;")[0]["tables"]
    assert [t["name"] for t in tables] == ["ST", "T"]
    described = engine.execute("DESCRIBE st;")[0]["sourceDescription"]
    assert described["readQueries"] == [{"id": "CST_ST_3"}] and described["writeQueries"] == []
    assert described["statement"] == SOURCE_TABLE and described["type"] == "TABLE"
    explained = engine.execute("EXPLAIN CST_ST_3;")[0]["queryDescription"]
    assert explained["id"] == "CST_ST_3" and explained["statementText"] == SOURCE_TABLE


def test_a_plain_table_stays_not_queryable(engine: Engine) -> None:
    with pytest.raises(KsqlError) as info:
        engine.query("SELECT * FROM t;")
    assert info.value.message.startswith("The `T` table isn't queryable. To derive a queryable table, you can do "
                                         "'CREATE TABLE QUERYABLE_T AS SELECT * FROM T'.")


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO ss SELECT id, v FROM s;", "Cannot insert into read-only stream: SS"),
    ("CREATE OR REPLACE STREAM ss AS SELECT id, v FROM s;", "Cannot insert into read-only stream: SS"),
    ("CREATE OR REPLACE SOURCE STREAM x (v INT) WITH (KAFKA_TOPIC='x', VALUE_FORMAT='JSON');",
     "Cannot add stream 'X': CREATE OR REPLACE is not supported on source streams."),
    ("CREATE OR REPLACE STREAM ss (id STRING KEY, v INT) WITH (KAFKA_TOPIC='ss', VALUE_FORMAT='JSON');",
     "Cannot add stream 'SS': CREATE OR REPLACE is not supported on source streams."),
    ("CREATE OR REPLACE TABLE st (id STRING PRIMARY KEY, v INT) WITH (KAFKA_TOPIC='st', VALUE_FORMAT='JSON');",
     "Cannot add table 'ST': CREATE OR REPLACE is not supported on source tables."),
    ("INSERT INTO st SELECT id, v FROM s;", "INSERT INTO can only be used to insert into a stream. ST is a table."),
    ("DROP STREAM ss DELETE TOPIC;", "Cannot delete topic for read-only source: SS"),
    ("DROP TABLE st DELETE TOPIC;", "Cannot delete topic for read-only source: ST"),
    ("CREATE SOURCE STREAM x AS SELECT * FROM s;", "line 1:24: mismatched input 'AS' expecting {'(', 'WITH'}"),
])
def test_read_only_refusals(engine: Engine, monkeypatch: Any, statement: str, message: str) -> None:
    engine.execute(SOURCE_STREAM + SOURCE_TABLE)
    logged = len(engine.commands.read_all())
    with pytest.raises(KsqlError) as info:
        engine.execute(statement)
    assert info.value.message == message
    assert len(engine.commands.read_all()) == logged            # nothing refused reaches the command topic
    assert engine.metastore.require("SS").read_only and engine.metastore.require("ST").read_only


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO ss VALUES ('k', 1);", "Cannot insert values into read-only stream: SS"),
    ("INSERT INTO st VALUES ('k', 1);", "Cannot insert values into read-only table: ST"),
])
def test_insert_values_into_a_source_is_refused(engine: Engine, monkeypatch: Any, statement: str,
                                                message: str) -> None:
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    FakeProducer.sent = []
    engine.execute(SOURCE_STREAM + SOURCE_TABLE)
    with pytest.raises(KsqlError) as info:
        engine.execute(statement)
    assert info.value.message == message and FakeProducer.sent == []
    with pytest.raises(KsqlError, match=message):              # nor through /inserts-stream
        engine.inserts_subscriber(statement.split()[2])


def test_queries_may_read_a_source_and_drop_takes_its_materializing_query(
        engine: Engine, batches: list[Callable[[Any, int], None]]) -> None:
    engine.execute(SOURCE_STREAM + SOURCE_TABLE)
    out = engine.execute("CREATE STREAM big AS SELECT id, v FROM ss WHERE v > 1;"
                         "CREATE TABLE n AS SELECT v, COUNT(*) AS c FROM st GROUP BY v;")
    assert [o["commandStatus"]["queryId"] for o in out] == ["CSAS_BIG_5", "CTAS_N_6"]
    with pytest.raises(KsqlError) as info:
        engine.execute("DROP TABLE st;")
    assert info.value.message == ("Cannot drop ST.\nThe following queries read from this source: [CTAS_N_6].\n"
                                  "The following queries write into this source: [].\n"
                                  "You need to terminate them before dropping ST.")
    engine.execute("TERMINATE CTAS_N_6; DROP TABLE n; DROP TABLE st;")
    assert engine.metastore.queries["CST_ST_4"].state == "TERMINATED" and "ST" not in engine.stores
    assert [q["id"] for q in engine.execute("SHOW QUERIES;")[0]["queries"]] == ["CSAS_BIG_5"]
    with pytest.raises(KsqlError, match="ST does not exist"):
        engine.query("SELECT * FROM st;")


def test_terminating_the_materializing_query_ends_pull_queries(
        engine: Engine, batches: list[Callable[[Any, int], None]]) -> None:
    engine.execute(SOURCE_TABLE + "TERMINATE CST_ST_3;")
    with pytest.raises(KsqlError, match="The `ST` table isn't queryable"):
        engine.query("SELECT * FROM st;")
    assert engine.execute("DROP TABLE st;")[0]["commandStatus"]["message"] == "Source `ST` (topic: st) was dropped."


def test_replay_rebuilds_sources_and_the_materializing_query(
        engine: Engine, batches: list[Callable[[Any, int], None]]) -> None:
    engine.execute(SOURCE_STREAM + SOURCE_TABLE + "DROP TABLE st;" + SOURCE_TABLE)
    again = Engine(engine.config, FakeSpark())
    again.commands = engine.commands
    assert again.start() == 7
    assert again.metastore.require("SS").read_only and again.metastore.require("ST").read_only
    assert {q.id: q.state for q in again.metastore.queries.values()} == {"CST_ST_4": "TERMINATED",
                                                                           "CST_ST_6": "RUNNING"}
    batches[-1](Batch([_record("a", 1, 0)]), 0)
    assert _pull(again, "SELECT * FROM st;") == [["a", 1]]
    with pytest.raises(KsqlError, match="Cannot insert values into read-only stream: SS"):
        again.execute("INSERT INTO ss VALUES ('k', 1);")


def test_a_resumed_source_table_reads_its_topic_up_to_its_checkpoint_before_it_goes_on(
        engine: Engine, batches: list[Callable[[Any, int], None]], monkeypatch: Any, tmp_path: Any) -> None:
    """Resumed, a SOURCE TABLE's query first reads its topic through Spark up to where its last
    committed batch ended (the table as that batch left it, decoded as the stream decodes), then
    goes on from there: no record applied twice, so a pull query never sees a key's older row."""
    engine.config = engine.config.__class__(listeners=engine.config.listeners, state_dir=str(tmp_path))
    checkpoint = tmp_path / engine.config.service_id / "CST_ST_3"                  # its checkpoint
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    (checkpoint / "offsets" / "4").write_text('v1\n{}\n{"st": {"0": 3}}\n')
    (checkpoint / "commits" / "4").write_text("v1\n{}\n")
    read: list[str | None] = []

    def read_changes(self: Engine, session: Any, table: Any, state: Any, until: str | None = None) -> Any:
        read.append(until)
        state.apply([_record("a", 1, 0), _record("b", 2, 1), _record("a", 3, 2)])     # offsets 0-2
        return None
    monkeypatch.setattr(Engine, "_read_changes", read_changes)
    engine.execute(SOURCE_TABLE)
    assert read == ['{"st": {"0": 3}}'] and _pull(engine, "SELECT * FROM st;") == [["a", 3], ["b", 2]]
    # the stream goes on at offset 3, where the last committed batch ended
    batches[-1](Batch([_record("b", None, 4), _record("a", 4, 3)]), 5)
    assert _pull(engine, "SELECT * FROM st;") == [["a", 4]]


@pytest.mark.parametrize("statement, refusal", [
    ("SELECT * FROM ss JOIN st ON ss.id = st.id;", "JOIN clauses."),
    ("SELECT id, COUNT(*) AS n FROM ss WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;", "WINDOW clauses."),
    ("SELECT v, COUNT(*) AS n FROM st GROUP BY v;", "GROUP BY clauses."),
    ("SELECT * FROM ss PARTITION BY v;", "PARTITION BY clauses."),
    ("SELECT * FROM st EMIT FINAL;", "EMIT clauses."),
])
def test_pull_queries_are_refused_as_ksqldbs_validator_refuses_them(engine: Engine, statement: str,
                                                                    refusal: str) -> None:
    """ksqlDB's PullQueryValidator, on tables and streams alike: the first clause a pull query may
    not have, named, then the syntax help; nothing is planned or read."""
    engine.execute(SOURCE_STREAM + SOURCE_TABLE)
    with pytest.raises(KsqlError) as info:
        engine.query(statement)
    assert info.value.message == (f"Pull queries don't support {refusal} See https://cnfl.io/queries for more info.\n"
                                  "Add EMIT CHANGES if you intended to issue a push query.")
