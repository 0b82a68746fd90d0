"""Windowed sources: a stream or table declared over a topic whose keys carry a window, as a
windowed aggregate (ours or ksqlDB's) writes them.

ksqlDB declares them with ``WITH (WINDOW_TYPE='TUMBLING'|'HOPPING'|'SESSION', WINDOW_SIZE='1
MINUTE')`` (``CreateSourceProperties``); their keys are Kafka Streams' windowed keys
(``WindowKeySchema``: the key's bytes, then the window start as 8 big-endian bytes;
``SessionKeySchema``: the key's bytes, then the end, then the start). A time window's end is not
in the key: it is the start plus the size, which is why ksqlDB needs ``WINDOW_SIZE``.

Pure functions: the engine's CREATE, planner and pull queries call them; the Spark SQL that
decodes the same keys in a query is ``joins.windowed_key``, the one that writes them
``engine._key_sql``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError

if TYPE_CHECKING:
    from kafkalite.sql.metastore import DataSource

_NO_REPARTITION = ("Implicit repartitioning of windowed sources is not supported. "
                   "See https://github.com/confluentinc/ksql/issues/4385.")

WINDOW_TYPES = ("SESSION", "HOPPING", "TUMBLING")          # ksqlDB's WindowType, in its order

#: java.util.concurrent.TimeUnit, which ksqlDB's DurationParser reads: name -> nanoseconds
_TIME_UNITS = {"NANOSECONDS": 1, "MICROSECONDS": 1_000, "MILLISECONDS": 1_000_000, "SECONDS": 1_000_000_000,
               "MINUTES": 60_000_000_000, "HOURS": 3_600_000_000_000, "DAYS": 86_400_000_000_000}


def parse_duration(text: str) -> int:
    """ksqlDB's ``DurationParser.parse`` ('10 SECONDS', '1 minute') in milliseconds; its
    messages in a ValueError."""
    try:
        parts = re.split(r"\s", text)
        while parts and parts[-1] == "":                  # Java's split drops trailing empties
            parts.pop()
        if len(parts) != 2:
            raise ValueError(f"Expected 2 tokens, got: {len(parts)}")
        try:
            size = int(parts[0])
        except ValueError:
            raise ValueError(f"Not numeric: '{parts[0]}'") from None
        unit = parts[1].upper()
        unit = unit if unit.endswith("S") else unit + "S"
        if unit not in _TIME_UNITS:
            raise ValueError(f"Unknown time unit: '{parts[1].upper()}'\nSupported time units are: "
                             + ", ".join(_TIME_UNITS))
        return size * _TIME_UNITS[unit] // 1_000_000
    except ValueError as exc:
        raise ValueError(f"Invalid duration: '{text}'. {exc}") from None


def window_of(props: Mapping[str, Any], text: str) -> ast.Window | None:
    """The window a CREATE STREAM/TABLE's ``WITH`` declares (``props`` upper-cased), refused in
    ksqlDB's words: an unknown type, a bad size, a time window without a size, a session window
    with one."""
    kind = props.get("WINDOW_TYPE")
    size = props.get("WINDOW_SIZE")
    if kind is not None and str(kind).upper() not in WINDOW_TYPES:
        raise KsqlError(f"Invalid value {kind} for configuration WINDOW_TYPE: String must be one of: "
                        + ", ".join(WINDOW_TYPES), statement=text)
    size_ms: int | None = None
    if size is not None:
        try:
            size_ms = parse_duration(str(size))
        except ValueError as exc:
            raise KsqlError(f"Configuration WINDOW_SIZE is invalid: {exc}", statement=text) from None
    if kind is None:
        if size_ms is not None:                           # ksqlDB's words, session or not
            raise KsqlError("'WINDOW_SIZE' should not be set for SESSION windows.", statement=text)
        return None
    kind = str(kind).upper()
    if kind != "SESSION" and size_ms is None:
        raise KsqlError(f"{kind} windows require 'WINDOW_SIZE' to be provided in the WITH clause. "
                        "For example: 'WINDOW_SIZE'='10 SECONDS'", statement=text)
    if kind == "SESSION" and size_ms is not None:
        raise KsqlError("'WINDOW_SIZE' should not be set for SESSION windows.", statement=text)
    return ast.Window(kind, size_ms or 0)


def encode_key(key: bytes, window: ast.Window, start: int, end: int | None = None) -> bytes:
    """Kafka Streams' windowed key bytes: key + start, or for a session key + end + start."""
    if window.kind == "SESSION":
        return key + int(end if end is not None else start).to_bytes(8, "big") + start.to_bytes(8, "big")
    return key + start.to_bytes(8, "big")


def decode_key(data: bytes, window: ast.Window) -> tuple[bytes, int, int]:
    """A windowed key's bytes as (key, window start, window end) in ms; a time window's end is
    its start plus the declared size."""
    if window.kind == "SESSION":
        if len(data) < 16:
            raise ValueError("a session-windowed key has at least 16 bytes")
        return data[:-16], int.from_bytes(data[-8:], "big"), int.from_bytes(data[-16:-8], "big")
    if len(data) < 8:
        raise ValueError("a time-windowed key has at least 8 bytes")
    start = int.from_bytes(data[-8:], "big")
    return data[:-8], start, start + window.size_ms


def check_join_key(left: "DataSource", left_column: ast.Column, right: "DataSource", right_column: ast.Column,
                   text: str) -> None:
    """A join of windowed sources is on their keys (and windows): a join column that is not the
    key would repartition a windowed source, which ksqlDB refuses (``SchemaKStream.selectKey``)."""
    for source, column in ((left, left_column), (right, right_column)):
        if source.window is not None and column.name not in [k.name for k in source.key_columns]:
            raise KsqlError(_NO_REPARTITION, statement=text)


def check_insert_window(target: "DataSource", result: ast.Window | None, text: str) -> None:
    """INSERT INTO a stream whose keys are windowed otherwise than the query's results would
    write keys its readers cannot decode: refused (the same window type, or both unwindowed)."""
    def how(w: ast.Window | None) -> str:
        return "not windowed" if w is None else f"{w.kind} windowed"
    if (target.window is None) != (result is None) or (
            target.window is not None and result is not None and target.window.kind != result.kind):
        raise KsqlError(f"Incompatible key format between results and sink: the sink {target.name} is "
                        f"{how(target.window)}, the results are {how(result)}.", statement=text)


def check_repartition(source_window: ast.Window | None, partition_by: ast.Expr | None,
                      key_names: list[str], text: str) -> None:
    """ksqlDB's ``SchemaKStream.selectKey``: a windowed stream cannot be repartitioned (PARTITION
    BY anything but its own key column)."""
    if source_window is None or partition_by is None:
        return
    if isinstance(partition_by, ast.Column) and partition_by.name in key_names:
        return
    raise KsqlError(_NO_REPARTITION, statement=text)
