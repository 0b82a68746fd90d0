"""The bugs tests/spark/test_spark_sql_format_matrix.py found, held without brokers or Spark
(recording doubles at the Spark, Admin, registry and command-topic boundaries)."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.registry import client as registry_client
from kafkalite.registry.client import RegistryClientError
from kafkalite.sql import engine as engine_mod
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from tests.unit.sql.conftest import ClientDouble, RecordingAdmin
from tests.unit.sql.test_sql_engine_statements import FakeCommands, FakeSpark


class RecordingRegistry:
    """The registry client at the engine's boundary: deleted subjects; ``missing`` are unknown."""
    deleted: list[str] = []
    missing: set[str] = set()

    def __init__(self, url: str) -> None:
        pass

    def delete_subject(self, subject: str) -> list[int]:
        if subject in RecordingRegistry.missing:
            raise RegistryClientError(f"Subject '{subject}' not found.", 40401, 404)
        RecordingRegistry.deleted.append(subject)
        return [1]


@pytest.fixture
def engine(monkeypatch: Any) -> Engine:
    e = Engine(KsqlConfig(listeners=("http://127.0.0.1:18088",), schema_registry_url="http://127.0.0.1:1"),
               FakeSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_ensure_sink_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_register_declared_avro", lambda self, *a: None)
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    monkeypatch.setattr(registry_client, "RegistryClient", RecordingRegistry)
    RecordingAdmin.deleted, RecordingRegistry.deleted, RecordingRegistry.missing = [], [], set()
    return e


def test_drop_delete_topic_deletes_an_avro_sources_subject_and_logs_the_drop_without_it(engine: Engine) -> None:
    """ksqlDB's TopicDeleteInjector: the topic and its ``-value`` subject go before the command
    is logged, and the logged DROP has no DELETE TOPIC, so a replay deletes nothing."""
    engine.execute("CREATE STREAM a (id STRING KEY, v INT) WITH (KAFKA_TOPIC='a-topic', VALUE_FORMAT='AVRO');"
                   "CREATE STREAM j (id STRING KEY, v INT) WITH (KAFKA_TOPIC='j-topic', VALUE_FORMAT='JSON');")
    out = engine.execute("DROP STREAM a DELETE TOPIC;")
    assert out[0]["commandStatus"]["message"] == "Source `A` (topic: a-topic) was dropped."
    assert RecordingAdmin.deleted == ["a-topic"] and RecordingRegistry.deleted == ["a-topic-value"]
    assert engine.commands.log[-1].statement == "DROP STREAM a;"            # type: ignore[attr-defined]
    RecordingRegistry.missing = {"j-topic-value"}
    engine.execute("drop stream if exists j delete topic ;")
    assert RecordingAdmin.deleted == ["a-topic", "j-topic"] and RecordingRegistry.deleted == ["a-topic-value"]
    assert engine.commands.log[-1].statement == "drop stream if exists j;"  # type: ignore[attr-defined]

    again = Engine(engine.config, FakeSpark())                 # a restart replays the log
    again.commands = engine.commands
    again.start()
    assert RecordingAdmin.deleted == ["a-topic", "j-topic"] and again.metastore.get("A") is None


def test_drop_delete_topic_of_a_missing_avro_subject_and_of_a_shared_topic(engine: Engine) -> None:
    engine.execute("CREATE STREAM a (id STRING KEY, v INT) WITH (KAFKA_TOPIC='shared', VALUE_FORMAT='AVRO');"
                   "CREATE STREAM b (id STRING KEY, v INT) WITH (KAFKA_TOPIC='shared', VALUE_FORMAT='AVRO');")
    logged = len(engine.commands.log)                          # type: ignore[attr-defined]
    with pytest.raises(KsqlError, match=r"^Refusing to delete topic. Found other data sources \(B\) using topic "
                                        r"shared$"):
        engine.execute("DROP STREAM a DELETE TOPIC;")
    assert RecordingAdmin.deleted == [] and len(engine.commands.log) == logged      # type: ignore[attr-defined]
    engine.execute("DROP STREAM b;")
    RecordingRegistry.missing = {"shared-value"}               # already gone: not an error
    engine.execute("DROP STREAM a DELETE TOPIC;")
    assert RecordingAdmin.deleted == ["shared"] and engine.metastore.get("A") is None


def test_a_session_window_ends_at_its_last_record(engine: Engine) -> None:
    """Kafka Streams' session window is [first record, last record]; Spark's ``session_window``
    ends a gap after the last record. WINDOWEND, the windowed key (``__window``) and HAVING read
    ksqlDB's bounds; tumbling and hopping windows keep Spark's."""
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                   "CREATE TABLE sess AS SELECT id, WINDOWEND AS e, COUNT(*) AS n FROM s WINDOW SESSION (5 SECONDS) "
                   "GROUP BY id HAVING WINDOWEND > 0;"
                   "CREATE TABLE tumbled AS SELECT id, WINDOWEND AS e, COUNT(*) AS n FROM s WINDOW TUMBLING "
                   "(SIZE 5 SECONDS) GROUP BY id;")
    sessions, tumbled = [t for t in engine.spark.sql_texts if "GROUP BY" in t][-2:]
    window = "session_window(`ROWTIME`, '5000 milliseconds')"
    bounds = f"named_struct('start', {window}.start, 'end', {window}.end - INTERVAL 5000 MILLISECONDS)"
    assert f"unix_millis({bounds}.end) AS `E`" in sessions and f"{bounds} AS `__window`" in sessions
    assert sessions.endswith(f"GROUP BY `ID`, {window} HAVING (unix_millis({bounds}.end) > 0)")
    assert "unix_millis(window(`ROWTIME`, '5000 milliseconds').end) AS `E`" in tumbled


