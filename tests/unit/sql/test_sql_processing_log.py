"""ksqlDB's processing log as a topic and the KSQL_PROCESSING_LOG stream (kafkalite/sql/processing_log.py):
the ``ksql.logging.processing.*`` properties, the executors' path from a poison record to a record
on the topic (the Kafka appender, with a recording producer at the client boundary), and the
stream's statement issued at start through the statement path, once (the Spark side:
tests/spark/test_spark_sql_format_matrix.py's poison-record test)."""
from __future__ import annotations

import json
import logging
import pickle
import time
from concurrent.futures import Future
from typing import Any, Iterator

import pytest

from kafkalite.client.errors import ClientError
from kafkalite.sql import deserialization, processing_log
from kafkalite.sql.config import ConfigError, KsqlConfig
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse
from tests.unit.sql.test_sql_engine_statements import FakeCommands, FakeSpark


# -- the properties ---------------------------------------------------------------------------
def test_the_properties_have_ksqldbs_defaults() -> None:
    c = KsqlConfig.from_properties({"ksql.service.id": "trucks_"})
    assert (c.processing_log_topic_auto_create, c.processing_log_stream_auto_create) == (False, False)
    assert (c.processing_log_topic_partitions, c.processing_log_topic_replication_factor) == (1, 1)
    assert c.processing_log_stream_name == "KSQL_PROCESSING_LOG"
    assert c.processing_log_topic == "trucks_ksql_processing_log"          # <ksql.service.id>ksql_processing_log
    assert KsqlConfig.from_properties({}).processing_log_topic == "default_ksql_processing_log"


def test_the_properties_set() -> None:
    c = KsqlConfig.from_properties({"ksql.logging.processing.topic.auto.create": "TRUE",
                                    "ksql.logging.processing.topic.name": "errors",
                                    "ksql.logging.processing.topic.partitions": "3",
                                    "ksql.logging.processing.topic.replication.factor": "2",
                                    "ksql.logging.processing.stream.auto.create": "true",
                                    "ksql.logging.processing.stream.name": "ERRORS_STREAM"})
    assert (c.processing_log_topic_auto_create, c.processing_log_topic, c.processing_log_topic_partitions,
            c.processing_log_topic_replication_factor) == (True, "errors", 3, 2)
    assert (c.processing_log_stream_auto_create, c.processing_log_stream_name) == (True, "ERRORS_STREAM")


@pytest.mark.parametrize("name, value, message", [
    ("ksql.logging.processing.topic.auto.create", "yes", "is not true or false"),
    ("ksql.logging.processing.stream.auto.create", "1", "is not true or false"),
    ("ksql.logging.processing.topic.partitions", "0", "is not a positive number"),
    ("ksql.logging.processing.topic.replication.factor", "two", "is not a positive number"),
    ("ksql.logging.processing.stream.name", "", "needs a name")])
def test_a_bad_property_stops_the_server(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}: .*{message}|{name}: {message}"):
        KsqlConfig.from_properties({name: value})


# -- the stream's statement ---------------------------------------------------------------------
def test_the_stream_statement_is_ksqldbs() -> None:
    """Word for word ProcessingLogServerUtilsTest's expected statement."""
    assert processing_log.stream_statement("PROCESSING_LOG_STREAM", "processing_log_topic") == (
        "CREATE STREAM PROCESSING_LOG_STREAM ("
        "logger VARCHAR, level VARCHAR, time BIGINT, message STRUCT<type INT, "
        "deserializationError STRUCT<target VARCHAR, errorMessage VARCHAR, recordB64 VARCHAR, cause ARRAY<VARCHAR>, "
        "`topic` VARCHAR>, "
        "recordProcessingError STRUCT<errorMessage VARCHAR, record VARCHAR, cause ARRAY<VARCHAR>>, "
        "productionError STRUCT<errorMessage VARCHAR>, "
        "serializationError STRUCT<target VARCHAR, errorMessage VARCHAR, record VARCHAR, cause ARRAY<VARCHAR>, "
        "`topic` VARCHAR>, "
        "kafkaStreamsThreadError STRUCT<errorMessage VARCHAR, threadName VARCHAR, cause ARRAY<VARCHAR>>"
        ">) WITH(KAFKA_TOPIC='processing_log_topic', VALUE_FORMAT='JSON', KEY_FORMAT='KAFKA');")
    s = parse(processing_log.stream_statement("KSQL_PROCESSING_LOG", "t"))[0].statement
    assert [c.name for c in s.columns] == ["LOGGER", "LEVEL", "TIME", "MESSAGE"]       # type: ignore[attr-defined]
    message = s.columns[3].type                                                        # type: ignore[attr-defined]
    assert [n for n, _ in message.fields][:2] == ["TYPE", "DESERIALIZATIONERROR"]
    assert [n for n, _ in message.fields[1][1].fields] == ["TARGET", "ERRORMESSAGE", "RECORDB64", "CAUSE", "topic"]


