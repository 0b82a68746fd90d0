"""The ksqlDB types of query expressions known before Spark runs (ksqlDB's ``ExpressionTypeManager``,
in small), and the common type of a collection constructor's elements (its
``CoercionUtil.coerceUserList``).

A query's ``ARRAY[...]``, ``MAP(k := v)`` and ``STRUCT(f := v)`` take their elements' common type as
ksqlDB's do: the first element whose type is known sets it; numbers widen (INTEGER < BIGINT <
DECIMAL < DOUBLE); a string literal among numbers or booleans is parsed as one; nested constructors
merge element by element (structs: the union of their fields); anything else is ksqlDB's
``operator does not exist`` statement error. Elements of another type than the common one are
converted as ksqlDB converts them: a literal to a literal of the common type, any other expression
wrapped in ``CAST`` (the AST returned here, which ``translate`` turns into Spark SQL). An element
whose type is only known to Spark (a function's result, arithmetic) is left to Spark's own
coercion. ``INSERT ... VALUES`` evaluates constants instead (``values``), with the same rules on
values; both share the number ranks and messages from there.
"""
from __future__ import annotations

import decimal
from typing import Callable

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.values import INT_RANGE, ksql_type_name, sql_text

T = ast.SqlType
#: a column's type (None: unknown, e.g. a computed column of an upstream query)
ColumnTypes = Callable[[ast.Column], "T | None"]
_RANK = {"INT": 0, "BIGINT": 1, "DECIMAL": 2, "DOUBLE": 3}
_STRING_FUNCTIONS = {"UCASE", "LCASE", "UPPER", "LOWER", "TRIM", "LTRIM", "RTRIM", "CONCAT", "CONCAT_WS", "SUBSTRING",
                     "REPLACE", "LPAD", "RPAD", "INITCAP", "REGEXP_EXTRACT", "REGEXP_REPLACE", "EXTRACTJSONFIELD",
                     "TIMESTAMPTOSTRING"}


def _base(t: T) -> str:
    return {"VARCHAR": "STRING", "INTEGER": "INT"}.get(t.name, t.name)


def _decimal_of(v: object) -> T:
    """A number's DECIMAL type as ksqlDB's ``DecimalUtil.fromValue`` gives it (``2.5`` DECIMAL(2, 1))."""
    d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(str(v).strip())
    sign, digits, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    return T("DECIMAL", (max(len(digits) + max(exponent, 0), scale, 1), scale))


def _as_decimal(t: T) -> T:
    return {"INT": T("DECIMAL", (10, 0)), "BIGINT": T("DECIMAL", (19, 0))}.get(_base(t), t)


def _widen_decimal(a: T, b: T) -> T:
    """ksqlDB's ``DecimalUtil.widen``: enough integer digits and scale for both."""
    a, b = _as_decimal(a), _as_decimal(b)
    scale = max(a.params[1], b.params[1])
    return T("DECIMAL", (max(a.params[0] - a.params[1], b.params[0] - b.params[1]) + scale, scale))


def _wider_number(a: T, b: T) -> T:
    if "DOUBLE" in (_base(a), _base(b)):
        return T("DOUBLE")
    if "DECIMAL" in (_base(a), _base(b)):
        return _widen_decimal(a, b)
    return a if _RANK[_base(a)] >= _RANK[_base(b)] else b


def literal_type(v: object) -> T | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return T("BOOLEAN")
    if isinstance(v, int):
        return T("INT") if v in INT_RANGE else T("BIGINT")
    if isinstance(v, (float, decimal.Decimal)):
        return _decimal_of(v)                            # a number with a point is a DECIMAL in ksqlDB
    return T("STRING")


