"""INSERT INTO ... VALUES with expressions, evaluated without Spark (``values``, ``serde.row_of``):
arithmetic with Java's semantics, string functions, ROUND, CAST, CASE and logic on constants, the
results coerced to the columns' types and encoded; ksqlDB's refusals word for word (a column
reference, an unknown function, a value of the wrong type, an overflowing DECIMAL)."""
from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

import pytest

from kafkalite.sql import ast, serde, values
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.parser import parse

T = ast.SqlType
SOURCE = DataSource("READINGS", "STREAM", "readings", (
    ast.ColumnDef("ID", T("STRING"), key=True), ast.ColumnDef("N", T("INT")), ast.ColumnDef("BIG", T("BIGINT")),
    ast.ColumnDef("X", T("DOUBLE")), ast.ColumnDef("AMOUNT", T("DECIMAL", (6, 2))), ast.ColumnDef("NAME", T("STRING")),
    ast.ColumnDef("OK", T("BOOLEAN")), ast.ColumnDef("TS", T("TIMESTAMP")), ast.ColumnDef("DAY", T("DATE")),
    ast.ColumnDef("AT", T("TIME"))))


def _row(sql: str) -> tuple[dict[str, Any], int | None]:
    stmt = parse(sql)[0]
    assert isinstance(stmt.statement, ast.InsertValues)
    return serde.row_of(stmt.statement, SOURCE, stmt.text)


def _value(expr: str) -> Any:
    stmt = parse(f"INSERT INTO r (x) VALUES ({expr});")[0].statement
    assert isinstance(stmt, ast.InsertValues)
    return values.constant(stmt.values[0])


def test_expressions_become_typed_column_values() -> None:
    row, rowtime = _row(
        "INSERT INTO readings (ROWTIME, id, n, big, x, amount, name, ok, ts, day, at) VALUES ("
        "1700000000000 + 5, CONCAT('truck-', UCASE('a'), '-', CAST(7 AS STRING)), 7 / 2 * 3 - -7 % 3, "
        "CAST('9000000000' AS BIGINT) + 1, ROUND(2.345, 2) * 2, 10.005 + 1, "
        "CASE WHEN 3 > 2 AND NOT (1 = 2) THEN LCASE(TRIM('  Speed  ')) ELSE 'no' END, "
        "'ab' LIKE 'a%' OR NULL, FROM_UNIXTIME(1700000000000), CAST(FROM_UNIXTIME(1764410400000) AS DATE), "
        "'10:00:00.250');")
    assert rowtime == 1700000000005
    assert row == {"ID": "truck-A-7", "N": 10, "BIG": 9000000001, "X": 4.7, "AMOUNT": decimal.Decimal("11.01"),
                   "NAME": "speed", "OK": True, "TS": 1700000000000, "DAY": "2025-11-29", "AT": "10:00:00.250000"}
    record = serde.encode(SOURCE, row, rowtime, None, "")
    assert (record.key, record.timestamp_ms) == (b"truck-A-7", 1700000000005)
    assert json.loads(record.value or b"")["AMOUNT"] == 11.01


@pytest.mark.parametrize("expr, expected", [
    ("-7 / 2", -3), ("-7 % 3", -1), ("7.0 / 2", decimal.Decimal("3.5")), ("CAST(7 AS DOUBLE) / 0", float("inf")),
    ("ROUND(2.5)", decimal.Decimal("3")), ("ROUND(CAST(-2.5 AS DOUBLE))", -3), ("ROUND(CAST(1.25 AS DOUBLE), 1)", 1.3),
    ("ABS(-3) + CEIL(1.2) + FLOOR(CAST(-1.5 AS DOUBLE))", decimal.Decimal("3")),
    ("SUBSTRING('kafkalite', 2, 4)", "afka"), ("SUBSTRING('kafkalite', -4)", "lite"), ("LEN('abc')", 3),
    ("LPAD('7', 3, '0')", "007"), ("REPLACE(INITCAP('hello world'), 'World', 'There')", "Hello There"),
    ("CONCAT_WS('-', 'a', NULL, 'b')", "a-b"), ("COALESCE(NULL, 'x')", "x"), ("IFNULL(NULL, 2)", 2),
    ("UCASE(NULL)", None), ("CAST(1.5 AS STRING)", "1.5"), ("CAST(TRUE AS STRING)", "true"),
    ("CAST('42' AS INT) BETWEEN 40 AND 50", True), ("3 IN (1, 2, 3)", True), ("GREATEST(1, 5, 3)", 5),
    ("CAST(3000000000 AS INT)", -1294967296), ("'a' + 'b'", "ab"),
])
def test_constant_expressions(expr: str, expected: Any) -> None:
    assert _value(expr) == expected


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO readings (id, n) VALUES ('k', n + 1);", "Unsupported column reference in insert value: (N + 1)"),
    ("INSERT INTO readings (id, n) VALUES ('k', NOSUCH(1));", "Can't find any functions with the name 'NOSUCH'"),
    ("INSERT INTO readings (id, n) VALUES (UCASE('k'));",
     "Expected a value for each column. Expected Columns: [ID, N]. Got [UCASE('k')]"),
    ("INSERT INTO readings (id, n) VALUES ('k', 1.5);", "Expected type INTEGER for field `N` but got DECIMAL(1.5)"),
    ("INSERT INTO readings (id, n) VALUES ('k', 3000000000);",
     "Expected type INTEGER for field `N` but got BIGINT(3000000000)"),
    ("INSERT INTO readings (id, name) VALUES ('k', 1 = 1);", "Expected type STRING for field `NAME` but got BOOLEAN(true)"),
    ("INSERT INTO readings (id, amount) VALUES ('k', 12345.6);",
     "Expected type DECIMAL(6, 2) for field `AMOUNT` but got DECIMAL(12345.6)"),
    ("INSERT INTO readings (id, amount) VALUES ('k', CAST(1 AS DOUBLE));",
     "Expected type DECIMAL(6, 2) for field `AMOUNT` but got DOUBLE(1.0)"),
    ("INSERT INTO readings (id, ts) VALUES ('k', 'yesterday');", "Expected type TIMESTAMP for field `TS` but got "
     "STRING(yesterday). Timestamp format must be yyyy-mm-ddThh:mm:ss[.S]"),
    ("INSERT INTO readings (id, n) VALUES ('k', 1 / 0);", "Error processing expression: / by zero"),
    ("INSERT INTO readings (id, n) VALUES ('k', CAST('x' AS INT));", "Cannot cast STRING(x) to INT"),
])
def test_refusals_are_ksqldb_statement_errors(statement: str, message: str) -> None:
    with pytest.raises(KsqlError) as err:
        _row(statement)
    assert err.value.message == "Failed to insert values into 'READINGS'. " + message
    assert err.value.statement == statement and err.value.code == 40001


