"""STRUCT constructors mixed with others of different fields (issue 30): ksqlDB's common type of
``ARRAY[STRUCT(a := 1), STRUCT(b := 'x')]`` is the union of their fields, each struct having the
fields it lacks null; Spark's ``array``/``map`` need one struct type, so each constructor is
written out at the union type (its missing fields typed nulls, its present ones at the field's
common type, nested structs alike)."""
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
SCOPE = Columns({"V", "NAME"}, {"V": T("INT"), "NAME": T("STRING")})


def expr(text: str) -> Any:
    return parse(f"SELECT {text} FROM s EMIT CHANGES;")[0].statement.query.items[0].expr  # type: ignore


@pytest.mark.parametrize("text, sql_type, spark", [
    ("ARRAY[STRUCT(a := 1), STRUCT(b := name)]", "ARRAY<STRUCT<`A` INT, `B` STRING>>",
     "array(named_struct('A', 1, 'B', CAST(NULL AS string)), named_struct('A', CAST(NULL AS int), 'B', `NAME`))"),
    ("ARRAY[STRUCT(a := v, s := STRUCT(x := 1)), STRUCT(a := CAST(2 AS BIGINT), s := STRUCT(y := 'q'))]",
     "ARRAY<STRUCT<`A` BIGINT, `S` STRUCT<`X` INT, `Y` STRING>>>",
     "array(named_struct('A', CAST(`V` AS bigint), 'S', named_struct('X', 1, 'Y', CAST(NULL AS string))), "
     "named_struct('A', CAST(2 AS bigint), 'S', named_struct('X', CAST(NULL AS int), 'Y', 'q')))"),
    ("MAP('k' := STRUCT(a := 1), 'j' := STRUCT(b := true))", "MAP<STRING, STRUCT<`A` INT, `B` BOOLEAN>>",
     "map('k', named_struct('A', 1, 'B', CAST(NULL AS boolean)), 'j', named_struct('A', CAST(NULL AS int), 'B', "
     "TRUE))"),
    ("ARRAY[STRUCT(a := 1, b := 'x'), STRUCT(a := 2, b := 'y')]", "ARRAY<STRUCT<`A` INT, `B` STRING>>",
     "array(named_struct('A', 1, 'B', 'x'), named_struct('A', 2, 'B', 'y'))"),        # same fields: as written
])
def test_mixed_structs_take_the_union_of_their_fields(text: str, sql_type: str, spark: str) -> None:
    assert str(type_of(expr(text), column_types(SCOPE))) == sql_type
    assert to_spark(expr(text), SCOPE) == spark


def test_a_field_of_two_types_without_a_common_one_is_refused() -> None:
    with pytest.raises(KsqlError, match="operator does not exist"):
        to_spark(expr("ARRAY[STRUCT(a := 1), STRUCT(a := true)]"), SCOPE, "x")


def test_a_query_of_mixed_structs_gets_the_union_type(engine: Engine) -> None:
    out = engine.execute("CREATE STREAM shaped AS SELECT id, ARRAY[STRUCT(v := v), STRUCT(n := name)] AS parts "
                         "FROM s;")
    plan, sql = engine.plans[out[0]["commandStatus"]["queryId"]]
    assert [(c.name, str(c.type)) for c in plan.sink.columns] == [
        ("ID", "STRING"), ("PARTS", "ARRAY<STRUCT<`V` INT, `N` STRING>>")]
    assert ("array(named_struct('V', `V`, 'N', CAST(NULL AS string)), named_struct('V', CAST(NULL AS int), "
            "'N', `NAME`)) AS `PARTS`") in sql
