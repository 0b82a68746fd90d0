"""The engine's statements without brokers or Spark: a recording double stands at the Spark
boundary (it keeps the Spark SQL text and the reader options the engine hands it) and another at
the command topic. INSERT INTO ... SELECT, INSERT VALUES, SET/UNSET within a request, EXPLAIN and
aggregating push queries go through the same plan as CREATE ... AS SELECT; ksqlDB's refusals."""
from __future__ import annotations

import json
from concurrent.futures import Future
from typing import Any

import pytest

from kafkalite.sql import engine as engine_mod
from kafkalite.sql.command_topic import Command
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from tests.unit.sql.conftest import ClientDouble


class Field:
    def __init__(self, name: str) -> None:
        self.name = name
        self.dataType = self

    def simpleString(self) -> str:
        return "bigint" if self.name.startswith("KSQL_COL") else "string"


class Frame:
    """A Spark DataFrame / reader / writer / streaming query double: every call chains, the
    calls the engine's plan depends on are recorded."""

    def __init__(self, spark: "FakeSpark", columns: list[str] | None = None) -> None:
        self.spark = spark
        self.columns = columns or []

    def __getattr__(self, name: str) -> Any:
        if name in ("writeStream", "write"):
            return self
        if name == "sparkSession":
            return self.spark

        def call(*args: Any, **kwargs: Any) -> Frame:
            if name == "option":
                self.spark.options[args[0]] = args[1]
            if name == "select":
                return Frame(self.spark, [a.strip("`") for a in args])
            return self
        return call

    @property
    def schema(self) -> Any:
        return type("Schema", (), {"fields": [Field(c) for c in self.columns]})()

    @property
    def _jdf(self) -> Any:
        return type("J", (), {"queryExecution": lambda _: type("Q", (), {"toString": lambda _: "== Plan =="})()})()

    @property
    def _jsq(self) -> Any:
        return type("J", (), {"explainInternal": lambda _, extended: "== Running plan =="})()

    isActive = True

    def processAllAvailable(self) -> None:
        pass

    def collect(self) -> list[Any]:
        return []


