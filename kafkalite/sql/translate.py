"""ksqlDB expressions and types to Spark SQL text (pure): the engine runs every persistent query
as a Spark SQL statement over a temporary view of its parsed source, so each ksqlDB function
maps to a Spark function here, and an unknown one is ksqlDB's statement error."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Callable

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.values import sql_text

#: ksqlDB scalar and aggregate functions with their Spark SQL counterpart
FUNCTIONS = {
    "ABS": "abs", "CEIL": "ceil", "FLOOR": "floor", "ROUND": "round", "SQRT": "sqrt", "EXP": "exp", "LN": "ln",
    "SIGN": "sign", "POWER": "power", "RANDOM": "rand", "GREATEST": "greatest", "LEAST": "least",
    "UCASE": "upper", "LCASE": "lower", "UPPER": "upper", "LOWER": "lower", "LEN": "length", "TRIM": "trim",
    "LTRIM": "ltrim", "RTRIM": "rtrim", "CONCAT": "concat", "CONCAT_WS": "concat_ws", "SUBSTRING": "substring",
    "REPLACE": "replace", "INSTR": "instr", "LPAD": "lpad", "RPAD": "rpad", "SPLIT": "split",
    "INITCAP": "initcap", "REGEXP_EXTRACT": "regexp_extract", "REGEXP_REPLACE": "regexp_replace",
    "COALESCE": "coalesce", "IFNULL": "ifnull", "NULLIF": "nullif", "ARRAY_LENGTH": "size",
    "EXTRACTJSONFIELD": "get_json_object", "UNIX_TIMESTAMP": "unix_millis(current_timestamp())",
    "TIMESTAMPTOSTRING": "date_format", "STRINGTOTIMESTAMP": "unix_timestamp",
    "COUNT": "count", "SUM": "sum", "AVG": "avg", "MIN": "min", "MAX": "max",
    "COUNT_DISTINCT": "count_distinct", "COLLECT_LIST": "collect_list", "COLLECT_SET": "collect_set",
    "EARLIEST_BY_OFFSET": "min_by", "LATEST_BY_OFFSET": "max_by",
}
AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "COUNT_DISTINCT", "COLLECT_LIST", "COLLECT_SET",
              "EARLIEST_BY_OFFSET", "LATEST_BY_OFFSET"}
_SPARK_TYPES = {"BOOLEAN": "boolean", "INT": "int", "BIGINT": "bigint", "DOUBLE": "double", "STRING": "string",
                "BYTES": "binary", "DATE": "date", "TIME": "string", "TIMESTAMP": "timestamp"}
#: pseudo columns that the engine's view provides (ROWTIME is a Spark timestamp there, for windows
#: and watermarks; in expressions it is ksqlDB's BIGINT of epoch milliseconds)
PSEUDO = ("ROWTIME", "ROWPARTITION", "ROWOFFSET")


@dataclass(frozen=True)
class Scope:
    """The columns a join's expressions can name: each source's alias with its columns (pseudo
    columns included). A qualified name (``A.ID``) must exist in that source; an unqualified one
    in exactly one source, else it is ambiguous (ksqlDB's rule); pseudo columns unqualified are
    the left source's."""

    sources: tuple[tuple[str, frozenset[str]], ...]

    def resolve(self, col: ast.Column, statement: str) -> str:
        aliases = dict(self.sources)
        if col.source is not None:
            if col.source not in aliases:
                raise KsqlError(f"Source '{col.source}' does not exist in the FROM clause.", statement=statement)
            if col.name not in aliases[col.source]:
                raise KsqlError(f"Column '{col.source}.{col.name}' cannot be resolved.", statement=statement)
            return f"{quote(col.source)}.{quote(col.name)}"
        owners = [a for a, cols in self.sources if col.name in cols]
        if col.name in PSEUDO:
            owners = owners[:1]
        if not owners:
            raise KsqlError(f"Column '{col.name}' cannot be resolved.", statement=statement)
        if len(owners) > 1:
            raise KsqlError(f"Column '{col.name}' is ambiguous. Could be any of: "
                            f"{', '.join(f'{a}.{col.name}' for a in owners)}", statement=statement)
        return f"{quote(owners[0])}.{quote(col.name)}"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_type(t: ast.SqlType) -> str:
    if t.name == "ARRAY":
        return f"array<{spark_type(t.items[0])}>"
    if t.name == "MAP":
        return f"map<{spark_type(t.items[0])},{spark_type(t.items[1])}>"
    if t.name == "STRUCT":
        return "struct<" + ",".join(f"{quote(n)}:{spark_type(ft)}" for n, ft in t.fields) + ">"
    if t.name == "DECIMAL":
        return f"decimal({t.params[0]},{t.params[1]})"
    return _SPARK_TYPES[t.name]


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def has_aggregate(e: ast.Expr | None) -> bool:
    if e is None:
        return False
    if isinstance(e, ast.Call):
        return e.name in AGGREGATES or any(has_aggregate(a) for a in e.args)
    return any(has_aggregate(c) for c in _children(e))


def _children(e: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(e, ast.Binary):
        return (e.left, e.right)
    if isinstance(e, (ast.Unary, ast.IsNull, ast.Cast, ast.Dereference)):
        return (e.operand,)
    if isinstance(e, ast.Between):
        return (e.operand, e.low, e.high)
    if isinstance(e, ast.InList):
        return (e.operand, *e.items)
    if isinstance(e, ast.Case):
        return tuple(x for pair in e.whens for x in pair) + ((e.default,) if e.default is not None else ())
    if isinstance(e, ast.Call):
        return e.args
    return ()


def map_columns(e: ast.Expr, fn: "Callable[[ast.Column], ast.Expr]") -> ast.Expr:
    """``e`` with every column replaced by ``fn(column)`` (the rest of the tree kept)."""
    def go(x: ast.Expr) -> ast.Expr:
        if isinstance(x, ast.Column):
            return fn(x)
        if isinstance(x, ast.Binary):
            return replace(x, left=go(x.left), right=go(x.right))
        if isinstance(x, (ast.Unary, ast.IsNull, ast.Cast, ast.Dereference)):
            return replace(x, operand=go(x.operand))
        if isinstance(x, ast.Between):
            return replace(x, operand=go(x.operand), low=go(x.low), high=go(x.high))
        if isinstance(x, ast.InList):
            return replace(x, operand=go(x.operand), items=tuple(go(i) for i in x.items))
        if isinstance(x, ast.Case):
            return replace(x, whens=tuple((go(c), go(v)) for c, v in x.whens),
                           default=None if x.default is None else go(x.default))
        if isinstance(x, ast.Call):
            return replace(x, args=tuple(go(a) for a in x.args))
        return x
    return go(e)


def columns_of(e: ast.Expr | None) -> set[str]:
    if e is None:
        return set()
    if isinstance(e, ast.Column):
        return {e.name}
    out: set[str] = set()
    for c in _children(e):
        out |= columns_of(c)
    return out


#: a windowed aggregate's bounds, selectable as columns (ms)
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")


def to_spark(e: ast.Expr, known: "set[str] | Scope", statement: str = "", window: str | None = None) -> str:
    """Spark SQL text for ``e``; ``known`` are the columns in scope (others: ksqlDB's error), a
    :class:`Scope` for a join; ``window`` is a windowed aggregate's window expression, whose
    bounds WINDOWSTART/WINDOWEND name."""
    def go(x: ast.Expr) -> str:
        if isinstance(x, ast.Literal):
            return literal(x.value)
        if isinstance(x, ast.Column):
            if isinstance(known, Scope):
                sql = known.resolve(x, statement)
                return f"unix_millis({sql})" if x.name == "ROWTIME" else sql
            if x.name not in known:
                raise KsqlError(f"Column '{x.name}' cannot be resolved.", statement=statement)
            if window is not None and x.name in WINDOW_BOUNDS:
                return f"unix_millis({window}.{'start' if x.name == 'WINDOWSTART' else 'end'})"
            return "unix_millis(`ROWTIME`)" if x.name == "ROWTIME" else quote(x.name)
        if isinstance(x, ast.Binary):
            op = {"||": "||", "=": "="}.get(x.op, x.op)
            return f"({go(x.left)} {op} {go(x.right)})"
        if isinstance(x, ast.Unary):
            return f"(NOT {go(x.operand)})" if x.op == "NOT" else f"(- {go(x.operand)})"
        if isinstance(x, ast.IsNull):
            return f"({go(x.operand)} IS {'NOT ' if x.negated else ''}NULL)"
        if isinstance(x, ast.Between):
            return f"({go(x.operand)} {'NOT ' if x.negated else ''}BETWEEN {go(x.low)} AND {go(x.high)})"
        if isinstance(x, ast.InList):
            return f"({go(x.operand)} {'NOT ' if x.negated else ''}IN ({', '.join(go(i) for i in x.items)}))"
        if isinstance(x, ast.Cast):
            return f"CAST({go(x.operand)} AS {spark_type(x.type)})"
        if isinstance(x, ast.Dereference):
            return f"{go(x.operand)}.{quote(x.field)}"
        if isinstance(x, ast.Case):
            whens = " ".join(f"WHEN {go(c)} THEN {go(v)}" for c, v in x.whens)
            return f"(CASE {whens}{' ELSE ' + go(x.default) if x.default is not None else ''} END)"
        if isinstance(x, ast.Call):
            return _call(x, go, statement)
        raise KsqlError(f"Unsupported expression in a query on this server: {sql_text(x)} (collection "
                        "constructors and subscripts are evaluated in INSERT ... VALUES only)", statement=statement)
    return go(e)


def _call(x: ast.Call, go: object, statement: str) -> str:
    assert callable(go)
    spark = FUNCTIONS.get(x.name)
    if spark is None:
        raise KsqlError(f"Can't find any functions with the name '{x.name}'", statement=statement)
    if x.star:
        if x.name != "COUNT":
            raise KsqlError(f"Function '{x.name}' does not accept '*'", statement=statement)
        return "count(*)"
    if "(" in spark:
        return spark
    args = [go(a) for a in x.args]
    if x.name in ("EARLIEST_BY_OFFSET", "LATEST_BY_OFFSET"):
        return f"{spark}({args[0]}, `ROWOFFSET`)"
    if x.name == "COUNT_DISTINCT":
        return f"count(DISTINCT {args[0]})"
    if x.name == "TIMESTAMPTOSTRING":       # (epoch ms, pattern)
        return f"date_format(timestamp_millis({args[0]}), {args[1]})"
    return f"{spark}({', '.join(args)})"


def output_name(item: ast.SelectItem, index: int) -> str:
    """ksqlDB's column naming: the alias, a column's own name, a struct field's name, else
    ``KSQL_COL_<n>``."""
    if item.alias:
        return item.alias
    if isinstance(item.expr, ast.Column):
        return item.expr.name
    if isinstance(item.expr, ast.Dereference):
        return item.expr.field
    return f"KSQL_COL_{index}"


def avro_schema(name: str, columns: list[tuple[str, str]]) -> str:
    """An Avro record schema (every field optional, as ksqlDB writes) for Spark types. Temporal and
    decimal columns get Avro's logical types as ksqlDB writes them (its Connect schemas through
    Confluent's AvroData): TIMESTAMP a ``long`` ``timestamp-millis``, DATE an ``int`` ``date``,
    DECIMAL(p, s) ``bytes`` ``decimal`` with its precision and scale."""
    kinds: dict[str, Any] = {"string": "string", "bigint": "long", "int": "int", "double": "double",
                             "boolean": "boolean", "float": "float", "binary": "bytes",
                             "timestamp": {"type": "long", "logicalType": "timestamp-millis"},
                             "date": {"type": "int", "logicalType": "date"}}
    fields = []
    for col, spark in columns:
        decimal = re.fullmatch(r"decimal\((\d+),(\d+)\)", spark)
        avro = ({"type": "bytes", "logicalType": "decimal", "precision": int(decimal[1]), "scale": int(decimal[2])}
                if decimal else kinds.get(spark))
        if avro is None:
            raise KsqlError(f"Column {col} of type {spark} cannot be written as AVRO by this server")
        fields.append({"name": col, "type": ["null", avro], "default": None})
    return json.dumps({"type": "record", "name": "KsqlDataSourceSchema",
                       "namespace": "io.confluent.ksql.avro_schemas", "fields": fields})
