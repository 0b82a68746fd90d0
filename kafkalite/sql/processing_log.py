"""ksqlDB's processing log as a Kafka topic, and the ``KSQL_PROCESSING_LOG`` stream over it.

ksqlDB writes its processing log (the ``processing`` logger hierarchy: one structured message per
record it could not process) through Log4j; its Kafka appender with the ``StructuredJsonLayout``
produces each entry to a topic as JSON (``level``, ``logger``, ``time``, ``message``: the
``ProcessingLogMessageSchema`` struct), with no key. With
``ksql.logging.processing.topic.auto.create=true`` the server creates that topic at start
(``ProcessingLogServerUtils.maybeCreateProcessingLogTopic``: ``ksql.logging.processing.topic.name``,
by default ``<ksql.service.id>ksql_processing_log``, with ``.partitions`` and
``.replication.factor``) and, with ``ksql.logging.processing.stream.auto.create=true``, issues a
``CREATE STREAM`` over it once the command topic is replayed, unless a stream of that name
exists (``KsqlRestApplication.maybeCreateProcessingLogStream``).

Here the appender is :class:`KafkaAppender`, a ``logging.Handler`` on the ``processing`` logger of
every process that writes processing-log messages: the server's own and each Spark Python worker
that runs a query's poison-record check (:mod:`kafkalite.sql.deserialization`), which gets the
:class:`ProcessingLogTopic` by pickling and calls :func:`attach`. One appender (one producer) per
process and topic; ``emit`` only queues (it never blocks the caller, the server's reactor included:
the producer's ``send`` can, see :class:`KafkaAppender`), a thread produces, and :func:`flush`
waits for the queue to be acknowledged (a worker flushes after each batch that logged something, so
a worker that exits loses nothing). A failed produce is logged on this module's logger and never
fails the query.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from kafkalite.client.admin import Admin, NewTopic
from kafkalite.client.producer import Producer
from kafkalite.client.security import ClientSecurity
from kafkalite.errors import ErrorCode

log = logging.getLogger(__name__)

#: the root of ksqlDB's processing loggers (``processing.<query id>...``, ``processing.KsqlTopic...``)
ROOT_LOGGER = "processing"
#: the attribute of a ``LogRecord`` that carries its structured message (``ProcessingLogMessageSchema``)
STRUCTURED = "ksql_processing_message"
#: how long a worker waits for its batch's messages to be acknowledged before it logs and goes on
FLUSH_TIMEOUT_S = 30.0

#: the stream's columns: Confluent's ``LogRecordStructBuilder`` (logger, level, time, message)
#: around ``ProcessingLogMessageSchema``, as ksqlDB's ``SqlSchemaFormatter`` writes them (``topic``
#: quoted: a reserved word)
_CAUSE = "cause ARRAY<VARCHAR>"
STREAM_COLUMNS = (
    "logger VARCHAR, level VARCHAR, time BIGINT, message STRUCT<"
    "type INT, "
    f"deserializationError STRUCT<target VARCHAR, errorMessage VARCHAR, recordB64 VARCHAR, {_CAUSE}, `topic` VARCHAR>, "
    f"recordProcessingError STRUCT<errorMessage VARCHAR, record VARCHAR, {_CAUSE}>, "
    "productionError STRUCT<errorMessage VARCHAR>, "
    f"serializationError STRUCT<target VARCHAR, errorMessage VARCHAR, record VARCHAR, {_CAUSE}, `topic` VARCHAR>, "
    f"kafkaStreamsThreadError STRUCT<errorMessage VARCHAR, threadName VARCHAR, {_CAUSE}>>")


def stream_statement(name: str, topic: str) -> str:
    """ksqlDB's ``processingLogStreamCreateStatement``: the stream over the processing-log topic."""
    return (f"CREATE STREAM {name} ({STREAM_COLUMNS}) WITH(KAFKA_TOPIC='{topic}', "
            "VALUE_FORMAT='JSON', KEY_FORMAT='KAFKA');")


@dataclass(frozen=True)
class ProcessingLogTopic:
    """Where the processing log goes: what a Spark worker needs (by pickling) to produce there."""
    bootstrap_servers: str
    topic: str
    security_properties: tuple[tuple[str, str], ...] = ()


def ensure_topic(target: ProcessingLogTopic, partitions: int, replication: int) -> None:
    """Create the topic unless it exists (an existing one is kept as it is, as ksqlDB does)."""
    security = ClientSecurity.from_properties(dict(target.security_properties))
    with Admin(target.bootstrap_servers, security=security) as admin:
        err = admin.create_topics([NewTopic(target.topic, partitions, replication)])[target.topic]
    if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
        raise err
    log.info("processing log topic %s %s", target.topic, "already exists" if err is not None else "created")


def entry(record: logging.LogRecord) -> bytes | None:
    """The ``StructuredJsonLayout`` of one log record (``level``, ``logger``, ``time`` in epoch ms,
    ``message``); None for a record with no structured message (not a processing-log message)."""
    message = getattr(record, STRUCTURED, None)
    if message is None:
        return None
    return json.dumps({"level": record.levelname, "logger": record.name, "time": int(record.created * 1000),
                       "message": message}).encode()


