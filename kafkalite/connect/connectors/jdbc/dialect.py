"""What differs between databases, on SQLAlchemy: URLs, engines, column types, upserts, errors.

Confluent's connector has one DatabaseDialect per database; SQLAlchemy already is that layer
(reflection, DDL, quoting, ``INSERT .. ON CONFLICT`` for PostgreSQL and SQLite), so this module
only maps between Connect schemas and SQLAlchemy types and sorts database errors into
retriable (the connection) and not (the data).
"""
from __future__ import annotations

import datetime as _dt
import decimal
import logging
import re
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import parse_qsl

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from ...config import Password
from ...data import Date, Decimal, Schema, SchemaBuilder, Time, Timestamp, Type
from ...errors import ConnectException, DataException, RetriableException

log = logging.getLogger(__name__)

_JDBC_PG = re.compile(r"^jdbc:postgresql://(?P<hostport>[^/?]*)(?:/(?P<db>[^?]*))?(?:\?(?P<query>.*))?$")


def sqlalchemy_url(url: str, user: str | None = None, password: str | Password | None = None) -> sa.engine.URL:
    """A Confluent-style JDBC URL or an SQLAlchemy URL as an SQLAlchemy URL (psycopg for PostgreSQL)."""
    secret = password.value if isinstance(password, Password) else password
    text = url.strip()
    if text.startswith("jdbc:sqlite:"):
        path = text[len("jdbc:sqlite:"):]
        return sa.engine.make_url("sqlite://" if path in ("", ":memory:") else f"sqlite:///{path}")
    match = _JDBC_PG.match(text)
    if match:
        params = dict(parse_qsl(match.group("query") or ""))
        user = user or params.pop("user", None)
        secret = secret or params.pop("password", None)
        host, _, port = (match.group("hostport") or "localhost").partition(":")
        return sa.engine.URL.create("postgresql+psycopg", username=user, password=secret, host=host or "localhost",
                                    port=int(port) if port else None, database=match.group("db") or None,
                                    query=params)
    if text.startswith("jdbc:"):
        raise ConnectException(f"Unsupported JDBC URL {text!r}: kafkalite's JDBC connectors speak PostgreSQL "
                               "(jdbc:postgresql://...) and SQLite (jdbc:sqlite:...), or any SQLAlchemy URL")
    try:
        parsed = sa.engine.make_url(text)
    except sa_exc.ArgumentError as exc:
        raise ConnectException(f"Invalid connection.url {text!r}: {exc}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if user and not parsed.username:
        parsed = parsed.set(username=user)
    if secret and not parsed.password:
        parsed = parsed.set(password=secret)
    return parsed


def create_engine(url: str, user: str | None = None, password: str | Password | None = None) -> sa.engine.Engine:
    """An engine that checks pooled connections before use, so a restarted database is reconnected to."""
    target = sqlalchemy_url(url, user, password)
    kwargs: dict[str, Any] = {"pool_pre_ping": True, "future": True}
    if target.drivername.startswith("postgresql"):
        kwargs["connect_args"] = {"connect_timeout": 10}
    return sa.create_engine(target, **kwargs)


def redacted(url: str) -> str:
    return re.sub(r"(password=)[^&;]*", r"\1****", re.sub(r"//([^:/@]+):[^@]*@", r"//\1:****@", url))


# -- errors -----------------------------------------------------------------------------------
def is_connection_error(exc: BaseException) -> bool:
    """A lost or refused connection (retry), as opposed to a statement the database rejected."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, (sa_exc.InterfaceError, sa_exc.DisconnectionError, sa_exc.TimeoutError)):
        return True
    if isinstance(exc, sa_exc.OperationalError):
        text = str(exc.orig if exc.orig is not None else exc).lower()
        return any(word in text for word in (
            "connection", "connect", "server closed", "terminating", "shutting down", "starting up",
            "the database system is", "timeout", "could not receive", "no route", "refused", "database is locked",
            "recovery mode", "ssl syscall", "unable to open database"))
    return False


def translate(exc: BaseException, action: str) -> ConnectException:
    """A database error as Connect's: connection errors retriable, the rest ConnectException."""
    if is_connection_error(exc):
        return RetriableException(f"{action}: {_short(exc)}")
    if isinstance(exc, (sa_exc.DataError, sa_exc.IntegrityError)):
        return DataException(f"{action}: {_short(exc)}")
    return ConnectException(f"{action}: {_short(exc)}")


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    return " ".join(str(orig if orig is not None else exc).split())


# -- database columns -> Connect --------------------------------------------------------------
def column_schema(column: Any, optional: bool, numeric_mapping: str = "none", sqlite: bool = False) -> Schema:
    """The Connect schema of a reflected column (Confluent's GenericDatabaseDialect mapping)."""
    col_type = column["type"] if isinstance(column, Mapping) else column.type
    builder: SchemaBuilder | None = None
    if isinstance(col_type, sa.Boolean):
        builder = SchemaBuilder.boolean()
    elif isinstance(col_type, sa.SmallInteger):
        builder = SchemaBuilder.int16()
    elif isinstance(col_type, sa.BigInteger):
        builder = SchemaBuilder.int64()
    elif isinstance(col_type, sa.Integer):
        # SQLite's INTEGER holds 64 bits (rowids): INT64 so large ids are not refused
        builder = SchemaBuilder.int64() if sqlite else SchemaBuilder.int32()
    elif isinstance(col_type, sa.Numeric) and not isinstance(col_type, sa.Float):
        precision, scale = col_type.precision, col_type.scale
        if precision is None and scale is None:
            # an unconstrained NUMERIC has no fixed scale for a Connect Decimal: rounding every value to
            # a guessed scale would lose digits silently, so it reads as a double
            builder = SchemaBuilder.float64()
        elif numeric_mapping in ("best_fit", "precision_only") and precision is not None and (scale or 0) == 0:
            builder = (SchemaBuilder.int8() if precision < 3 else SchemaBuilder.int16() if precision < 5
                       else SchemaBuilder.int32() if precision < 10 else SchemaBuilder.int64() if precision < 19
                       else Decimal.builder(0))
        elif numeric_mapping == "best_fit" and precision is not None and precision <= 15 and (scale or 0) > 0:
            builder = SchemaBuilder.float64()
        else:
            builder = Decimal.builder(scale if scale is not None else 0)
    elif isinstance(col_type, (sa.Float, sa.REAL)) or type(col_type).__name__ in ("DOUBLE_PRECISION", "DOUBLE"):
        # PostgreSQL's real is 4 bytes; SQLite's REAL is an 8-byte double
        is_real = not sqlite and (isinstance(col_type, sa.REAL) or getattr(col_type, "precision", None) in range(1, 25))
        builder = SchemaBuilder.float32() if is_real and not type(col_type).__name__.startswith("DOUBLE") \
            else SchemaBuilder.float64()
    elif isinstance(col_type, sa.DateTime):
        builder = Timestamp.builder()
    elif isinstance(col_type, sa.Date):
        builder = Date.builder()
    elif isinstance(col_type, sa.Time):
        builder = Time.builder()
    elif isinstance(col_type, (sa.LargeBinary, sa.types._Binary)):
        builder = SchemaBuilder.bytes_()
    elif isinstance(col_type, (sa.String, sa.Enum)) or type(col_type).__name__ in ("UUID", "JSON", "JSONB"):
        builder = SchemaBuilder.string()
    elif isinstance(col_type, sa.types.NullType):
        builder = SchemaBuilder.string()
    if builder is None:
        log.warning("JDBC type %s of column %s not supported: read as a string", col_type,
                    column["name"] if isinstance(column, Mapping) else column.name)
        builder = SchemaBuilder.string()
    if optional:
        builder.optional()
    return builder.build()


def to_connect_value(schema: Schema, value: Any, zone: _dt.tzinfo) -> Any:
    """A value as the database driver returned it, as the Connect value of ``schema``."""
    if value is None:
        return None
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        scale = Decimal.scale(schema)
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        return number.quantize(decimal.Decimal(1).scaleb(-scale))
    if name == Timestamp.LOGICAL_NAME:
        if isinstance(value, str):
            value = _dt.datetime.fromisoformat(value)
        if isinstance(value, _dt.datetime):
            return value.astimezone(_dt.timezone.utc) if value.tzinfo else value.replace(tzinfo=zone).astimezone(
                _dt.timezone.utc)
        if isinstance(value, _dt.date):
            return _dt.datetime(value.year, value.month, value.day, tzinfo=zone).astimezone(_dt.timezone.utc)
    if name == Date.LOGICAL_NAME:
        if isinstance(value, str):
            value = _dt.date.fromisoformat(value[:10])
        return value.date() if isinstance(value, _dt.datetime) else value
    if name == Time.LOGICAL_NAME:
        if isinstance(value, str):
            value = _dt.time.fromisoformat(value)
        if isinstance(value, _dt.timedelta):
            value = (_dt.datetime.min + value).time()
        return value.replace(tzinfo=None) if isinstance(value, _dt.time) else value
    t = schema.type
    if t.is_integer:
        return int(value)
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    if t is Type.BOOLEAN:
        return bool(value)
    if t is Type.BYTES:
        return bytes(value)
    if t is Type.STRING and not isinstance(value, str):
        return str(value)
    return value


# -- Connect -> database columns --------------------------------------------------------------
def sql_type(schema: Schema) -> Any:
    """The column type ``auto.create``/``auto.evolve`` gives a Connect schema (Confluent's mapping)."""
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        return sa.Numeric(precision=None, scale=Decimal.scale(schema), asdecimal=True)
    if name == Date.LOGICAL_NAME:
        return sa.Date()
    if name == Time.LOGICAL_NAME:
        return sa.Time()
    if name == Timestamp.LOGICAL_NAME:
        return sa.DateTime()
    mapping: dict[Type, Callable[[], Any]] = {
        Type.INT8: sa.SmallInteger, Type.INT16: sa.SmallInteger, Type.INT32: sa.Integer, Type.INT64: sa.BigInteger,
        Type.FLOAT32: sa.REAL, Type.FLOAT64: sa.Double, Type.BOOLEAN: sa.Boolean, Type.STRING: sa.Text,
        Type.BYTES: sa.LargeBinary,
    }
    factory = mapping.get(schema.type)
    if factory is None:
        raise ConnectException(f"{schema.type} (schema {schema.name}) type doesn't have a mapping to the SQL "
                               "database column type")
    return factory()


def to_db_value(schema: Schema | None, value: Any, zone: _dt.tzinfo) -> Any:
    """A Connect value as a bind parameter (timestamps as naive datetimes in db.timezone)."""
    if value is None:
        return None
    if schema is not None and schema.name == Timestamp.LOGICAL_NAME and isinstance(value, _dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
        return aware.astimezone(zone).replace(tzinfo=None)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def upsert_statement(engine: sa.engine.Engine, table: sa.Table, pk: Sequence[str], columns: Sequence[str]) -> Any:
    """``INSERT .. ON CONFLICT (pk) DO UPDATE`` for PostgreSQL and SQLite (DO NOTHING when all columns are keys)."""
    dialect = engine.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert  # type: ignore[assignment]
    else:
        raise ConnectException(f"insert.mode=upsert is not supported for {dialect} databases")
    statement = dialect_insert(table)
    updates = [c for c in columns if c not in pk]
    if not updates:
        return statement.on_conflict_do_nothing(index_elements=list(pk))
    return statement.on_conflict_do_update(index_elements=list(pk),
                                           set_={c: statement.excluded[c] for c in updates})



