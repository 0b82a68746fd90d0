"""The metastore's bookkeeping and ksqlDB's refusals; the expression translation to Spark SQL."""
from __future__ import annotations

import pytest

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.metastore import DataSource, MetaStore, PersistentQuery
from kafkalite.sql.parser import parse_one
from kafkalite.sql.translate import has_aggregate, output_name, to_spark

COLS = (ast.ColumnDef("ID", ast.SqlType("STRING"), key=True), ast.ColumnDef("V", ast.SqlType("INT")))


def test_add_drop_and_queries() -> None:
    ms = MetaStore()
    ms.add(DataSource("S", "STREAM", "s", COLS))
    assert ms.get("S") is not None and ms.require("S").key_columns == COLS[:1]
    with pytest.raises(KsqlError, match="Cannot add stream 'S': A stream with the same name already exists"):
        ms.add(DataSource("S", "STREAM", "s2", COLS))
    with pytest.raises(KsqlError, match="Cannot replace stream 'S' with a table"):
        ms.add(DataSource("S", "TABLE", "s2", COLS), replace_existing=True)
    ms.add(DataSource("S", "STREAM", "s2", COLS), replace_existing=True)
    assert ms.require("S").topic == "s2"
    ms.add(DataSource("T", "TABLE", "t", COLS))
    ms.add_query(PersistentQuery("CTAS_T_3", "CREATE TABLE T AS ...", "T", ("S",)))
    assert ms.readers_and_writers("S") == (["CTAS_T_3"], [])
    with pytest.raises(KsqlError, match=r"Cannot drop S.\nThe following queries read from this source: \[CTAS_T_3\]"):
        ms.drop("S")
    with pytest.raises(KsqlError, match="Unknown queryId: CSAS_X_1"):
        ms.terminate("CSAS_X_1")
    ms.terminate("CTAS_T_3")
    assert ms.live_queries() == []
    with pytest.raises(KsqlError, match="Unknown queryId: CTAS_T_3"):
        ms.terminate("CTAS_T_3")
    assert ms.drop("S").topic == "s2" and ms.get("S") is None
    with pytest.raises(KsqlError, match="X does not exist."):
        ms.require("X")


def test_expressions_to_spark_sql() -> None:
    stmt = parse_one("CREATE STREAM o AS SELECT ucase(id) AS u, v * 2 + 1, CAST(v AS BIGINT), "
                     "CASE WHEN v > 1 THEN 'a' ELSE 'b' END, IFNULL(id, 'x') FROM s "
                     "WHERE v BETWEEN 1 AND 5 AND id NOT LIKE 'a%' AND id IS NOT NULL;")
    assert isinstance(stmt, ast.CreateAsSelect)
    known = {"ID", "V"}
    got = [to_spark(i.expr, known) for i in stmt.query.items if i.expr is not None]
    assert got == ["upper(`ID`)", "((`V` * 2) + 1)", "CAST(`V` AS bigint)",
                   "(CASE WHEN (`V` > 1) THEN 'a' ELSE 'b' END)", "ifnull(`ID`, 'x')"]
    assert [output_name(i, n) for n, i in enumerate(stmt.query.items)] == ["U", "KSQL_COL_1", "KSQL_COL_2",
                                                                         "KSQL_COL_3", "KSQL_COL_4"]
    assert stmt.query.where is not None
    assert to_spark(stmt.query.where, known) == ("(((`V` BETWEEN 1 AND 5) AND (NOT (`ID` LIKE 'a%'))) "
                                                 "AND (`ID` IS NOT NULL))")
    assert to_spark(ast.Literal("it's"), known) == "'it\\'s'"
    with pytest.raises(KsqlError, match="Column 'W' cannot be resolved."):
        to_spark(ast.Column("W"), known)
    assert to_spark(ast.Column("ROWTIME"), known | {"ROWTIME"}) == "unix_millis(`ROWTIME`)"    # BIGINT ms
    with pytest.raises(KsqlError, match="Can't find any functions with the name 'NOPE'"):
        to_spark(ast.Call("NOPE", (ast.Column("V"),)), known)
    assert has_aggregate(ast.Binary("+", ast.Call("SUM", (ast.Column("V"),)), ast.Literal(1)))
    assert not has_aggregate(ast.Call("UCASE", (ast.Column("ID"),)))
