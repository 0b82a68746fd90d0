"""Transient queries (ksqlDB's push and pull queries): what ``/query`` and ``/query-stream`` serve.

* A push query (``SELECT ... EMIT CHANGES [LIMIT n]``) runs as a Spark Structured Streaming query
  over the source topic, with the same decoding and expression translation as persistent queries;
  each micro-batch's rows are collected in the driver and handed to a listener (the HTTP layer),
  which writes them to the client. It is stopped when the client goes away, on ``/close-query``,
  or when LIMIT rows have been sent.
* A pull query (``SELECT ... FROM table WHERE key = ...``) is answered from a ``StateStore``: the
  materialized table's latest row per key (and window), kept in memory by the CTAS query's
  ``foreachBatch`` after each batch is written; the topic is not re-read per query.
"""
from __future__ import annotations

import datetime
import decimal
import json
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable

from kafkalite.sql import ast, avro_keys, kafka_format, serde, windowed
from kafkalite.sql.errors import KsqlError

if TYPE_CHECKING:
    from kafkalite.sql.metastore import DataSource

log = logging.getLogger(__name__)

Row = list[Any]
Listener = Callable[[list[Row]], None]

# Spark's simpleString -> ksqlDB's type names, for headers and metadata
_KSQL_TYPES = {"string": "STRING", "bigint": "BIGINT", "int": "INTEGER", "integer": "INTEGER",
               "double": "DOUBLE", "float": "DOUBLE", "boolean": "BOOLEAN", "binary": "BYTES",
               "timestamp": "TIMESTAMP", "date": "DATE", "smallint": "INTEGER", "tinyint": "INTEGER"}


#: how long :func:`await_sources` lets one query create its sources before the next one starts anyway
SOURCES_WAIT_S = 120.0