def type_of(e: ast.Expr, column: ColumnTypes, statement: str = "") -> T | None:
    """``e``'s ksqlDB type if it is known without running it; None when only Spark knows it."""
    def go(x: ast.Expr) -> T | None:
        if isinstance(x, ast.Literal):
            return literal_type(x.value)
        if isinstance(x, ast.Column):
            return column(x)
        if isinstance(x, ast.Cast):
            return x.type
        if isinstance(x, (ast.IsNull, ast.Between, ast.InList)):
            return T("BOOLEAN")
        if isinstance(x, ast.Unary):
            return T("BOOLEAN") if x.op == "NOT" else go(x.operand)
        if isinstance(x, ast.Binary):
            if x.op in ("=", "!=", "<>", "<", "<=", ">", ">=", "AND", "OR", "LIKE"):
                return T("BOOLEAN")
            if x.op == "||":
                return T("STRING")
            a, b = go(x.left), go(x.right)
            if a is not None and b is not None and _base(a) == _base(b) == "STRING" and x.op == "+":
                return T("STRING")
            if a is not None and b is not None and _base(a) in _RANK and _base(b) in _RANK and "DECIMAL" not in (
                    _base(a), _base(b)):
                return _wider_number(a, b)
            return None
        if isinstance(x, (ast.ArrayConstructor, ast.MapConstructor, ast.StructConstructor)):
            return coerce_constructor(x, column, statement)[1]
        if isinstance(x, ast.Subscript):
            base = go(x.operand)
            if base is None:
                return None
            if base.name not in ("ARRAY", "MAP"):
                hint = (f" Use the dereference operator for STRUCTS: {sql_text(x.operand)}->{sql_text(x.index)}"
                        if base.name == "STRUCT" else "")
                raise KsqlError(f"Subscript expression ({sql_text(x)}) do not apply to {ksql_type_name(base)}.{hint}",
                                statement=statement)
            return base.items[0] if base.name == "ARRAY" else base.items[1]
        if isinstance(x, ast.Dereference):
            base = go(x.operand)
            if base is None:
                return None
            if base.name != "STRUCT":
                raise KsqlError(f"Expected STRUCT type, got: {ksql_type_name(base)}", statement=statement)
            found = dict(base.fields).get(x.field)
            if found is None:
                raise KsqlError(f"Could not find field '{x.field}' in '{sql_text(x.operand)}'.", statement=statement)
            return found
        if isinstance(x, ast.Case):
            return next((t for t in (go(v) for _, v in x.whens) if t is not None),
                        None if x.default is None else go(x.default))
        if isinstance(x, ast.Call):
            if x.name in LAMBDA_FUNCTIONS:
                return lambda_call_type(x, column, statement)
            if x.name in _STRING_FUNCTIONS:
                return T("STRING")
            if x.name == "SPLIT":
                return T("ARRAY", items=(T("STRING"),))
            if x.name in ("LEN", "INSTR", "ARRAY_LENGTH"):
                return T("INT")
            if x.name == "COUNT" or x.name == "COUNT_DISTINCT":
                return T("BIGINT")
            if x.name == "AVG":
                return T("DOUBLE")
            if x.name == "SUM" and len(x.args) == 1:
                summed = go(x.args[0])
                return summed if summed is not None and _base(summed) in ("INT", "BIGINT", "DOUBLE", "DECIMAL") \
                    else None
            if x.name in ("COLLECT_LIST", "COLLECT_SET") and x.args:
                inner = go(x.args[0])
                return None if inner is None else T("ARRAY", items=(inner,))
            if x.name in ("MIN", "MAX", "EARLIEST_BY_OFFSET", "LATEST_BY_OFFSET", "IFNULL", "COALESCE") and x.args:
                return go(x.args[0])
        return None
    return go(e)