class FakeConf:
    """The session's runtime settings (``spark.conf``): get and set, as the engine uses them."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str | None) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value


class FakeSpark:
    def __init__(self) -> None:
        self.sql_texts: list[str] = []
        self.options: dict[str, str] = {}
        self.conf = FakeConf()
        self.active: list[Any] = []            # the JVM sessions made a thread's active one
        self._jsparkSession = object()
        self._jvm = type("JVM", (), {"SparkSession": type("S", (), {"setActiveSession": self.active.append})})()
        self.readStream = Frame(self)
        self.read = Frame(self)
        self.udf = self                        # the session's udf.register (the processing log's function)
        self.dropped_views: list[str] = []
        self.catalog = type("Catalog", (), {"dropTempView": lambda _, name: self.dropped_views.append(name)})()

    def register(self, name: str, f: Any, return_type: Any = None) -> None:
        pass

    def sql(self, text: str) -> Frame:
        self.sql_texts.append(text)
        return Frame(self)

    def createDataFrame(self, rows: list[Any], schema: Any) -> Frame:
        return Frame(self)


class FakeCommands:
    topic = "_confluent-ksql-default__command_topic"

    def __init__(self) -> None:
        self.log: list[Command] = []

    def ensure(self) -> None:
        pass

    def append(self, command_id: str, statement: str, properties: dict[str, Any]) -> int:
        self.log.append(Command(command_id, statement, properties, len(self.log)))
        return len(self.log) - 1

    def read_all(self) -> list[Command]:
        return list(self.log)

    def close(self) -> None:
        pass


@pytest.fixture
def engine(monkeypatch: Any) -> Engine:
    e = Engine(KsqlConfig(listeners=("http://127.0.0.1:18088",)), FakeSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_ensure_sink_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_join_start", lambda self, *a: None)      # a table-table join's start offsets
    e.execute("CREATE STREAM s (id STRING KEY, v INT, name STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
              "CREATE STREAM o (id STRING KEY, v INT) WITH (KAFKA_TOPIC='o', VALUE_FORMAT='JSON');"
              "CREATE TABLE t (id STRING PRIMARY KEY, v INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');")
    return e


def _spark(e: Engine) -> FakeSpark:
    spark = e.spark
    assert isinstance(spark, FakeSpark)
    return spark


def test_insert_into_select_is_a_persistent_query_into_the_stream(engine: Engine) -> None:
    out = engine.execute("INSERT INTO o SELECT id, v FROM s WHERE v > 1;")
    assert out[0]["@type"] == "currentStatus" and out[0]["commandId"] == "stream/`O`/create"
    assert out[0]["commandStatus"]["queryId"] == "INSERTQUERY_3"
    assert engine.commands.log[-1].statement == "INSERT INTO o SELECT id, v FROM s WHERE v > 1;"  # type: ignore
    assert "WHERE (`V` > 1)" in _spark(engine).sql_texts[-1]
    shown = engine.execute("SHOW QUERIES;")[0]["queries"]
    assert [(q["id"], q["sinks"], q["sinkKafkaTopics"]) for q in shown] == [("INSERTQUERY_3", ["O"], ["o"])]
    with pytest.raises(KsqlError, match=r"Cannot drop O.\nThe following queries read from this source: \[\]."
                                        r"\nThe following queries write into this source: \[INSERTQUERY_3\]"):
        engine.execute("DROP STREAM o;")


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO o SELECT id, v AS w FROM s;", "Incompatible schema between results and sink.\n"
     "Result schema is `ID` STRING KEY, `W` INT\nSink schema is `ID` STRING KEY, `V` INT"),
    ("INSERT INTO o SELECT id, name AS v FROM s;", "Incompatible schema between results and sink."),
    ("INSERT INTO o SELECT * FROM s;", "Incompatible schema between results and sink."),
    ("INSERT INTO t SELECT id, v FROM s;", "INSERT INTO can only be used to insert into a stream. T is a table."),
    ("INSERT INTO nope SELECT id, v FROM s;", "NOPE does not exist."),
    ("INSERT INTO o SELECT id, COUNT(*) AS v FROM s GROUP BY id;", "Invalid result type. Your SELECT query "
     "produces a TABLE."),
])
def test_insert_into_refusals(engine: Engine, statement: str, message: str) -> None:
    before = len(engine.commands.log)  # type: ignore[attr-defined]
    with pytest.raises(KsqlError) as info:
        engine.execute(statement)
    assert info.value.message.startswith(message) and info.value.statement == statement
    assert len(engine.commands.log) == before                    # type: ignore[attr-defined]  # nothing logged


def test_format_sets_the_key_and_value_formats_of_a_source_and_of_a_query_output(engine: Engine) -> None:
    """``FORMAT`` is both formats, in a CREATE and in a CREATE ... AS SELECT (whose output otherwise
    takes its source's formats); beside ``KEY_FORMAT`` or ``VALUE_FORMAT`` it is refused as ksqlDB
    refuses it, and nothing is logged."""
    engine.execute("CREATE STREAM both_json (id STRING KEY, v INT) WITH (KAFKA_TOPIC='bj', FORMAT='JSON');"
                   "CREATE STREAM out WITH (KAFKA_TOPIC='out', FORMAT='DELIMITED') AS SELECT id, v FROM both_json;"
                   "CREATE STREAM kept WITH (KAFKA_TOPIC='kept') AS SELECT id, v FROM both_json;")
    formats = {n: (engine.metastore.sources[n].key_format, engine.metastore.sources[n].value_format)
               for n in ("BOTH_JSON", "OUT", "KEPT")}
    assert formats == {"BOTH_JSON": ("JSON", "JSON"), "OUT": ("DELIMITED", "DELIMITED"), "KEPT": ("JSON", "JSON")}
    before = len(engine.commands.log)  # type: ignore[attr-defined]
    for statement, other in (("CREATE STREAM x (id STRING KEY) WITH (KAFKA_TOPIC='x', FORMAT='JSON', "
                              "KEY_FORMAT='KAFKA');", "KEY_FORMAT"),
                             ("CREATE STREAM y WITH (KAFKA_TOPIC='y', FORMAT='JSON', VALUE_FORMAT='JSON') AS "
                              "SELECT * FROM s;", "VALUE_FORMAT")):
        with pytest.raises(KsqlError) as info:
            engine.execute(statement)
        assert info.value.message == (f"Cannot supply both '{other}' and 'FORMAT' properties, as 'FORMAT' sets both "
                                      "key and value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and "
                                      "'VALUE_FORMAT'.")
    assert len(engine.commands.log) == before  # type: ignore[attr-defined]


def test_a_failing_statement_reports_the_entities_before_it(engine: Engine) -> None:
    with pytest.raises(KsqlError) as info:
        engine.execute("SHOW STREAMS; DROP STREAM nope;")
    body = info.value.body()
    assert (body["@type"], body["error_code"], body["statementText"]) == ("statement_error", 40001,
                                                                          "DROP STREAM nope;")
    assert [e["@type"] for e in body["entities"]] == ["streams"]


def test_set_applies_to_the_later_statements_of_the_request(engine: Engine) -> None:
    out = engine.execute("SET 'auto.offset.reset'='earliest'; CREATE STREAM a AS SELECT * FROM s;"
                         "UNSET 'auto.offset.reset'; CREATE STREAM b AS SELECT * FROM s; SHOW PROPERTIES;")
    assert [e["@type"] for e in out] == ["currentStatus", "currentStatus", "properties"]   # SET: no entity
    log = engine.commands.log                                      # type: ignore[attr-defined]
    assert (log[-2].statement, log[-2].streams_properties) == ("CREATE STREAM a AS SELECT * FROM s;",
                                                               {"auto.offset.reset": "earliest"})
    assert log[-1].streams_properties == {}
    shown = engine.execute("SHOW PROPERTIES;", {"auto.offset.reset": "earliest"})[0]
    assert shown["overwrittenProperties"] == ["ksql.streams.auto.offset.reset"]
    assert {"name": "ksql.streams.auto.offset.reset", "scope": "KSQL", "value": "earliest"} in shown["properties"]


def test_show_properties_lists_the_servers_properties_with_their_defaults() -> None:
    """As ksqlDB's ListPropertiesExecutor: every ksql.* property the server honours, defaults
    included, merged with the request's, and ``defaultProperties`` naming those at their default."""
    config = KsqlConfig.from_properties({"listeners": "http://127.0.0.1:18088", "ksql.service.id": "svc_",
                                         "ksql.streams.commit.interval.ms": "500",
                                         "ksql.fail.on.deserialization.error": "true",
                                         "ksql.streams.num.stream.threads": "2", "ssl.key.password": "secret"})
    e = Engine(config, FakeSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    shown = e.execute("SHOW PROPERTIES;", {"ksql.streams.commit.interval.ms": "2000"})[0]
    values = {p["name"]: p["value"] for p in shown["properties"]}
    assert {p["scope"] for p in shown["properties"]} == {"KSQL"}
    assert (values["ksql.service.id"], values["ksql.fail.on.deserialization.error"],
            values["ksql.streams.num.stream.threads"], values["ksql.streams.auto.offset.reset"],
            values["ksql.query.retry.backoff.initial.ms"], values["ksql.insert.into.values.enabled"]) == (
        "svc_", "true", "2", "latest", "15000", "true")
    assert values["ksql.streams.commit.interval.ms"] == "2000"          # the request's value wins
    assert not any("ssl" in name for name in values)                   # security properties are not listed
    assert shown["overwrittenProperties"] == ["ksql.streams.commit.interval.ms"]
    # a request setting a property to the server's own value does not overwrite it (ksqlDB compares values)
    same = e.execute("SHOW PROPERTIES;", {"ksql.streams.commit.interval.ms": "500", "auto.offset.reset": "earliest"})[0]
    assert same["overwrittenProperties"] == ["ksql.streams.auto.offset.reset"]
    defaults = set(shown["defaultProperties"])
    assert {"ksql.streams.auto.offset.reset", "ksql.query.retry.backoff.initial.ms",
            "ksql.streams.commit.interval.ms"} <= defaults
    assert not defaults & {"ksql.service.id", "ksql.fail.on.deserialization.error", "ksql.streams.num.stream.threads"}


def test_explain_a_query_id_and_a_statement(engine: Engine) -> None:
    engine.execute("CREATE STREAM fast AS SELECT id, v * 2 AS dbl FROM s WHERE v > 80;")
    described = engine.execute("EXPLAIN CSAS_FAST_3;")[0]
    assert described["@type"] == "queryDescription" and described["statementText"] == "EXPLAIN CSAS_FAST_3;"
    d = described["queryDescription"]
    assert set(d) == {"id", "statementText", "windowType", "fields", "sources", "sinks", "topology",
                      "executionPlan", "overriddenProperties", "ksqlHostQueryStatus", "queryType", "queryErrors",
                      "tasksMetadata", "state", "consumerGroupId"}
    assert (d["id"], d["sources"], d["sinks"], d["queryType"], d["state"]) == (
        "CSAS_FAST_3", ["S"], ["FAST"], "PERSISTENT", "RUNNING")
    assert d["statementText"] == "CREATE STREAM fast AS SELECT id, v * 2 AS dbl FROM s WHERE v > 80;"
    assert d["ksqlHostQueryStatus"] == {"127.0.0.1:18088": "RUNNING"}
    assert [f["name"] for f in d["fields"]] == ["ID", "DBL"] and d["fields"][0]["type"] == "KEY"
    assert d["topology"] == "== Running plan ==" and "(`V` * 2) AS `DBL`" in d["executionPlan"]
    logged = len(engine.commands.log)                              # type: ignore[attr-defined]
    planned = engine.execute("EXPLAIN CREATE TABLE c AS SELECT id, COUNT(*) FROM s "
                             "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY id;")[0]["queryDescription"]
    assert (planned["id"], planned["windowType"], planned["topology"]) == ("CTAS_C_4", "TUMBLING", "== Plan ==")
    assert planned["ksqlHostQueryStatus"] == {} and planned["state"] is None
    assert len(engine.commands.log) == logged and engine.metastore.get("C") is None      # type: ignore
    with pytest.raises(KsqlError, match="Query with id:CSAS_NOPE_1 does not exist, use SHOW QUERIES"):
        engine.execute("EXPLAIN CSAS_NOPE_1;")
    with pytest.raises(KsqlError, match="The provided statement does not run a ksql query"):
        engine.execute("EXPLAIN SELECT * FROM t WHERE id = 'a';")


def test_replay_rebuilds_insert_queries_with_the_same_ids(engine: Engine) -> None:
    engine.execute("INSERT INTO o SELECT id, v FROM s; TERMINATE INSERTQUERY_3; INSERT INTO o SELECT id, v FROM s;")
    again = Engine(engine.config, FakeSpark())
    again.commands = engine.commands
    assert again.start() == 6
    assert {q.id: q.state for q in again.metastore.queries.values()} == {
        "INSERTQUERY_3": "TERMINATED", "INSERTQUERY_5": "RUNNING"}
    assert list(again.plans) == ["INSERTQUERY_5"] and again.last_sequence == 5


def test_aggregating_push_query_runs_in_update_mode(engine: Engine, monkeypatch: Any) -> None:
    modes: list[str] = []
    orig = Frame.__getattr__

    conf = _spark(engine).conf
    allow_multiple_at_start: list[str | None] = []

    def spy(self: Frame, name: str) -> Any:
        if name == "outputMode":
            return lambda mode: modes.append(mode) or self
        if name == "start":
            allow_multiple_at_start.append(conf.get(engine_mod.ALLOW_MULTIPLE))
        return orig(self, name)
    monkeypatch.setattr(Frame, "__getattr__", spy)
    monkeypatch.setattr(engine_mod.threading, "Thread", lambda **kw: type("T", (), {"start": lambda _: None})())
    tq = engine.query("SELECT id, WINDOWSTART, WINDOWEND AS we, COUNT(*) FROM s WINDOW TUMBLING (SIZE 10 SECONDS) "
                      "GROUP BY id EMIT CHANGES;")
    assert tq.push and tq.column_names == ["ID", "WINDOWSTART", "WE", "KSQL_COL_3"] and modes == ["update"]
    # a windowed aggregate over one stream starts with Spark's late filter on the current
    # micro-batch's watermark (Engine._start_stream); the session's setting is put back after
    assert allow_multiple_at_start == ["false"] and conf.get(engine_mod.ALLOW_MULTIPLE) is None
    assert _spark(engine).active == [_spark(engine)._jsparkSession]     # the starting thread's session
    sql = _spark(engine).sql_texts[-1]
    assert sql == ("SELECT `ID` AS `ID`, unix_millis(window(`ROWTIME`, '10000 milliseconds').start) AS `WINDOWSTART`, "
                   "unix_millis(window(`ROWTIME`, '10000 milliseconds').end) AS `WE`, count(*) AS `KSQL_COL_3`, "
                   "max(`ROWTIME`) AS `__rowtime`, window(`ROWTIME`, '10000 milliseconds') AS `__window` FROM ksql_" + tq.id.lower()
                   + " GROUP BY `ID`, window(`ROWTIME`, '10000 milliseconds')")
    tq.close()
    with pytest.raises(KsqlError, match="PARTITION BY is not supported in push queries"):
        engine.query("SELECT * FROM s PARTITION BY v EMIT CHANGES;")


class FakeProducer:
    """Acknowledges every record at once; counts the producers made and closed."""

    sent: list[tuple[str, Any, Any, int | None]] = []
    made: list["FakeProducer"] = []

    def __init__(self, *a: Any, **kw: Any) -> None:
        self.closed = False
        self.fail_with: BaseException | None = None           # the next send's outcome, if set
        FakeProducer.made.append(self)

    def send(self, topic: str, value: Any, key: Any, *, timestamp_ms: int | None = None,
             callback: Any = None) -> Future:
        if self.closed:
            raise RuntimeError("producer is closed")
        FakeProducer.sent.append((topic, key, value, timestamp_ms))
        f: Future = Future()
        if callback is not None:
            f.add_done_callback(callback)
        if self.fail_with is not None:
            f.set_exception(self.fail_with)
        else:
            f.set_result(None)
        return f

    def close(self, timeout: float) -> None:
        self.closed = True


def test_insert_values_produces_one_encoded_record(engine: Engine, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    FakeProducer.sent = []
    assert engine.execute("INSERT INTO s (ROWTIME, id, v, name) VALUES (1700000000000, 'k1', 7, 'it''s');") == []
    assert engine.execute("INSERT INTO s VALUES ('k2', 8, NULL);") == []
    topic, key, value, ts = FakeProducer.sent[0]
    assert (topic, key, json.loads(value), ts) == ("s", b"k1", {"V": 7, "NAME": "it's"}, 1700000000000)
    assert FakeProducer.sent[1][1:3] == (b"k2", b'{"V":8,"NAME":null}')
    engine.execute("CREATE STREAM d (id STRING KEY, x DOUBLE, ok BOOLEAN) WITH (KAFKA_TOPIC='d', "
                   "VALUE_FORMAT='DELIMITED');")
    engine.execute("INSERT INTO d (id, x, ok) VALUES ('a', 2, true);")
    assert FakeProducer.sent[-1][1:3] == (b"a", b"2.0,true")


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO s VALUES ('k', 1);", "Failed to insert values into 'S'. Expected a value for each column. "
                                       "Expected Columns: [ID, V, NAME]. Got ['k', 1]"),
    ("INSERT INTO s (id, nope) VALUES ('k', 1);", "Failed to insert values into 'S'. Column name `NOPE` does not exist."),
    ("INSERT INTO s (id, v) VALUES ('k', 'x');", "Failed to insert values into 'S'. Expected type INTEGER for field "
                                                 "`V` but got STRING(x)"),
    ("INSERT INTO s (id, ROWOFFSET) VALUES ('k', 1);", "Failed to insert values into 'S'. Inserting into column "
                                                       "`ROWOFFSET` is not allowed."),
    ("INSERT INTO t (v) VALUES (1);", "Failed to insert values into 'T'. Value for primary key column(s) ID is "
                                      "required for tables"),
    ("INSERT INTO nope VALUES (1);", "Cannot insert values into an unknown stream/table: `NOPE`"),
])
def test_insert_values_refusals(engine: Engine, monkeypatch: Any, statement: str, message: str) -> None:
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    FakeProducer.sent = []
    with pytest.raises(KsqlError) as info:
        engine.execute(statement)
    assert info.value.message == message and FakeProducer.sent == []


