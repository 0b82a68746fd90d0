"""A row as a source's record bytes (ksqlDB's ``InsertValuesExecutor``): the values of ``INSERT
INTO ... VALUES`` checked against the columns' types, then encoded per the source's
``KEY_FORMAT``/``VALUE_FORMAT`` exactly as the engine's queries decode them (KAFKA keys as the
value's text, JSON as an object with the column names, DELIMITED comma-separated, AVRO framed with
the registry's latest ``<topic>-value`` schema). Pure apart from the registry lookup it is handed.
"""
from __future__ import annotations

import datetime
import decimal
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.metastore import DataSource

#: (schema id, parsed schema, field names) of a subject's latest Avro schema
AvroLookup = Callable[[str], tuple[int, Any, list[str]]]


@dataclass(frozen=True)
class EncodedRecord:
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


def row_of(s: ast.InsertValues, source: DataSource, text: str) -> tuple[dict[str, Any], int | None]:
    """The statement's values by column name (typed), and ROWTIME if it was given."""
    names = list(s.columns) or [c.name for c in source.columns]
    if len(names) != len(s.values):
        raise KsqlError(f"Expected a value for each column. Expected Columns: [{', '.join(names)}]. "
                        f"Got [{', '.join(_text(v) for v in s.values)}]", statement=text)
    row: dict[str, Any] = {}
    rowtime: int | None = None
    for name, expr in zip(names, s.values):
        if not isinstance(expr, ast.Literal):
            raise KsqlError(f"Only literals are supported in INSERT VALUES by this server. Got: {_text(expr)}",
                            statement=text)
        if name == "ROWTIME":
            if not isinstance(expr.value, int) or isinstance(expr.value, bool):
                raise KsqlError(f"Expected type BIGINT for field ROWTIME but got {_text(expr)}", statement=text)
            rowtime = expr.value
            continue
        if name in ("ROWPARTITION", "ROWOFFSET"):
            raise KsqlError(f"Inserting into column `{name}` is not allowed.", statement=text)
        column = source.column(name)
        if column is None:
            raise KsqlError(f"Column name `{name}` does not exist.", statement=text)
        row[name] = _coerce(expr.value, column, text)
    if source.kind == "TABLE":
        missing = [c.name for c in source.key_columns if row.get(c.name) is None]
        if missing:
            raise KsqlError(f"Failed to insert values into '{source.name}'. Value for primary key column(s) "
                            f"{', '.join(missing)} is required for tables", statement=text)
    return row, rowtime


def encode(source: DataSource, row: dict[str, Any], rowtime: int | None, avro: AvroLookup | None,
           text: str) -> EncodedRecord:
    keys, values = source.key_columns, source.value_columns
    key: bytes | None = None
    if keys:
        if source.key_format == "JSON":
            key = json.dumps({c.name: _json(row.get(c.name)) for c in keys}).encode()
        elif row.get(keys[0].name) is not None:
            key = _plain(row[keys[0].name]).encode()
    value: bytes | None
    fmt = source.value_format
    if fmt == "JSON":
        value = json.dumps({c.name: _json(row.get(c.name)) for c in values}).encode()
    elif fmt == "DELIMITED":
        value = source.value_delimiter.join("" if row.get(c.name) is None else _plain(row[c.name])
                                            for c in values).encode()
    elif fmt == "KAFKA":
        v = row.get(values[0].name) if len(values) == 1 else None
        value = None if v is None else _plain(v).encode()
    else:
        if avro is None:
            raise KsqlError("Schema registry url is not set (ksql.schema.registry.url)", statement=text)
        from kafkalite.registry import serde

        schema_id, parsed, fields = avro(f"{source.topic}-value")
        by_upper = {f.upper(): f for f in fields}
        try:
            datum = {by_upper.get(c.name, c.name): _avro_value(row.get(c.name), c) for c in values}
        except ValueError as exc:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None
        try:
            value = serde.encode(schema_id, parsed, datum)
        except serde.SerdeError as exc:
            raise KsqlError(f"Failed to insert values into '{source.name}'. {exc}", statement=text) from None
    ts = rowtime
    if ts is None and source.timestamp and isinstance(row.get(source.timestamp), int):
        ts = row[source.timestamp]                       # the TIMESTAMP column is the record's time
    return EncodedRecord(key, value, ts if ts is not None else int(time.time() * 1000))


def _coerce(value: Any, column: ast.ColumnDef, text: str) -> Any:
    """ksqlDB's implicit casts for literals: INT -> BIGINT/DOUBLE/DECIMAL, numbers stay numbers,
    a STRING column takes only strings."""
    if value is None:
        return None
    t = column.type.name
    ok = {"BOOLEAN": isinstance(value, bool),
          "INT": isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31,
          "BIGINT": isinstance(value, int) and not isinstance(value, bool),
          "DOUBLE": isinstance(value, (int, float)) and not isinstance(value, bool),
          "DECIMAL": isinstance(value, (int, float)) and not isinstance(value, bool),
          "STRING": isinstance(value, str),
          "TIMESTAMP": isinstance(value, int) and not isinstance(value, bool),
          "DATE": isinstance(value, str), "TIME": isinstance(value, str), "BYTES": isinstance(value, str)}
    if not ok.get(t, False):
        kind = type(value).__name__.upper().replace("STR", "STRING").replace("FLOAT", "DOUBLE")
        raise KsqlError(f"Expected type {column.type} for field {column.name} but got {kind}({value})",
                        statement=text)
    if t == "DOUBLE":
        return float(value)
    if t == "DECIMAL":
        return decimal.Decimal(str(value))
    return value


def _avro_value(v: Any, column: ast.ColumnDef) -> Any:
    """A DATE or TIME literal (ksqlDB's 'yyyy-MM-dd' / 'HH:mm:ss[.SSS]' text) as the value Avro's
    ``date`` / ``time-millis`` logical types take; a TIMESTAMP is already its epoch milliseconds."""
    if isinstance(v, str) and column.type.name == "DATE":
        try:
            return datetime.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"Invalid DATE for {column.name}: {v!r} (expected yyyy-MM-dd)") from None
    if isinstance(v, str) and column.type.name == "TIME":
        try:
            return datetime.time.fromisoformat(v)
        except ValueError:
            raise ValueError(f"Invalid TIME for {column.name}: {v!r} (expected HH:mm:ss)") from None
    return v


def _json(v: Any) -> Any:
    return float(v) if isinstance(v, decimal.Decimal) else v


def _plain(v: Any) -> str:
    """A value as DELIMITED/KAFKA text (booleans as ksqlDB writes them: true, false)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(_json(v))


def _text(e: ast.Expr) -> str:
    if isinstance(e, ast.Literal):
        return "'" + e.value + "'" if isinstance(e.value, str) else "null" if e.value is None else str(e.value)
    return type(e).__name__
