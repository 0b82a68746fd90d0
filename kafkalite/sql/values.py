"""The value of an ``INSERT INTO ... VALUES`` expression (ksqlDB's ``GenericExpressionResolver``):
any expression without column references (arithmetic, string concatenation, comparisons and
logic, CASE, CAST, and ksqlDB's scalar functions on constants), evaluated here in Python, because
one row does not justify a Spark job. Values carry ksqlDB's types by their Python class:

  BOOLEAN bool, INTEGER/BIGINT int (by range), DOUBLE float, DECIMAL Decimal, STRING str,
  BYTES bytes, TIMESTAMP an aware UTC datetime, DATE date, TIME time.

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


def type_name(v: Any) -> str:
    """ksqlDB's base type name of a value (its ``SqlBaseType``), as its error messages print it."""
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


def java_text(v: Any) -> str:
    """A value as Java's ``toString`` shows it (ksqlDB's messages and CAST(... AS STRING))."""
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
    return type(e).__name__


def _no_columns(e: ast.Expr, whole: ast.Expr) -> None:
    if isinstance(e, ast.Column):
        raise EvaluationError(f"Unsupported column reference in insert value: {sql_text(whole)}")
    for child in _children(e):
        _no_columns(child, whole)


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
    raise EvaluationError(f"Unsupported expression in insert value: {type(e).__name__}")


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
        raise EvaluationError(f"Expected type {ksql} for field `{field}` but got {type_name(v)}({java_text(v)}){hint}")
    return ok


_NO = object()


def refuse(message: str, target: str, statement: str) -> KsqlError:
    """ksqlDB's INSERT VALUES error: the statement's target, then why."""
    return KsqlError(f"Failed to insert values into '{target}'. {message}", statement=statement)