@pytest.mark.parametrize("type_name, value, data", [
    ("INT", 7, b"\x00\x00\x00\x07"), ("INT", -2, b"\xff\xff\xff\xfe"),
    ("BIGINT", 1795964407000, (1795964407000).to_bytes(8, "big")), ("BIGINT", -1, b"\xff" * 8),
    ("DOUBLE", 2.5, b"\x40\x04\x00\x00\x00\x00\x00\x00"), ("STRING", "u1", b"u1"), ("BYTES", b"\x00\x01", b"\x00\x01"),
])
def test_the_kafka_format_is_kafkas_serializers(type_name: str, value: Any, data: bytes) -> None:
    """ksqlDB's KAFKA format: IntegerSerializer, LongSerializer, DoubleSerializer (big-endian
    binary), StringSerializer, raw bytes; INSERT VALUES writes a KAFKA key and value so."""
    from kafkalite.sql import ast, kafka_format, serde
    from kafkalite.sql.metastore import DataSource

    t = ast.SqlType(type_name)
    assert kafka_format.encode(value, t) == data and kafka_format.decode(data, t) == value
    source = DataSource("S", "STREAM", "s", (ast.ColumnDef("K", t, key=True), ast.ColumnDef("V", t)), "KAFKA",
                        "KAFKA")
    record = serde.encode(source, {"K": value, "V": value}, 5, None, "INSERT ...")
    assert (record.key, record.value, record.timestamp_ms) == (data, data, 5)
    if type_name in ("INT", "BIGINT", "DOUBLE"):
        with pytest.raises(ValueError, match=f"3 bytes are no KAFKA {type_name}"):
            kafka_format.decode(b"abc", t)



def test_a_failed_spark_call_names_the_java_error() -> None:
    """A query that Spark refuses to (re)start logs and reports why, not only py4j's call name."""
    error = Exception("An error occurred while calling o210.start.\n: java.lang.IllegalStateException: "
                      "Cannot start query with name Q as a query with that name is already active\n\tat org.x.Y")
    assert engine_mod._first_line(error) == (
        "An error occurred while calling o210.start. java.lang.IllegalStateException: Cannot start query with name "
        "Q as a query with that name is already active")
    assert engine_mod._first_line(Exception("one line\nmore")) == "one line"


