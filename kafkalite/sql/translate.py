"""ksqlDB expressions and types to Spark SQL text (pure): the engine runs every persistent query
as a Spark SQL statement over a temporary view of its parsed source, so each ksqlDB function
maps to a Spark function here, and an unknown one is ksqlDB's statement error."""
from __future__ import annotations

import decimal
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping

from kafkalite.sql import ast, expression_types
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
    #: ``ALIAS.COLUMN`` -> declared type, for the types of expressions (collection constructors)
    types: Mapping[str, ast.SqlType] = field(default_factory=dict, compare=False)

    def owner(self, col: ast.Column) -> str | None:
        if col.source is not None:
            return col.source
        return next((a for a, cols in self.sources if col.name in cols), None)

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


class Columns(set[str]):
    """The column names a single-source query's expressions can name, with their declared types
    (pseudo columns and window bounds are BIGINT), so collection constructors and subscripts are
    typed as ksqlDB types them. A plain set of names works too (types then unknown)."""

    types: Mapping[str, ast.SqlType]

    def __init__(self, names: Iterable[str], types: Mapping[str, ast.SqlType]) -> None:
        super().__init__(names)
        self.types = dict(types)


def column_types(known: "set[str] | Scope") -> Callable[[ast.Column], ast.SqlType | None]:
    """The type of a column in scope, None if unknown."""
    def of(col: ast.Column) -> ast.SqlType | None:
        if col.name in PSEUDO or col.name in WINDOW_BOUNDS:
            return ast.SqlType("BIGINT")
        if isinstance(known, Scope):
            owner = known.owner(col)
            return None if owner is None else known.types.get(f"{owner}.{col.name}")
        return known.types.get(col.name) if isinstance(known, Columns) else None
    return of


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


def _has_temporal(t: ast.SqlType) -> bool:
    return t.name in ("DATE", "TIMESTAMP") or any(_has_temporal(i) for i in t.items) or any(
        _has_temporal(f) for _, f in t.fields)


def wire_type(t: ast.SqlType) -> ast.SqlType:
    """The type a JSON or DELIMITED column is first read as: DATE and TIMESTAMP (also inside
    collections) as text, since ksqlDB writes them as numbers (days since the epoch, epoch
    milliseconds) that Spark's own JSON parser would misread (a number as seconds, or not a date)."""
    if t.name in ("DATE", "TIMESTAMP"):
        return ast.SqlType("STRING")
    return replace(t, items=tuple(wire_type(i) for i in t.items), fields=tuple((n, wire_type(f)) for n, f in t.fields))


def _nested(expr: str, t: ast.SqlType, leaf: Callable[[str, ast.SqlType], str], depth: int = 0) -> str:
    """``expr`` with ``leaf`` applied to every DATE/TIMESTAMP inside it (arrays through
    ``transform``, map values through ``transform_values``, struct fields rebuilt)."""
    if not _has_temporal(t):
        return expr
    if t.name in ("DATE", "TIMESTAMP"):
        return leaf(expr, t)
    var = f"`__e{depth}`"
    if t.name == "ARRAY":
        return f"transform({expr}, {var} -> {_nested(var, t.items[0], leaf, depth + 1)})"
    if t.name == "MAP":
        return f"transform_values({expr}, (`__k{depth}`, {var}) -> {_nested(var, t.items[1], leaf, depth + 1)})"
    fields = ", ".join(f"{literal(n)}, {_nested(f'{expr}.{quote(n)}', ft, leaf, depth + 1)}" for n, ft in t.fields)
    return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({fields}) END"


def from_wire(expr: str, t: ast.SqlType) -> str:
    """A column read as :func:`wire_type` at its type, as ksqlDB's JSON and DELIMITED
    deserializers read it: a DATE from days since the epoch, a TIMESTAMP from epoch milliseconds
    (a number or numeric text); text such as ``2025-11-29`` or ``2025-11-29T10:00:00`` is read too
    (what this server wrote before), anything else is null."""
    def leaf(x: str, leaf_type: ast.SqlType) -> str:
        if leaf_type.name == "DATE":
            return (f"CASE WHEN {x} RLIKE '^-?[0-9]+$' THEN date_from_unix_date(CAST({x} AS INT)) "
                    f"ELSE try_cast({x} AS DATE) END")
        return (f"CASE WHEN {x} RLIKE '^-?[0-9]+$' THEN timestamp_millis(CAST({x} AS BIGINT)) "
                f"ELSE try_cast({x} AS TIMESTAMP) END")
    return _nested(expr, t, leaf)