def test_stream_stream_join_plan(engine: Engine) -> None:
    out = engine.execute("CREATE STREAM j AS SELECT s.id AS id, name, o.v AS ov FROM s JOIN o "
                         "WITHIN (1 SECOND, 2 SECONDS) GRACE PERIOD 3 SECONDS ON s.id = o.id WHERE s.v > 0;")
    assert out[0]["commandStatus"]["queryId"] == "CSAS_J_3"
    sql = _spark(engine).sql_texts[-1]
    assert sql == ("SELECT `S`.`ID` AS `ID`, `S`.`NAME` AS `NAME`, `O`.`V` AS `OV`, "
                   "greatest(`S`.`ROWTIME`, `O`.`ROWTIME`) AS `__rowtime` FROM ksql_csas_j_3_0 AS `S` "
                   "INNER JOIN ksql_csas_j_3_1 AS `O` ON (`S`.`ID` = `O`.`ID`) "
                   "AND `O`.`ROWTIME` >= `S`.`ROWTIME` - INTERVAL 1000 MILLISECONDS "
                   "AND `O`.`ROWTIME` <= `S`.`ROWTIME` + INTERVAL 2000 MILLISECONDS WHERE (`S`.`V` > 0)")
    j = engine.metastore.require("J")
    assert [(c.name, str(c.type), c.key) for c in j.columns] == [
        ("ID", "STRING", True), ("NAME", "STRING", False), ("OV", "INT", False)]
    assert engine.metastore.readers_and_writers("O") == (["CSAS_J_3"], [])
    star = engine.execute("EXPLAIN SELECT * FROM s x LEFT JOIN o WITHIN 1 MINUTE ON x.id = o.id EMIT CHANGES;")
    fields = star[0]["queryDescription"]["fields"]
    assert [f["name"] for f in fields] == ["X_ID", "X_V", "X_NAME", "O_ID", "O_V"]
    assert "LEFT OUTER JOIN" in _spark(engine).sql_texts[-1]


