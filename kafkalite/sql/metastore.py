"""Streams, tables and persistent queries (ksqlDB's ``MetaStoreImpl``): pure bookkeeping, no I/O.

The engine changes it only while applying a statement from the command topic, so every server
with the same ``ksql.service.id`` rebuilds the same metastore by replaying the same log.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kafkalite.sql.ast import ColumnDef, SqlType, Window
from kafkalite.sql.errors import KsqlError

FORMATS = ("JSON", "AVRO", "DELIMITED", "KAFKA")

#: the pseudo columns every source has (ksqlDB's ROWTIME, ROWPARTITION, ROWOFFSET)
ROWTIME = ColumnDef("ROWTIME", SqlType("BIGINT"))


@dataclass(frozen=True)
class DataSource:
    """A stream or table over a topic (ksqlDB's ``KsqlStream`` / ``KsqlTable``)."""

    name: str
    kind: str                                     # STREAM or TABLE
    topic: str
    columns: tuple[ColumnDef, ...]                # key columns first, as ksqlDB lists them
    key_format: str = "KAFKA"
    value_format: str = "JSON"
    timestamp: str | None = None                  # the TIMESTAMP column (BIGINT ms), else the record's
    window: Window | None = None                  # a windowed table's window (from its query)
    value_delimiter: str = ","
    key_schema_id: int | None = None              # KEY_SCHEMA_ID: the registry schema the key column comes from
    value_schema_id: int | None = None            # VALUE_SCHEMA_ID: the registry schema the value columns come from
    key_schema_full_name: str | None = None       # KEY_SCHEMA_FULL_NAME: the key record's Avro full name
    value_schema_full_name: str | None = None     # VALUE_SCHEMA_FULL_NAME: the value record's Avro full name
    statement: str = ""
    read_only: bool = False                       # CREATE SOURCE STREAM|TABLE: no query or INSERT writes it

    @property
    def key_columns(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if c.key)

    @property
    def value_columns(self) -> tuple[ColumnDef, ...]:
        return tuple(c for c in self.columns if not c.key)

    def column(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass
class PersistentQuery:
    """A CREATE ... AS SELECT / INSERT INTO running as a Spark streaming query."""

    id: str                                       # CSAS_<SINK>_<n>, CTAS_<SINK>_<n>, INSERTQUERY_<n>
    statement: str
    sink: str
    sources: tuple[str, ...]
    state: str = "RUNNING"                        # RUNNING, ERROR, TERMINATED (ksqlDB's KsqlQueryStatus)
    error: str | None = None
    source_table: bool = False                    # CST_<TABLE>_<n>: materializes a SOURCE TABLE, no sink
    #: the request's properties it was created with (SET, streamsProperties): EXPLAIN's overriddenProperties
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class MetaStore:
    sources: dict[str, DataSource] = field(default_factory=dict)
    queries: dict[str, PersistentQuery] = field(default_factory=dict)

    def get(self, name: str) -> DataSource | None:
        return self.sources.get(name)

    def require(self, name: str, statement: str = "") -> DataSource:
        source = self.sources.get(name)
        if source is None:
            raise KsqlError(f"{name} does not exist.", statement=statement)
        return source

    def add(self, source: DataSource, *, replace_existing: bool = False, statement: str = "") -> None:
        existing = self.sources.get(source.name)
        if existing is not None and not replace_existing:
            kind = existing.kind.lower()
            raise KsqlError(f"Cannot add {source.kind.lower()} '{source.name}': A {kind} with the same name "
                            "already exists", statement=statement)
        if existing is not None and existing.kind != source.kind:
            raise KsqlError(f"Cannot replace {existing.kind.lower()} '{source.name}' with a "
                            f"{source.kind.lower()}", statement=statement)
        self.sources[source.name] = source

    def readers_and_writers(self, name: str) -> tuple[list[str], list[str]]:
        live = [q for q in self.queries.values() if q.state != "TERMINATED"]
        return ([q.id for q in live if name in q.sources], [q.id for q in live if q.sink == name])

    def drop(self, name: str, *, statement: str = "") -> DataSource:
        """The source removed, refused while a query reads or writes it; a SOURCE TABLE's own
        materializing query does not count: the engine terminates it with the table (ksqlDB's
        ``maybeTerminateCreateAsQuery``)."""
        source = self.require(name, statement)
        readers, writers = self.readers_and_writers(name)
        readers = [r for r in readers if r not in self.source_table_queries(name)]
        if readers or writers:
            raise KsqlError(f"Cannot drop {name}.\nThe following queries read from this source: [{', '.join(readers)}]."
                            f"\nThe following queries write into this source: [{', '.join(writers)}].\n"
                            "You need to terminate them before dropping " + name + ".", statement=statement)
        return self.sources.pop(name)

    def source_table_queries(self, name: str) -> list[str]:
        """The live query that materializes the SOURCE TABLE ``name`` (none for other sources)."""
        return [q.id for q in self.live_queries() if q.source_table and q.sources == (name,)]

    def add_query(self, query: PersistentQuery) -> None:
        self.queries[query.id] = query

    def terminate(self, query_id: str, *, statement: str = "") -> PersistentQuery:
        query = self.queries.get(query_id)
        if query is None or query.state == "TERMINATED":
            raise KsqlError(f"Unknown queryId: {query_id}", statement=statement)
        query.state = "TERMINATED"
        return query

    def live_queries(self) -> list[PersistentQuery]:
        return [q for q in self.queries.values() if q.state != "TERMINATED"]

    def with_window(self, name: str, window: Window) -> None:
        self.sources[name] = replace(self.sources[name], window=window)