# -- from a poison record to the topic ----------------------------------------------------------
class RecordingProducer:
    """kafkalite's Producer at the appender's boundary: what was sent, acknowledged at once
    (or failed, for a topic named ``broken``)."""
    made: list[dict[str, Any]] = []
    sent: list[tuple[str, Any, Any]] = []
    flushes = 0

    def __init__(self, bootstrap: str, **kw: Any) -> None:
        RecordingProducer.made.append({"bootstrap": bootstrap, **kw})

    def send(self, topic: str, value: Any, key: Any = None) -> Future:
        f: Future = Future()
        if topic == "broken":
            f.set_exception(ClientError("UNKNOWN_TOPIC_OR_PARTITION"))
        else:
            RecordingProducer.sent.append((topic, key, value))
            f.set_result(None)
        return f

    def flush(self, timeout: float | None = None) -> None:
        RecordingProducer.flushes += 1

    def close(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture
def producer(monkeypatch: Any) -> Iterator[type[RecordingProducer]]:
    monkeypatch.setattr(processing_log, "Producer", RecordingProducer)
    RecordingProducer.made, RecordingProducer.sent, RecordingProducer.flushes = [], [], 0
    yield RecordingProducer
    for target in list(processing_log._appenders):
        processing_log.detach(target)


def _batch(causes: list[Any]) -> list[Any]:
    import pyarrow as pa

    n = len(causes)
    return [pa.array(causes, pa.string()), pa.array(["value" if c else None for c in causes], pa.string()),
            pa.array([0] * n, pa.int32()), pa.array(range(7, 7 + n), pa.int64()),
            pa.array([b"oops" if c else None for c in causes], pa.binary())]


def test_a_poison_record_is_produced_to_the_topic_as_ksqldbs_structured_json(producer: Any) -> None:
    target = processing_log.ProcessingLogTopic("127.0.0.1:1", "default_ksql_processing_log",
                                               (("security.protocol", "PLAINTEXT"),))
    # what a Spark worker gets: the function's state, pickled
    logger = pickle.loads(pickle.dumps(deserialization._Logger("orders", False, target)))
    before = int(time.time() * 1000)
    assert logger(*_batch([None, None])).to_pylist() == [True, True]
    assert producer.made == []                               # a clean batch: no appender, no producer
    assert logger(*_batch([None, "Invalid JSON: oops", None])).to_pylist() == [True, False, True]
    # flushed before the batch went on: the record is with the broker when the function returns
    [(topic, key, value)] = producer.sent
    assert (topic, key) == ("default_ksql_processing_log", None)
    entry = json.loads(value)
    assert list(entry) == ["level", "logger", "time", "message"]
    assert (entry["level"], entry["logger"]) == ("ERROR", "processing.KsqlTopic.Source.deserializer")
    assert before <= entry["time"] <= int(time.time() * 1000)
    assert entry["message"] == deserialization.message("value", "orders", "Invalid JSON: oops", b"oops", False, 0, 8)
    assert entry["message"]["deserializationError"]["recordB64"] is None       # rows.include is false
    assert producer.flushes >= 1
    # one producer per process and topic, made with the server's client settings
    assert logger(*_batch(["Invalid JSON: again"])).to_pylist() == [False]
    assert len(producer.sent) == 2 and len(producer.made) == 1
    assert producer.made[0]["bootstrap"] == "127.0.0.1:1" and producer.made[0]["security"].protocol == "PLAINTEXT"


def test_a_failed_produce_is_logged_and_the_query_goes_on(producer: Any, caplog: Any) -> None:
    logger = deserialization._Logger("orders", False, processing_log.ProcessingLogTopic("127.0.0.1:1", "broken"))
    with caplog.at_level(logging.WARNING, logger="kafkalite.sql.processing_log"):
        assert logger(*_batch(["Invalid JSON: oops", None])).to_pylist() == [False, True]
    assert producer.sent == []
    assert any("not written to broken" in r.getMessage() and "UNKNOWN_TOPIC_OR_PARTITION" in r.getMessage()
               for r in caplog.records)
    assert processing_log._appenders[processing_log.ProcessingLogTopic("127.0.0.1:1", "broken")].failed == 1


def test_emit_only_queues_and_other_messages_are_not_produced(producer: Any, monkeypatch: Any) -> None:
    """``emit`` never produces on the caller's thread (the server's reactor may log): the
    appender's thread does; a record without a structured message is not a processing-log entry."""
    import threading

    senders: list[str] = []
    send = RecordingProducer.send

    def spy(self: Any, *a: Any, **kw: Any) -> Any:
        senders.append(threading.current_thread().name)
        return send(self, *a, **kw)
    monkeypatch.setattr(RecordingProducer, "send", spy)
    target = processing_log.ProcessingLogTopic("127.0.0.1:1", "plog")
    appender = processing_log.attach(target)
    assert processing_log.attach(target) is appender
    logging.getLogger("processing.CSAS_X_1.Project").error("plain text, no structure")
    deserialization.log_error("key", "t", "cause", None, False)
    processing_log.flush()
    assert senders == ["ksql-processing-log-appender"] and appender.produced == 1
    assert json.loads(producer.sent[0][2])["message"]["deserializationError"]["target"] == "key"


def test_emit_returns_while_the_producers_send_is_blocked(producer: Any, monkeypatch: Any) -> None:
    """kafkalite's ``Producer.send`` waits on the network (its first record's metadata, a full
    buffer): the appender's own thread takes that wait, never the thread that logged."""
    import threading

    release = threading.Event()
    entered = threading.Event()
    send = RecordingProducer.send

    def stuck(self: Any, *a: Any, **kw: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return send(self, *a, **kw)
    monkeypatch.setattr(RecordingProducer, "send", stuck)
    appender = processing_log.attach(processing_log.ProcessingLogTopic("127.0.0.1:1", "plog"))
    try:
        deserialization.log_error("value", "t", "first", None, False)
        assert entered.wait(30)                       # the appender's thread is inside send...
        deserialization.log_error("value", "t", "second", None, False)   # ...and emit still returns
        assert appender.produced == 0 and producer.sent == []
    finally:
        release.set()
    processing_log.flush()
    assert appender.produced == 2 and [json.loads(v)["message"]["deserializationError"]["cause"][0]
                                       for _, _, v in producer.sent] == ["first", "second"]


def test_an_avro_value_the_source_dropped_is_a_processing_log_message(producer: Any, caplog: Any) -> None:
    """The kafkalite source's ``malformedRecordHandler`` for a query's AVRO values (the engine sets
    it with ``mode=DROPMALFORMED``): the dropped record logged and produced as ksqlDB's
    deserialization error, in Confluent's Avro deserializer's words."""
    from spark_integration.avro import MalformedRecord, malformed_handler

    target = processing_log.ProcessingLogTopic("127.0.0.1:1", "plog", (("security.protocol", "PLAINTEXT"),))
    args = deserialization.dropped_avro_args("trucks", True, target)
    handler = malformed_handler(deserialization.DROPPED_AVRO_HANDLER)
    with caplog.at_level(logging.ERROR, logger=deserialization.LOGGER):
        handler(args, MalformedRecord("trucks", 2, 41, "value", b"plain", "The value of trucks-2 at offset 41 ..."))
        handler(args, MalformedRecord("trucks", 2, 42, "value", b"\0\0\0\0\x07\xff", "cannot be decoded"))
    messages = [json.loads(v)["message"] for _, _, v in producer.sent]
    assert messages == [json.loads(r.getMessage()) for r in caplog.records]
    assert messages[0] == deserialization.message("value", "trucks", "Unknown magic byte!", b"plain", True, 2, 41)
    assert messages[1]["deserializationError"]["errorMessage"] == (
        "Failed to deserialize value from topic: trucks. Error deserializing Avro message for id 7")
    assert producer.made[0]["security"].protocol == "PLAINTEXT"
    # rows.include false keeps the record's bytes out of the message
    with caplog.at_level(logging.ERROR, logger=deserialization.LOGGER):
        handler(deserialization.dropped_avro_args("t", False, None), MalformedRecord("t", 0, 1, "value", b"x", "c"))
    assert json.loads(caplog.records[-1].getMessage())["deserializationError"]["recordB64"] is None


# -- at the server's start ------------------------------------------------------------------------
def _engine(monkeypatch: Any, **settings: Any) -> tuple[Engine, list[tuple[str, int, int]]]:
    created: list[tuple[str, int, int]] = []
    monkeypatch.setattr(processing_log, "ensure_topic",
                        lambda target, partitions, replicas: created.append((target.topic, partitions, replicas)))
    monkeypatch.setattr(processing_log, "Producer", RecordingProducer)
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    e = Engine(KsqlConfig(service_id="svc_", listeners=("http://127.0.0.1:18088",), **settings), FakeSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    return e, created


def test_start_creates_the_topic_and_the_stream_once(monkeypatch: Any) -> None:
    e, created = _engine(monkeypatch, processing_log_topic_auto_create=True, processing_log_stream_auto_create=True,
                         processing_log_topic_partitions=2)
    try:
        assert e.start() == 0
        assert created == [("svc_ksql_processing_log", 2, 1)]
        [command] = e.commands.log                                           # type: ignore[attr-defined]
        assert command.command_id == "stream/`KSQL_PROCESSING_LOG`/create"
        assert command.statement == processing_log.stream_statement("KSQL_PROCESSING_LOG", "svc_ksql_processing_log")
        streams = e.execute("SHOW STREAMS;")[0]["streams"]
        assert [(s["name"], s["topic"], s["keyFormat"], s["valueFormat"]) for s in streams] == [
            ("KSQL_PROCESSING_LOG", "svc_ksql_processing_log", "KAFKA", "JSON")]
        fields = e.execute("DESCRIBE KSQL_PROCESSING_LOG;")[0]["sourceDescription"]["fields"]
        assert [f["name"] for f in fields] == ["LOGGER", "LEVEL", "TIME", "MESSAGE"]
        assert e.processing_log_topic is not None and e.processing_log_topic in processing_log._appenders
        # no query writes into it (ksqlDB's read-only topics)
        with pytest.raises(KsqlError, match="^Cannot insert into read-only topic: svc_ksql_processing_log$"):
            e.execute("INSERT INTO KSQL_PROCESSING_LOG SELECT * FROM KSQL_PROCESSING_LOG;")
        with pytest.raises(KsqlError, match="^Cannot insert values into read-only topic: svc_ksql_processing_log$"):
            e.execute("INSERT INTO KSQL_PROCESSING_LOG (level) VALUES ('ERROR');")
        with pytest.raises(KsqlError, match="^Cannot insert values into read-only topic: svc_ksql_processing_log$"):
            e.inserts_subscriber("KSQL_PROCESSING_LOG")
    finally:
        e.stop()
    assert processing_log._appenders == {}                                   # the server's appender closed
    # a restart replays the command topic: the stream is there, not created again
    again, _ = _engine(monkeypatch, processing_log_topic_auto_create=True, processing_log_stream_auto_create=True)
    again.commands = e.commands
    try:
        assert again.start() == 1
        assert len(again.commands.log) == 1 and again.metastore.get("KSQL_PROCESSING_LOG") is not None  # type: ignore
    finally:
        again.stop()


def test_nothing_without_the_properties_and_a_failed_create_is_logged(monkeypatch: Any, caplog: Any) -> None:
    e, created = _engine(monkeypatch)
    e.start()
    assert (created, e.commands.log, e.processing_log_topic) == ([], [], None)     # type: ignore[attr-defined]
    e.stop()
    # a table of that name already there: ksqlDB's CREATE STREAM fails, the server starts anyway
    e.execute("CREATE TABLE errs (id STRING PRIMARY KEY, v INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');")
    commands = e.commands
    e, created = _engine(monkeypatch, processing_log_stream_auto_create=True, processing_log_stream_name="errs")
    e.commands = commands
    with caplog.at_level(logging.ERROR, logger="kafkalite.sql.engine"):
        assert e.start() == 1
    assert any("processing log stream errs" in r.getMessage() and "already exists" in r.getMessage()
               for r in caplog.records)
    assert e.metastore.get("ERRS").kind == "TABLE" and created == []        # type: ignore[union-attr]
    e.stop()