@pytest.mark.parametrize("statement, message", [
    ("SELECT * FROM s JOIN o ON s.id = o.id EMIT CHANGES;", "Stream-Stream joins must have a WITHIN clause"),
    ("SELECT * FROM s JOIN t WITHIN 1 SECOND ON s.id = t.id EMIT CHANGES;", "A window definition was provided "
     "for a Stream-Table join. These joins are not windowed."),
    ("SELECT * FROM t JOIN s ON t.id = s.id EMIT CHANGES;", "Invalid join order: table-stream joins are not "
     "supported; only stream-table joins. Got T [INNER] JOIN S."),
    ("SELECT * FROM s FULL OUTER JOIN t ON s.id = t.id EMIT CHANGES;", "Invalid join type: full-outer join not "
     "supported for stream-table join. Got S [FULL] OUTER JOIN T."),
    ("SELECT * FROM s JOIN o WITHIN 1 SECOND ON s.v > o.v EMIT CHANGES;", "Unsupported join expression: "
     "(S.V > O.V)."),
    ("SELECT * FROM s JOIN s WITHIN 1 SECOND ON s.id = s.id EMIT CHANGES;", "Can not join 'S' to 'S': self joins"),
    ("SELECT id FROM s JOIN o WITHIN 1 SECOND ON s.id = o.id EMIT CHANGES;", "Column 'ID' is ambiguous. Could be "
     "any of: S.ID, O.ID"),
    ("SELECT s.nope FROM s JOIN o WITHIN 1 SECOND ON s.id = o.id EMIT CHANGES;", "Column 'S.NOPE' cannot be "
     "resolved."),
    ("CREATE STREAM k AS SELECT name FROM s JOIN o WITHIN 1 SECOND ON s.id = o.id;", "Key missing from "
     "projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\nThe query used to build `K` must include the join "
     "expression S.ID in its projection (eg, SELECT S.ID...)."),
])
def test_join_refusals(engine: Engine, statement: str, message: str) -> None:
    with pytest.raises(KsqlError) as info:
        engine.query(statement) if statement.startswith("SELECT") else engine.execute(statement)
    assert info.value.message.startswith(message), info.value.message


