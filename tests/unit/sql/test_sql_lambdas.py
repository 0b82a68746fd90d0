"""ksqlDB's lambda functions (issue 30): TRANSFORM, FILTER and REDUCE over arrays and maps,
parsed (``x => ...``, ``(k, v) => ...``), typed as ksqlDB types them (its UDF signatures:
TRANSFORM an array of the lambda's type or a map of both lambdas' types, FILTER its collection's
type, REDUCE its initial state's), translated to Spark's higher-order functions, and refused in
ksqlDB's words; planned through the engine against its Spark double."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.sql import ast
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.expression_types import type_of
from kafkalite.sql.parser import parse
from kafkalite.sql.translate import Columns, column_types, to_spark
from tests.unit.sql.test_sql_engine_statements import engine  # noqa: F401  (the fixture)

T = ast.SqlType
TYPES = {"NUMS": T("ARRAY", items=(T("INT"),)), "M": T("MAP", items=(T("STRING"), T("BIGINT"))),
         "WORDS": T("ARRAY", items=(T("STRING"),)), "N": T("INT"), "NAME": T("STRING"),
         "NESTED": T("ARRAY", items=(T("ARRAY", items=(T("INT"),)),)),
         "ITEMS": T("ARRAY", items=(T("STRUCT", fields=(("SKU", T("STRING")), ("QTY", T("INT")))),))}
SCOPE = Columns(set(TYPES), TYPES)


def expr(text: str) -> Any:
    statement = parse(f"SELECT {text} FROM s EMIT CHANGES;")[0].statement
    return statement.query.items[0].expr                     # type: ignore[union-attr]


def test_lambdas_parse_as_arguments_after_the_others() -> None:
    e = expr("REDUCE(nums, 0, (s, x) => s + x)")
    assert e == ast.Call("REDUCE", (ast.Column("NUMS"), ast.Literal(0), ast.Lambda(
        ("S", "X"), ast.Binary("+", ast.Column("S"), ast.Column("X")))))
    assert expr("TRANSFORM(nums, x=>x)").args[1] == ast.Lambda(("X",), ast.Column("X"))
    # a parenthesized expression is not a lambda's parameter list
    assert expr("ROUND((n), 2)") == ast.Call("ROUND", (ast.Column("N"), ast.Literal(2)))
    with pytest.raises(KsqlError, match=r"line 1:\d+: "):
        parse("SELECT TRANSFORM(x => x, nums) FROM s EMIT CHANGES;")      # a lambda comes last, as in ksqlDB


@pytest.mark.parametrize("text, sql_type", [
    ("TRANSFORM(nums, x => x * 2)", "ARRAY<INT>"),
    ("TRANSFORM(nums, x => CAST(x AS STRING))", "ARRAY<STRING>"),
    ("TRANSFORM(nums, x => x > 1)", "ARRAY<BOOLEAN>"),
    ("TRANSFORM(m, (k, v) => UCASE(k), (k, v) => v + 1)", "MAP<STRING, BIGINT>"),
    ("TRANSFORM(m, (k, v) => v, (k, v) => k)", "MAP<BIGINT, STRING>"),
    ("FILTER(nums, x => x > 2)", "ARRAY<INT>"),
    ("FILTER(m, (k, v) => v > 2)", "MAP<STRING, BIGINT>"),
    ("REDUCE(nums, 0, (s, x) => s + x)", "INT"),
    ("REDUCE(nums, CAST(0 AS BIGINT), (s, x) => s + x)", "BIGINT"),
    ("REDUCE(m, '', (s, k, v) => CONCAT(s, k))", "STRING"),
    ("TRANSFORM(nested, a => TRANSFORM(a, x => x + n))", "ARRAY<ARRAY<INT>>"),
    ("TRANSFORM(items, i => i->qty)", "ARRAY<INT>"),
    ("TRANSFORM(words, n => LEN(n))", "ARRAY<INT>"),                 # the parameter shadows the column N
])
def test_lambda_calls_are_typed_as_ksqldb_types_them(text: str, sql_type: str) -> None:
    assert str(type_of(expr(text), column_types(SCOPE))) == sql_type


@pytest.mark.parametrize("text, spark", [
    ("TRANSFORM(nums, x => x * 2)", "transform(`NUMS`, `X` -> (`X` * 2))"),
    ("FILTER(nums, x => x > 2)", "filter(`NUMS`, `X` -> (`X` > 2))"),
    ("FILTER(m, (k, v) => v > 2 AND k LIKE 'a%')", "map_filter(`M`, (`K`, `V`) -> ((`V` > 2) AND (`K` LIKE 'a%')))"),
    ("REDUCE(nums, 0, (s, x) => s + x)",
     "(CASE WHEN 0 IS NULL THEN NULL WHEN `NUMS` IS NULL THEN CAST(0 AS int) ELSE aggregate(`NUMS`, CAST(0 AS int), "
     "(`S`, `X`) -> CAST((`S` + `X`) AS int)) END)"),
    ("REDUCE(m, 0, (s, k, v) => s + v)",
     "(CASE WHEN 0 IS NULL THEN NULL WHEN `M` IS NULL THEN CAST(0 AS int) ELSE aggregate(map_entries(`M`), CAST(0 AS "
     "int), (`S`, `__entry0`) -> CAST((`S` + `__entry0`.value) AS int)) END)"),
    ("TRANSFORM(nested, a => TRANSFORM(a, x => x + n))",
     "transform(`NESTED`, `A` -> transform(`A`, `X` -> (`X` + `N`)))"),
    ("TRANSFORM(words, n => LEN(n))", "transform(`WORDS`, `N` -> length(`N`))"),
])
def test_lambda_calls_become_spark_higher_order_functions(text: str, spark: str) -> None:
    assert to_spark(expr(text), SCOPE, "x") == spark


def test_a_map_transform_is_null_for_repeated_or_null_keys() -> None:
    sql = to_spark(expr("TRANSFORM(m, (k, v) => LCASE(k), (k, v) => v * 2)"), SCOPE, "x")
    pairs = ("transform(map_entries(`M`), `__entry0` -> struct(lower(`__entry0`.key) AS key, (`__entry0`.value * 2) "
             "AS value))")
    assert sql == (f"(CASE WHEN `M` IS NULL THEN NULL WHEN exists({pairs}, `__entry0` -> `__entry0`.key IS NULL OR "
                   f"`__entry0`.value IS NULL) OR size(array_distinct(transform({pairs}, `__entry0` -> "
                   f"`__entry0`.key))) != size(`M`) THEN NULL ELSE map_from_entries({pairs}) END)")


def test_nested_map_lambdas_get_their_own_entry_variables() -> None:
    scope = Columns({"MM"}, {"MM": T("MAP", items=(T("STRING"), T("MAP", items=(T("STRING"), T("INT")))))})
    sql = to_spark(expr("REDUCE(mm, 0, (s, k, v) => s + REDUCE(v, 0, (t, k2, v2) => t + v2))"), scope, "x")
    assert "(`S`, `__entry0`) -> " in sql and "(`T`, `__entry3`) -> CAST((`T` + `__entry3`.value) AS int)" in sql


@pytest.mark.parametrize("text, message", [
    ("TRANSFORM(nums, (x, y) => x)", "Function 'TRANSFORM' does not accept parameters (ARRAY<INTEGER>, "
                                     "LAMBDA (X, Y) => ...).\nValid alternatives are:\nTRANSFORM(ARRAY<T> array, "),
    ("TRANSFORM(m, (k, v) => k)", "Function 'TRANSFORM' does not accept parameters (MAP<STRING, BIGINT>, "
                                  "LAMBDA (K, V) => ...)."),
    ("FILTER(n, x => x > 1)", "Function 'FILTER' does not accept parameters (INTEGER, LAMBDA (X) => ...)."),
    ("REDUCE(nums, (s, x) => s + x)", "Function 'REDUCE' does not accept parameters ("),
    ("TRANSFORM(nums, x => nope)", "Column 'NOPE' cannot be resolved."),
    ("TRANSFORM(nums, x => x[1])", "Subscript expression (X[1]) do not apply to INTEGER."),
])
def test_lambda_refusals(text: str, message: str) -> None:
    with pytest.raises(KsqlError) as info:
        to_spark(expr(text), SCOPE, "SELECT ...;")
    assert info.value.message.startswith(message), info.value.message


def test_lambdas_in_a_persistent_query_and_its_output_types(engine: Engine) -> None:
    engine.execute("CREATE STREAM orders (id STRING KEY, nums ARRAY<INT>, m MAP<STRING, BIGINT>) "
                   "WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='JSON');")
    out = engine.execute("CREATE STREAM shaped AS SELECT id, TRANSFORM(nums, x => x * 2) AS dbl, "
                         "FILTER(m, (k, v) => v > 1) AS big, REDUCE(nums, 0, (s, x) => s + x) AS total "
                         "FROM orders WHERE ARRAY_LENGTH(FILTER(nums, x => x > 2)) > 0;")
    plan, sql = engine.plans[out[0]["commandStatus"]["queryId"]]
    assert sql.endswith("WHERE (size(filter(`NUMS`, `X` -> (`X` > 2))) > 0)")
    assert [(c.name, str(c.type)) for c in plan.sink.columns] == [
        ("ID", "STRING"), ("DBL", "ARRAY<INT>"), ("BIG", "MAP<STRING, BIGINT>"), ("TOTAL", "INT")]
    fields = {f["name"]: f["schema"]["type"] for f in engine.execute("DESCRIBE shaped;")[0]["sourceDescription"]
              ["fields"]}
    assert (fields["ID"], fields["DBL"], fields["BIG"]) == ("STRING", "ARRAY", "MAP")
    with pytest.raises(KsqlError, match="Function 'FILTER' does not accept parameters"):
        engine.execute("CREATE STREAM bad AS SELECT id, FILTER(id, x => x = 'a') AS f FROM orders;")
