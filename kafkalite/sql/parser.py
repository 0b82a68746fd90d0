"""ksqlDB statements to :mod:`kafkalite.sql.ast`, with Lark (an LALR(1) grammar below, ksqlDB's
``SqlBase.g4`` in small) rather than hand-written string matching: every statement has one
grammar, and an error names the line and column where the text stopped making sense, as
ksqlDB's ``line 1:15: mismatched input ...`` does.

Unquoted identifiers are upper-cased (ksqlDB's rule); back-quoted ones keep their case.
A request's text may hold several statements separated by ``;`` (:func:`parse`).
"""
from __future__ import annotations

import difflib
import re
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError

GRAMMAR = r"""
?statement: create_source | create_as | insert_into | insert_values | query | show | describe | drop
          | terminate | set_prop | unset_prop | explain | print_topic

create_source: "CREATE"i or_replace [SOURCE] kind if_not_exists ident ["(" column_defs ")"] with_props
create_as: "CREATE"i or_replace kind if_not_exists ident [with_props] "AS"i select
insert_into: "INSERT"i "INTO"i ident [with_props] select
insert_values: "INSERT"i "INTO"i ident [insert_columns] "VALUES"i "(" expr ("," expr)* ")"
insert_columns: "(" ident ("," ident)* ")"
explain: "EXPLAIN"i (ident | create_as | insert_into | query)
print_topic: "PRINT"i (IDENT | QUOTED_IDENT | STRING) [FROM_BEGINNING] [print_interval] [limit]
FROM_BEGINNING.2: /FROM\s+BEGINNING/i
print_interval: ("INTERVAL"i | "SAMPLE"i) INT
query: select
or_replace: OR_REPLACE?
SOURCE: "SOURCE"i
if_not_exists: IF_NOT_EXISTS?
OR_REPLACE.2: /OR\s+REPLACE/i
IF_NOT_EXISTS.2: /IF\s+NOT\s+EXISTS/i
kind: STREAM | TABLE
STREAM: "STREAM"i
TABLE: "TABLE"i

column_defs: column_def ("," column_def)*
column_def: ident type key_spec
key_spec: -> no_key
        | "KEY"i -> key
        | "PRIMARY"i "KEY"i -> key
type: ident ["(" INT ("," INT)? ")"]            -> base_type
    | "ARRAY"i LT type GT                       -> array_type
    | "MAP"i LT type "," type GT                -> map_type
    | "STRUCT"i LT struct_field ("," struct_field)* GT -> struct_type
struct_field: ident type

with_props: "WITH"i "(" prop ("," prop)* ")"
prop: ident EQ literal

select: "SELECT"i select_items "FROM"i aliased joins [window] [where] [group_by] [partition_by] [having] [emit] [limit]
select_items: select_item ("," select_item)*
select_item: "*"                                -> star
           | expr ["AS"i ident]                 -> item
aliased: ident [["AS"i] ident]
joins: join*
join: join_type "JOIN"i aliased [within] "ON"i expr
join_type: -> inner_join
         | "INNER"i -> inner_join
         | "LEFT"i ["OUTER"i] -> left_join
         | "RIGHT"i ["OUTER"i] -> right_join
         | "FULL"i ["OUTER"i] -> full_join
within: "WITHIN"i (duration | "(" duration "," duration ")") [within_grace]
within_grace: "GRACE"i "PERIOD"i duration
window: "WINDOW"i window_spec
?window_spec: "TUMBLING"i "(" "SIZE"i duration [grace] ")"                              -> tumbling
            | "HOPPING"i "(" "SIZE"i duration "," "ADVANCE"i "BY"i duration [grace] ")" -> hopping
            | "SESSION"i "(" duration [grace] ")"                                       -> session
grace: "," "GRACE"i "PERIOD"i duration
duration: INT ident
where: "WHERE"i expr
group_by: "GROUP"i "BY"i expr ("," expr)*
partition_by: "PARTITION"i "BY"i expr
having: "HAVING"i expr
emit: "EMIT"i EMIT_KIND
EMIT_KIND: "CHANGES"i | "FINAL"i
limit: "LIMIT"i INT

show: SHOW_WORD SHOW_WHAT [EXTENDED]
SHOW_WORD: "SHOW"i | "LIST"i
SHOW_WHAT: "STREAMS"i | "TABLES"i | "QUERIES"i | "TOPICS"i | "PROPERTIES"i
EXTENDED: "EXTENDED"i
// ksqlDB 0.29 (SqlBase.g4 #showColumns): DESCRIBE sourceName EXTENDED?
describe: "DESCRIBE"i ident [EXTENDED]
drop: "DROP"i kind [IF_EXISTS] ident [DELETE_TOPIC]
IF_EXISTS.2: /IF\s+EXISTS/i
DELETE_TOPIC.2: /DELETE\s+TOPIC/i
terminate: "TERMINATE"i (ident | ALL)
ALL: "ALL"i
set_prop: "SET"i STRING EQ STRING
unset_prop: "UNSET"i STRING

?expr: or_expr
?or_expr: and_expr ("OR"i and_expr)*            -> or_chain
?and_expr: not_expr ("AND"i not_expr)*          -> and_chain
?not_expr: "NOT"i not_expr                      -> not_
         | predicate
?predicate: sum
          | sum comp_op sum                     -> compare
          | sum "IS"i "NULL"i                   -> is_null
          | sum "IS"i "NOT"i "NULL"i            -> is_not_null
          | sum [NOT] "LIKE"i sum               -> like
          | sum [NOT] "BETWEEN"i sum "AND"i sum -> between
          | sum [NOT] "IN"i "(" expr ("," expr)* ")" -> in_list
NOT: "NOT"i
comp_op: EQ | NEQ | LTE | GTE | LT | GT
EQ: "="
NEQ: "!=" | "<>"
LTE: "<="
GTE: ">="
LT: "<"
GT: ">"
?sum: product (ADD_OP product)*                 -> sum_chain
ADD_OP: "+" | "-" | "||"
// above ADD_OP, whose "-" would otherwise split ksqlDB's STRUCT_FIELD_REF '->'
ARROW.2: "->"
?product: unary (MUL_OP unary)*                 -> product_chain
MUL_OP: "*" | "/" | "%"
?unary: "-" unary                               -> neg
      | postfix
?postfix: primary
        | postfix ARROW ident                   -> deref
        | postfix "[" expr "]"                  -> subscript
?primary: literal                               -> lit
        | ident "(" "*" ")"                     -> call_star
        | ident "(" [expr ("," expr)*] ")"      -> call
        | ident "(" expr ("," expr)* ("," lambda_fn)+ ")" -> call
        | "CAST"i "(" expr "AS"i type ")"       -> cast
        | "ARRAY"i "[" [expr ("," expr)*] "]"   -> array_ctor
        | "MAP"i "(" [map_entry ("," map_entry)*] ")" -> map_ctor
        | "STRUCT"i "(" [struct_entry ("," struct_entry)*] ")" -> struct_ctor
        | "CASE"i ("WHEN"i expr "THEN"i expr)+ ["ELSE"i expr] "END"i -> case
        | ident "." ident                       -> qualified
        | ident                                 -> column
        | "(" expr ")"

// ksqlDB's SqlBase.g4 #lambda: x => body, (k, v) => body; its head is one token, so that a
// parenthesized expression "(a)" never reads as a lambda's parameters
lambda_fn: LAMBDA_HEAD expr
LAMBDA_HEAD.3: /\(\s*[A-Za-z_][A-Za-z0-9_]*(\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*\s*\)\s*=>/
             | /[A-Za-z_][A-Za-z0-9_]*\s*=>/

// ksqlDB's SqlBase.g4: MAP(k := v, ...), STRUCT(name := v, ...)
map_entry: expr ASSIGN expr
struct_entry: ident ASSIGN expr
ASSIGN: ":="

literal: STRING                                 -> string
       | SIGNED_NUMBER                          -> number
       | "TRUE"i                                -> true
       | "FALSE"i                               -> false
       | "NULL"i                                -> null

ident: IDENT | QUOTED_IDENT
IDENT: /[A-Za-z_][A-Za-z0-9_@]*/
QUOTED_IDENT: /`([^`]|``)+`/
STRING: /'([^']|'')*'/
INT: /[0-9]+/
SIGNED_NUMBER: /[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?/ | /\.[0-9]+/

COMMENT: /--[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
"""