def await_sources(running: Any, timeout_s: float = SOURCES_WAIT_S) -> None:
    """Returns once the Spark query ``running`` has created its sources (its status message is past
    Spark's "Initializing StreamExecution" / "Initializing sources"), has stopped, or
    ``timeout_s`` has passed.

    Why: a streaming read of a Python data source (the ``kafkalite`` source) starts, in the
    driver, one Python process of its own (``PythonStreamingSourceRunner`` through
    ``PythonWorkerFactory.createSimpleWorker``), and Spark 4.x waits 10 seconds for it to connect
    back, a wait no setting changes (the daemon and ``spark.python.worker.reuse`` are for
    executors' and planners' workers, not this one). Queries started side by side (several CSAS in
    one request, a server replaying its command topic) start these processes all at once, next to
    each other's planning; on a loaded machine one of them misses the 10 seconds and its query
    fails with "Python worker failed to connect back". The engine starts queries one source
    initialization after the other, which keeps one such process starting at a time (a query that
    fails all the same is restarted from its checkpoint by the engine's supervisor)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not running.isActive or not str(running.status["message"]).startswith("Initializing"):
                return
        except Exception as exc:                          # the query failed meanwhile: its supervisor says why
            log.debug("waiting for %s's sources: %s", getattr(running, "name", "?"), exc)
            return
        time.sleep(0.05)
    log.warning("query %s still initializing its sources after %.0f s; starting the next one anyway",
                getattr(running, "name", "?"), timeout_s)


def ksql_type(spark_simple: str) -> str:
    if spark_simple.startswith("decimal"):
        return spark_simple.upper()
    if spark_simple.startswith("array<"):
        return f"ARRAY<{ksql_type(spark_simple[6:-1])}>"
    if spark_simple.startswith("map<"):
        return "MAP<" + ", ".join(ksql_type(p) for p in spark_simple[4:-1].split(",", 1)) + ">"
    return _KSQL_TYPES.get(spark_simple, spark_simple.upper())


def json_value(v: Any) -> Any:
    """A Spark/Python value as ksqlDB writes it in JSON rows (timestamps as ISO text, decimals as numbers)."""
    if isinstance(v, datetime.datetime):
        return v.isoformat(timespec="milliseconds")
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (bytes, bytearray)):
        import base64
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if hasattr(v, "asDict"):                              # a Spark Row (STRUCT)
        return {k: json_value(x) for k, x in v.asDict().items()}
    return v


class TransientQuery:
    """One running or finished transient query, as the HTTP layer sees it."""

    def __init__(self, statement: str, column_names: list[str], column_types: list[str],
                 limit: int | None, push: bool, rows: list[Row] | None = None, printing: bool = False) -> None:
        self.id = ("transient_" if push else "query_") + uuid.uuid4().hex[:16]
        self.statement = statement
        self.column_names = column_names
        self.column_types = column_types
        self.limit = limit
        self.push = push
        self.printing = printing                          # PRINT: rows are text lines, not column values
        self.error: str | None = None                     # why the query ended on its own (a failure)
        self.rows = rows or []                            # a pull query's whole answer
        self.listener: Listener | None = None
        self._stop: Callable[[], None] = lambda: None
        self._buffer: list[Row] = []                      # rows that came before a listener was set
        self._lock = threading.Lock()
        self.closed = False
        self.on_close: list[Callable[[], None]] = []      # e.g. end the HTTP response on /close-query

    @property
    def schema(self) -> str:
        """ksqlDB's header schema text: ```COL` TYPE, ...``."""
        return ", ".join(f"`{n}` {t}" for n, t in zip(self.column_names, self.column_types))

    def listen(self, listener: Listener) -> None:
        with self._lock:
            self.listener, pending, self._buffer = listener, self._buffer, []
        if pending:
            listener(pending)

    def offer(self, rows: list[Row]) -> None:
        """Called per micro-batch from Spark's callback thread."""
        if not rows or self.closed:
            return
        with self._lock:
            listener = self.listener
            if listener is None:
                self._buffer.extend(rows)
                return
        listener(rows)

    def close(self) -> None:
        """Stops the Spark query (blocking: call it off the reactor thread)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._stop()
        except Exception as exc:                          # a failed query may refuse to stop cleanly
            log.warning("stopping transient query %s: %s", self.id, exc)
        for callback in self.on_close:
            callback()


class StateStore:
    """A materialized table's latest row per key (and window): ``key tuple -> row dict``."""

    def __init__(self, key_names: list[str], windowed: bool, column_names: list[str],
                 column_types: list[str]) -> None:
        self.key_names = key_names
        self.column_types = column_types
        self.windowed = windowed
        self.column_names = column_names                  # keys, WINDOWSTART/END if windowed, values
        self._rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        """A row's key in the store: its key columns, and its window bounds if windowed."""
        key = tuple(row.get(k) for k in self.key_names)
        return key + (row.get("WINDOWSTART"), row.get("WINDOWEND")) if self.windowed else key

    def update(self, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            for r in rows:
                self._rows[self.key_of(r)] = r

    def apply_records(self, records: Iterable[dict[str, Any]]) -> int:
        """A SOURCE TABLE's topic records (decoded, with ROWPARTITION, ROWOFFSET and
        ``__tombstone``) applied in offset order per partition: a record sets its key's row (its
        :attr:`column_names`), a tombstone deletes it. Returns how many were applied."""
        ordered = sorted(records, key=lambda r: (r["ROWPARTITION"], r["ROWOFFSET"]))
        names = self.column_names
        with self._lock:                                  # once per batch, not per record
            for r in ordered:
                if r["__tombstone"]:
                    self._rows.pop(self.key_of(r), None)
                else:
                    row = {n: r.get(n) for n in names}
                    self._rows[self.key_of(row)] = row
        return len(ordered)

    def keys(self) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._rows)

    def get(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        """The row of one key (and window), as last updated."""
        with self._lock:
            return self._rows.get(key)

    def delete(self, keys: list[tuple[Any, ...]]) -> None:
        """Rows deleted (a tombstone of the table): as restored or as the query writes them."""
        with self._lock:
            for k in keys:
                self._rows.pop(k, None)

    def scan(self, predicate: Callable[[dict[str, Any]], bool]) -> list[Row]:
        with self._lock:
            found = [r for r in self._rows.values() if predicate(r)]
        found.sort(key=lambda r: tuple(str(r.get(c)) for c in self.column_names))
        return [[r.get(c) for c in self.column_names] for r in found]


def evaluate(e: ast.Expr, row: dict[str, Any], statement: str) -> Any:
    """A pull query's WHERE over one stored row: comparisons of columns with literals joined by
    AND/OR/NOT, IN, BETWEEN (what ksqlDB accepts on keys and window bounds)."""
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.Column):
        if e.name not in row:
            raise KsqlError(f"Column '{e.name}' cannot be resolved.", statement=statement)
        return row[e.name]
    if isinstance(e, ast.Unary) and e.op == "NOT":
        return not evaluate(e.operand, row, statement)
    if isinstance(e, ast.InList):
        v = evaluate(e.operand, row, statement)
        return (v in [evaluate(i, row, statement) for i in e.items]) != e.negated
    if isinstance(e, ast.Between):
        v = evaluate(e.operand, row, statement)
        inside = evaluate(e.low, row, statement) <= v <= evaluate(e.high, row, statement)
        return inside != e.negated
    if isinstance(e, ast.Binary):
        if e.op == "AND":
            return bool(evaluate(e.left, row, statement)) and bool(evaluate(e.right, row, statement))
        if e.op == "OR":
            return bool(evaluate(e.left, row, statement)) or bool(evaluate(e.right, row, statement))
        a, b = evaluate(e.left, row, statement), evaluate(e.right, row, statement)
        if a is None or b is None:
            return False
        if isinstance(a, str) != isinstance(b, str):
            a, b = str(a), str(b)
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "=": lambda x, y: x == y, "!=": lambda x, y: x != y, "<>": lambda x, y: x != y,
            "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
            ">=": lambda x, y: x >= y}
        if e.op in ops:
            return ops[e.op](a, b)
    raise KsqlError("Unsupported pull query WHERE clause: only comparisons of the key and window bounds with "
                    "literals are supported", statement=statement)


