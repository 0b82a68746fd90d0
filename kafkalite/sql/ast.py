"""The statements and expressions the parser produces (ksqlDB's ``parser/tree`` in small):
plain frozen dataclasses, so the metastore, the engine and the tests compare them directly."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union


# -- expressions --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Column:
    name: str                       # upper-cased unless quoted
    source: str | None = None       # a qualifier (``S.ID``)


@dataclass(frozen=True)
class Literal:
    value: object                   # str, int, float, bool or None


@dataclass(frozen=True)
class Call:
    name: str                       # upper-cased function name
    args: tuple["Expr", ...] = ()
    star: bool = False              # COUNT(*)


@dataclass(frozen=True)
class Binary:
    op: str                         # + - * / % || = != < <= > >= AND OR LIKE
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Unary:
    op: str                         # NOT, -
    operand: "Expr"


@dataclass(frozen=True)
class IsNull:
    operand: "Expr"
    negated: bool = False


@dataclass(frozen=True)
class Between:
    operand: "Expr"
    low: "Expr"
    high: "Expr"
    negated: bool = False


@dataclass(frozen=True)
class InList:
    operand: "Expr"
    items: tuple["Expr", ...]
    negated: bool = False


@dataclass(frozen=True)
class Cast:
    operand: "Expr"
    type: "SqlType"


@dataclass(frozen=True)
class Case:
    whens: tuple[tuple["Expr", "Expr"], ...]
    default: "Expr | None" = None


@dataclass(frozen=True)
class Dereference:
    """``struct->field``"""

    operand: "Expr"
    field: str


@dataclass(frozen=True)
class ArrayConstructor:
    """``ARRAY[e1, e2, ...]``"""

    items: tuple["Expr", ...]


@dataclass(frozen=True)
class MapConstructor:
    """``MAP(k1 := v1, k2 := v2, ...)``"""

    entries: tuple[tuple["Expr", "Expr"], ...]


@dataclass(frozen=True)
class StructConstructor:
    """``STRUCT(name1 := e1, name2 := e2, ...)``"""

    fields: tuple[tuple[str, "Expr"], ...]


@dataclass(frozen=True)
class Subscript:
    """``array[index]`` (1-based, negative from the end) or ``map[key]``"""

    operand: "Expr"
    index: "Expr"


@dataclass(frozen=True)
class Lambda:
    """A lambda function argument of TRANSFORM, FILTER or REDUCE: ``x => body`` or ``(k, v) =>
    body``; in ``body`` its parameters are Columns without a source."""

    params: tuple[str, ...]
    body: "Expr"


Expr = Union[Column, Literal, Call, Binary, Unary, IsNull, Between, InList, Cast, Case, Dereference,
             ArrayConstructor, MapConstructor, StructConstructor, Subscript, Lambda]


# -- types and columns --------------------------------------------------------------------------
@dataclass(frozen=True)
class SqlType:
    """A ksqlDB SQL type: BOOLEAN, INT, BIGINT, DOUBLE, DECIMAL(p,s), STRING/VARCHAR, BYTES, DATE,
    TIME, TIMESTAMP, ARRAY<T>, MAP<K,V>, STRUCT<name T, ...>."""

    name: str
    params: tuple[int, ...] = ()
    items: tuple["SqlType", ...] = ()             # ARRAY element, MAP key/value
    fields: tuple[tuple[str, "SqlType"], ...] = ()   # STRUCT

    def __str__(self) -> str:
        return self.render(lambda name: name, lambda field, text: f"`{field}` {text}")

    def render(self, named: Callable[[str], str], field: Callable[[str, str], str]) -> str:
        """The type as ksqlDB's messages write it, ``named`` giving a type name's spelling (INT or
        INTEGER) and ``field`` a struct field's (quoted or not) with its type's text."""
        if self.name == "ARRAY":
            return f"ARRAY<{self.items[0].render(named, field)}>"
        if self.name == "MAP":
            return f"MAP<{self.items[0].render(named, field)}, {self.items[1].render(named, field)}>"
        if self.name == "STRUCT":
            return "STRUCT<" + ", ".join(field(n, t.render(named, field)) for n, t in self.fields) + ">"
        if self.params:
            return f"{named(self.name)}({', '.join(map(str, self.params))})"
        return named(self.name)


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: SqlType
    key: bool = False               # KEY (stream) or PRIMARY KEY (table)


# -- query parts --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SelectItem:
    expr: Expr | None               # None: ``*``
    alias: str | None = None


@dataclass(frozen=True)
class Window:
    kind: str                       # TUMBLING, HOPPING, SESSION
    size_ms: int
    advance_ms: int | None = None   # HOPPING
    grace_ms: int | None = None


@dataclass(frozen=True)
class Within:
    """A stream-stream join's window: ``WITHIN n unit`` (before = after) or ``WITHIN (before, after)``."""

    before_ms: int
    after_ms: int
    grace_ms: int | None = None