def test_timestamps_take_text_epoch_ms_and_functions() -> None:
    row, _ = _row("INSERT INTO readings (id, ts, day, at) VALUES ('k', '2025-11-29T10:00:00.123', "
                  "FROM_DAYS(20421), CAST('10:11:12' AS TIME));")
    assert row["TS"] == int(datetime.datetime(2025, 11, 29, 10, 0, 0, 123000, datetime.timezone.utc).timestamp() * 1000)
    assert (row["DAY"], row["AT"]) == ("2025-11-29", "10:11:12")


def test_bytes_take_base64_text() -> None:
    import dataclasses

    src = dataclasses.replace(SOURCE, columns=(SOURCE.columns[0], ast.ColumnDef("B", T("BYTES"))))
    stmt = parse("INSERT INTO readings (id, b) VALUES ('k', 'AAEC');")[0]
    assert isinstance(stmt.statement, ast.InsertValues)
    row, _ = serde.row_of(stmt.statement, src, stmt.text)
    assert row["B"] == b"\x00\x01\x02"
    assert json.loads(serde.encode(src, row, None, None, "").value or b"") == {"B": "AAEC"}


def test_time_and_date_are_written_as_ksqldb_writes_them() -> None:
    """JSON and DELIMITED: a TIME as milliseconds of the day, a DATE as days since the epoch
    (Connect's Time and Date through JsonConverter; KsqlDelimitedSerializer's handleTime and
    handleDate); AVRO takes them as time-millis and date (checked with the registry's serde in
    test_sql_engine_statements)."""
    import dataclasses

    row, _ = _row("INSERT INTO readings (id, at, day) VALUES ('k', '10:00:00.250', '2025-11-29');")
    value = json.loads(serde.encode(SOURCE, row, None, None, "").value or b"")
    assert (value["AT"], value["DAY"]) == (36000250, 20421)            # 2025-11-29
    delimited = dataclasses.replace(SOURCE, value_format="DELIMITED", columns=(
        SOURCE.columns[0], ast.ColumnDef("AT", T("TIME")), ast.ColumnDef("N", T("INT"))))
    assert serde.encode(delimited, {"ID": "k", "AT": "00:00:01", "N": 3}, None, None, "").value == b"1000,3"
    dated = dataclasses.replace(SOURCE, value_format="DELIMITED", columns=(
        SOURCE.columns[0], ast.ColumnDef("DAY", T("DATE")), ast.ColumnDef("TS", T("TIMESTAMP"))))
    assert serde.encode(dated, {"ID": "k", "DAY": "1969-12-31", "TS": 1700000000000}, None, None,
                        "").value == b"-1,1700000000000"


def test_insert_values_can_be_disabled_as_in_ksqldb() -> None:
    """``ksql.insert.into.values.enabled=false`` refuses INSERT VALUES (a statement error) and
    /inserts-stream (a request error, 40000), before any producer exists."""
    from kafkalite.sql.config import KsqlConfig
    from kafkalite.sql.engine import Engine

    engine = Engine(KsqlConfig(insert_values_enabled=False), lambda: None)
    engine.metastore.add(SOURCE)
    disabled = ("The server has disabled INSERT INTO ... VALUES functionality. To enable it, restart your ksqlDB "
                "server with 'ksql.insert.into.values.enabled'=true")
    with pytest.raises(KsqlError) as err:
        engine.execute("INSERT INTO readings (id) VALUES ('k');")
    assert err.value.message == "Failed to insert values into 'READINGS'. " + disabled and err.value.code == 40001
    with pytest.raises(KsqlError) as err:
        engine.inserts_subscriber("readings")
    assert (err.value.message, err.value.code, err.value.statement) == (disabled, 40000, "")