def _typed(text: Any, ksql: str) -> Any:
    """A value read back from a JSON or DELIMITED output record as the query's Spark rows hold it:
    numbers from text, a DATE from days since the epoch, a TIMESTAMP from epoch milliseconds (as
    PySpark gives timestamps: naive, in local time)."""
    if ksql in ("DATE", "TIMESTAMP") and text is not None:
        try:
            if isinstance(text, str) and not text.lstrip("-").isdigit():
                return (datetime.date.fromisoformat(text) if ksql == "DATE"
                        else datetime.datetime.fromisoformat(text.rstrip("Z")))
            n = int(text)
        except (TypeError, ValueError):
            return text
        if ksql == "DATE":
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=n)
        return datetime.datetime.fromtimestamp(n / 1000)
    if text is None or not isinstance(text, str):
        return text
    try:
        if ksql in ("BIGINT", "INTEGER"):
            return int(text)
        if ksql == "DOUBLE":
            return float(text)
    except ValueError:
        return text
    if ksql == "BOOLEAN":
        return text.lower() == "true"
    return text


def _as_spark(v: Any) -> Any:
    """A decoded Avro value as the query's Spark rows hold it: timestamps naive, in local time."""
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return datetime.datetime.fromtimestamp(v.timestamp())
    if isinstance(v, list):
        return [_as_spark(x) for x in v]
    if isinstance(v, dict):
        return {k: _as_spark(x) for k, x in v.items()}
    return v


def _json_object(data: bytes) -> dict[str, Any] | None:
    doc = json.loads(data)
    return doc if isinstance(doc, dict) else None


def decode_output(key: bytes | None, value: bytes | None, sink: "DataSource", store: StateStore,
                  window: ast.Window | None, avro: Callable[[bytes], Any] | None = None) -> dict[str, Any] | None:
    """One record of a table's output topic back into a state-store row (the inverse of the
    query's key and value encoding); None for a record this cannot read. A tombstone (a table
    join's deleted row) is its key columns with ``__deleted`` set. ``avro`` decodes a
    registry-framed AVRO key or value. A JSON object's or Avro record's fields are matched to
    the columns as ksqlDB's deserializers match them (``serde.record_fields``)."""
    if key is None:
        return None
    types = dict(zip(store.column_names, store.column_types))
    row: dict[str, Any] = {}
    try:
        if window is not None:
            key, row["WINDOWSTART"], row["WINDOWEND"] = windowed.decode_key(key, window)
        if sink.key_format == "AVRO":
            datum = None if avro is None else avro(key)
            if datum is None:                             # not registry-framed Avro
                return None
            row.update({k: _as_spark(v) for k, v in avro_keys.columns_of(datum, store.key_names).items()})
        elif sink.key_format == "JSON" and len(store.key_names) == 1:     # unwrapped: the bare value
            row[store.key_names[0]] = _typed(json.loads(key), types[store.key_names[0]])
        elif sink.key_format == "JSON":
            doc = _json_object(key)
            if doc is None:
                return None
            row.update({k: _typed(v, types[k]) for k, v in serde.record_fields(doc, store.key_names).items()})
        elif store.key_names and sink.key_format == "KAFKA" and sink.column(store.key_names[0]) is not None:
            column = sink.column(store.key_names[0])
            assert column is not None
            row[column.name] = _typed(kafka_format.decode(key, column.type), types[column.name])
        elif store.key_names:
            row[store.key_names[0]] = _typed(key.decode(), types[store.key_names[0]])
        values = [c for c in store.column_names if c not in store.key_names and c not in ("WINDOWSTART", "WINDOWEND")]
        if value is None:
            return {**row, "__deleted": True}
        if sink.value_format == "JSON":
            doc = _json_object(value)
            if doc is None:
                return None
            row.update({c: _typed(v, types[c]) for c, v in serde.record_fields(doc, values).items()})
        elif sink.value_format == "DELIMITED":
            row.update({c: _typed(v, types[c]) for c, v in zip(values, value.decode().split(","))})
        elif sink.value_format == "KAFKA" and len(values) == 1:
            column = sink.column(values[0])
            row[values[0]] = _typed(value.decode() if column is None else kafka_format.decode(value, column.type),
                                    types[values[0]])
        elif sink.value_format == "AVRO" and avro is not None:
            datum = avro(value)
            if not isinstance(datum, dict):
                return None
            row.update({c: _as_spark(v) for c, v in serde.record_fields(datum, values).items()})
        else:
            return None
    except (ValueError, UnicodeDecodeError):
        return None
    return row