#: ksqlDB's lambda functions (its ``udf/lambda`` package): name -> (ARRAY form, MAP form), each
#: form the parameter counts of its lambdas, in ksqlDB's UDF signatures
LAMBDA_FUNCTIONS = {"TRANSFORM": ((1,), (2, 2)), "FILTER": ((1,), (2,)), "REDUCE": ((2,), (3,))}
_SIGNATURES = {"TRANSFORM": ["TRANSFORM(ARRAY<T> array, LAMBDA (T) => R lambda function)",
                             "TRANSFORM(MAP<K, V> map, LAMBDA (K, V) => R key lambda function, "
                             "LAMBDA (K, V) => T value lambda function)"],
               "FILTER": ["FILTER(ARRAY<T> array, LAMBDA (T) => BOOLEAN lambda function)",
                          "FILTER(MAP<K, V> map, LAMBDA (K, V) => BOOLEAN lambda function)"],
               "REDUCE": ["REDUCE(ARRAY<T> array, S initial state, LAMBDA (S, T) => S reduce function)",
                          "REDUCE(MAP<K, V> map, S initial state, LAMBDA (S, K, V) => S reduce function)"]}


def lambda_form(x: ast.Call, collection: T | None, statement: str) -> tuple[str, list[ast.Lambda]]:
    """Which of a lambda function's forms a call is ("ARRAY" or "MAP", by its first argument's
    type, or by its lambdas' parameters when that type is unknown) and its lambdas; a call that
    fits neither is ksqlDB's ``UdfIndex`` refusal."""
    array_form, map_form = LAMBDA_FUNCTIONS[x.name]
    lambdas = [a for a in x.args if isinstance(a, ast.Lambda)]
    plain = [a for a in x.args if not isinstance(a, ast.Lambda)]
    arity = tuple(len(f.params) for f in lambdas)
    kind = collection.name if collection is not None else (
        "ARRAY" if arity == array_form else "MAP" if arity == map_form else None)
    wanted_plain = 2 if x.name == "REDUCE" else 1
    fits = (kind == "ARRAY" and arity == array_form) or (kind == "MAP" and arity == map_form)
    if not fits or len(plain) != wanted_plain:
        def shown(a: ast.Expr) -> str:
            if isinstance(a, ast.Lambda):
                return "LAMBDA (" + ", ".join(a.params) + ") => ..."
            t = collection if a is x.args[0] else None
            return "null" if t is None else ksql_type_name(t)
        raise KsqlError(f"Function '{x.name}' does not accept parameters ({', '.join(shown(a) for a in x.args)})."
                        "\nValid alternatives are:\n" + "\n".join(_SIGNATURES[x.name])
                        + "\nFor detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;",
                        statement=statement)
    return str(kind), lambdas


def lambda_params(x: ast.Call, kind: str, collection: T | None, state: T | None) -> list[dict[str, T | None]]:
    """Each lambda's parameter types: an array's element; a map's key and value; REDUCE's state
    (the initial state's type, ksqlDB's ``S``) first."""
    items: tuple[T | None, ...] = (None, None)
    if collection is not None and collection.items:
        items = tuple(collection.items) + (None,)
    types = [items[0]] if kind == "ARRAY" else [items[0], items[1]]
    if x.name == "REDUCE":
        types = [state] + types
    return [dict(zip(f.params, types)) for f in x.args if isinstance(f, ast.Lambda)]


def bound(column: ColumnTypes, params: dict[str, T | None]) -> ColumnTypes:
    """``column`` inside a lambda's body: its parameters (unqualified names) first."""
    def of(c: ast.Column) -> T | None:
        return params[c.name] if c.source is None and c.name in params else column(c)
    return of


def lambda_call_type(x: ast.Call, column: ColumnTypes, statement: str) -> T | None:
    """TRANSFORM: an array of its lambda's type, or a map of its two lambdas' types; FILTER: its
    collection's type; REDUCE: its initial state's type (ksqlDB's signatures)."""
    collection = type_of(x.args[0], column, statement) if x.args else None
    state = type_of(x.args[1], column, statement) if x.name == "REDUCE" and len(x.args) > 1 else None
    kind, lambdas = lambda_form(x, collection, statement)
    params = lambda_params(x, kind, collection, state)
    results = [type_of(f.body, bound(column, p), statement) for f, p in zip(lambdas, params)]
    if x.name == "FILTER":
        return collection
    if x.name == "REDUCE":
        return state
    if kind == "ARRAY":
        return None if results[0] is None else T("ARRAY", items=(results[0],))
    key, value = results
    return None if key is None or value is None else T("MAP", items=(key, value))