def test_stream_table_join_joins_each_batch_with_the_tables_latest_rows(engine: Engine, monkeypatch: Any) -> None:
    out = engine.execute("CREATE STREAM e AS SELECT s.id AS id, name, t.v AS tv FROM s LEFT JOIN t ON s.id = t.id;")
    assert out[0]["commandStatus"]["queryId"] == "CSAS_E_3"
    plan, sql = engine.plans["CSAS_E_3"]
    assert sql == ("SELECT `S`.`ID` AS `ID`, `S`.`NAME` AS `NAME`, `T`.`V` AS `TV`, "
                   "`S`.`ROWTIME` AS `__rowtime` FROM ksql_csas_e_3_stream AS `S` "
                   "LEFT OUTER JOIN ksql_csas_e_3_table AS `T` ON (`S`.`ID` = `T`.`ID`)")
    compiled, _ = engine._compile(plan)
    assert isinstance(compiled, engine_mod.TableJoin)
    spark = _spark(engine)
    read: list[str] = []
    monkeypatch.setattr(Engine, "_read_changes", lambda self, session, table, state, until=None: read.append(
        table.name) or Frame(spark).schema)
    before = len(spark.sql_texts)
    compiled.per_batch(Frame(spark))                     # what each micro-batch runs: the table's new records
    lookup, joined = spark.sql_texts[before:]            # and the rows the stream's records look up
    assert lookup == "SELECT DISTINCT `S`.`ID` FROM ksql_csas_e_3_stream AS `S`"
    assert joined == sql and read == ["T"]
    assert engine.metastore.readers_and_writers("T") == (["CSAS_E_3"], [])
    with pytest.raises(KsqlError, match="Invalid join condition: stream-table joins require to join on the table's "
                                        "primary key. Got S.V = T.V."):
        engine.query("SELECT * FROM s JOIN t ON s.v = t.v EMIT CHANGES;")