def test_a_single_json_key_column_is_unwrapped_as_ksqldb_writes_it() -> None:
    """ksqlDB sets UNWRAP_SINGLES for one key column of a format that can wrap (JSON): the key is
    the bare JSON value (``"u1"``, ``7``), null a null key; several key columns stay an object.
    INSERT VALUES writes it so and a table's topic reads back so."""
    from kafkalite.sql import ast, serde
    from kafkalite.sql.metastore import DataSource
    from kafkalite.sql.queries import StateStore, decode_output

    one = DataSource("S", "TABLE", "s", (ast.ColumnDef("K", ast.SqlType("STRING"), key=True),
                                         ast.ColumnDef("V", ast.SqlType("INT"))), "JSON", "JSON")
    assert serde.encode(one, {"K": "u1", "V": 1}, 5, None, "INSERT ...").key == b'"u1"'
    assert serde.encode(one, {"K": None, "V": 1}, 5, None, "INSERT ...").key is None
    day = DataSource("D", "STREAM", "d", (ast.ColumnDef("K", ast.SqlType("DATE"), key=True),
                                          ast.ColumnDef("V", ast.SqlType("INT"))), "JSON", "JSON")
    assert serde.encode(day, {"K": "1970-01-11", "V": 1}, 5, None, "INSERT ...").key == b"10"    # days
    two = DataSource("T", "TABLE", "t", (ast.ColumnDef("A", ast.SqlType("STRING"), key=True),
                                         ast.ColumnDef("B", ast.SqlType("INT"), key=True),
                                         ast.ColumnDef("V", ast.SqlType("INT"))), "JSON", "JSON")
    assert serde.encode(two, {"A": "x", "B": 2, "V": 1}, 5, None, "INSERT ...").key == b'{"A":"x","B":2}'
    store = StateStore(["K"], False, ["K", "V"], ["STRING", "INTEGER"])
    assert decode_output(b'"u1"', b'{"V": 3}', one, store, None) == {"K": "u1", "V": 3}


def test_explain_shows_the_properties_a_query_was_created_with(engine: Engine) -> None:
    """ksqlDB's EXPLAIN reads ``QueryMetadata.getOverriddenProperties``: the request's properties
    (a SET earlier in the request, or streamsProperties) the query was created with; none after
    UNSET; an explained statement shows the request's own."""
    created = engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                             "SET 'auto.offset.reset'='earliest'; CREATE STREAM a AS SELECT * FROM s;"
                             "UNSET 'auto.offset.reset'; CREATE STREAM b AS SELECT * FROM s;")
    explained = engine.execute("".join(f"EXPLAIN {c['commandStatus']['queryId']};" for c in created[1:]))
    assert [e["queryDescription"]["overriddenProperties"] for e in explained] == [{"auto.offset.reset": "earliest"},
                                                                                 {}]
    planned = engine.execute("EXPLAIN CREATE STREAM c AS SELECT * FROM s;", {"commit.interval.ms": 100})
    assert planned[0]["queryDescription"]["overriddenProperties"] == {"commit.interval.ms": 100}


def test_describe_extended_counts_the_topics_partitions_and_replicas(engine: Engine, monkeypatch: Any) -> None:
    """ksqlDB's DescribeExecutor describes the topic only for EXTENDED: its partition count and
    its first partition's replica count; a plain DESCRIBE has 0 and 0 and asks no broker."""
    from types import SimpleNamespace

    asked: list[Any] = []

    class Client(ClientDouble):
        def metadata(self, topics: Any) -> Any:
            asked.append(topics)
            partition = SimpleNamespace(replicas=[1, 2, 3])
            return SimpleNamespace(topics={"s-topic": SimpleNamespace(partitions={0: partition, 1: partition})})
    monkeypatch.setattr(engine_mod, "KafkaClient", Client)
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s-topic', VALUE_FORMAT='JSON');")
    plain, extended = (d["sourceDescription"] for d in engine.execute("DESCRIBE s; DESCRIBE s EXTENDED;"))
    assert (plain["extended"], plain["partitions"], plain["replication"]) == (False, 0, 0)
    assert (extended["extended"], extended["partitions"], extended["replication"]) == (True, 2, 3)
    assert asked == [["s-topic"]]


