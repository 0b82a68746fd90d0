"""A source's TIMESTAMP column as the SQL server's queries read it (``engine.with_event_time``) on
the shared local[2] session: ROWTIME is the column's value; a record whose column is null or
negative is skipped, as ksqlDB's extractor (-1) and Kafka Streams do with
``ksql.timestamp.throw.on.invalid=false``, and fails the query when it is true."""
from __future__ import annotations

import datetime
from typing import Any

import pytest

from kafkalite.sql import ast
from kafkalite.sql.engine import with_event_time
from kafkalite.sql.metastore import DataSource


def _frame(spark: Any, ts_type: str) -> Any:
    record_time = datetime.datetime(2026, 1, 1)
    rows = [("a", 1700000000000), ("b", None), ("c", -5), ("d", 1700000001000)]
    if ts_type == "TIMESTAMP":
        return spark.createDataFrame(
            [(k, None if v is None else datetime.datetime.fromtimestamp(v / 1000, datetime.timezone.utc)
              .replace(tzinfo=None), record_time) for k, v in rows],
            "ID string, TS timestamp, __record_time timestamp")
    return spark.createDataFrame([(k, v, record_time) for k, v in rows], "ID string, TS bigint, __record_time timestamp")


@pytest.mark.parametrize("ts_type", ["BIGINT", "TIMESTAMP"])
def test_records_without_a_valid_timestamp_column_are_skipped_or_fail(spark: Any, ts_type: str) -> None:
    src = DataSource("S", "STREAM", "s", (ast.ColumnDef("ID", ast.SqlType("STRING"), key=True),
                                          ast.ColumnDef("TS", ast.SqlType(ts_type))), timestamp="TS")
    out = with_event_time(_frame(spark, ts_type), src).selectExpr("ID", "unix_millis(ROWTIME) AS t").collect()
    assert sorted((r.ID, r.t) for r in out) == [("a", 1700000000000), ("d", 1700000001000)]
    if ts_type == "TIMESTAMP":
        return                                 # the rest does not depend on the column's type
    with pytest.raises(Exception, match="Failed to extract timestamp from row: column TS is null or negative"):
        with_event_time(_frame(spark, ts_type), src, throw_on_invalid=True).collect()
    plain = DataSource("S", "STREAM", "s", src.columns)
    assert [r.ROWTIME for r in with_event_time(_frame(spark, ts_type), plain).collect()] == [
        datetime.datetime(2026, 1, 1)] * 4


def test_time_columns_read_from_milliseconds_of_the_day(spark: Any) -> None:
    """What ksqlDB writes for TIME (Avro time-millis as an int, JSON/DELIMITED numbers or their
    text) reads back as the time's text; text already in that form is kept."""
    from kafkalite.sql.engine import with_time_text

    src = DataSource("S", "STREAM", "s", (ast.ColumnDef("AT", ast.SqlType("TIME")),
                                          ast.ColumnDef("N", ast.SqlType("INT"))))
    as_int = spark.createDataFrame([(36000250, 1), (0, 2), (None, 3)], "AT int, N int")
    assert [(r.AT, r.N) for r in with_time_text(as_int, src).collect()] == [
        ("10:00:00.250", 1), ("00:00:00", 2), (None, 3)]
    as_text = spark.createDataFrame([("86399000",), ("10:11:12",)], "AT string")
    assert [r.AT for r in with_time_text(as_text, src).collect()] == ["23:59:59", "10:11:12"]