class StandInQuery:
    """A Spark StreamingQuery double: fails at once (as a query whose Python worker did not
    connect back) or runs until stopped."""

    def __init__(self, fails: bool) -> None:
        import threading
        self.fails = fails
        self._stopped = threading.Event()

    @property
    def isActive(self) -> bool:
        return not self.fails and not self._stopped.is_set()

    def awaitTermination(self) -> None:
        if self.fails:
            raise RuntimeError("Python worker failed to connect back.\n\tat org.apache.spark...")
        self._stopped.wait()

    def exception(self) -> str:
        return "Python worker failed to connect back." if self.fails else ""

    def stop(self) -> None:
        self._stopped.set()

    @property
    def _jsq(self) -> Any:
        return type("J", (), {"explainInternal": lambda _, extended: "== Running plan =="})()


def test_a_failed_persistent_query_is_restarted_from_its_checkpoint_with_back_off(
        engine: Engine, monkeypatch: Any, caplog: Any) -> None:
    import logging
    import threading

    from tests.support.waiting import wait_for

    started: list[StandInQuery] = []
    outcomes = [True, True, False]                  # fails twice, then runs

    def start(frame: Frame) -> StandInQuery:
        started.append(StandInQuery(fails=outcomes.pop(0)))
        return started[-1]
    monkeypatch.setattr(Frame, "start", start, raising=False)
    waits: list[int] = []
    release = threading.Semaphore(0)

    def backoff(self: Engine, wait_ms: int) -> bool:
        waits.append(wait_ms)
        release.acquire()
        return False
    monkeypatch.setattr(Engine, "_backoff", backoff)
    caplog.set_level(logging.INFO, logger="kafkalite.sql.engine")
    checkpoints: list[str] = []
    engine.execute("CREATE STREAM big AS SELECT id, v FROM s WHERE v > 1;")
    checkpoints.append(_spark(engine).options["checkpointLocation"])

    def state() -> tuple[str, str]:
        shown = engine.execute("SHOW QUERIES;")[0]["queries"]
        explained = engine.execute("EXPLAIN CSAS_BIG_3;")[0]["queryDescription"]
        return shown[0]["state"], explained["state"]
    wait_for(lambda: waits == [15000], what="the first back-off")
    assert state() == ("ERROR", "ERROR")             # ERROR while it waits, as ksqlDB shows it
    explained = engine.execute("EXPLAIN CSAS_BIG_3;")[0]["queryDescription"]
    assert explained["queryErrors"][0]["errorMessage"] == "Python worker failed to connect back."
    release.release()
    wait_for(lambda: waits == [15000, 30000], what="the second back-off, doubled")
    checkpoints.append(_spark(engine).options["checkpointLocation"])
    assert state() == ("ERROR", "ERROR")
    release.release()
    wait_for(lambda: engine.metastore.queries["CSAS_BIG_3"].state == "RUNNING", what="the restart")
    checkpoints.append(_spark(engine).options["checkpointLocation"])
    assert state() == ("RUNNING", "RUNNING") and len(started) == 3 and engine.running["CSAS_BIG_3"] is started[2]
    assert checkpoints[0].endswith("CSAS_BIG_3") and len(set(checkpoints)) == 1    # resumed, not started anew
    assert "query CSAS_BIG_3 restarted from its checkpoint (attempt #2)" in caplog.text
    assert "restarting it from its checkpoint in 15000 ms (attempt #1)" in caplog.text
    engine.execute("TERMINATE CSAS_BIG_3;")
    assert started[2]._stopped.is_set() and engine.execute("SHOW QUERIES;")[0]["queries"] == []


