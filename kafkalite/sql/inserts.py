"""``/inserts-stream``'s server side without HTTP (ksqlDB's ``InsertsStreamEndpoint`` and
``InsertsSubscriber``): the target resolved with ksqlDB's refusals, then each JSON row coerced,
encoded as the source's queries decode it (``serde``) and produced; the outcome of every row
reaches a callback, which the HTTP layer turns into an ack or an error line. Every request and
every INSERT VALUES statement write through the engine's one ``SharedProducer`` (idempotent, so a
retried batch is not written twice), as ksqlDB's ``KsqlEngine`` keeps one producer for inserts.
Rows are timestamped when they are produced, as ksqlDB's subscriber does.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Protocol

from kafkalite.client.errors import ClientError
from kafkalite.client.producer import Producer, RecordMetadata
from kafkalite.sql import serde
from kafkalite.sql.errors import BAD_STATEMENT, KsqlError
from kafkalite.sql.metastore import DataSource, MetaStore

log = logging.getLogger(__name__)

#: ksqlDB's refusal when ``ksql.insert.into.values.enabled`` is false (INSERT VALUES and /inserts-stream)
DISABLED = ("The server has disabled INSERT INTO ... VALUES functionality. To enable it, restart your ksqlDB "
            "server with 'ksql.insert.into.values.enabled'=true")

#: what a row's outcome is reported with: None when the broker acknowledged it
Done = Callable[[BaseException | None], None]


def resolve_target(metastore: MetaStore, target: str, read_only_topics: tuple[str, ...] = ()) -> DataSource:
    """The stream or table a request names, or ksqlDB's error (code 40001) for a bad name, an
    unknown source (with its "Did you mean" hint), a windowed source or a read-only topic."""
    try:
        name = serde.identifier(target)
    except ValueError as exc:
        raise KsqlError(f"Invalid target name: {exc}", code=BAD_STATEMENT) from None
    return writable_source(metastore, name, read_only_topics, "")


def writable_source(metastore: MetaStore, name: str, read_only_topics: tuple[str, ...], statement: str) -> DataSource:
    """The source rows may be inserted into, by its exact name (INSERT VALUES words the windowed
    refusal with a "!", as ksqlDB's ``InsertValuesExecutor`` does)."""
    source = metastore.get(name)
    if source is None:
        raise KsqlError(f"Cannot insert values into an unknown stream/table: `{name}`"
                        + _alternatives(metastore, name), code=BAD_STATEMENT, statement=statement)
    if source.window is not None:
        raise KsqlError("Cannot insert values into windowed stream/table" + ("!" if statement else ""),
                        code=BAD_STATEMENT, statement=statement)
    if source.topic in read_only_topics:
        raise KsqlError(f"Cannot insert values into read-only topic: {source.topic}", code=BAD_STATEMENT,
                        statement=statement)
    if source.read_only:                                  # CREATE SOURCE STREAM|TABLE (InsertValuesExecutor)
        raise KsqlError(f"Cannot insert values into read-only {source.kind.lower()}: {source.name}",
                        code=BAD_STATEMENT, statement=statement)
    return source


def _alternatives(metastore: MetaStore, name: str) -> str:
    """ksqlDB's ``MetaStoreImpl.checkAlternatives``: sources whose names differ only in case."""
    matches = sorted((s for s in metastore.sources.values() if s.name.upper() == name.upper() and s.name != name),
                     key=lambda s: s.name)
    if not matches:
        return ""
    if len(matches) > 1:
        parts = []
        for i, s in enumerate(matches):
            last = i == len(matches) - 1
            punct = "? " if last else (" or " if i == 0 and len(matches) == 2 else
                                       ", or " if i == len(matches) - 2 else ", ")
            parts.append(f"\"{s.name}\" ({s.kind}){punct}")
        return "\nDid you mean " + "".join(parts) + "Hint: wrap the source name in double quotes to make it case-sensitive."
    only = matches[0].name
    if any(ch.islower() for ch in only):
        return f"\nDid you mean \"{only}\"? Hint: wrap the source name in double quotes to make it case-sensitive."
    return f"\nDid you mean {only}? Hint: try removing double quotes from the source name."


class Sender(Protocol):
    """What an ``InsertsSubscriber`` writes through (the engine's ``SharedProducer``)."""

    def send(self, topic: str, value: bytes | None, key: bytes | None, *, timestamp_ms: int | None = None,
             callback: Callable[[Future], None] | None = None) -> "Future[RecordMetadata]": ...


class SharedProducer:
    """The server's one producer for INSERT VALUES and every ``/inserts-stream`` request.

    Made on first use, not at start (a server that never inserts never asks for a producer id),
    and shared: each statement or request no longer pays a connection, a metadata round trip and
    an InitProducerId, which under load made the ksqldb client's 5 s timeout trip. ``Producer.send``
    is thread-safe (the accumulator is under its lock), so requests and statements of any thread
    write through it at once. A producer whose send fails is replaced on the next use: a failed
    batch leaves an idempotent producer's sequence numbers with a gap the broker refuses
    (OUT_OF_ORDER_SEQUENCE_NUMBER), and a fenced producer or a broker that went away leaves it
    unusable; the error itself still reaches the caller. The failed one is closed in the
    background, so the sends other requests still have in flight through it complete or fail."""

    CLOSE_TIMEOUT_S = 5.0

    def __init__(self, make: Callable[[], Producer]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._producer: Producer | None = None
        self._closed = False

    def _current(self) -> Producer:
        with self._lock:
            if self._closed:
                raise ClientError("the server is shutting down: inserts are closed")
            if self._producer is None:
                self._producer = self._make()       # under the lock: concurrent first uses make one
            return self._producer

    def ready(self) -> None:
        """Makes the producer now if there is none (an /inserts-stream request that cannot get one
        is refused as a whole, before any row)."""
        self._current()

    def send(self, topic: str, value: bytes | None, key: bytes | None, *, timestamp_ms: int | None = None,
             callback: Callable[[Future], None] | None = None) -> "Future[RecordMetadata]":
        """``Producer.send`` through the current producer. The future returned resolves only once
        a failed producer has been let go, so whoever sees the error and sends again gets a new one."""
        outcome: Future[RecordMetadata] = Future()
        if callback is not None:
            outcome.add_done_callback(callback)
        for attempt in range(2):
            producer = self._current()

            def delivered(f: Future, producer: Producer = producer) -> None:
                exc = f.exception()
                if exc is None:
                    outcome.set_result(f.result())
                    return
                self._discard(producer, exc)
                outcome.set_exception(exc)
            try:
                producer.send(topic, value, key, timestamp_ms=timestamp_ms, callback=delivered)
                return outcome
            except Exception as exc:
                if not self._discard(producer, exc) and attempt == 0:
                    continue                          # another failure replaced it meanwhile: use the new one
                raise
        raise AssertionError("unreachable")

    def _discard(self, producer: Producer, exc: BaseException) -> bool:
        """Forget ``producer`` if it is still the current one, and close it in the background;
        False if another failure (or the server's stop) let it go already."""
        with self._lock:
            if self._producer is not producer:
                return False
            self._producer = None
        log.warning("the inserts producer failed (%s); the next insert makes a new one", exc)
        threading.Thread(target=self._close_quietly, args=(producer,), name="ksql-inserts-producer-close",
                         daemon=True).start()
        return True

    def _close_quietly(self, producer: Producer) -> None:
        try:
            producer.close(self.CLOSE_TIMEOUT_S)
        except Exception as exc:                      # it failed already; nothing more to tell
            log.warning("closing the failed inserts producer: %s", exc)

    def close(self) -> None:
        """At the server's stop: what is queued is flushed (up to a few seconds), no more sends."""
        with self._lock:
            self._closed = True
            producer, self._producer = self._producer, None
        if producer is not None:
            self._close_quietly(producer)


class InsertsSubscriber:
    """Writes one request's rows to the source's topic, in the order they are given, through the
    engine's shared producer (which the request's end leaves open)."""

    def __init__(self, source: DataSource, producer: Sender, avro: serde.AvroLookup | None) -> None:
        self.source = source
        self.producer = producer
        self._avro = avro
        self._schemas: dict[str, tuple[int, Any, list[str]]] = {}

    def _lookup(self, subject: str) -> tuple[int, Any, list[str]]:
        """The subject's latest schema, fetched once per request rather than once per row."""
        if subject not in self._schemas:
            assert self._avro is not None
            self._schemas[subject] = self._avro(subject)
        return self._schemas[subject]

    def send(self, row: Any, done: Done) -> None:
        """Queues one row; ``done`` gets None when the broker has it, or the error: a KsqlError
        (code 40000) for a row ksqlDB would refuse, anything else for a failure of the server."""
        if not isinstance(row, dict):
            raise KsqlError("Invalid JSON in inserts stream", code=40000)
        values = serde.row_from_json(row, self.source)
        record = serde.encode(self.source, values, int(time.time() * 1000),
                              self._lookup if self._avro is not None else None, "")

        def completed(f: Future) -> None:
            done(f.exception())
        self.producer.send(self.source.topic, record.value, record.key, timestamp_ms=record.timestamp_ms,
                           callback=completed)

    def close(self) -> None:
        """The request is over. Every row it sent has been answered (the HTTP layer closes it
        then, or when the client went away); the shared producer stays open for the others."""
        self._schemas.clear()