_UNITS = {"MILLISECOND": 1, "MILLISECONDS": 1, "SECOND": 1000, "SECONDS": 1000, "MINUTE": 60000,
          "MINUTES": 60000, "HOUR": 3600000, "HOURS": 3600000, "DAY": 86400000, "DAYS": 86400000}
_TYPE_NAMES = {"BOOLEAN", "INT", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL", "STRING", "VARCHAR", "BYTES",
               "DATE", "TIME", "TIMESTAMP"}


class _Semantic(Exception):
    """A grammatical statement that ksqlDB still refuses (unknown type, time unit...)."""


@v_args(inline=True)
class _ToAst(Transformer):
    # identifiers and literals
    def ident(self, tok: Token) -> str:
        text = str(tok)
        if tok.type == "QUOTED_IDENT":
            return text[1:-1].replace("``", "`")
        return text.upper()

    def string(self, tok: Token) -> ast.Literal:
        return ast.Literal(str(tok)[1:-1].replace("''", "'"))

    def number(self, tok: Token) -> ast.Literal:
        text = str(tok)
        return ast.Literal(float(text) if any(c in text for c in ".eE") else int(text))

    def true(self) -> ast.Literal:
        return ast.Literal(True)

    def false(self) -> ast.Literal:
        return ast.Literal(False)

    def null(self) -> ast.Literal:
        return ast.Literal(None)

    # statements
    def or_replace(self, *words: Any) -> bool:
        return True if words else False

    def if_not_exists(self, *words: Any) -> bool:
        return True if words else False

    def kind(self, tok: Token) -> str:
        return str(tok).upper()

    def create_source(self, or_replace: bool, read_only: Token | None, kind: str, if_not_exists: bool, name: str,
                      columns: Any, props: Any) -> ast.CreateSource:
        return ast.CreateSource(kind, name, tuple(columns or ()), tuple(props), if_not_exists, or_replace,
                                read_only is not None)

    def create_as(self, or_replace: bool, kind: str, if_not_exists: bool, name: str, props: Any,
                  select: ast.Select) -> ast.CreateAsSelect:
        return ast.CreateAsSelect(kind, name, tuple(props or ()), select, if_not_exists, or_replace)

    def insert_into(self, target: str, props: Any, select: ast.Select) -> ast.InsertInto:
        return ast.InsertInto(target, select, tuple(props or ()))

    def insert_values(self, target: str, columns: Any, *values: ast.Expr) -> ast.InsertValues:
        return ast.InsertValues(target, tuple(columns or ()), tuple(values))

    def insert_columns(self, *names: str) -> list[str]:
        return list(names)

    def explain(self, target: Any) -> ast.Explain:
        if isinstance(target, str):
            return ast.Explain(target)
        return ast.Explain(None, target)

    def print_topic(self, topic: Token, beginning: Any, interval: Any, limit: Any) -> ast.Print:
        quoted = topic.type != "IDENT"
        name = str(topic)[1:-1] if quoted else str(topic)
        return ast.Print(name, quoted, beginning is not None, interval if interval is not None else 1, limit)

    def print_interval(self, n: Token) -> int:
        return int(n)

    def query(self, select: ast.Select) -> ast.Query:
        return ast.Query(select)

    def column_defs(self, *cols: ast.ColumnDef) -> list[ast.ColumnDef]:
        return list(cols)

    def column_def(self, name: str, type_: ast.SqlType, key: bool) -> ast.ColumnDef:
        return ast.ColumnDef(name, type_, key)

    def no_key(self) -> bool:
        return False

    def key(self) -> bool:
        return True

    def base_type(self, name: str, p: Any = None, s: Any = None) -> ast.SqlType:
        name = {"INTEGER": "INT", "VARCHAR": "STRING"}.get(name, name)
        if name not in _TYPE_NAMES:
            raise _Semantic(f"Unknown type: {name}")
        params = tuple(int(x) for x in (p, s) if x is not None)
        if name == "DECIMAL" and len(params) != 2:
            raise _Semantic("DECIMAL needs a precision and a scale: DECIMAL(p, s)")
        return ast.SqlType(name, params)

    def array_type(self, _lt: Token, item: ast.SqlType, _gt: Token) -> ast.SqlType:
        return ast.SqlType("ARRAY", items=(item,))

    def map_type(self, _lt: Token, k: ast.SqlType, v: ast.SqlType, _gt: Token) -> ast.SqlType:
        return ast.SqlType("MAP", items=(k, v))

    def struct_type(self, _lt: Token, *rest: Any) -> ast.SqlType:
        return ast.SqlType("STRUCT", fields=tuple(rest[:-1]))

    def struct_field(self, name: str, type_: ast.SqlType) -> tuple[str, ast.SqlType]:
        return (name, type_)

    def with_props(self, *props: tuple[str, object]) -> list[tuple[str, object]]:
        return list(props)

    def prop(self, name: str, _eq: Token, value: ast.Literal) -> tuple[str, object]:
        return (name, value.value)

    # SELECT
    def select(self, items: list[ast.SelectItem], source: tuple[str, str | None], joins: list[ast.Join],
               window: Any, where: Any, group_by: Any, partition_by: Any, having: Any, emit: Any,
               limit: Any) -> ast.Select:
        return ast.Select(tuple(items), source[0], source[1], window, where, tuple(group_by or ()), partition_by,
                          having, emit, limit, tuple(joins))

    def aliased(self, name: str, alias: Any) -> tuple[str, str | None]:
        return (name, alias)

    def joins(self, *joins: ast.Join) -> list[ast.Join]:
        return list(joins)

    def join(self, kind: str, source: tuple[str, str | None], within: Any, on: ast.Expr) -> ast.Join:
        return ast.Join(kind, source[0], source[1], within, on)

    def inner_join(self) -> str:
        return "INNER"

    def left_join(self) -> str:
        return "LEFT"

    def right_join(self) -> str:
        return "RIGHT"

    def full_join(self) -> str:
        return "FULL"

    def within(self, *parts: Any) -> ast.Within:
        grace = parts[-1]
        before, after = (parts[0], parts[1]) if len(parts) == 3 else (parts[0], parts[0])
        return ast.Within(before, after, grace)

    def within_grace(self, ms: int) -> int:
        return ms

    def select_items(self, *items: ast.SelectItem) -> list[ast.SelectItem]:
        return list(items)

    def star(self) -> ast.SelectItem:
        return ast.SelectItem(None)

    def item(self, expr: ast.Expr, alias: Any = None) -> ast.SelectItem:
        return ast.SelectItem(expr, alias)

    def window(self, spec: ast.Window) -> ast.Window:
        return spec

    def tumbling(self, size: int, grace: Any = None) -> ast.Window:
        return ast.Window("TUMBLING", size, None, grace)

    def hopping(self, size: int, advance: int, grace: Any = None) -> ast.Window:
        if advance > size:
            raise _Semantic("Window advance must be less than or equal to the window size")
        return ast.Window("HOPPING", size, advance, grace)

    def session(self, size: int, grace: Any = None) -> ast.Window:
        return ast.Window("SESSION", size, None, grace)

    def grace(self, ms: int) -> int:
        return ms

    def duration(self, n: Token, unit: str) -> int:
        if unit not in _UNITS:
            raise _Semantic(f"Invalid time unit: {unit} (MILLISECONDS, SECONDS, MINUTES, HOURS or DAYS)")
        return int(n) * _UNITS[unit]

    def where(self, e: ast.Expr) -> ast.Expr:
        return e

    def having(self, e: ast.Expr) -> ast.Expr:
        return e

    def partition_by(self, e: ast.Expr) -> ast.Expr:
        return e

    def group_by(self, *exprs: ast.Expr) -> list[ast.Expr]:
        return list(exprs)

    def emit(self, tok: Token) -> str:
        return str(tok).upper()

    def limit(self, n: Token) -> int:
        return int(n)

    # other statements
    def show(self, _word: Token, what: Token, extended: Any = None) -> ast.Show:
        return ast.Show(str(what).upper(), extended is not None)

    def describe(self, name: str, extended: Any) -> ast.Describe:
        return ast.Describe(name, extended is not None)

    def drop(self, kind: str, if_exists: Any, name: str, delete_topic: Any) -> ast.Drop:
        return ast.Drop(kind, name, if_exists is not None, delete_topic is not None)

    def terminate(self, target: Any) -> ast.Terminate:
        return ast.Terminate(None if isinstance(target, Token) and target.type == "ALL" else str(target))

    def set_prop(self, name: Token, _eq: Token, value: Token) -> ast.SetProperty:
        return ast.SetProperty(str(name)[1:-1], str(value)[1:-1])

    def unset_prop(self, name: Token) -> ast.SetProperty:
        return ast.SetProperty(str(name)[1:-1], None)

    # expressions
    def or_chain(self, *parts: ast.Expr) -> ast.Expr:
        return _fold("OR", parts)

    def and_chain(self, *parts: ast.Expr) -> ast.Expr:
        return _fold("AND", parts)

    def not_(self, e: ast.Expr) -> ast.Expr:
        return ast.Unary("NOT", e)

    def comp_op(self, tok: Token) -> str:
        return "!=" if str(tok) == "<>" else str(tok)

    def compare(self, a: ast.Expr, op: str, b: ast.Expr) -> ast.Expr:
        return ast.Binary(op, a, b)

    def is_null(self, a: ast.Expr) -> ast.Expr:
        return ast.IsNull(a)

    def is_not_null(self, a: ast.Expr) -> ast.Expr:
        return ast.IsNull(a, True)

    def like(self, a: ast.Expr, neg: Any, b: ast.Expr) -> ast.Expr:
        e: ast.Expr = ast.Binary("LIKE", a, b)
        return ast.Unary("NOT", e) if neg is not None else e

    def between(self, a: ast.Expr, neg: Any, lo: ast.Expr, hi: ast.Expr) -> ast.Expr:
        return ast.Between(a, lo, hi, neg is not None)

    def in_list(self, a: ast.Expr, neg: Any, *items: ast.Expr) -> ast.Expr:
        return ast.InList(a, tuple(items), neg is not None)

    def sum_chain(self, *parts: Any) -> ast.Expr:
        return _fold_ops(parts)

    def product_chain(self, *parts: Any) -> ast.Expr:
        return _fold_ops(parts)

    def neg(self, e: ast.Expr) -> ast.Expr:
        if isinstance(e, ast.Literal) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
            return ast.Literal(-e.value)
        return ast.Unary("-", e)

    def deref(self, e: ast.Expr, _arrow: Token, name: str) -> ast.Expr:
        return ast.Dereference(e, name)

    def subscript(self, e: ast.Expr, index: ast.Expr) -> ast.Expr:
        return ast.Subscript(e, index)

    def array_ctor(self, *items: Any) -> ast.Expr:
        return ast.ArrayConstructor(tuple(i for i in items if i is not None))

    def map_entry(self, k: ast.Expr, _assign: Token, v: ast.Expr) -> tuple[ast.Expr, ast.Expr]:
        return (k, v)

    def map_ctor(self, *entries: Any) -> ast.Expr:
        return ast.MapConstructor(tuple(e for e in entries if e is not None))

    def struct_entry(self, name: str, _assign: Token, v: ast.Expr) -> tuple[str, ast.Expr]:
        return (name, v)

    def struct_ctor(self, *fields: Any) -> ast.Expr:
        pairs = tuple(f for f in fields if f is not None)
        names = [n for n, _ in pairs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise _Semantic(f"Duplicate field names found in STRUCT: '{dup}'")
        return ast.StructConstructor(pairs)

    def lit(self, value: ast.Literal) -> ast.Literal:
        return value

    def call_star(self, name: str) -> ast.Expr:
        return ast.Call(name, (), True)

    def call(self, name: str, *args: Any) -> ast.Expr:
        return ast.Call(name, tuple(a for a in args if a is not None))

    def lambda_fn(self, head: Token, body: ast.Expr) -> ast.Lambda:
        names = str(head)[:-2].strip().strip("()").split(",")
        return ast.Lambda(tuple(n.strip().upper() for n in names), body)

    def cast(self, e: ast.Expr, type_: ast.SqlType) -> ast.Expr:
        return ast.Cast(e, type_)

    def case(self, *parts: Any) -> ast.Expr:
        default = parts[-1] if len(parts) % 2 else None
        pairs = parts[:-1] if len(parts) % 2 else parts
        return ast.Case(tuple((pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)), default)

    def qualified(self, source: str, name: str) -> ast.Expr:
        return ast.Column(name, source)

    def column(self, name: str) -> ast.Expr:
        return ast.Column(name)


def _fold(op: str, parts: tuple[ast.Expr, ...]) -> ast.Expr:
    out = parts[0]
    for p in parts[1:]:
        out = ast.Binary(op, out, p)
    return out


def _fold_ops(parts: tuple[Any, ...]) -> ast.Expr:
    out = parts[0]
    for i in range(1, len(parts), 2):
        out = ast.Binary(str(parts[i]), out, parts[i + 1])
    return out


_PARSER = Lark(GRAMMAR, start="statement", parser="lalr", maybe_placeholders=True)


def split(text: str) -> list[str]:
    """The statements of a request, each with its own text (``;`` outside quotes ends one)."""
    out, current, quote = [], [], ""
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in ("'", "`"):
            quote = ch
        if ch == ";":
            stmt = "".join(current).strip()
            if stmt:
                out.append(stmt + ";")
            current = []
            continue
        current.append(ch)
    rest = "".join(current).strip()
    if rest and not all(line.strip().startswith("--") or not line.strip() for line in rest.splitlines()):
        out.append(rest)
    return out


def parse(text: str) -> list[ast.ParsedStatement]:
    """Every statement of ``text``; the first bad one is a :class:`KsqlError` with its position."""
    return [ast.ParsedStatement(stmt, parse_one(stmt)) for stmt in split(text)]


def parse_one(text: str) -> ast.Statement:
    body = text.rstrip().rstrip(";")
    try:
        tree = _PARSER.parse(body)
        stmt: ast.Statement = _ToAst().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, _Semantic):
            raise KsqlError(str(exc.orig_exc), statement=text) from None
        raise
    except UnexpectedInput as exc:
        raise _syntax_error(exc, body, text) from None
    if isinstance(stmt, ast.Explain) and stmt.statement is not None:
        explained = re.sub(r"^\s*EXPLAIN\s+", "", body, flags=re.IGNORECASE).strip() + ";"
        stmt = ast.Explain(None, stmt.statement, explained)
    return stmt