def _null_literal(x: ast.Expr) -> bool:
    return isinstance(x, ast.Literal) and x.value is None


def _refuse(target: T, source: T | None, x: ast.Expr, statement: str) -> KsqlError:
    return KsqlError(f"operator does not exist: {ksql_type_name(target)} = "
                     f"{'null' if source is None else ksql_type_name(source)} ({sql_text(x)})\n"
                     "Hint: You might need to add explicit type casts.", statement=statement)


def _string_number_type(text: str, target: T, statement: str) -> T:
    """A string literal among numbers: the number type its text has (ksqlDB's
    ``getStringNumericType``), or ksqlDB's invalid-syntax error."""
    try:
        d = decimal.Decimal(text.strip())
    except decimal.InvalidOperation:
        raise KsqlError(f'invalid input syntax for type {ksql_type_name(T(_base(target)))}: "{text}".',
                        statement=statement) from None
    if not any(c in text for c in ".eE") and d == d.to_integral_value():
        return T("INT") if int(d) in INT_RANGE else T("BIGINT") if -2**63 < int(d) < 2**63 else _decimal_of(d)
    return _decimal_of(d)


_ISSUE = "see https://github.com/confluentinc/ksql/issues/4239"
_TRUTHS = ("true", "t", "yes", "y", "false", "f", "no", "n")


def _merge(x: ast.Expr, t: T, target: T, column: ColumnTypes, statement: str) -> T:
    """ksqlDB's ``resolveCommonType`` for one more element ``x`` of type ``t``."""
    if isinstance(x, (ast.ArrayConstructor, ast.MapConstructor, ast.StructConstructor)):
        wanted = {ast.ArrayConstructor: "ARRAY", ast.MapConstructor: "MAP", ast.StructConstructor: "STRUCT"}[type(x)]
        if target.name != wanted:
            raise _refuse(target, t, x, statement)
        try:
            if isinstance(x, ast.ArrayConstructor):
                return T("ARRAY", items=(_within(target.items[0], list(x.items), column, statement),))
            if isinstance(x, ast.MapConstructor):
                return T("MAP", items=(_within(target.items[0], [k for k, _ in x.entries], column, statement),
                                       _within(target.items[1], [v for _, v in x.entries], column, statement)))
            fields = dict(target.fields)
            merged = dict(fields)
            for name, value in x.fields:                 # t is known, so every field's type is
                vt = type_of(value, column, statement)
                assert vt is not None
                merged[name] = vt if name not in fields else _merge(value, vt, fields[name], column, statement)
            return T("STRUCT", fields=tuple(merged.items()))
        except KsqlError as exc:
            if str(exc).startswith("operator does not exist"):
                raise _refuse(target, t, x, statement) from None
            raise
    base, goal = _base(t), _base(target)
    if isinstance(x, ast.Literal) and isinstance(x.value, str):
        if goal in _RANK:
            return _wider_number(target, _string_number_type(x.value, target, statement))
        if goal == "BOOLEAN":
            if x.value.strip().lower() not in _TRUTHS:
                raise KsqlError(f'invalid input syntax for type BOOLEAN: "{x.value}".', statement=statement)
            return target
        if goal in ("TIMESTAMP", "DATE", "TIME"):           # the lax literal coercer parses them
            return target
    if base == goal and base not in ("ARRAY", "MAP", "STRUCT", "DECIMAL"):
        return target
    if base in _RANK and goal in _RANK:
        return _wider_number(target, t)
    if t == target:
        return target
    raise _refuse(target, t, x, statement)


def _common(start: T | None, exprs: list[ast.Expr], column: ColumnTypes, statement: str) -> T | None:
    target = start
    for x in exprs:
        if _null_literal(x):
            continue
        t = type_of(x, column, statement)
        if t is None:                                    # only Spark knows it: Spark coerces it
            continue
        target = t if target is None else _merge(x, t, target, column, statement)
    return target