@dataclass(frozen=True)
class Join:
    kind: str                       # INNER, LEFT, RIGHT, FULL
    source: str
    alias: str | None
    within: Within | None
    on: "Expr"


@dataclass(frozen=True)
class Select:
    items: tuple[SelectItem, ...]
    source: str
    alias: str | None = None
    window: Window | None = None
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    partition_by: Expr | None = None
    having: Expr | None = None
    emit: str | None = None         # CHANGES or FINAL
    limit: int | None = None
    joins: tuple[Join, ...] = ()


# -- statements ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CreateSource:
    """CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name (columns) WITH (...)"""

    kind: str                       # STREAM or TABLE
    name: str
    columns: tuple[ColumnDef, ...]
    properties: tuple[tuple[str, object], ...]
    if_not_exists: bool = False
    or_replace: bool = False
    read_only: bool = False         # CREATE SOURCE STREAM|TABLE (ksqlDB 0.22+): no query writes into it

    def prop(self, name: str, default: object = None) -> object:
        return dict(self.properties).get(name, default)


@dataclass(frozen=True)
class CreateAsSelect:
    """CREATE STREAM|TABLE name [WITH (...)] AS SELECT ... (a persistent query)"""

    kind: str
    name: str
    properties: tuple[tuple[str, object], ...]
    query: Select
    if_not_exists: bool = False
    or_replace: bool = False

    def prop(self, name: str, default: object = None) -> object:
        return dict(self.properties).get(name, default)


@dataclass(frozen=True)
class InsertInto:
    """INSERT INTO stream [WITH (...)] SELECT ... (a persistent query into an existing stream)"""

    target: str
    query: Select
    properties: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class InsertValues:
    """INSERT INTO source [(columns)] VALUES (...)"""

    target: str
    columns: tuple[str, ...]
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Explain:
    """EXPLAIN query_id, or EXPLAIN a statement (a CSAS/CTAS/INSERT INTO/SELECT not run)."""

    query_id: str | None
    statement: "CreateAsSelect | InsertInto | Query | None" = None
    text: str = ""                  # the explained statement's text


@dataclass(frozen=True)
class Print:
    """PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]"""

    topic: str
    quoted: bool = False            # 'topic' or `topic`: exact case; else matched case-insensitively
    from_beginning: bool = False
    interval: int = 1
    limit: int | None = None


@dataclass(frozen=True)
class Query:
    """A transient SELECT (push with EMIT CHANGES, else pull)."""

    query: Select


@dataclass(frozen=True)
class Show:
    what: str                       # STREAMS, TABLES, QUERIES, TOPICS, PROPERTIES
    extended: bool = False


@dataclass(frozen=True)
class Describe:
    name: str
    extended: bool = False


@dataclass(frozen=True)
class Drop:
    kind: str
    name: str
    if_exists: bool = False
    delete_topic: bool = False


@dataclass(frozen=True)
class Terminate:
    query_id: str | None            # None: TERMINATE ALL


@dataclass(frozen=True)
class SetProperty:
    name: str
    value: str | None = None        # None: UNSET


Statement = Union[CreateSource, CreateAsSelect, InsertInto, InsertValues, Query, Show, Describe, Drop, Terminate,
                  SetProperty, Explain, Print]


@dataclass(frozen=True)
class ParsedStatement:
    """One statement with its own text (as ksqlDB echoes it in ``statementText``)."""

    text: str
    statement: Statement = field(compare=False)


def children(e: Expr) -> tuple[Expr, ...]:
    """An expression's direct sub-expressions, for the walks that look through a whole tree."""
    if isinstance(e, Binary):
        return (e.left, e.right)
    if isinstance(e, (Unary, IsNull, Cast, Dereference)):
        return (e.operand,)
    if isinstance(e, Between):
        return (e.operand, e.low, e.high)
    if isinstance(e, InList):
        return (e.operand, *e.items)
    if isinstance(e, Case):
        return tuple(x for pair in e.whens for x in pair) + ((e.default,) if e.default is not None else ())
    if isinstance(e, Call):
        return e.args
    if isinstance(e, ArrayConstructor):
        return e.items
    if isinstance(e, MapConstructor):
        return tuple(x for pair in e.entries for x in pair)
    if isinstance(e, StructConstructor):
        return tuple(v for _, v in e.fields)
    if isinstance(e, Subscript):
        return (e.operand, e.index)
    if isinstance(e, Lambda):
        return (e.body,)
    return ()