def test_a_query_terminated_during_its_back_off_is_not_restarted(engine: Engine, monkeypatch: Any) -> None:
    import threading

    from tests.support.waiting import wait_for

    started: list[StandInQuery] = []

    def start(frame: Frame) -> StandInQuery:
        started.append(StandInQuery(fails=True))
        return started[-1]
    monkeypatch.setattr(Frame, "start", start, raising=False)
    waiting, release, done = threading.Event(), threading.Event(), threading.Event()

    def backoff(self: Engine, wait_ms: int) -> bool:
        waiting.set()
        release.wait(10)
        done.set()
        return False
    monkeypatch.setattr(Engine, "_backoff", backoff)
    engine.execute("CREATE STREAM big AS SELECT id, v FROM s;")
    assert waiting.wait(10)
    engine.execute("TERMINATE CSAS_BIG_3;")
    release.set()
    assert done.wait(10)
    wait_for(lambda: not any(t.name == "supervise-CSAS_BIG_3" for t in threading.enumerate()),
             what="the supervisor to give up")
    assert len(started) == 1 and engine.metastore.queries["CSAS_BIG_3"].state == "TERMINATED"


def test_retry_back_off_properties_have_ksqldbs_names_and_defaults() -> None:
    from kafkalite.sql.config import ConfigError

    assert (KsqlConfig().retry_backoff_initial_ms, KsqlConfig().retry_backoff_max_ms) == (15000, 900000)
    c = KsqlConfig.from_properties({"ksql.query.retry.backoff.initial.ms": "100",
                                    "ksql.query.retry.backoff.max.ms": "250", "listeners": "http://127.0.0.1:1"})
    assert (c.retry_backoff_initial_ms, c.retry_backoff_max_ms) == (100, 250)
    with pytest.raises(ConfigError, match="ksql.query.retry.backoff.max.ms"):
        KsqlConfig.from_properties({"ksql.query.retry.backoff.max.ms": "soon", "listeners": "http://127.0.0.1:1"})


def test_avro_columns_map_connect_logical_types_as_ksqldb_does(engine: Engine, monkeypatch: Any) -> None:
    """ksqlDB (ConnectKsqlSchemaTranslator) reads long timestamp-millis as TIMESTAMP, int date as
    DATE, int time-millis as TIME, bytes decimal as DECIMAL; timestamp-micros has no Connect type
    and stays BIGINT."""
    from dataclasses import replace

    from kafkalite.registry import client as registry_client

    schema = {"type": "record", "name": "Reading", "fields": [
        {"name": "id", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None},
        {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None}]}
    subjects: list[str] = []

    def latest(self: Any, subject: str) -> Any:
        subjects.append(subject)
        return registry_client.RegisteredSchema(7, "AVRO", json.dumps(schema))
    monkeypatch.setattr(registry_client.RegistryClient, "latest", latest)
    engine.config = replace(engine.config, schema_registry_url="http://127.0.0.1:1")
    engine.execute("CREATE STREAM readings WITH (KAFKA_TOPIC='readings', VALUE_FORMAT='AVRO', TIMESTAMP='ts');")
    fields = engine.execute("DESCRIBE readings;")[0]["sourceDescription"]["fields"]
    assert set(subjects) == {"readings-value"}              # at validation and when applied
    assert [(f["name"], f["schema"]["type"]) for f in fields] == [
        ("ID", "BIGINT"), ("TS", "TIMESTAMP"), ("DAY", "DATE"), ("AT", "TIME"), ("AMOUNT", "DECIMAL"),
        ("MICROS", "BIGINT"), ("TAGS", "ARRAY")]
    # INSERT VALUES into it: TIMESTAMP as epoch ms, DATE and TIME as ksqlDB's literal text
    import datetime
    import decimal

    from kafkalite.registry.serde import decode, parse_avro
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    monkeypatch.setattr(Engine, "_avro_lookup", lambda self, subject: (
        7, parse_avro(json.dumps(schema)), [f["name"] for f in schema["fields"]]))
    FakeProducer.sent = []
    engine.execute("INSERT INTO readings (id, ts, day, at, amount, micros, tags) VALUES "
                   "(1, 1764410400123, '2025-11-29', '10:00:00.250', 12.34, 5, NULL);")
    _, _, value, ts = FakeProducer.sent[0]
    datum = decode(value, lambda i: (None, parse_avro(json.dumps(schema))))[2]
    assert ts == 1764410400123                                # the TIMESTAMP column is the record's time
    assert (datum["ts"], datum["day"], datum["at"], datum["amount"]) == (
        datetime.datetime(2025, 11, 29, 10, 0, 0, 123000, tzinfo=datetime.timezone.utc),
        datetime.date(2025, 11, 29), datetime.time(10, 0, 0, 250000), decimal.Decimal("12.34"))
    with pytest.raises(KsqlError, match=r"Failed to insert values into 'READINGS'. Expected type DATE for field "
                                        r"`DAY` but got STRING\(Sunday\). Date format must be yyyy-mm-dd"):
        engine.execute("INSERT INTO readings (id, ts, day) VALUES (2, 1, 'Sunday');")
    schema["fields"] = [{"name": "choice", "type": ["null", "int", "string"]}]
    with pytest.raises(KsqlError, match=r"Field choice of other-value has an Avro type this server cannot map: "
                                        r"\[\"null\", \"int\", \"string\"\]"):
        engine.execute("CREATE STREAM other WITH (KAFKA_TOPIC='other', VALUE_FORMAT='AVRO');")


