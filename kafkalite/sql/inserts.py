"""``/inserts-stream``'s server side without HTTP (ksqlDB's ``InsertsStreamEndpoint`` and
``InsertsSubscriber``): the target resolved with ksqlDB's refusals, then each JSON row coerced,
encoded as the source's queries decode it (``serde``) and produced; the outcome of every row
reaches a callback, which the HTTP layer turns into an ack or an error line. One producer per
request (idempotent, so a retried batch is not written twice), closed when the request ends.
Rows are timestamped when they are produced, as ksqlDB's subscriber does.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from typing import Any, Callable

from kafkalite.client.producer import Producer
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


class InsertsSubscriber:
    """Writes one request's rows to the source's topic, in the order they are given."""

    def __init__(self, source: DataSource, producer: Producer, avro: serde.AvroLookup | None) -> None:
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
        try:
            self.producer.close(5)
        except Exception as exc:                          # the request is over either way
            log.warning("closing the inserts producer: %s", exc)