def _within(start: T, exprs: list[ast.Expr], column: ColumnTypes, statement: str) -> T:
    """The common type of a nested constructor's elements and the type found so far."""
    out = _common(start, exprs, column, statement)
    assert out is not None
    return out


def _convert(x: ast.Expr, t: T | None, common: T | None) -> ast.Expr:
    """An element at the common type (ksqlDB's ``convertToCommonType``): as it is if its type is
    the common one (or unknown), else a CAST (Spark's cast of a literal is the literal converted)."""
    if common is None or t is None or t == common or _null_literal(x):
        return x
    if isinstance(x, (ast.ArrayConstructor, ast.MapConstructor, ast.StructConstructor)) and common.name != "STRUCT":
        return ast.Cast(x, common)
    if isinstance(x, ast.StructConstructor):
        return _struct_at(x, t, common)
    return ast.Cast(x, common)


def _struct_at(x: ast.StructConstructor, t: T, common: T) -> ast.StructConstructor:
    """A STRUCT constructor at the union type of the structs it is mixed with: every field of
    the union in its order, a missing one a typed null (ksqlDB's struct has it null), a present
    one converted to the field's common type (nested structs alike); Spark then sees one type."""
    own_types = dict(t.fields)
    own = dict(x.fields)
    fields = []
    for name, field_type in common.fields:
        if name in own:
            fields.append((name, _convert(own[name], own_types.get(name), field_type)))
        else:
            fields.append((name, ast.Cast(ast.Literal(None), field_type)))
    return ast.StructConstructor(tuple(fields))


def coerce_constructor(x: ast.ArrayConstructor | ast.MapConstructor | ast.StructConstructor, column: ColumnTypes,
                       statement: str = "") -> tuple[ast.Expr, T | None]:
    """The constructor with its elements at their common type, and its type (None if Spark must
    decide); ksqlDB's errors for elements without one."""
    if isinstance(x, ast.StructConstructor):
        types = [type_of(v, column, statement) for _, v in x.fields]
        known = None if any(t is None for t in types) else T(
            "STRUCT", fields=tuple((n, t) for (n, _), t in zip(x.fields, types) if t is not None))
        return x, known
    if isinstance(x, ast.ArrayConstructor):
        items = list(x.items)
        if not items:
            raise KsqlError(f"Array constructor cannot be empty. Please supply at least one element ({_ISSUE}).",
                            statement=statement)
        if all(_null_literal(i) for i in items):
            raise KsqlError(f"Cannot construct an array with all NULL elements ({_ISSUE}). As a workaround, you may "
                            "cast a NULL value to the desired type.", statement=statement)
        common = _common(None, items, column, statement)
        out = [_convert(i, type_of(i, column, statement), common) for i in items]
        known = None if common is None or any(type_of(i, column, statement) is None and not _null_literal(i)
                                              for i in items) else T("ARRAY", items=(common,))
        return ast.ArrayConstructor(tuple(out)), known
    keys, vals = [k for k, _ in x.entries], [v for _, v in x.entries]
    if not keys:
        raise KsqlError(f"Map constructor cannot be empty. Please supply at least one key value pair ({_ISSUE}).",
                        statement=statement)
    for what, exprs in (("keys", keys), ("values", vals)):
        if all(_null_literal(e) for e in exprs):
            raise KsqlError(f"Cannot construct a map with all NULL {what} ({_ISSUE}). As a workaround, you may cast "
                            f"a NULL {what[:-1]} to the desired type.", statement=statement)
    key_type, value_type = _common(None, keys, column, statement), _common(None, vals, column, statement)
    entries = tuple((_convert(k, type_of(k, column, statement), key_type),
                     _convert(v, type_of(v, column, statement), value_type)) for k, v in x.entries)
    unknown = any(type_of(e, column, statement) is None and not _null_literal(e) for e in keys + vals)
    known = None if key_type is None or value_type is None or unknown else T("MAP", items=(key_type, value_type))
    return ast.MapConstructor(entries), known
