"""Join planning rules that ksqlDB applies beyond one join's shape: windowed sources, the
internal topics a join's aggregate needs, n-way joins mixing stream-stream and stream-table
joins, and aggregations over a table (KGroupedTable, a table-table join's output).

Pure functions over the metastore's ``DataSource``s and the AST: the engine (``engine.py``)
calls them while planning and compiling; nothing here talks to Spark or the brokers.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.translate import AGGREGATES

#: the aggregate functions ksqlDB can undo (its ``TableAggregationFunction``s among ours): only
#: they aggregate a table, whose rows are replaced and deleted (KGroupedTable's subtractor)
TABLE_AGGREGATES = ("COUNT", "SUM", "AVG", "COLLECT_LIST")


def repartition_topic(service_id: str, query_id: str) -> str:
    """The internal topic a join feeds an aggregate through, named as ksqlDB (Kafka Streams)
    names it: ``_confluent-ksql-<service id>query_<id>-Join-repartition`` for a persistent
    query, ``_confluent-ksql-<service id>transient_...-Join-repartition`` for a push query."""
    prefix = "" if query_id.startswith("transient_") else "query_"
    return f"_confluent-ksql-{service_id}{prefix}{query_id}-Join-repartition"


def check_join_windowing(left: DataSource, left_alias: str, right: DataSource, right_alias: str,
                         text: str) -> None:
    """ksqlDB's ``Analyzer.throwOnIncompatibleSourceWindowing``: both sides of a join are
    windowed or neither is; session windows join session windows only, hopping and tumbling
    windows join each other."""
    lw, rw = left.window, right.window
    if (lw is None) != (rw is None):
        def how(w: ast.Window | None) -> str:
            return "not" if w is None else w.kind
        raise KsqlError(f"Can not join windowed source to non-windowed source.\n{left_alias} is {how(lw)} windowed"
                        f"\n{right_alias} is {how(rw)} windowed", statement=text)
    if lw is None or rw is None:
        return
    compatible = rw.kind == "SESSION" if lw.kind == "SESSION" else rw.kind in ("HOPPING", "TUMBLING")
    if not compatible:
        raise KsqlError(f"Incompatible windowed sources.\nLeft source: {lw.kind}\nRight source: {rw.kind}\n"
                        "Session windowed sources can only be joined to other session windowed sources, and may "
                        "still not result in expected behaviour as session bounds must be an exact match for the "
                        "join to work\nHopping and tumbling windowed sources can only be joined to other hopping "
                        "and tumbling windowed sources", statement=text)


def windowed_key(raw_key: str, window: ast.Window) -> list[str]:
    """A windowed source's Kafka Streams key (key bytes, then the window start; a session's end
    then start, 8 big-endian bytes each) as Spark SQL: the key without its window (``key``),
    ``WINDOWSTART`` and ``WINDOWEND`` in ms (a tumbling or hopping window's end is start + size)."""
    tail = 16 if window.kind == "SESSION" else 8

    def ms(offset: int) -> str:                        # 8 bytes ``offset`` bytes before the end
        return f"CAST(conv(hex(substring({raw_key}, length({raw_key}) - {offset - 1}, 8)), 16, 10) AS BIGINT)"
    start = ms(8)
    end = ms(16) if window.kind == "SESSION" else f"{start} + {window.size_ms}"
    return [f"substring({raw_key}, 1, length({raw_key}) - {tail}) AS key", f"{start} AS `WINDOWSTART`",
            f"{end} AS `WINDOWEND`"]


def window_match(left: str, right: str, window: ast.Window | None) -> str:
    """The extra ON condition of a join of windowed tables: Kafka Streams joins windowed keys,
    so the same key in the same window (a session's bounds exactly, as ksqlDB warns)."""
    if window is None:
        return ""
    bounds = ["WINDOWSTART", "WINDOWEND"] if window.kind == "SESSION" else ["WINDOWSTART"]
    return "".join(f" AND `{left}`.`{b}` = `{right}`.`{b}`" for b in bounds)


def keyed_in_window(key_sql: str, alias: str | None, window: ast.Window | None) -> str:
    """A table's key as the string a table-table join compares its changed keys by: with the
    window start for a windowed table (``key@start``)."""
    if window is None:
        return f"CAST({key_sql} AS STRING)"
    start = "`WINDOWSTART`" if alias is None else f"`{alias}`.`WINDOWSTART`"
    return f"concat(CAST({key_sql} AS STRING), '@', CAST({start} AS STRING))"


def check_persistent_sources(sources: list[DataSource], text: str) -> None:
    """ksqlDB's ``PushQueryValidator``: a persistent query (CSAS, CTAS, INSERT INTO) reads no
    windowed table; a push query may."""
    if any(s.kind == "TABLE" and s.window is not None for s in sources):
        raise KsqlError("KSQL does not support persistent queries on windowed tables.", statement=text)


def check_mixed_joins(lefts: list[tuple[str, DataSource]], j: ast.Join, right: DataSource, other: ast.Column,
                      text: str) -> None:
    """A stream-stream join in a query that also joins tables: the stream-stream joins run
    first, as one Spark stream-stream join, and the tables are joined to each of its
    micro-batches, so a stream-stream join's ON may name stream columns only. (A query without
    an aggregate whose stream-stream join names a table column is split before it gets here,
    ``Engine._plan_split_join``, as ksqlDB repartitions; an aggregate over one aggregates that.)"""
    if right.kind != "STREAM":
        return
    owner = next((d for a, d in lefts if a == other.source), None)
    if owner is not None and owner.kind == "TABLE":
        raise KsqlError(f"A stream-stream join on a column of a joined table ({other.source}.{other.name}) is not "
                        "supported by this server yet: join the streams on stream columns", statement=text)


def check_table_aggregate(select: ast.Select, text: str) -> None:
    """ksqlDB's ``SchemaKGroupedTable.aggregate`` refusals: no WINDOW, and only functions that can
    undo a row (a table's row is replaced or deleted, its old value subtracted)."""
    if select.window is not None:
        raise KsqlError("Windowing not supported for table aggregations.", statement=text)
    names: list[str] = []

    def visit(x: ast.Expr) -> ast.Expr:
        if isinstance(x, ast.Call) and x.name in AGGREGATES and x.name not in TABLE_AGGREGATES \
                and x.name not in names:
            names.append(x.name)
        return x
    for item in select.items:
        if item.expr is not None:
            rewrite(item.expr, visit)
    if select.having is not None:
        rewrite(select.having, visit)
    if names:
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        raise KsqlError(f"The aggregation function{'s' if len(names) > 1 else ''} {joined} cannot be applied to a "
                        "table source, only to a stream source.", statement=text)


def undone_aggregates(e: ast.Expr) -> ast.Expr:
    """A table aggregate's expression as ksqlDB computes it: SUM and AVG start from 0 (ksqlDB's
    ``SumKudaf`` and ``AverageUdaf`` initial values, nulls skipped) where Spark's are null over
    no value, so a group whose rows are all gone keeps a row of zeros (and empty lists), as a
    Kafka Streams table aggregate keeps the undone aggregate."""
    def zero(x: ast.Expr) -> ast.Expr:
        if isinstance(x, ast.Call) and x.name in ("SUM", "AVG"):
            return ast.Call("COALESCE", (x, ast.Literal(0 if x.name == "SUM" else 0.0)))
        return x
    return rewrite(e, zero)


def rewrite(e: Any, fn: Callable[[ast.Expr], ast.Expr]) -> Any:
    """``e`` rebuilt bottom-up, every expression node passed through ``fn`` after its children
    (tuples of children and of pairs, as in CASE and MAP, included)."""
    if isinstance(e, tuple):
        return tuple(rewrite(x, fn) for x in e)
    if not is_dataclass(e) or isinstance(e, ast.SqlType):
        return e
    changes = {f.name: rewrite(getattr(e, f.name), fn) for f in fields(e)}
    return fn(replace(e, **changes))  # type: ignore[type-var, arg-type]


def substitute(e: ast.Expr, values: list[tuple[ast.Expr, object]]) -> ast.Expr:
    """``e`` with each occurrence of an expression of ``values`` replaced by its value as a
    literal (outermost match first): a table aggregate's row for a group whose rows are all gone
    is its items evaluated over no row, the GROUP BY expressions standing for the group's key."""
    for expr, value in values:
        if e == expr:
            return ast.Literal(value)
    if not is_dataclass(e):
        return e

    def go(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(go(x) for x in v)
        if is_dataclass(v) and not isinstance(v, ast.SqlType):
            return substitute(v, values)  # type: ignore[arg-type]
        return v
    return replace(e, **{f.name: go(getattr(e, f.name)) for f in fields(e)})
