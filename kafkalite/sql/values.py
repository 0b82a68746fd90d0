"""The value of an ``INSERT INTO ... VALUES`` expression (ksqlDB's ``GenericExpressionResolver``):
any expression without column references (arithmetic, string concatenation, comparisons and
logic, CASE, CAST, and ksqlDB's scalar functions on constants), evaluated here in Python, because
one row does not justify a Spark job. Values carry ksqlDB's types by their Python class:

  BOOLEAN bool, INTEGER/BIGINT int (by range), DOUBLE float, DECIMAL Decimal, STRING str,
  BYTES bytes, TIMESTAMP an aware UTC datetime, DATE date, TIME time, ARRAY list, MAP dict,
  STRUCT :class:`Struct` (a dict by field name, so that MAP and STRUCT stay apart).

``ARRAY[...]``, ``MAP(k := v, ...)`` and ``STRUCT(f := v, ...)`` give their elements a common type
as ksqlDB's ``CoercionUtil.coerceUserList`` does (the first non-null element drives it; numbers
widen; a string literal among numbers or booleans is parsed), and element access follows ksqlDB:
``arr[i]`` is 1-based, negative from the end, null out of range; ``m[k]`` null for a missing key;
``s->f`` a struct's field.

A number literal with a point is a DECIMAL, as ksqlDB parses it (``1.5`` is DECIMAL(2, 1)). Java's
semantics where they differ from Python's: integer division and remainder truncate toward zero,
ROUND rounds half up. A function this module does not know is ksqlDB's "Can't find any functions
with the name" error, never a wrong answer.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import math
import re
import time
from typing import Any, Callable

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError

UTC = datetime.timezone.utc
INT_RANGE = range(-2**31, 2**31)


class EvaluationError(Exception):
    """An expression ksqlDB would refuse; the caller adds the statement's context."""


def constant(e: ast.Expr) -> Any:
    """The value of ``e``; EvaluationError for a column reference, an unknown function or a bad
    operand."""
    _no_columns(e, e)
    return _eval(e)


class Struct(dict[str, Any]):
    """A STRUCT value: field name -> value, in the declared order."""


def type_name(v: Any) -> str:
    """ksqlDB's base type name of a value (its ``SqlBaseType``), as its error messages print it."""
    if isinstance(v, Struct):
        return "STRUCT"
    if isinstance(v, dict):
        return "MAP"
    if isinstance(v, list):
        return "ARRAY"
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "INTEGER" if v in INT_RANGE else "BIGINT"
    if isinstance(v, float):
        return "DOUBLE"
    if isinstance(v, decimal.Decimal):
        return "DECIMAL"
    if isinstance(v, str):
        return "STRING"
    if isinstance(v, bytes):
        return "BYTES"
    if isinstance(v, datetime.datetime):
        return "TIMESTAMP"
    if isinstance(v, datetime.date):
        return "DATE"
    if isinstance(v, datetime.time):
        return "TIME"
    return type(v).__name__.upper()


def sql_type_text(v: Any) -> str:
    """A value's full ksqlDB type as its messages print it (``ARRAY<INTEGER>``, ``MAP<STRING,
    INTEGER>``, ``STRUCT<`A` INTEGER>``); an empty or all-null collection's element type is unknown
    and printed as ksqlDB's ``null``-typed element would not be: as STRING."""
    if isinstance(v, Struct):
        return "STRUCT<" + ", ".join(f"`{k}` {sql_type_text(x)}" for k, x in v.items()) + ">"
    if isinstance(v, dict):
        inner = next((x for x in v.values() if x is not None), "")
        return f"MAP<STRING, {sql_type_text(inner)}>"
    if isinstance(v, list):
        return f"ARRAY<{sql_type_text(next((x for x in v if x is not None), ''))}>"
    if isinstance(v, decimal.Decimal):
        digits = max(len(v.as_tuple().digits), -int(v.as_tuple().exponent), 1)
        return f"DECIMAL({digits}, {max(-int(v.as_tuple().exponent), 0)})"
    return type_name(v)