def test_a_query_is_started_with_the_session_active_on_the_starting_thread(engine: Engine, monkeypatch: Any) -> None:
    """Spark finds a Python data source (the ``kafkalite`` sink) only in the calling thread's
    active session (a JVM thread-local): the matrix's INSERT INTO, restarted from its supervising
    thread after a Python worker failed to connect back, failed every attempt with
    DATA_SOURCE_NOT_FOUND. Each start, the restart's too, comes after the session was made
    active on its own thread."""
    import threading
    from types import SimpleNamespace

    from tests.support.waiting import wait_for
    from tests.unit.sql.test_sql_engine_statements import Frame, StandInQuery

    events: list[tuple[str, str]] = []
    spark = engine.spark
    spark._jsparkSession = "the session"
    spark._jvm = SimpleNamespace(SparkSession=SimpleNamespace(setActiveSession=lambda session: events.append(
        ("active", threading.current_thread().name)) if session == "the session" else None))
    outcomes = [True, False]                       # fails once (its supervisor restarts it), then runs

    def start(frame: Frame) -> StandInQuery:
        events.append(("start", threading.current_thread().name))
        return StandInQuery(fails=outcomes.pop(0))
    monkeypatch.setattr(Frame, "start", start, raising=False)
    monkeypatch.setattr(Engine, "_backoff", lambda self, wait_ms: False)
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
                   "CREATE STREAM big AS SELECT id, v FROM s WHERE v > 1;")
    wait_for(lambda: len(events) == 4, what="the restart")
    here = threading.current_thread().name
    assert events == [("active", here), ("start", here), ("active", "supervise-CSAS_BIG_1"),
                      ("start", "supervise-CSAS_BIG_1")]
    engine.execute("TERMINATE CSAS_BIG_1;")


def test_show_extended_lists_descriptions_explanations_and_topic_consumers(engine: Engine, monkeypatch: Any) -> None:
    """SHOW STREAMS|TABLES EXTENDED is ksqlDB's SourceDescriptionList (each source as DESCRIBE ...
    EXTENDED has it), SHOW QUERIES EXTENDED its QueryDescriptionList (each query as EXPLAIN has
    it), SHOW TOPICS EXTENDED its KafkaTopicsListExtended, consumers counted as ListTopicsExecutor
    counts them: one per partition a consumer group's member is assigned, and the groups with one."""
    from types import SimpleNamespace

    from kafkalite.client import TopicPartition
    from kafkalite.sql.cli import render

    partition = SimpleNamespace(replicas=[1, 2])

    class Client(ClientDouble):
        def metadata(self, topics: Any) -> Any:
            return SimpleNamespace(topics={
                name: SimpleNamespace(partitions={0: partition, 1: partition}, internal=False)
                for name in ("s-topic", "BIG", "_schemas")})

    def member(*tps: tuple[str, int]) -> Any:
        return SimpleNamespace(assignment=[TopicPartition(t, p) for t, p in tps])

    groups = {"g1": [member(("s-topic", 0), ("s-topic", 1)), member(("BIG", 0))], "g2": [member(("s-topic", 1))],
              "connect-cluster": [member(("s-topic", 0))]}

    class Admin(ClientDouble):
        def list_groups(self) -> list[tuple[str, str]]:
            return [("connect-cluster", "connect"), ("g1", "consumer"), ("g2", "consumer")]

        def describe_group(self, group_id: str) -> Any:
            return SimpleNamespace(members=groups[group_id])
    monkeypatch.setattr(engine_mod, "KafkaClient", Client)
    monkeypatch.setattr(engine_mod, "Admin", Admin)
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s-topic', VALUE_FORMAT='JSON');"
                   "CREATE STREAM big AS SELECT id, v FROM s WHERE v > 1;")
    streams, tables, queries, topics = engine.execute(
        "SHOW STREAMS EXTENDED; SHOW TABLES EXTENDED; SHOW QUERIES EXTENDED; SHOW TOPICS EXTENDED;")
    assert streams["@type"] == "source_descriptions" and tables["sourceDescriptions"] == []
    assert streams["sourceDescriptions"] == [engine.execute(f"DESCRIBE {n} EXTENDED;")[0]["sourceDescription"]
                                             for n in ("BIG", "S")]
    [explained] = queries["queryDescriptions"]
    assert queries["@type"] == "query_descriptions" and explained["id"] == "CSAS_BIG_1"
    assert explained["sinks"] == ["BIG"] and explained["sources"] == ["S"]
    assert topics["@type"] == "kafka_topics_extended"
    assert [(t["name"], t["replicaInfo"], t["consumerCount"], t["consumerGroupCount"]) for t in topics["topics"]] == [
        ("BIG", [2, 2], 1, 1), ("s-topic", [2, 2], 3, 2)]
    printed = render(topics)
    assert "| Consumers | ConsumerGroups |" in printed and "| s-topic     | 2          | 2,2                | 3 " in printed
    assert render(streams).count("Name                 : ") == 2 and "ID                   : CSAS_BIG_1" in render(
        queries)