def test_temporal_and_decimal_columns_are_written_as_avro_logical_types() -> None:
    """What a CSAS registers for its AVRO output, and the values Spark hands the sink (a naive
    local datetime for TIMESTAMP, a date, a Decimal) encoded and read back through the registry's
    serde: TIMESTAMP as long timestamp-millis, DATE as int date, DECIMAL as bytes decimal."""
    import datetime
    import decimal
    import io

    import fastavro

    from kafkalite.registry.serde import encode, parse_avro
    from kafkalite.sql import serde
    from kafkalite.sql.translate import spark_column

    text = serde.value_avro_schema([spark_column(c, t) for c, t in [
        ("TS", "timestamp"), ("DAY", "date"), ("AMOUNT", "decimal(10,2)"), ("N", "bigint")]])
    doc = json.loads(text)
    assert [f["type"][1] for f in doc["fields"]] == [
        {"type": "long", "logicalType": "timestamp-millis"}, {"type": "int", "logicalType": "date"},
        {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}, "long"]
    ms = 1_764_410_400_123                                   # 2025-11-29T10:00:00.123Z
    spark_ts = datetime.datetime.fromtimestamp(ms / 1000)    # PySpark's TimestampType: naive, local time
    data = encode(3, parse_avro(text), {"TS": spark_ts, "DAY": datetime.date(2025, 11, 29),
                                        "AMOUNT": decimal.Decimal("12.34"), "N": 5})
    assert data[:5] == b"\x00\x00\x00\x00\x03"
    plain = json.loads(text.replace('"logicalType"', '"ignored"'))   # the raw Avro values ksqlDB reads
    raw = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(plain), None)
    assert (raw["TS"], raw["DAY"], raw["N"]) == (ms, (datetime.date(2025, 11, 29) - datetime.date(1970, 1, 1)).days, 5)
    typed = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(doc), None)
    assert typed["AMOUNT"] == decimal.Decimal("12.34")
    assert typed["TS"] == datetime.datetime(2025, 11, 29, 10, 0, 0, 123000, tzinfo=datetime.timezone.utc)


def test_health_follows_the_command_runner_not_a_failed_query(engine: Engine, monkeypatch: Any) -> None:
    """ksqlDB's commandRunner check is the command runner's state: unhealthy before the command
    topic is replayed; a query waiting in ERROR for its restart leaves the server healthy."""
    class Client(ClientDouble):
        def metadata(self, topics: Any) -> Any:
            return None
    monkeypatch.setattr(engine_mod, "KafkaClient", Client)
    assert engine.health()["details"]["commandRunner"] == {"isHealthy": False}
    engine.start()
    engine.running["CSAS_X_1"] = StandInQuery(fails=True)
    assert engine.health() == {"isHealthy": True, "details": {"metastore": {"isHealthy": True},
                                                              "kafka": {"isHealthy": True},
                                                              "commandRunner": {"isHealthy": True}}}


def test_a_stream_pull_query_is_a_batch_read_through_the_push_querys_projection(engine: Engine) -> None:
    """A pull query on a stream reads its topic as a batch (the session's reader, from the earliest
    offsets) through the same Spark SQL a push query compiles, answers at once, and drops its view."""
    spark = _spark(engine)
    tq = engine.query("SELECT id, v * 2 AS d FROM s WHERE v > 1 LIMIT 3;")
    assert (tq.push, tq.limit, tq.rows, tq.id.startswith("query_")) == (False, 3, [], True)
    assert spark.options["subscribe"] == "s" and spark.options["startingOffsets"] == "earliest"
    view = spark.sql_texts[-1].split(" FROM ")[1].split()[0]
    assert view.startswith("ksql_query_s_") and "WHERE (`V` > 1)" in spark.sql_texts[-1]
    assert "(`V` * 2) AS `D`" in spark.sql_texts[-1] and spark.dropped_views == [view]
