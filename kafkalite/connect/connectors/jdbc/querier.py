"""One table's (or the custom query's) reader: bulk, incrementing, timestamp, timestamp+incrementing.

The queries are Confluent's: ``inc > ?`` ordered by the incrementing column; ``ts > ? AND ts < ?``
(now minus timestamp.delay.interval.ms) ordered by the timestamp; and for both
``ts < ? AND ((ts = ? AND inc > ?) OR ts > ?)`` ordered by timestamp then id. A query's result
is read in batches of batch.max.rows across polls and closed when exhausted; the next query
starts poll.interval.ms later. Offsets are Confluent's: partition ``{"table": name}`` (or
``{"query": "query"}``), offset ``{"incrementing": n, "timestamp": ms, "timestamp_nanos": ns}``.
"""
from __future__ import annotations

import datetime as _dt
import logging
import time
from typing import Any

import sqlalchemy as sa

from ...data import (
    OPTIONAL_BYTES_SCHEMA, OPTIONAL_FLOAT64_SCHEMA, OPTIONAL_INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, Schema,
    SchemaBuilder, Struct,
)
from ...errors import ConnectException
from ...records import SourceRecord
from . import config as c
from .dialect import column_schema, to_connect_value, translate

log = logging.getLogger(__name__)

INCREMENTING_FIELD = "incrementing"
TIMESTAMP_FIELD = "timestamp"
TIMESTAMP_NANOS_FIELD = "timestamp_nanos"
TABLE_NAME_KEY = "table"
QUERY_NAME_KEY = "query"
QUERY_NAME_VALUE = "query"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

#: PostgreSQL type OIDs of a custom query's result columns -> Connect schemas
_PG_OIDS: dict[int, Schema] = {
    16: SchemaBuilder.boolean().optional().build(), 20: OPTIONAL_INT64_SCHEMA,
    21: SchemaBuilder.int16().optional().build(), 23: SchemaBuilder.int32().optional().build(),
    700: SchemaBuilder.float32().optional().build(), 701: OPTIONAL_FLOAT64_SCHEMA, 17: OPTIONAL_BYTES_SCHEMA,
    1082: SchemaBuilder.int32().name("org.apache.kafka.connect.data.Date").version(1).optional().build(),
    1083: SchemaBuilder.int32().name("org.apache.kafka.connect.data.Time").version(1).optional().build(),
    1114: SchemaBuilder.int64().name("org.apache.kafka.connect.data.Timestamp").version(1).optional().build(),
    1184: SchemaBuilder.int64().name("org.apache.kafka.connect.data.Timestamp").version(1).optional().build(),
}


