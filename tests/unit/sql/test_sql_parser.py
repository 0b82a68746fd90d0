"""ksqlDB statements through the Lark grammar: what each statement becomes, identifiers' case,
expression precedence, and errors with ksqlDB's position and statement text."""
from __future__ import annotations

import pytest

from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse, parse_one, split


def test_create_stream_with_columns_keys_and_properties() -> None:
    s = parse_one("CREATE STREAM pageviews (viewtime BIGINT, userid VARCHAR KEY, `pageId` STRING, "
                  "tags ARRAY<STRING>, m MAP<STRING, DOUBLE>, d STRUCT<x INT, y DECIMAL(4, 2)>) "
                  "WITH (KAFKA_TOPIC='pageviews', VALUE_FORMAT='JSON', PARTITIONS=2, TIMESTAMP='viewtime');")
    assert isinstance(s, ast.CreateSource) and (s.kind, s.name) == ("STREAM", "PAGEVIEWS")
    assert [(c.name, str(c.type), c.key) for c in s.columns] == [
        ("VIEWTIME", "BIGINT", False), ("USERID", "STRING", True), ("pageId", "STRING", False),
        ("TAGS", "ARRAY<STRING>", False), ("M", "MAP<STRING, DOUBLE>", False),
        ("D", "STRUCT<`X` INT, `Y` DECIMAL(4, 2)>", False)]
    assert s.properties == (("KAFKA_TOPIC", "pageviews"), ("VALUE_FORMAT", "JSON"), ("PARTITIONS", 2),
                            ("TIMESTAMP", "viewtime"))
    t = parse_one("create or replace table if not exists users (id string primary key) with (kafka_topic='u', "
                  "format='avro')")
    assert isinstance(t, ast.CreateSource) and t.or_replace and t.if_not_exists and t.columns[0].key


def test_windowed_ctas_and_csas() -> None:
    s = parse_one("CREATE TABLE speeds WITH (KAFKA_TOPIC='s') AS SELECT truck, AVG(speed) AS avg_speed, COUNT(*) "
                  "FROM trucks t WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS, GRACE PERIOD 5 SECONDS) "
                  "WHERE speed > 0 GROUP BY truck HAVING COUNT(*) > 2 EMIT FINAL;")
    assert isinstance(s, ast.CreateAsSelect) and s.kind == "TABLE"
    q = s.query
    assert (q.source, q.alias, q.emit) == ("TRUCKS", "T", "FINAL")
    assert q.window == ast.Window("HOPPING", 60000, 10000, 5000)
    assert q.items[2] == ast.SelectItem(ast.Call("COUNT", (), True))
    assert q.group_by == (ast.Column("TRUCK"),)
    assert q.having == ast.Binary(">", ast.Call("COUNT", (), True), ast.Literal(2))
    session = parse_one("CREATE TABLE x AS SELECT k, COUNT(*) FROM s WINDOW SESSION (30 SECONDS) GROUP BY k;")
    assert isinstance(session, ast.CreateAsSelect) and session.query.window == ast.Window("SESSION", 30000)
    c = parse_one("CREATE STREAM fast AS SELECT s.truck, speed * 1.5 + 2 AS v, -speed, "
                  "CASE WHEN speed > 80 THEN 'fast' ELSE 'ok' END FROM trucks s "
                  "WHERE speed BETWEEN 10 AND 20 OR NOT truck IN ('a', 'b') AND truck IS NOT NULL PARTITION BY truck;")
    assert isinstance(c, ast.CreateAsSelect)
    items = c.query.items
    assert items[0].expr == ast.Column("TRUCK", "S")
    assert items[1].expr == ast.Binary("+", ast.Binary("*", ast.Column("SPEED"), ast.Literal(1.5)), ast.Literal(2))
    assert items[2].expr == ast.Unary("-", ast.Column("SPEED"))
    assert isinstance(items[3].expr, ast.Case)
    where = c.query.where
    assert isinstance(where, ast.Binary) and where.op == "OR"          # AND binds tighter than OR
    assert isinstance(where.right, ast.Binary) and where.right.op == "AND"
    assert c.query.partition_by == ast.Column("TRUCK")


def test_other_statements_and_splitting() -> None:
    text = ("SHOW STREAMS; list topics extended; DESCRIBE EXTENDED x; DROP TABLE IF EXISTS y DELETE TOPIC;"
            " TERMINATE CSAS_X_1; TERMINATE ALL; SET 'auto.offset.reset'='earliest'; UNSET 'a';"
            " SELECT * FROM t WHERE k = 'a;b' EMIT CHANGES;")
    got = [p.statement for p in parse(text)]
    assert got == [ast.Show("STREAMS"), ast.Show("TOPICS", True), ast.Describe("X", True),
                   ast.Drop("TABLE", "Y", True, True), ast.Terminate("CSAS_X_1"), ast.Terminate(None),
                   ast.SetProperty("auto.offset.reset", "earliest"), ast.SetProperty("a", None),
                   ast.Query(ast.Select((ast.SelectItem(None),), "T",
                                        where=ast.Binary("=", ast.Column("K"), ast.Literal("a;b")), emit="CHANGES"))]
    assert split("SHOW TABLES;\n-- a comment\n") == ["SHOW TABLES;"]
    assert parse("")== []


@pytest.mark.parametrize("text, message, line, column", [
    ("SELEC * FROM x;", "line 1:1: mismatched input 'SELEC'", 1, 1),
    ("CREATE STREAM s (a INT WITH (kafka_topic='x');", "line 1:24: mismatched input 'WITH'", 1, 24),
    ("SHOW", "line 1:5: mismatched input '<EOF>'", 1, 5),
    ("SELECT a\nFROM x WHERE a = $;", "line 2:18: mismatched input '$'", 2, 18),
])
def test_syntax_errors_carry_the_position(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(KsqlError) as info:
        parse(text)
    err = info.value
    assert err.message.startswith(message) and (err.line, err.column) == (line, column)
    assert err.body() == {"@type": "statement_error", "error_code": 40001, "message": err.message,
                          "statementText": text, "entities": []}


@pytest.mark.parametrize("text, message", [
    ("CREATE STREAM s (a FOO) WITH (kafka_topic='x');", "Unknown type: FOO"),
    ("CREATE STREAM s (a DECIMAL) WITH (kafka_topic='x');", "DECIMAL needs a precision and a scale"),
    ("SELECT * FROM x WINDOW TUMBLING (SIZE 1 FORTNIGHT) GROUP BY a;", "Invalid time unit: FORTNIGHT"),
    ("CREATE TABLE t AS SELECT a, COUNT(*) FROM s WINDOW HOPPING (SIZE 1 SECOND, ADVANCE BY 2 SECONDS) "
     "GROUP BY a;", "Window advance must be less than or equal to the window size"),
])
def test_semantic_errors(text: str, message: str) -> None:
    with pytest.raises(KsqlError, match=message):
        parse(text)