def java_text(v: Any) -> str:
    """A value as Java's ``toString`` shows it (ksqlDB's messages and CAST(... AS STRING)):
    a list ``[1, 2]``, a map ``{k=1}``, a struct ``Struct{A=1,B=x}`` (Connect's)."""
    if isinstance(v, Struct):
        return "Struct{" + ",".join(f"{k}={java_text(x)}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{java_text(k)}={java_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(java_text(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e7:
            return f"{v:.1f}"
        return repr(v).replace("e+", "E").replace("e-", "E-").replace("inf", "Infinity")
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, datetime.datetime):
        return v.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    return "null" if v is None else str(v)


def sql_text(e: ast.Expr) -> str:
    """An expression as ksqlDB's ``ExpressionFormatter`` prints it in messages."""
    if isinstance(e, ast.Literal):
        v = e.value
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return "null" if v is None else java_text(v) if isinstance(v, bool) else str(v)
    if isinstance(e, ast.Column):
        return (f"{e.source}." if e.source else "") + e.name
    if isinstance(e, ast.Call):
        return f"{e.name}({'*' if e.star else ', '.join(sql_text(a) for a in e.args)})"
    if isinstance(e, ast.Binary):
        return f"({sql_text(e.left)} {e.op} {sql_text(e.right)})"
    if isinstance(e, ast.Unary):
        return f"(NOT {sql_text(e.operand)})" if e.op == "NOT" else f"-{sql_text(e.operand)}"
    if isinstance(e, ast.Cast):
        return f"CAST({sql_text(e.operand)} AS {e.type})"
    if isinstance(e, ast.IsNull):
        return f"(({sql_text(e.operand)}) IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, ast.ArrayConstructor):
        return f"ARRAY[{', '.join(sql_text(i) for i in e.items)}]"
    if isinstance(e, ast.MapConstructor):
        return f"MAP({', '.join(f'{sql_text(k)}:={sql_text(v)}' for k, v in e.entries)})"
    if isinstance(e, ast.StructConstructor):
        return f"STRUCT({', '.join(f'{n}:={sql_text(v)}' for n, v in e.fields)})"
    if isinstance(e, ast.Subscript):
        return f"{sql_text(e.operand)}[{sql_text(e.index)}]"
    if isinstance(e, ast.Dereference):
        return f"{sql_text(e.operand)}->{e.field}"
    return type(e).__name__


def _no_columns(e: ast.Expr, whole: ast.Expr) -> None:
    if isinstance(e, ast.Column):
        raise EvaluationError(f"Unsupported column reference in insert value: {sql_text(whole)}")
    for child in ast.children(e):
        _no_columns(child, whole)


def _eval(e: ast.Expr) -> Any:
    if isinstance(e, ast.Literal):
        v = e.value
        return decimal.Decimal(repr(v)) if isinstance(v, float) and math.isfinite(v) else v
    if isinstance(e, ast.Unary):
        v = _eval(e.operand)
        if v is None:
            return None
        if e.op == "NOT":
            return not _boolean(v, "NOT")
        _numeric(v, "-")
        return -v
    if isinstance(e, ast.Binary):
        return _binary(e)
    if isinstance(e, ast.IsNull):
        return (_eval(e.operand) is None) != e.negated
    if isinstance(e, ast.Between):
        v, lo, hi = _eval(e.operand), _eval(e.low), _eval(e.high)
        if v is None or lo is None or hi is None:
            return None
        return (_compare(lo, v) <= 0 <= _compare(hi, v)) != e.negated
    if isinstance(e, ast.InList):
        v = _eval(e.operand)
        if v is None:
            return None
        return any(i is not None and _compare(v, i) == 0 for i in map(_eval, e.items)) != e.negated
    if isinstance(e, ast.Case):
        for cond, value in e.whens:
            if _eval(cond) is True:
                return _eval(value)
        return None if e.default is None else _eval(e.default)
    if isinstance(e, ast.Cast):
        return cast(_eval(e.operand), e.type)
    if isinstance(e, ast.Call):
        return _call(e)
    if isinstance(e, ast.ArrayConstructor):
        return _common(list(e.items))
    if isinstance(e, ast.MapConstructor):
        keys = _common([k for k, _ in e.entries])
        if any(k is None for k in keys):
            raise EvaluationError("Error processing expression: MAP key cannot be null")
        if any(isinstance(k, (list, dict)) for k in keys):
            raise EvaluationError(f"Error processing expression: MAP keys must be of a primitive type, got "
                                  f"{sql_type_text(keys[0])}")
        return dict(zip(keys, _common([v for _, v in e.entries])))
    if isinstance(e, ast.StructConstructor):
        return Struct((name, _eval(v)) for name, v in e.fields)
    if isinstance(e, ast.Subscript):
        return _subscript(_eval(e.operand), _eval(e.index))
    if isinstance(e, ast.Dereference):
        v = _eval(e.operand)
        if v is None:
            return None
        if not isinstance(v, Struct):
            raise EvaluationError(f"Error processing expression: Expected STRUCT type, got: {type_name(v)}")
        if e.field not in v:
            raise EvaluationError(f"Error processing expression: Could not find field '{e.field}' in "
                                  f"'{sql_text(e.operand)}'.")
        return v[e.field]
    raise EvaluationError(f"Unsupported expression in insert value: {type(e).__name__}")