def to_wire(expr: str, t: ast.SqlType) -> str:
    """A query's output value as ksqlDB's JSON and DELIMITED serializers write it: a DATE as days
    since the epoch, a TIMESTAMP as epoch milliseconds, also inside collections."""
    return _nested(expr, t, lambda x, leaf_type: f"unix_date({x})" if leaf_type.name == "DATE" else f"unix_millis({x})")


#: Confluent's AvroData writes a Connect map whose keys are not strings as an Avro array of these
MAP_ENTRY = "io.confluent.connect.avro.MapEntry"


def map_entry_fields(items: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The ``key`` and ``value`` fields of an Avro array's items if they are Connect's
    ``MapEntry`` record (a map with non-string keys, as AvroData writes it), else None."""
    if isinstance(items, list):
        branches = [b for b in items if b != "null"]
        items = branches[0] if len(branches) == 1 else None
    if not isinstance(items, dict) or items.get("type") != "record":
        return None
    name = str(items.get("name", ""))
    full = name if "." in name else f"{items.get('namespace', '')}.{name}"
    fields = {f.get("name"): f for f in items.get("fields", []) if isinstance(f, dict)}
    if full != MAP_ENTRY or set(fields) != {"key", "value"}:
        return None
    return fields["key"], fields["value"]


def map_of_entries(expr: str) -> str:
    """Connect's map-as-entries (``array<struct<key, value>>``) as ksqlDB reads it: a MAP whose
    keys are the keys' text (``ConnectKsqlSchemaTranslator``; a repeated key, the last)."""
    return (f"map_from_entries(transform({expr}, `__entry` -> struct(CAST(`__entry`.`key` AS STRING) AS `key`, "
            f"`__entry`.`value` AS `value`)))")


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def has_aggregate(e: ast.Expr | None) -> bool:
    if e is None:
        return False
    if isinstance(e, ast.Call):
        return e.name in AGGREGATES or any(has_aggregate(a) for a in e.args)
    return any(has_aggregate(c) for c in ast.children(e))


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
        if isinstance(x, ast.ArrayConstructor):
            return replace(x, items=tuple(go(i) for i in x.items))
        if isinstance(x, ast.MapConstructor):
            return replace(x, entries=tuple((go(k), go(v)) for k, v in x.entries))
        if isinstance(x, ast.StructConstructor):
            return replace(x, fields=tuple((n, go(v)) for n, v in x.fields))
        if isinstance(x, ast.Subscript):
            return replace(x, operand=go(x.operand), index=go(x.index))
        return x
    return go(e)


def columns_of(e: ast.Expr | None) -> set[str]:
    if e is None:
        return set()
    if isinstance(e, ast.Column):
        return {e.name}
    out: set[str] = set()
    for c in ast.children(e):
        out |= columns_of(c)
    return out


#: a windowed aggregate's bounds, selectable as columns (ms)
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")


def to_spark(e: ast.Expr, known: "set[str] | Scope", statement: str = "", window: str | None = None,
             params: Mapping[str, tuple[ast.SqlType | None, str]] | None = None) -> str:
    """Spark SQL text for ``e``; ``known`` are the columns in scope (others: ksqlDB's error), a
    :class:`Scope` for a join; ``window`` is a windowed aggregate's window expression, whose
    bounds WINDOWSTART/WINDOWEND name; ``params`` are the lambda parameters in scope (inside a
    TRANSFORM/FILTER/REDUCE lambda's body), each with its type and the Spark SQL it stands for,
    which an unqualified name means first."""
    bound = dict(params or {})
    types = expression_types.bound(column_types(known), {n: t for n, (t, _) in bound.items()})

    def go(x: ast.Expr) -> str:
        if isinstance(x, ast.Literal):
            return literal(x.value)
        if isinstance(x, ast.Column) and x.source is None and x.name in bound:
            return bound[x.name][1]                       # a lambda's parameter (Spark's lambda variable)
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
            expression_types.type_of(x, types, statement)   # ksqlDB's refusals
            return f"{go(x.operand)}.{quote(x.field)}"
        if isinstance(x, ast.Case):
            whens = " ".join(f"WHEN {go(c)} THEN {go(v)}" for c, v in x.whens)
            return f"(CASE {whens}{' ELSE ' + go(x.default) if x.default is not None else ''} END)"
        if isinstance(x, ast.Call) and x.name in expression_types.LAMBDA_FUNCTIONS:
            def body(f: ast.Lambda, inner: dict[str, tuple[ast.SqlType | None, str]]) -> str:
                return to_spark(f.body, known, statement, window, {**bound, **inner})
            return _lambda_call(x, go, types, body, f"`__entry{len(bound)}`", statement)
        if isinstance(x, ast.Lambda):
            raise KsqlError(f"Lambda functions are only allowed as arguments of TRANSFORM, FILTER and REDUCE: "
                            f"{sql_text(x)}", statement=statement)
        if isinstance(x, ast.Call):
            return _call(x, go, statement)
        if isinstance(x, (ast.ArrayConstructor, ast.MapConstructor, ast.StructConstructor)):
            return _constructor(x, go, types, statement)
        if isinstance(x, ast.Subscript):
            return _subscript(x, go, types, statement)
        raise KsqlError(f"Unsupported expression in a query on this server: {sql_text(x)}", statement=statement)
    return go(e)


def _constructor(x: ast.ArrayConstructor | ast.MapConstructor | ast.StructConstructor, go: Callable[[ast.Expr], str],
                 types: expression_types.ColumnTypes, statement: str) -> str:
    """``ARRAY[...]`` as Spark's ``array``, ``MAP(k := v)`` as ``map`` (a repeated key: the last
    wins, as in ksqlDB, with the session's ``spark.sql.mapKeyDedupPolicy=LAST_WIN``), ``STRUCT(f :=
    v)`` as ``named_struct``; elements at ksqlDB's common type first."""
    coerced, _ = expression_types.coerce_constructor(x, types, statement)
    if isinstance(coerced, ast.ArrayConstructor):
        return f"array({', '.join(go(i) for i in coerced.items)})"
    if isinstance(coerced, ast.MapConstructor):
        return f"map({', '.join(f'{go(k)}, {go(v)}' for k, v in coerced.entries)})"
    assert isinstance(coerced, ast.StructConstructor)
    return f"named_struct({', '.join(f'{literal(n)}, {go(v)}' for n, v in coerced.fields)})"


def _subscript(x: ast.Subscript, go: Callable[[ast.Expr], str], types: expression_types.ColumnTypes,
               statement: str) -> str:
    """``arr[i]`` as ksqlDB's ``ArrayAccess``: 1-based, negative from the end, null out of range
    and for 0 (Spark's ``try_element_at`` refuses 0, hence ``nullif``); ``m[k]`` null for a
    missing key. An operand whose type is unknown before Spark runs is an array unless the index
    is a string."""
    expression_types.type_of(x, types, statement)          # ksqlDB's refusal of a subscript on anything else
    base = expression_types.type_of(x.operand, types, statement)
    index = expression_types.type_of(x.index, types, statement)
    is_map = base.name == "MAP" if base is not None else index is not None and index.name == "STRING"
    if is_map:
        return f"try_element_at({go(x.operand)}, {go(x.index)})"
    return f"try_element_at({go(x.operand)}, nullif({go(x.index)}, 0))"


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


def _lambda_call(x: ast.Call, go: Callable[[ast.Expr], str], types: expression_types.ColumnTypes,
                 body: Callable[[ast.Lambda, dict[str, tuple[ast.SqlType | None, str]]], str], entry: str,
                 statement: str) -> str:
    """ksqlDB's TRANSFORM, FILTER and REDUCE (``udf/lambda``) as Spark's higher-order functions,
    with ksqlDB's nulls: a null collection gives null (REDUCE: the initial state; a null initial
    state null); a map TRANSFORM whose new keys repeat or whose keys or values are null gives
    null, where ksqlDB's ``Collectors.toMap`` fails the row's call (Spark would fail the whole
    query). A map's lambdas run over Spark's ``map_entries``, their (key, value) parameters
    standing for the entry's fields (``entry``: a lambda variable unique at this depth)."""
    collection = expression_types.type_of(x.args[0], types, statement)
    state = expression_types.type_of(x.args[1], types, statement) if x.name == "REDUCE" else None
    kind, lambdas = expression_types.lambda_form(x, collection, statement)
    params = expression_types.lambda_params(x, kind, collection, state)

    def fn(index: int, fields: list[str] | None = None) -> str:
        """Lambda ``index``'s body, its parameters Spark lambda variables of their own names,
        or (``fields``) the given expressions."""
        f = lambdas[index]
        sql = fields or [quote(p) for p in f.params]
        return body(f, {p: (params[index][p], v) for p, v in zip(f.params, sql)})

    def lam(index: int) -> str:
        names = [quote(p) for p in lambdas[index].params]     # Spark: x -> ... or (a, b) -> ...
        return f"{names[0] if len(names) == 1 else '(' + ', '.join(names) + ')'} -> {fn(index)}"
    source = go(x.args[0])
    if x.name == "FILTER":
        return f"filter({source}, {lam(0)})" if kind == "ARRAY" else f"map_filter({source}, {lam(0)})"
    if x.name == "TRANSFORM" and kind == "ARRAY":
        return f"transform({source}, {lam(0)})"
    key_value = [f"{entry}.key", f"{entry}.value"]
    if x.name == "TRANSFORM":
        pairs = (f"transform(map_entries({source}), {entry} -> struct({fn(0, key_value)} AS key, "
                 f"{fn(1, key_value)} AS value))")
        return (f"(CASE WHEN {source} IS NULL THEN NULL WHEN exists({pairs}, {entry} -> {entry}.key IS NULL OR "
                f"{entry}.value IS NULL) OR size(array_distinct(transform({pairs}, {entry} -> {entry}.key))) != "
                f"size({source}) THEN NULL ELSE map_from_entries({pairs}) END)")
    init = go(x.args[1])

    def typed(text: str) -> str:                          # Spark's aggregate keeps the state's exact type
        return text if state is None else f"CAST({text} AS {spark_type(state)})"
    f = lambdas[0]
    if kind == "ARRAY":
        reduced = f"aggregate({source}, {typed(init)}, ({', '.join(quote(p) for p in f.params)}) -> {typed(fn(0))})"
    else:
        merge = typed(fn(0, [quote(f.params[0])] + key_value))
        reduced = f"aggregate(map_entries({source}), {typed(init)}, ({quote(f.params[0])}, {entry}) -> {merge})"
    return f"(CASE WHEN {init} IS NULL THEN NULL WHEN {source} IS NULL THEN {typed(init)} ELSE {reduced} END)"


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


_FROM_SPARK = {"string": "STRING", "bigint": "BIGINT", "int": "INT", "integer": "INT", "smallint": "INT",
               "tinyint": "INT", "double": "DOUBLE", "float": "DOUBLE", "boolean": "BOOLEAN", "binary": "BYTES",
               "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP", "date": "DATE"}


def sql_type_of_spark(simple: str) -> ast.SqlType | None:
    """A Spark type's ``simpleString`` (``array<int>``, ``map<string,bigint>``,
    ``struct<A:int,B:array<double>>``, ``decimal(4,2)``) as a ksqlDB type; None for a type ksqlDB
    has no counterpart of (``void``, intervals...)."""
    def split(inner: str) -> list[str]:
        parts, depth, start = [], 0, 0
        for i, ch in enumerate(inner):
            if ch in "<(":
                depth += 1
            elif ch in ">)":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(inner[start:i])
                start = i + 1
        return parts + [inner[start:]]
    simple = simple.strip()
    decimal_type = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", simple)
    if decimal_type:
        return ast.SqlType("DECIMAL", (int(decimal_type[1]), int(decimal_type[2])))
    if simple.startswith("array<") and simple.endswith(">"):
        item = sql_type_of_spark(simple[6:-1])
        return None if item is None else ast.SqlType("ARRAY", items=(item,))
    if simple.startswith("map<") and simple.endswith(">"):
        kv = [sql_type_of_spark(p) for p in split(simple[4:-1])]
        return None if len(kv) != 2 or None in kv else ast.SqlType("MAP", items=tuple(t for t in kv if t))
    if simple.startswith("struct<") and simple.endswith(">"):
        fields = []
        for part in split(simple[7:-1]) if simple != "struct<>" else []:
            name, _, kind = part.partition(":")
            t = sql_type_of_spark(kind)
            if t is None:
                return None
            fields.append((name.strip("`"), t))
        return ast.SqlType("STRUCT", fields=tuple(fields))
    return ast.SqlType(_FROM_SPARK[simple]) if simple in _FROM_SPARK else None


def spark_column(name: str, spark: str) -> ast.ColumnDef:
    """An output column known only by its Spark type (``spark_type.simpleString()``) as the
    ksqlDB-typed column a query writes, e.g. into the Avro schema it registers; a type ksqlDB has
    no name for is this server's refusal."""
    t = sql_type_of_spark(spark)
    if t is None:
        raise KsqlError(f"Column {name} of type {spark} cannot be written as AVRO by this server")
    return ast.ColumnDef(name, t)
