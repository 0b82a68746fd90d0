"""Confluent's JDBC sink connector on SQLAlchemy (io.confluent.connect.jdbc.JdbcSinkConnector).

Each ``put`` is one transaction: records are grouped per destination table
(``table.name.format``), the table is created (``auto.create``) or widened (``auto.evolve``) from
the record schemas, and rows are written in batches of ``batch.size`` with ``insert.mode``
insert, upsert (``INSERT .. ON CONFLICT (pk) DO UPDATE``) or update; tombstones delete by key
when ``delete.enabled``. Primary keys follow ``pk.mode``/``pk.fields`` as Confluent defines them
(``kafka`` mode keys rows by ``__connect_topic``/``__connect_partition``/``__connect_offset``, so
a redelivered record upserts the same row: exactly once in the table).

Failures: a lost connection rolls the transaction back and raises RetriableException after
``context.timeout(retry.backoff.ms)``, so the runtime redelivers the same batch (``max.retries``
times, then the task fails); a record the database or the mapping refuses goes to the
dead-letter queue through the errant record reporter when one is configured (KIP-610; the rest
of the batch is written), else it fails the task as Confluent's does after its retries.

Beyond Confluent: a schemaless map value (JsonConverter with schemas.enable=false) is accepted,
its columns typed from the values, so JSON topics can be sunk without a schema envelope.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from ...config import AbstractConfig, ConfigDef, ConfigException
from ...connector import SinkConnector, SinkTask, Task, TopicPartition
from ...data import (
    INT32_SCHEMA, INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Schema, SchemaBuilder, Struct, Type,
)
from ...errors import ConnectException, DataException, RetriableException
from ...records import SinkRecord
from ...values import infer_schema
from . import config as c
from .dialect import create_engine, is_connection_error, sql_type, to_db_value, translate, upsert_statement

log = logging.getLogger(__name__)

KAFKA_PK_FIELDS = ("__connect_topic", "__connect_partition", "__connect_offset")
DEFAULT_KEY_FIELD = "__connect_key"


class JdbcSinkConnector(SinkConnector):
    def __init__(self) -> None:
        super().__init__()
        self.props: dict[str, str] = {}

    def config(self) -> ConfigDef:
        return c.sink_config_def()

    def start(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        SinkSettings.parse(props)  # fail fast on a bad configuration

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


@dataclass
class SinkSettings:
    values: dict[str, Any]

    @staticmethod
    def parse(props: Mapping[str, Any]) -> "SinkSettings":
        values = AbstractConfig(c.sink_config_def(), props).values
        if values[c.DELETE_ENABLED] and values[c.PK_MODE] != "record_key":
            raise ConfigException(c.DELETE_ENABLED, "true", "Primary key mode must be 'record_key' when delete "
                                  "support is enabled")
        if values[c.PK_MODE] == "kafka" and values[c.PK_FIELDS] and len(values[c.PK_FIELDS]) != 3:
            raise ConfigException(c.PK_FIELDS, ",".join(values[c.PK_FIELDS]), "PK mode for table is KAFKA so "
                                  "there should either be no field names defined for defaults "
                                  f"{list(KAFKA_PK_FIELDS)} to be applicable, or exactly 3")
        return SinkSettings(values)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


@dataclass(frozen=True)
class FieldsMetadata:
    """Which columns a record writes: key columns and value columns with their schemas (Confluent's)."""

    key: tuple[tuple[str, Schema], ...]
    value: tuple[tuple[str, Schema], ...]

    @property
    def all(self) -> tuple[tuple[str, Schema], ...]:
        return self.key + self.value


def _struct_of(schema: Schema | None, value: Any, what: str) -> tuple[Schema, Struct] | None:
    """A record side as a struct: a struct as is, a schemaless map with inferred optional fields."""
    if value is None:
        return None
    if isinstance(value, Struct):
        return value.schema, value
    if schema is None and isinstance(value, dict):
        builder = SchemaBuilder.struct()
        for name, item in value.items():
            inferred = infer_schema(item) if item is not None else None
            if inferred is None or inferred.type in (Type.ARRAY, Type.MAP, Type.STRUCT):
                inferred = OPTIONAL_STRING_SCHEMA
            elif inferred.type.is_integer:
                inferred = SchemaBuilder.int64().optional().build()
            else:
                inferred = _optional(inferred)
            builder.field(str(name), inferred)
        built = builder.build()
        struct = Struct(built)
        for name, item in value.items():
            schema_of = built.field(str(name))
            assert schema_of is not None
            if item is not None and schema_of.schema == OPTIONAL_STRING_SCHEMA and not isinstance(item, str):
                import json
                item = json.dumps(item, default=str)
            struct.put(str(name), item)
        return built, struct
    raise DataException(f"Sink connector requires records with a non-null Struct value and non-null Struct schema "
                        f"(or a map without schema), but found record {what} of type {type(value).__name__}")


def _optional(schema: Schema) -> Schema:
    if schema.optional:
        return schema
    return Schema(schema.type, True, None, schema.name, schema.version, schema.doc, schema.parameters)


def fields_metadata(settings: SinkSettings, record: SinkRecord) -> FieldsMetadata:
    mode, pk_fields, whitelist = settings[c.PK_MODE], list(settings[c.PK_FIELDS]), set(settings[c.FIELDS_WHITELIST])
    value = _struct_of(record.value_schema, record.value, "value")
    value_fields = [(f.name, f.schema) for f in value[0].fields] if value else []
    key: list[tuple[str, Schema]] = []
    if mode == "kafka":
        names = pk_fields or list(KAFKA_PK_FIELDS)
        key = list(zip(names, (STRING_SCHEMA, INT32_SCHEMA, INT64_SCHEMA)))
    elif mode == "record_key":
        if record.key is None:
            raise DataException("PK mode for table is RECORD_KEY, but record key is null")
        if isinstance(record.key, (Struct, dict)):
            key_struct = _struct_of(record.key_schema, record.key, "key")
            assert key_struct is not None
            fields = {f.name: f.schema for f in key_struct[0].fields}
            names = pk_fields or list(fields)
            missing = [n for n in names if n not in fields]
            if missing:
                raise ConnectException(f"PK mode for table is RECORD_KEY with configured PK fields {names}, but "
                                       f"record key schema does not contain fields: {missing}")
            key = [(n, fields[n]) for n in names]
        else:
            if len(pk_fields) > 1:
                raise ConnectException("Need exactly one PK column defined since the key schema for records is a "
                                       f"primitive type, defined columns are: {pk_fields}")
            key_schema = record.key_schema or infer_schema(record.key) or STRING_SCHEMA
            key = [((pk_fields or [DEFAULT_KEY_FIELD])[0], Schema(key_schema.type, False, None, key_schema.name,
                                                                 key_schema.version, None, key_schema.parameters))]
    elif mode == "record_value":
        fields = dict(value_fields)
        names = pk_fields or list(fields)
        missing = [n for n in names if n not in fields]
        if missing:
            raise ConnectException(f"PK mode for table is RECORD_VALUE with configured PK fields {names}, but "
                                   f"record value schema does not contain fields: {missing}")
        key = [(n, fields[n]) for n in names]
    key_names = {n for n, _ in key}
    values = tuple((n, s) for n, s in value_fields if n not in key_names and (not whitelist or n in whitelist))
    return FieldsMetadata(tuple(key), values)


class TableWriter:
    """Creates/evolves tables and writes rows; one instance per task, tables reflected once."""

    def __init__(self, engine: sa.engine.Engine, settings: SinkSettings) -> None:
        self.engine = engine
        self.settings = settings
        self.zone = ZoneInfo(settings[c.DB_TIMEZONE])
        self._tables: dict[str, sa.Table] = {}
        self._metadata: dict[tuple[Any, ...], FieldsMetadata] = {}

    def fields(self, record: SinkRecord) -> FieldsMetadata:
        """fields_metadata, computed once per key/value schema pair (schemaless maps every time)."""
        if isinstance(record.value, dict) or isinstance(record.key, dict):
            return fields_metadata(self.settings, record)
        cache_key = (record.key_schema, record.value_schema, record.value is None,
                     None if record.key_schema is not None else type(record.key))
        meta = self._metadata.get(cache_key)
        if meta is None:
            meta = fields_metadata(self.settings, record)
            if len(self._metadata) > 256:
                self._metadata.clear()
            self._metadata[cache_key] = meta
        return meta

    def table_name(self, topic: str) -> tuple[str | None, str]:
        name = str(self.settings[c.TABLE_NAME_FORMAT]).replace("${topic}", topic)
        schema, _, table = name.rpartition(".")
        return (schema or None), table

    def ensure_table(self, conn: sa.engine.Connection, topic: str, meta: FieldsMetadata) -> sa.Table:
        schema, name = self.table_name(topic)
        qualified = f"{schema}.{name}" if schema else name
        table = self._tables.get(qualified)
        if table is None:
            if not sa.inspect(conn).has_table(name, schema=schema):
                if not self.settings[c.AUTO_CREATE]:
                    raise ConnectException(f"Table {qualified} is missing and auto-creation is disabled")
                self._create(conn, schema, name, meta)
            table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
            self._tables[qualified] = table
        missing = [(n, s) for n, s in meta.all if n not in table.c]
        if missing:
            if not self.settings[c.AUTO_EVOLVE]:
                raise ConnectException(f"Table {qualified} is missing fields ({[n for n, _ in missing]}) and "
                                       "auto-evolution is disabled")
            self._evolve(conn, table, missing)
            table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
            self._tables[qualified] = table
        return table

    def _create(self, conn: sa.engine.Connection, schema: str | None, name: str, meta: FieldsMetadata) -> None:
        key_names = {n for n, _ in meta.key}
        columns = [sa.Column(n, sql_type(s), primary_key=n in key_names,
                             nullable=(s.optional and n not in key_names), autoincrement=False,
                             server_default=_default_clause(s))
                   for n, s in meta.all]
        log.info("Creating table %s with columns %s", name, [n for n, _ in meta.all])
        sa.Table(name, sa.MetaData(), *columns, schema=schema).create(conn, checkfirst=True)

    def _evolve(self, conn: sa.engine.Connection, table: sa.Table, missing: list[tuple[str, Schema]]) -> None:
        preparer = conn.dialect.identifier_preparer
        for name, schema in missing:
            if not schema.optional and schema.default is None:
                raise ConnectException(f"Cannot ALTER TABLE {table.name} to add missing field {name}, as the field "
                                       "is not optional and does not have a default value")
            column = sa.Column(name, sql_type(schema), nullable=schema.optional,
                               server_default=_default_clause(schema))
            ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
            log.info("Amending table %s: adding column %s", table.name, name)
            conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN {ddl}"))

    def row(self, record: SinkRecord, meta: FieldsMetadata) -> dict[str, Any]:
        out: dict[str, Any] = {}
        mode = self.settings[c.PK_MODE]
        if mode == "kafka":
            names = [n for n, _ in meta.key]
            out.update(zip(names, (record.topic, record.kafka_partition, record.kafka_offset)))
        elif mode == "record_key":
            if isinstance(record.key, (Struct, dict)):
                key = _struct_of(record.key_schema, record.key, "key")
                assert key is not None
                out.update({n: to_db_value(s, key[1].get(n), self.zone) for n, s in meta.key})
            else:
                name, schema = meta.key[0]
                out[name] = to_db_value(schema, record.key, self.zone)
        value = _struct_of(record.value_schema, record.value, "value")
        if value is not None:
            struct = value[1]
            if mode == "record_value":
                out.update({n: to_db_value(s, struct.get(n), self.zone) for n, s in meta.key})
            out.update({n: to_db_value(s, struct.get(n), self.zone) for n, s in meta.value})
        return out

    def write(self, records: list[SinkRecord]) -> None:
        """All records in one transaction, in order, batched per table and kind of statement."""
        with self.engine.begin() as conn:
            pending: list[dict[str, Any]] = []
            pending_key: tuple[Any, ...] | None = None
            for record in records:
                if record.value is None and not self.settings[c.DELETE_ENABLED]:
                    log.debug("Ignoring the tombstone at %s-%s@%s (delete.enabled=false)", record.topic,
                              record.kafka_partition, record.kafka_offset)
                    continue
                meta = self.fields(record)
                table = self.ensure_table(conn, record.topic, meta)
                kind = "delete" if record.value is None else str(self.settings[c.INSERT_MODE])
                columns = tuple(n for n, _ in (meta.key if kind == "delete" else meta.all))
                group = (table.fullname, kind, columns)
                if pending and (group != pending_key or len(pending) >= max(1, int(self.settings[c.BATCH_SIZE]))):
                    self._flush(conn, pending_key, pending)
                    pending = []
                pending_key = group
                pending.append(self.row(record, meta))
            if pending:
                self._flush(conn, pending_key, pending)

    def _flush(self, conn: sa.engine.Connection, group: tuple[Any, ...] | None, rows: list[dict[str, Any]]) -> None:
        assert group is not None
        fullname, kind, columns = group
        table = next(t for t in self._tables.values() if t.fullname == fullname)
        key_names = [n for n, _ in self._key_columns(table, columns, kind)]
        if kind in ("upsert", "update", "delete") and not key_names:
            raise ConnectException(f"Write to table '{fullname}' in {kind.upper()} mode requires key field names to "
                                   "be known, check the primary key configuration")
        if kind == "insert":
            conn.execute(table.insert(), rows)
        elif kind == "upsert":
            conn.execute(upsert_statement(self.engine, table, key_names, list(columns)), rows)
        elif kind == "update":
            condition = sa.and_(*[table.c[n] == sa.bindparam(f"pk_{n}") for n in key_names])
            updates: dict[str, Any] = {n: sa.bindparam(n) for n in columns if n not in key_names}
            statement = table.update().where(condition).values(updates)
            conn.execute(statement, [{**r, **{f"pk_{n}": r[n] for n in key_names}} for r in rows])
        else:
            condition = sa.and_(*[table.c[n] == sa.bindparam(f"pk_{n}") for n in key_names])
            conn.execute(table.delete().where(condition), [{f"pk_{n}": r[n] for n in key_names} for r in rows])

    def _key_columns(self, table: sa.Table, columns: tuple[str, ...], kind: str) -> list[tuple[str, None]]:
        mode = self.settings[c.PK_MODE]
        if mode == "none":
            return []
        configured = list(self.settings[c.PK_FIELDS])
        if mode == "kafka":
            names = configured or list(KAFKA_PK_FIELDS)
        elif configured:
            names = configured
        else:
            names = [col.name for col in table.primary_key.columns if col.name in columns]
            if not names and mode == "record_key" and DEFAULT_KEY_FIELD in columns:
                names = [DEFAULT_KEY_FIELD]
        return [(n, None) for n in names if n in columns]

    def forget(self) -> None:
        self._tables.clear()


def _default_clause(schema: Schema) -> Any:
    default = schema.default
    if default is None or schema.type in (Type.BYTES, Type.ARRAY, Type.MAP, Type.STRUCT) or schema.name:
        return None
    if isinstance(default, bool):
        return sa.true() if default else sa.false()
    if isinstance(default, (int, float)):
        return sa.text(repr(default))
    return sa.text("'" + str(default).replace("'", "''") + "'")


class JdbcSinkTask(SinkTask):
    def __init__(self) -> None:
        super().__init__()
        self.settings: SinkSettings | None = None
        self.engine: sa.engine.Engine | None = None
        self.writer: TableWriter | None = None
        self.remaining_retries = 0

    def start(self, props: dict[str, str]) -> None:
        self.settings = SinkSettings.parse(props)
        self.engine = create_engine(self.settings[c.CONNECTION_URL], self.settings[c.CONNECTION_USER],
                                    self.settings[c.CONNECTION_PASSWORD])
        self.writer = TableWriter(self.engine, self.settings)
        self.remaining_retries = int(self.settings[c.MAX_RETRIES])

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        assert self.writer is not None and self.settings is not None
        try:
            self.writer.write(records)
        except (sa.exc.SQLAlchemyError, ConnectException) as exc:
            self.writer.forget()
            reporter = self.context.errant_record_reporter() if self.context is not None else None
            connection_lost = isinstance(exc, sa.exc.SQLAlchemyError) and is_connection_error(exc)
            if not connection_lost and reporter is not None:
                self._write_one_by_one(records, reporter)
                self.remaining_retries = int(self.settings[c.MAX_RETRIES])
                return
            self._retry_or_fail(exc)
        else:
            self.remaining_retries = int(self.settings[c.MAX_RETRIES])

    def _retry_or_fail(self, exc: BaseException) -> None:
        assert self.settings is not None
        error = translate(exc, "Write to the database failed") if isinstance(exc, sa.exc.SQLAlchemyError) else exc
        if self.remaining_retries <= 0:
            raise ConnectException(f"Exceeded max.retries ({self.settings[c.MAX_RETRIES]}): {error}") from exc
        self.remaining_retries -= 1
        backoff = int(self.settings[c.RETRY_BACKOFF])
        log.warning("Write of %s failed, %d retries left, retrying in %d ms: %s", "records", self.remaining_retries,
                    backoff, error)
        if self.engine is not None:
            self.engine.dispose()
        if self.context is not None:
            self.context.timeout(backoff)
        raise RetriableException(str(error)) from exc

    def _write_one_by_one(self, records: list[SinkRecord], reporter: Any) -> None:
        """KIP-610: each record alone; the ones the database refuses go to the errant record reporter."""
        assert self.writer is not None
        for record in records:
            try:
                self.writer.write([record])
            except (sa.exc.SQLAlchemyError, ConnectException) as exc:
                self.writer.forget()
                if isinstance(exc, sa.exc.SQLAlchemyError) and is_connection_error(exc):
                    self._retry_or_fail(exc)
                error = translate(exc, "Write failed") if isinstance(exc, sa.exc.SQLAlchemyError) else exc
                log.warning("Reporting record %s-%s@%s: %s", record.topic, record.kafka_partition,
                            record.kafka_offset, error)
                future = reporter.report(record, error)
                if hasattr(future, "result"):
                    future.result()

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Nothing buffered: every put committed its own transaction."""

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None