# -- collections ---------------------------------------------------------------------------------
_NUMBER_RANK = {"INTEGER": 0, "BIGINT": 1, "DECIMAL": 2, "DOUBLE": 3}


def _common(exprs: list[ast.Expr]) -> list[Any]:
    """The elements' values at their common type (ksqlDB's ``CoercionUtil.coerceUserList``): the
    first non-null value sets it; numbers widen to the widest (INTEGER < BIGINT < DECIMAL <
    DOUBLE); a string literal is parsed as a number, a boolean or a TIMESTAMP/DATE/TIME where
    those are expected (ksqlDB's lax literal coercion);
    anything else that differs is ksqlDB's "operator does not exist" error."""
    vals = [_eval(x) for x in exprs]
    first = next((v for v in vals if v is not None), None)
    if first is None:
        return vals
    target = type_name(first)
    if target in _NUMBER_RANK:
        for x, v in zip(exprs, vals):
            if isinstance(v, str) and isinstance(x, ast.Literal):
                try:
                    n = decimal.Decimal(v.strip())
                except decimal.InvalidOperation:
                    raise EvaluationError(f'invalid input syntax for type {target}: "{v}".') from None
                v = int(n) if n == n.to_integral_value() and not any(c in v for c in ".eE") else n
            if v is not None and type_name(v) in _NUMBER_RANK:
                target = max(target, type_name(v), key=lambda t: _NUMBER_RANK[t])
    out = []
    for x, v in zip(exprs, vals):
        out.append(None if v is None else _to_common(x, v, target, first))
    return out


def _to_common(x: ast.Expr, v: Any, target: str, first: Any) -> Any:
    kind = type_name(v)
    if target in _NUMBER_RANK:
        if isinstance(v, str) and isinstance(x, ast.Literal):
            v = decimal.Decimal(v.strip())
            kind = "DECIMAL"
        if kind in _NUMBER_RANK:
            return float(v) if target == "DOUBLE" else decimal.Decimal(v) if target == "DECIMAL" else int(v)
    elif target == "BOOLEAN" and isinstance(v, str) and isinstance(x, ast.Literal):
        low = v.strip().lower()
        if low in ("true", "t", "yes", "y", "false", "f", "no", "n"):
            return low[0] in "ty"
        raise EvaluationError(f'invalid input syntax for type BOOLEAN: "{v}".')
    elif target in ("TIMESTAMP", "DATE", "TIME") and isinstance(v, str) and isinstance(x, ast.Literal):
        try:
            return cast(v, ast.SqlType(target))
        except EvaluationError:
            raise EvaluationError(f'invalid input syntax for type {target}: "{v}".') from None
    elif kind == target:
        return v
    raise EvaluationError(f"operator does not exist: {sql_type_text(first)} = {sql_type_text(v)} ({sql_text(x)})\n"
                          "Hint: You might need to add explicit type casts.")


def _subscript(v: Any, index: Any) -> Any:
    if v is None or index is None:
        return None
    if isinstance(v, list):
        if not isinstance(index, int) or isinstance(index, bool):
            raise EvaluationError(f"Error processing expression: array index must be INTEGER, got {type_name(index)}")
        i = index - 1 if index >= 0 else len(v) + index      # 1-based; negative counts from the end
        return v[i] if 0 <= i < len(v) else None
    if isinstance(v, dict) and not isinstance(v, Struct):
        return v.get(index)
    raise EvaluationError(f"Error processing expression: Subscript expression is only supported on ARRAY or MAP, "
                          f"got {type_name(v)}")