class KafkaAppender(logging.Handler):
    """Log4j's ``KafkaAppender`` for the ``processing`` logger: each structured entry produced to
    the topic, key null, by one producer, from a thread of its own.

    Why a queue and a thread in front of a producer that already sends from its own I/O thread:
    :class:`kafkalite.client.Producer` only *ships* batches on that thread; making it and calling
    ``send`` still block the caller, and it has no ``max.block.ms`` to bound that. Its
    constructor bootstraps (a Metadata round trip, retried up to ``request.timeout.ms``), ``send``
    fetches the topic's partitions on its first record and again every ``metadata.max.age.ms``
    (retried the same way while the brokers are unreachable or the topic leaderless), and waits
    without limit while ``buffer.memory`` is full. ``emit`` runs on whatever thread logged (the
    server's reactor, a Spark task's poison-record check), which must not wait on the network, so
    ``emit`` only appends to a deque and this appender's thread makes the producer and calls
    ``send``."""

    def __init__(self, target: ProcessingLogTopic) -> None:
        super().__init__(logging.DEBUG)
        self.target = target
        self.pid = os.getpid()
        self._pending: deque[bytes] = deque()
        self._unacknowledged = 0                   # queued or in flight
        self._cond = threading.Condition()
        self._closed = False
        self._producer: Producer | None = None
        self.produced = 0                          # acknowledged by the broker
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="ksql-processing-log-appender", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            value = entry(record)
        except (TypeError, ValueError) as exc:      # a message json cannot write: say so, go on
            log.warning("processing log entry not written to %s: %s", self.target.topic, exc)
            return
        if value is None:
            return
        with self._cond:
            if self._closed:
                return
            self._pending.append(value)
            self._unacknowledged += 1
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                value = self._pending.popleft()
                self._cond.notify_all()
            try:
                producer = self._producer_now()
                producer.send(self.target.topic, value, None).add_done_callback(self._done)
            except Exception as exc:                # brokers unreachable, topic gone...: never the query's failure
                self._failure(exc)

    def _producer_now(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(self.target.bootstrap_servers, linger_ms=50, allow_auto_create_topics=False,
                                      client_id="ksql-processing-log",
                                      security=ClientSecurity.from_properties(dict(self.target.security_properties)))
        return self._producer

    def _done(self, future: Any) -> None:
        exc = future.exception()
        if exc is not None:
            self._failure(exc)
            return
        with self._cond:
            self.produced += 1
            self._unacknowledged -= 1
            self._cond.notify_all()

    def _failure(self, exc: BaseException) -> None:
        log.warning("processing log entry not written to %s: %s", self.target.topic, exc)
        with self._cond:
            self.failed += 1
            self._unacknowledged -= 1
            self._cond.notify_all()

    def flush(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
        """Wait until every entry emitted so far is acknowledged or failed, at most ``timeout``
        seconds (what is left then is logged as late, not waited for)."""
        deadline = time.monotonic() + timeout

        def wait_while(busy: Any) -> None:
            while busy() and (remaining := deadline - time.monotonic()) > 0:
                self._cond.wait(min(remaining, 0.5))
        with self._cond:
            wait_while(lambda: self._pending)      # every entry handed to the producer...
        producer = self._producer
        if producer is not None:
            try:
                producer.flush(max(0.0, deadline - time.monotonic()))   # ...which sends them now
            except Exception as exc:
                log.warning("processing log entries not yet written to %s: %s", self.target.topic, exc)
        with self._cond:
            wait_while(lambda: self._unacknowledged)
            left = self._unacknowledged
        if left:
            log.warning("processing log: %d entries not yet written to %s after %.0f s", left, self.target.topic,
                        timeout)

    def close(self) -> None:
        self.flush()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(5)
        if self._producer is not None:
            try:
                self._producer.close(5)
            except Exception as exc:
                log.warning("processing log producer: %s", exc)
            self._producer = None
        super().close()


_lock = threading.Lock()
_appenders: dict[ProcessingLogTopic, KafkaAppender] = {}


def attach(target: ProcessingLogTopic) -> KafkaAppender:
    """This process's appender for ``target`` on the ``processing`` logger, made on first use
    (a process forked from one that had it gets its own: threads do not survive a fork)."""
    with _lock:
        appender = _appenders.get(target)
        if appender is not None and appender.pid == os.getpid():
            return appender
        root = logging.getLogger(ROOT_LOGGER)
        if appender is not None:
            root.removeHandler(appender)
        appender = KafkaAppender(target)
        root.addHandler(appender)
        _appenders[target] = appender
        return appender


def flush(timeout: float = FLUSH_TIMEOUT_S) -> None:
    """Wait for this process's appenders (after a batch of records that logged something)."""
    with _lock:
        appenders = [a for a in _appenders.values() if a.pid == os.getpid()]
    for appender in appenders:
        appender.flush(timeout)


def detach(target: ProcessingLogTopic) -> None:
    """Flush, stop and remove this process's appender for ``target`` (the server's, at shutdown)."""
    with _lock:
        appender = _appenders.pop(target, None)
    if appender is not None:
        logging.getLogger(ROOT_LOGGER).removeHandler(appender)
        if appender.pid == os.getpid():
            appender.close()