def timestamp_to_offset(moment: _dt.datetime) -> tuple[int, int]:
    """(epoch ms, nanos of the second) as java.sql.Timestamp's getTime()/getNanos()."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)
    delta = aware - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return seconds * 1000 + delta.microseconds // 1000, delta.microseconds * 1000


def offset_to_timestamp(ms: int, nanos: int | None) -> _dt.datetime:
    seconds = ms // 1000
    micros = (nanos // 1000) if nanos is not None else (ms % 1000) * 1000
    return _EPOCH + _dt.timedelta(seconds=seconds, microseconds=micros)


class TableQuerier:
    """The reader of one source partition; ``poll`` returns up to batch.max.rows records."""

    def __init__(self, engine: sa.engine.Engine, settings: dict[str, Any], zone: _dt.tzinfo, *,
                 table: str | None = None, schema_name: str | None = None, query: str | None = None,
                 offset: dict[str, Any] | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.zone = zone
        self.mode: str = settings[c.MODE]
        self.table_name = table
        self.schema_name = schema_name
        self.query = query
        self.batch = int(settings[c.BATCH_MAX_ROWS])
        self.poll_interval = int(settings[c.POLL_INTERVAL]) / 1000.0
        self.delay = _dt.timedelta(milliseconds=int(settings[c.TIMESTAMP_DELAY]))
        self.partition: dict[str, Any] = ({TABLE_NAME_KEY: table} if table is not None
                                          else {QUERY_NAME_KEY: QUERY_NAME_VALUE})
        self.topic = settings[c.TOPIC_PREFIX] + (table or "")
        self.incrementing_column: str | None = settings[c.INCREMENTING_COLUMN] or None
        self.timestamp_columns: list[str] = list(settings[c.TIMESTAMP_COLUMN] or [])
        self.incrementing: int | None = None
        self.timestamp: _dt.datetime | None = None
        self._restore(offset or {})
        self.next_update = 0.0
        self._result: Any = None
        self._conn: sa.engine.Connection | None = None
        self._table: sa.Table | None = None
        self._schema: Schema | None = None
        self._columns: list[tuple[str, Schema]] = []
        self._infer_pending = False

    # -- offsets -----------------------------------------------------------------------------
    def _restore(self, offset: dict[str, Any]) -> None:
        if self.mode in (c.MODE_INCREMENTING, c.MODE_TIMESTAMP_INCREMENTING):
            self.incrementing = int(offset.get(INCREMENTING_FIELD, -1))
        if self.mode in (c.MODE_TIMESTAMP, c.MODE_TIMESTAMP_INCREMENTING):
            if offset.get(TIMESTAMP_FIELD) is not None:
                self.timestamp = offset_to_timestamp(int(offset[TIMESTAMP_FIELD]), offset.get(TIMESTAMP_NANOS_FIELD))
            else:
                initial = self.settings.get(c.TIMESTAMP_INITIAL)
                if initial is None:
                    self.timestamp = _EPOCH
                elif int(initial) == -1:
                    self.timestamp = _dt.datetime.now(_dt.timezone.utc)
                else:
                    self.timestamp = offset_to_timestamp(int(initial), None)

    def offset(self) -> dict[str, Any] | None:
        if self.mode == c.MODE_BULK:
            return None
        out: dict[str, Any] = {}
        if self.incrementing is not None:
            out[INCREMENTING_FIELD] = self.incrementing
        if self.timestamp is not None:
            ms, nanos = timestamp_to_offset(self.timestamp)
            out[TIMESTAMP_FIELD] = ms
            out[TIMESTAMP_NANOS_FIELD] = nanos
        return out

    # -- querying ----------------------------------------------------------------------------
    @property
    def querying(self) -> bool:
        return self._result is not None

    def _reflect(self, conn: sa.engine.Connection) -> None:
        if self._table is not None:
            return
        table = sa.Table(self.table_name or "", sa.MetaData(), schema=self.schema_name, autoload_with=conn)
        sqlite = self.engine.dialect.name == "sqlite"
        mapping = str(self.settings[c.NUMERIC_MAPPING])
        columns = [(col.name, column_schema(col, bool(col.nullable), mapping, sqlite)) for col in table.columns]
        if self.mode in (c.MODE_INCREMENTING, c.MODE_TIMESTAMP_INCREMENTING) and not self.incrementing_column:
            keys = [col for col in table.primary_key.columns if isinstance(col.type, sa.Integer)]
            if len(keys) != 1:
                raise ConnectException(f"Cannot find a unique auto-incrementing integer key in {self.table_name}: "
                                       f"set {c.INCREMENTING_COLUMN}")
            self.incrementing_column = keys[0].name
        for name in ([self.incrementing_column] if self.incrementing_column else []) + self.timestamp_columns:
            if name not in table.c:
                raise ConnectException(f"Column {name} not found in table {self.table_name}")
            if self.settings[c.VALIDATE_NON_NULL] and table.c[name].nullable and not table.c[name].primary_key and \
                    not (name in self.timestamp_columns and len(self.timestamp_columns) > 1):
                raise ConnectException(f"Cannot make incremental queries using column {name} on "
                                       f"{self.table_name} because this column is nullable.")
        self._table = table
        self._columns = columns
        builder = SchemaBuilder.struct().name(self.table_name)
        for name, schema in columns:
            builder.field(name, schema)
        self._schema = builder.build()

    def _source(self, conn: sa.engine.Connection) -> Any:
        """The selectable the criteria apply to: the table, or the custom query as a subquery."""
        if self.table_name is not None:
            self._reflect(conn)
            return self._table
        names = list(conn.execute(sa.text(f"SELECT * FROM ({self.query}) AS q LIMIT 0")).keys())
        return sa.text(self.query or "").columns(*[sa.column(n) for n in names]).subquery("q")

    def _end_time(self, conn: sa.engine.Connection) -> _dt.datetime:
        if self.engine.dialect.name == "postgresql":
            now = conn.execute(sa.select(sa.func.current_timestamp())).scalar_one()
            now = now if now.tzinfo else now.replace(tzinfo=self.zone)
        else:
            now = _dt.datetime.now(_dt.timezone.utc)
        return now - self.delay

    def _db_time(self, moment: _dt.datetime, column: Any) -> _dt.datetime:
        """An instant as the column compares it: naive in db.timezone unless the column has a zone."""
        if getattr(column.type, "timezone", False):
            return moment
        return moment.astimezone(self.zone).replace(tzinfo=None)

    def _statement(self, conn: sa.engine.Connection) -> Any:
        source = self._source(conn)
        statement = sa.select(source)
        ts_expr: Any = None
        if self.timestamp_columns:
            cols = [source.c[n] for n in self.timestamp_columns]
            ts_expr = cols[0] if len(cols) == 1 else sa.func.coalesce(*cols)
        inc_col = source.c[self.incrementing_column] if self.incrementing_column else None
        if self.mode == c.MODE_INCREMENTING:
            assert inc_col is not None
            statement = statement.where(inc_col > self.incrementing).order_by(inc_col.asc())
        elif self.mode in (c.MODE_TIMESTAMP, c.MODE_TIMESTAMP_INCREMENTING):
            if ts_expr is None:
                raise ConnectException(f"{c.TIMESTAMP_COLUMN} must be set for mode {self.mode}")
            ref = source.c[self.timestamp_columns[0]]
            start = self._db_time(self.timestamp or _EPOCH, ref)
            end = self._db_time(self._end_time(conn), ref)
            if self.mode == c.MODE_TIMESTAMP:
                statement = statement.where(ts_expr > start, ts_expr < end).order_by(ts_expr.asc())
            else:
                assert inc_col is not None
                statement = statement.where(
                    ts_expr < end, sa.or_(sa.and_(ts_expr == start, inc_col > self.incrementing), ts_expr > start)
                ).order_by(ts_expr.asc(), inc_col.asc())
        return statement

    def _start(self) -> None:
        conn = self.engine.connect()
        try:
            statement = self._statement(conn)
            self._result = conn.execution_options(stream_results=True).execute(statement)
            self._conn = conn
            if self.table_name is None:
                self._columns = self._query_columns(self._result)
        except Exception:
            conn.close()
            raise

    def _query_columns(self, result: Any) -> list[tuple[str, Schema]]:
        described = result.cursor.description if result.cursor is not None else None
        columns = []
        for i, name in enumerate(result.keys()):
            type_code = described[i][1] if described else None
            columns.append((name, _PG_OIDS.get(type_code, OPTIONAL_STRING_SCHEMA)
                            if isinstance(type_code, int) else OPTIONAL_STRING_SCHEMA))
        self._infer_pending = described is None or all(d[1] is None for d in described)
        self._set_query_schema(columns)
        return columns

    def _set_query_schema(self, columns: list[tuple[str, Schema]]) -> None:
        builder = SchemaBuilder.struct()
        for name, schema in columns:
            builder.field(name, schema)
        self._schema = builder.build()
        self._columns = columns

    def _infer_query_schema(self, rows: list[Any]) -> None:
        """SQLite reports no result types: a custom query's columns take the type of their first value."""
        columns = []
        for name, _ in self._columns:
            sample = next((row._mapping[name] for row in rows if row._mapping[name] is not None), None)
            schema = (OPTIONAL_INT64_SCHEMA if isinstance(sample, int) and not isinstance(sample, bool)
                      else OPTIONAL_FLOAT64_SCHEMA if isinstance(sample, float)
                      else OPTIONAL_BYTES_SCHEMA if isinstance(sample, bytes) else OPTIONAL_STRING_SCHEMA)
            columns.append((name, schema))
        self._set_query_schema(columns)
        self._infer_pending = False

    def close(self) -> None:
        """End the current query (exhausted, failed, or the task stopping)."""
        result, conn = self._result, self._conn
        self._result = self._conn = None
        for thing in (result, conn):
            if thing is not None:
                try:
                    thing.close()
                except Exception:  # closing after a lost connection: nothing left to release
                    log.debug("closing after a failed query", exc_info=True)

    def poll(self) -> list[SourceRecord]:
        """Up to batch.max.rows records; when the result is exhausted the querier sleeps poll.interval.ms."""
        try:
            if self._result is None:
                self._start()
            rows = self._result.fetchmany(self.batch)
        except Exception as exc:
            self.close()
            self._table = None  # reflect again after a reconnect (the table may have changed)
            self.next_update = time.monotonic() + min(self.poll_interval, 1.0)
            raise translate(exc, f"Failed to run query for {self.table_name or 'query'}") from exc
        if rows and self.table_name is None and self._infer_pending:
            self._infer_query_schema(rows)
        records = [self._record(row) for row in rows]
        if len(rows) < self.batch:
            self.close()
            self.next_update = time.monotonic() + self.poll_interval
        return records

    def _record(self, row: Any) -> SourceRecord:
        assert self._schema is not None
        struct = Struct(self._schema)
        mapping = row._mapping
        for name, schema in self._columns:
            value = mapping[name]
            struct.put(name, to_connect_value(schema, value, self.zone))
        if self.incrementing_column is not None and self.mode in (c.MODE_INCREMENTING, c.MODE_TIMESTAMP_INCREMENTING):
            self.incrementing = int(mapping[self.incrementing_column])
        if self.timestamp_columns and self.mode in (c.MODE_TIMESTAMP, c.MODE_TIMESTAMP_INCREMENTING):
            moment = next((mapping[n] for n in self.timestamp_columns if mapping[n] is not None), None)
            if moment is not None:
                if isinstance(moment, str):
                    moment = _dt.datetime.fromisoformat(moment)
                self.timestamp = moment.astimezone(_dt.timezone.utc) if moment.tzinfo else \
                    moment.replace(tzinfo=self.zone).astimezone(_dt.timezone.utc)
        return SourceRecord(dict(self.partition), self.offset(), self.topic, None, None, None, self._schema, struct)