# -- operators ------------------------------------------------------------------------------------
def _numeric(v: Any, op: str) -> None:
    if not isinstance(v, (int, float, decimal.Decimal)) or isinstance(v, bool):
        raise EvaluationError(f"Error processing expression: Unsupported arithmetic types. {type_name(v)} {op}")


def _boolean(v: Any, op: str) -> bool:
    if not isinstance(v, bool):
        raise EvaluationError(f"Error processing expression: {op} expects BOOLEAN, got {type_name(v)}")
    return v


def _binary(e: ast.Binary) -> Any:
    if e.op in ("AND", "OR"):
        a, b = _eval(e.left), _eval(e.right)        # SQL's three-valued logic
        a = None if a is None else _boolean(a, e.op)
        b = None if b is None else _boolean(b, e.op)
        if e.op == "AND":
            return False if a is False or b is False else None if a is None or b is None else True
        return True if a is True or b is True else None if a is None or b is None else False
    a, b = _eval(e.left), _eval(e.right)
    if a is None or b is None:
        return None
    if e.op in ("||", "+") and isinstance(a, str) and isinstance(b, str):
        return a + b
    if (isinstance(a, (list, dict)) or isinstance(b, (list, dict))) and e.op in ("=", "!=", "<>", "<", "<=", ">",
                                                                               ">="):    # collections: equality only
        if e.op in ("=", "!=", "<>") and type_name(a) == type_name(b):
            return (a == b) == (e.op == "=")
        raise EvaluationError(f"Error processing expression: Cannot compare {type_name(a)} to {type_name(b)} "
                              f"with {e.op}")
    if e.op == "LIKE":
        if not (isinstance(a, str) and isinstance(b, str)):
            raise EvaluationError("Error processing expression: LIKE expects STRING operands")
        pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in b)
        return re.fullmatch(pattern, a, re.DOTALL) is not None
    comparisons: dict[str, Callable[[int], bool]] = {
        "=": lambda c: c == 0, "!=": lambda c: c != 0, "<>": lambda c: c != 0, "<": lambda c: c < 0,
        "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}
    if e.op in comparisons:
        return comparisons[e.op](_compare(a, b))
    _numeric(a, e.op)
    _numeric(b, e.op)
    return _arithmetic(e.op, a, b)


def _arithmetic(op: str, a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
    elif isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        a, b = decimal.Decimal(a), decimal.Decimal(b)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        if b == 0:
            if isinstance(a, float):                    # Java's doubles: Infinity / NaN
                return math.nan if op == "%" or a == 0 else math.copysign(math.inf, a) * math.copysign(1, b)
            raise EvaluationError("Error processing expression: / by zero")
        if isinstance(a, int):                          # Java truncates toward zero
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if op == "/" else a - b * q
        if isinstance(a, decimal.Decimal):
            return a / b if op == "/" else a % b       # Decimal's % already truncates like Java
        return a / b if op == "/" else math.fmod(a, b)
    raise EvaluationError(f"Unsupported operator in insert value: {op}")


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        raise EvaluationError(f"Error processing expression: Cannot compare {type_name(a)} to {type_name(b)}")
    numbers = (int, float, decimal.Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        x, y = (float(a), float(b)) if isinstance(a, float) or isinstance(b, float) else (a, b)
    elif type(a) is type(b):
        x, y = a, b
    else:
        raise EvaluationError(f"Error processing expression: Cannot compare {type_name(a)} to {type_name(b)}")
    return (x > y) - (x < y)


# -- CAST -----------------------------------------------------------------------------------------
def cast(v: Any, t: ast.SqlType) -> Any:
    """ksqlDB's CAST between its types (numbers truncate to integers; text parses)."""
    if v is None:
        return None
    name = "STRING" if t.name == "VARCHAR" else "INT" if t.name == "INTEGER" else t.name
    try:
        if name == "STRING":
            return java_text(v)
        if name == "BOOLEAN":
            if isinstance(v, bool):
                return v
            if isinstance(v, str):
                low = v.strip().lower()
                if low in ("true", "t", "yes", "y"):
                    return True
                if low in ("false", "f", "no", "n"):
                    return False
                raise ValueError(v)
        elif name in ("INT", "BIGINT"):
            if isinstance(v, str):
                n = int(v.strip())
            elif isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
                n = int(v)
            else:
                raise TypeError
            if name == "INT":
                n = (n + 2**31) % 2**32 - 2**31         # Java's narrowing
            return n
        elif name == "DOUBLE":
            if isinstance(v, (int, float, decimal.Decimal, str)) and not isinstance(v, bool):
                return float(v)
        elif name == "DECIMAL":
            if isinstance(v, (int, float, decimal.Decimal, str)) and not isinstance(v, bool):
                return fit_decimal(decimal.Decimal(str(v).strip() if isinstance(v, str) else v), t)
        elif name == "TIMESTAMP":
            if isinstance(v, datetime.datetime):
                return v
            if isinstance(v, str):
                return parse_timestamp(v)
        elif name == "DATE":
            if isinstance(v, datetime.datetime):
                return v.date()
            if isinstance(v, datetime.date):
                return v
            if isinstance(v, str):
                return datetime.date.fromisoformat(v.strip())
        elif name == "TIME":
            if isinstance(v, datetime.datetime):
                return v.timetz().replace(tzinfo=None)
            if isinstance(v, datetime.time):
                return v
            if isinstance(v, str):
                return datetime.time.fromisoformat(v.strip())
        elif name == "BYTES" and isinstance(v, bytes):
            return v
    except (ValueError, TypeError, decimal.InvalidOperation):
        raise EvaluationError(f"Cannot cast {type_name(v)}({java_text(v)}) to {t}") from None
    raise EvaluationError(f"Cast of {type_name(v)} to {t} is not supported")


def fit_decimal(d: decimal.Decimal, t: ast.SqlType) -> decimal.Decimal:
    """A decimal at the type's scale (half up), or ValueError if it needs more digits than the
    precision allows (ksqlDB's ``DecimalUtil.ensureFit``)."""
    precision, scale = t.params
    out = d.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP)
    if out != 0 and out.adjusted() + 1 > precision - scale:
        raise ValueError(f"Numeric field overflow: A field with precision {precision} and scale {scale} must round "
                         f"to an absolute value less than 10^{precision - scale}. Got {d}")
    return out


def parse_timestamp(text: str) -> datetime.datetime:
    """ksqlDB's TIMESTAMP text, ``yyyy-MM-ddTHH:mm:ss[.S]`` (a date alone is midnight), UTC
    unless it carries an offset."""
    ts = datetime.datetime.fromisoformat(text.strip())
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


# -- functions ------------------------------------------------------------------------------------
def _round(v: Any, digits: Any = None) -> Any:
    if v is None:
        return None
    places = 0 if digits is None else int(digits)
    if isinstance(v, int):
        return v if places >= 0 else int(_round(decimal.Decimal(v), places))
    d = decimal.Decimal(repr(v)) if isinstance(v, float) else v
    out = d.quantize(decimal.Decimal(1).scaleb(-places), decimal.ROUND_HALF_UP)
    if isinstance(v, float):                            # ROUND(DOUBLE) is BIGINT, ROUND(DOUBLE, n) DOUBLE
        return int(out) if digits is None else float(out)
    return out


def _substring(s: str, pos: int, length: int | None = None) -> str:
    """ksqlDB's SUBSTRING: 1-based, a negative position counts from the end."""
    start = pos - 1 if pos > 0 else max(len(s) + pos, 0)
    return s[start:] if length is None else s[start:start + max(length, 0)]


def _pad(left: bool) -> Callable[[str, int, str], str | None]:
    def pad(s: str, length: int, fill: str) -> str | None:
        if length < 0 or (not fill and length > len(s)):
            return None
        if length <= len(s):
            return s[:length]
        filler = (fill * length)[:length - len(s)]
        return filler + s if left else s + filler
    return pad


def _initcap(s: str) -> str:
    return re.sub(r"\S+", lambda m: m.group(0)[0].upper() + m.group(0)[1:].lower(), s)


def _split(s: str, sep: str) -> list[str]:
    return list(s) if sep == "" else s.split(sep)


def _concat_ws(sep: str, *parts: Any) -> str:
    return sep.join(p for p in parts if p is not None)


def _sign(v: Any) -> int:
    return (v > 0) - (v < 0)


def _math(f: Callable[[float], float]) -> Callable[[Any], float]:
    def apply(v: Any) -> float:
        _numeric(v, "function")
        return f(float(v))
    return apply


def _from_unixtime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, UTC)


def _abs(v: Any) -> Any:
    _numeric(v, "ABS")
    return abs(v)


def _ceil_floor(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def apply(v: Any) -> Any:
        _numeric(v, "function")
        if isinstance(v, int):
            return v
        return float(f(v)) if isinstance(v, float) else decimal.Decimal(f(v))
    return apply


#: name -> (implementation, null in -> null out); arguments are evaluated first
FUNCTIONS: dict[str, tuple[Callable[..., Any], bool]] = {
    "UCASE": (str.upper, True), "UPPER": (str.upper, True), "LCASE": (str.lower, True), "LOWER": (str.lower, True),
    "TRIM": (str.strip, True), "LTRIM": (str.lstrip, True), "RTRIM": (str.rstrip, True), "LEN": (len, True),
    "INITCAP": (_initcap, True), "SUBSTRING": (_substring, True), "REPLACE": (str.replace, True),
    "INSTR": (lambda s, sub: s.find(sub) + 1, True), "LPAD": (_pad(True), True), "RPAD": (_pad(False), True),
    "SPLIT": (_split, True), "CONCAT": (lambda *p: "".join(x for x in p if x is not None), False),
    "CONCAT_WS": (lambda sep, *p: None if sep is None else _concat_ws(sep, *p), False),
    "ABS": (_abs, True), "CEIL": (_ceil_floor(math.ceil), True), "FLOOR": (_ceil_floor(math.floor), True),
    "ROUND": (_round, False), "SQRT": (_math(math.sqrt), True), "EXP": (_math(math.exp), True),
    "LN": (_math(math.log), True), "SIGN": (_sign, True), "POWER": (lambda a, b: float(a) ** float(b), True),
    "GREATEST": (lambda *p: max((x for x in p if x is not None), default=None), False),
    "LEAST": (lambda *p: min((x for x in p if x is not None), default=None), False),
    "COALESCE": (lambda *p: next((x for x in p if x is not None), None), False),
    "IFNULL": (lambda a, b: b if a is None else a, False), "NULLIF": (lambda a, b: None if a == b else a, False),
    "FROM_UNIXTIME": (_from_unixtime, True), "UNIX_TIMESTAMP": (lambda *a: int(time.time() * 1000)
                                                                if not a else int(a[0].timestamp() * 1000), True),
    "UNIX_DATE": (lambda *a: datetime.datetime.now(UTC).date().toordinal() - 719163 if not a
                  else a[0].toordinal() - 719163, True),
    "FROM_DAYS": (lambda n: datetime.date.fromordinal(719163 + n), True),
}


def _call(e: ast.Call) -> Any:
    found = FUNCTIONS.get(e.name)
    if found is None or e.star:
        raise EvaluationError(f"Can't find any functions with the name '{e.name}'")
    f, strict = found
    args = [_eval(a) for a in e.args]
    if strict and any(a is None for a in args):
        return None
    try:
        return f(*args)
    except EvaluationError:
        raise
    except (TypeError, ValueError, ArithmeticError, AttributeError) as exc:
        kinds = ", ".join(type_name(a) for a in args)
        raise EvaluationError(f"Function '{e.name}' does not accept parameters ({kinds}): {exc}") from None


def column_value(v: Any, t: ast.SqlType, field: str) -> Any:
    """An evaluated value as a column's value (ksqlDB's strict coercion after evaluation), in the
    form ``serde.encode`` takes: TIMESTAMP epoch ms, DATE/TIME ISO text, DECIMAL at its scale.
    KsqlError-free: raises EvaluationError with ksqlDB's message."""
    if v is None:
        return None
    if t.name in ("ARRAY", "MAP", "STRUCT"):
        out = _collection_value(v, t)
        if out is _NO:
            raise EvaluationError(f"Expected type {ksql_type_name(t)} for field `{field}` but got "
                                  f"{sql_type_text(v)}({java_text(v)})")
        return out
    name = "STRING" if t.name == "VARCHAR" else t.name
    ok: Any = _NO
    if name == "BOOLEAN" and isinstance(v, bool):
        ok = v
    elif isinstance(v, bool):
        pass
    elif name == "INT" and isinstance(v, int) and v in INT_RANGE:
        ok = v
    elif name == "BIGINT" and isinstance(v, int):
        ok = v
    elif name == "DOUBLE" and isinstance(v, (int, float, decimal.Decimal)):
        ok = float(v)
    elif name == "DECIMAL" and isinstance(v, (int, decimal.Decimal)):
        try:
            ok = fit_decimal(decimal.Decimal(v), t)
        except ValueError:
            ok = _NO
    elif name == "STRING" and isinstance(v, str):
        ok = v
    elif name == "BYTES" and isinstance(v, bytes):
        ok = v
    elif name == "BYTES" and isinstance(v, str):          # base64 text, as ksqlDB's coercer decodes it
        try:
            ok = base64.b64decode(v, validate=True)
        except binascii.Error:
            ok = _NO
    elif name == "TIMESTAMP":
        if isinstance(v, datetime.datetime):
            ok = int(v.timestamp() * 1000)
        elif isinstance(v, int):                         # epoch ms, as this server has always taken them
            ok = v
        elif isinstance(v, str):
            try:
                ok = int(parse_timestamp(v).timestamp() * 1000)
            except ValueError:
                ok = _NO
    elif name == "DATE" and isinstance(v, (str, datetime.date)) and not isinstance(v, datetime.datetime):
        try:
            ok = (datetime.date.fromisoformat(v.strip()) if isinstance(v, str) else v).isoformat()
        except ValueError:
            ok = _NO
    elif name == "TIME" and isinstance(v, (str, datetime.time)):
        try:
            ok = (datetime.time.fromisoformat(v.strip()) if isinstance(v, str) else v).isoformat()
        except ValueError:
            ok = _NO
    if ok is _NO:
        hint = {"TIMESTAMP": ". Timestamp format must be yyyy-mm-ddThh:mm:ss[.S]",
                "TIME": ". Time format must be hh:mm:ss[.S]",
                "DATE": ". Date format must be yyyy-mm-dd"}.get(name, "") if isinstance(v, str) else ""
        ksql = "INTEGER" if name == "INT" else str(t) if name != "STRING" else "STRING"
        got = sql_type_text(v) if isinstance(v, (list, dict)) else type_name(v)
        raise EvaluationError(f"Expected type {ksql} for field `{field}` but got {got}({java_text(v)}){hint}")
    return ok


_NO = object()


def _collection_value(v: Any, t: ast.SqlType) -> Any:
    """ksqlDB's strict coercion of an ARRAY, MAP or STRUCT value to a column type, element by
    element (numbers only widen; a MAP's keys are STRING); a STRUCT may leave out fields (null)
    but not bring fields the type lacks. A struct comes out as a dict by declared field name, in
    the declared order; ``_NO`` if anything does not fit."""
    def element(x: Any, et: ast.SqlType) -> Any:
        if x is None:
            return None
        if et.name in ("ARRAY", "MAP", "STRUCT"):
            return _collection_value(x, et)
        try:
            return column_value(x, et, "")
        except EvaluationError:
            return _NO
    if t.name == "ARRAY" and isinstance(v, list):
        out: Any = [element(x, t.items[0]) for x in v]
        return _NO if any(x is _NO for x in out) else out
    if t.name == "MAP" and isinstance(v, dict) and not isinstance(v, Struct):
        pairs = [(element(k, t.items[0]), element(x, t.items[1])) for k, x in v.items()]
        return _NO if any(k is _NO or x is _NO for k, x in pairs) else dict(pairs)
    if t.name == "STRUCT" and isinstance(v, Struct):
        declared = dict(t.fields)
        if any(k not in declared for k in v):
            return _NO
        out = {n: element(v.get(n), ft) for n, ft in t.fields}
        return _NO if any(x is _NO for x in out.values()) else out
    return _NO


def ksql_type_name(t: ast.SqlType) -> str:
    """A type as ksqlDB prints it in messages (``INTEGER``, ``ARRAY<INTEGER>``, ``DECIMAL(4, 2)``)."""
    if t.name == "ARRAY":
        return f"ARRAY<{ksql_type_name(t.items[0])}>"
    if t.name == "MAP":
        return f"MAP<{ksql_type_name(t.items[0])}, {ksql_type_name(t.items[1])}>"
    if t.name == "STRUCT":
        return "STRUCT<" + ", ".join(f"`{n}` {ksql_type_name(ft)}" for n, ft in t.fields) + ">"
    return "INTEGER" if t.name == "INT" else "STRING" if t.name == "VARCHAR" else str(t)


def refuse(message: str, target: str, statement: str) -> KsqlError:
    """ksqlDB's INSERT VALUES error: the statement's target, then why."""
    return KsqlError(f"Failed to insert values into '{target}'. {message}", statement=statement)