#: the statements a request may start with, for ksqlDB's "Unknown statement ... Did you mean" hint
_STATEMENT_WORDS = ("CREATE", "INSERT", "SELECT", "SHOW", "LIST", "DESCRIBE", "DROP", "TERMINATE", "SET",
                    "UNSET", "EXPLAIN", "PRINT", "RUN")
#: ANTLR's display names (ksqlDB's SqlBase.g4 tokens) for the terminals that are not one keyword
_TOKEN_NAMES = {"IDENT": "IDENTIFIER", "QUOTED_IDENT": "BACKQUOTED_IDENTIFIER", "STRING": "STRING",
                "INT": "INTEGER_VALUE", "SIGNED_NUMBER": "DECIMAL_VALUE", "$END": "<EOF>",
                "LAMBDA_HEAD": "IDENTIFIER"}                    # a lambda starts with its parameter(s)
#: the operator terminals that stand for several symbols
_OPERATORS = {"NEQ": ("!=", "<>"), "ADD_OP": ("+", "-", "||"), "MUL_OP": ("*", "/", "%")}


def _syntax_error(exc: UnexpectedInput, body: str, text: str) -> KsqlError:
    """ksqlDB's wording (ANTLR's messages through its ``SyntaxErrorValidator``): ``line L:C:
    mismatched input 'X' expecting {...}`` naming real keywords and token classes, ``Syntax error
    at or near`` for a character no token starts with, and ``Unknown statement`` for a first word
    that starts no statement. Lark's own terminal names never reach the user."""
    line, column = getattr(exc, "line", -1), getattr(exc, "column", -1)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else -1
        near = body[pos] if 0 <= pos < len(body) else "<EOF>"
        return KsqlError(f"line {line}:{column}: Syntax error at or near '{near}'", statement=text, line=line,
                         column=column)
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        lines = body.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        found = "<EOF>"
    elif isinstance(exc, UnexpectedToken):
        found = str(exc.token)
        if exc.token.start_pos == len(body) - len(body.lstrip()):        # the statement's first word
            return _unknown_statement(found, text, line, column)
    else:
        found = "input"
    expected = _expected(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    hint = f" expecting {expected[0]}" if len(expected) == 1 else \
        f" expecting {{{', '.join(expected)}}}" if expected else ""
    return KsqlError(f"line {line}:{column}: mismatched input '{found}'{hint}", statement=text, line=line,
                     column=column)


def _unknown_statement(word: str, text: str, line: int, column: int) -> KsqlError:
    close = difflib.get_close_matches(word.upper(), _STATEMENT_WORDS, n=1)
    hint = f"\nDid you mean '{close[0]}'?" if close else ""
    return KsqlError(f"line {line}:{column}: Syntax Error\nUnknown statement '{word}'{hint}", statement=text,
                     line=line, column=column)


def _expected(terminals: Any) -> list[str]:
    """Display names of the terminals Lark expected: literals quoted as ANTLR quotes them
    (keywords first), then token classes (IDENTIFIER, STRING, ...)."""
    literals: set[str] = set()
    classes: set[str] = set()
    for name in terminals:
        if name in _TOKEN_NAMES:
            classes.add(_TOKEN_NAMES[name])
            continue
        if name in _OPERATORS:
            literals.update(_OPERATORS[name])
            continue
        pattern = _TERMINALS[name].pattern if name in _TERMINALS else None
        if pattern is None:
            continue
        if pattern.type == "str":
            literals.add(str(pattern.value).upper())
        else:
            literals.update(w.upper() for w in _alternatives(str(pattern.value)))
    return [f"'{w}'" for w in sorted(literals, key=lambda w: (w[0].isalpha(), w))] + sorted(classes)


def _alternatives(regex: str) -> list[str]:
    """The words a keyword terminal matches: ``(?:(?i:SHOW)|(?i:LIST))`` -> SHOW, LIST;
    ``IF\\s+NOT\\s+EXISTS`` -> IF (the first token, as ANTLR would expect it)."""
    words = re.findall(r"\(\?i:([^()]+)\)", regex)
    if words:
        return words
    return [regex.split("\\s+")[0]]


_TERMINALS = {t.name: t for t in _PARSER.terminals}
