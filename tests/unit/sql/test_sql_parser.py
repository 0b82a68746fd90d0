"""ksqlDB statements through the Lark grammar: what each statement becomes, identifiers' case,
expression precedence, and errors with ksqlDB's position and statement text."""
from __future__ import annotations

import re

import pytest

from kafkalite.sql import ast, parser
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
    text = ("SHOW STREAMS; list topics extended; DESCRIBE x EXTENDED; describe y; DROP TABLE IF EXISTS y DELETE TOPIC;"
            " TERMINATE CSAS_X_1; TERMINATE ALL; SET 'auto.offset.reset'='earliest'; UNSET 'a';"
            " SELECT * FROM t WHERE k = 'a;b' EMIT CHANGES;")
    got = [p.statement for p in parse(text)]
    assert got == [ast.Show("STREAMS"), ast.Show("TOPICS", True), ast.Describe("X", True), ast.Describe("Y", False),
                   ast.Drop("TABLE", "Y", True, True), ast.Terminate("CSAS_X_1"), ast.Terminate(None),
                   ast.SetProperty("auto.offset.reset", "earliest"), ast.SetProperty("a", None),
                   ast.Query(ast.Select((ast.SelectItem(None),), "T",
                                        where=ast.Binary("=", ast.Column("K"), ast.Literal("a;b")), emit="CHANGES"))]
    assert split("SHOW TABLES;\n-- a comment\n") == ["SHOW TABLES;"]
    assert parse("")== []


@pytest.mark.parametrize("text, message, line, column", [
    ("SELEC * FROM x;", "line 1:1: Syntax Error\nUnknown statement 'SELEC'\nDid you mean 'SELECT'?", 1, 1),
    ("CREATE STREAM s (a INT WITH (kafka_topic='x');", "line 1:24: mismatched input 'WITH' expecting {", 1, 24),
    ("SHOW", "line 1:5: mismatched input '<EOF>' expecting {'PROPERTIES', 'QUERIES', 'STREAMS', 'TABLES', "
             "'TOPICS'}", 1, 5),
    ("SHOW FOO;", "line 1:6: mismatched input 'FOO' expecting {'PROPERTIES', 'QUERIES', 'STREAMS', 'TABLES', "
                  "'TOPICS'}", 1, 6),
    ("DROP STREAM;", "line 1:12: mismatched input '<EOF>' expecting {'IF', BACKQUOTED_IDENTIFIER, IDENTIFIER}",
     1, 12),
    ("INSERT INTO x VALUES 1;", "line 1:22: mismatched input '1' expecting '('", 1, 22),
    ("SELECT a\nFROM x WHERE a = $;", "line 2:18: Syntax error at or near '$'", 2, 18),
])
def test_syntax_errors_carry_the_position(text: str, message: str, line: int, column: int) -> None:
    with pytest.raises(KsqlError) as info:
        parse(text)
    err = info.value
    assert err.message.startswith(message) and (err.line, err.column) == (line, column)
    body = err.body()
    assert (body["@type"], body["error_code"], body["statementText"]) == ("statement_error", 40001, text)


def test_error_messages_never_name_grammar_terminals() -> None:
    """Every terminal of the grammar shows as a keyword, a symbol or an ANTLR token class."""
    names = {t.name for t in parser._PARSER.terminals} - {"WS", "COMMENT"}
    shown = parser._expected(names)
    classes = {"BACKQUOTED_IDENTIFIER", "DECIMAL_VALUE", "IDENTIFIER", "INTEGER_VALUE", "STRING"}
    assert [s for s in shown if s not in classes and not re.fullmatch(r"'[A-Z]+'|'[^A-Za-z0-9_ ]{1,2}'", s)] == []
    assert {"'STREAMS'", "'OR'", "'IF'", "'FROM'", "'!='", "'||'", "'CHANGES'"} <= set(shown)
    for text in ("CREATE STREAM s (a INT WITH (kafka_topic='x');", "SELECT a b c FROM x;", "SHOW FOO;",
                 "SELECT * FROM x WHERE a <> ;", "CREATE STREAM x (a INT) WITH (a=);", "DROP TABLE x DELETE;"):
        with pytest.raises(KsqlError) as info:
            parse(text)
        assert not re.search(r"[A-Z]+_[A-Z_]+|__ANON", info.value.message.replace("BACKQUOTED_IDENTIFIER", "")
                             .replace("DECIMAL_VALUE", "").replace("INTEGER_VALUE", "")), info.value.message


def test_joins_insert_explain_print() -> None:
    q = parse_one("SELECT * FROM a AS x FULL OUTER JOIN b y WITHIN (1 HOUR, 2 MINUTES) GRACE PERIOD 5 SECONDS "
                  "ON x.id = y.id LEFT JOIN c ON c.k = x.id EMIT CHANGES;")
    assert isinstance(q, ast.Query) and (q.query.source, q.query.alias) == ("A", "X")
    assert q.query.joins == (
        ast.Join("FULL", "B", "Y", ast.Within(3600000, 120000, 5000),
                 ast.Binary("=", ast.Column("ID", "X"), ast.Column("ID", "Y"))),
        ast.Join("LEFT", "C", None, None, ast.Binary("=", ast.Column("K", "C"), ast.Column("ID", "X"))))
    j = parse_one("SELECT * FROM a JOIN b WITHIN 10 SECONDS ON a.id = b.id EMIT CHANGES;")
    assert isinstance(j, ast.Query) and j.query.joins[0].within == ast.Within(10000, 10000, None)
    assert j.query.joins[0].kind == "INNER"
    i = parse_one("INSERT INTO s SELECT * FROM t WHERE v > 1;")
    assert isinstance(i, ast.InsertInto) and i.target == "S" and i.query.source == "T"
    v = parse_one("INSERT INTO s (a, `b`) VALUES (1, 'x', -2.5, NULL);")
    assert v == ast.InsertValues("S", ("A", "b"), (ast.Literal(1), ast.Literal("x"), ast.Literal(-2.5),
                                                   ast.Literal(None)))
    assert parse_one("EXPLAIN CSAS_X_1;") == ast.Explain("CSAS_X_1")
    e = parse_one("explain  CREATE STREAM y AS SELECT * FROM x;")
    assert isinstance(e, ast.Explain) and isinstance(e.statement, ast.CreateAsSelect)
    assert e.text == "CREATE STREAM y AS SELECT * FROM x;"
    assert parse_one("PRINT 'my-topic' FROM BEGINNING INTERVAL 2 LIMIT 5;") == ast.Print("my-topic", True, True, 2, 5)
    assert parse_one("print foo;") == ast.Print("foo", False, False, 1, None)
