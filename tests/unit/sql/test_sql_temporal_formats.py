"""DATE and TIMESTAMP in JSON and DELIMITED as ksqlDB writes and reads them (days since the epoch,
epoch milliseconds; its JsonSerdeUtils and KsqlDelimitedSerializer/Deserializer), in the Spark SQL
the queries decode and encode with, also inside collections; and a materialized table's output
topic read back into its pull-query state, AVRO values included (decoded through the registry)."""
from __future__ import annotations

import datetime
import decimal
import json
from typing import Any

from kafkalite.registry import client as registry_client
from kafkalite.registry.serde import encode, parse_avro
from kafkalite.sql import ast, deserialization, serde
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine, _json_columns
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.queries import StateStore, decode_output, json_value
from kafkalite.sql.translate import from_wire, spark_column, to_wire, wire_type

T = ast.SqlType
DAYS = "CASE WHEN {x} RLIKE '^-?[0-9]+$' THEN date_from_unix_date(CAST({x} AS INT)) ELSE try_cast({x} AS DATE) END"
MILLIS = ("CASE WHEN {x} RLIKE '^-?[0-9]+$' THEN timestamp_millis(CAST({x} AS BIGINT)) "
          "ELSE try_cast({x} AS TIMESTAMP) END")


def test_dates_and_timestamps_are_read_from_ksqldbs_numbers_and_from_text() -> None:
    assert wire_type(T("STRUCT", fields=(("D", T("DATE")), ("N", T("INT"))))) == T(
        "STRUCT", fields=(("D", T("STRING")), ("N", T("INT"))))
    assert from_wire("`x`", T("DATE")) == DAYS.format(x="`x`")
    assert from_wire("`x`", T("TIMESTAMP")) == MILLIS.format(x="`x`")
    assert from_wire("`x`", T("INT")) == "`x`"
    assert from_wire("`a`", T("ARRAY", items=(T("DATE"),))) == f"transform(`a`, `__e0` -> {DAYS.format(x='`__e0`')})"
    nested = T("MAP", items=(T("STRING"), T("STRUCT", fields=(("AT", T("TIMESTAMP")), ("N", T("INT"))))))
    assert from_wire("`m`", nested) == (
        "transform_values(`m`, (`__k0`, `__e0`) -> CASE WHEN `__e0` IS NULL THEN NULL ELSE named_struct("
        f"'AT', {MILLIS.format(x='`__e0`.`AT`')}, 'N', `__e0`.`N`) END)")
    # a JSON source: temporal fields parsed as text first (Spark would read a number as seconds)
    [column] = _json_columns("value", (ast.ColumnDef("DAY", T("DATE")),))
    assert column == DAYS.format(x="`__jv_value_0`") + " AS `DAY`"     # the bound read: the VARIANT's text
    assert deserialization._bound_read("value", 0, ast.ColumnDef("DAY", T("DATE")), "$.DAY") == (
        "try_variant_get(`__jf_value_0`, '$', 'string')")


def test_dates_and_timestamps_are_written_as_ksqldbs_numbers() -> None:
    assert to_wire("`d`", T("DATE")) == "unix_date(`d`)"
    assert to_wire("`t`", T("TIMESTAMP")) == "unix_millis(`t`)"
    assert to_wire("`s`", T("STRING")) == "`s`"
    assert to_wire("`a`", T("ARRAY", items=(T("ARRAY", items=(T("DATE"),)),))) == (
        "transform(`a`, `__e0` -> transform(`__e0`, `__e1` -> unix_date(`__e1`)))")


def test_a_querys_json_and_delimited_output_carries_days_and_millis(monkeypatch: Any) -> None:
    """The value expression the engine hands Spark for a table's output."""
    from tests.unit.sql.test_sql_engine_statements import FakeSpark

    class Typed:
        def __init__(self, name: str, simple: str) -> None:
            self.name, self.dataType = name, self
            self.simple = simple

        def simpleString(self) -> str:
            return self.simple
    result = type("R", (), {"schema": type("S", (), {"fields": [
        Typed("ID", "string"), Typed("DAY", "date"), Typed("AT", "timestamp"), Typed("DAYS", "array<date>"),
        Typed("N", "bigint")]})()})()
    engine = Engine(KsqlConfig(), FakeSpark())
    plan = type("P", (), {"items": [(n, None) for n in ("ID", "DAY", "AT", "DAYS", "N")], "key_names": ["ID"],
                          "sink": DataSource("O", "STREAM", "o", (), "KAFKA", "JSON", None)})()
    [json_value_sql] = engine._value_sql(plan, result)  # type: ignore[arg-type]
    assert json_value_sql == ("to_json(named_struct('DAY', unix_date(`DAY`), 'AT', unix_millis(`AT`), 'DAYS', "
                              "transform(`DAYS`, `__e0` -> unix_date(`__e0`)), 'N', `N`), "
                              "map('ignoreNullFields', 'false')) AS value")
    plan.sink = DataSource("O", "STREAM", "o", (), "KAFKA", "DELIMITED", None)  # type: ignore[attr-defined]
    [delimited] = engine._value_sql(plan, result)  # type: ignore[arg-type]
    assert delimited.startswith("concat_ws(',', CAST(unix_date(`DAY`) AS STRING), CAST(unix_millis(`AT`) AS STRING)")


def _store() -> StateStore:
    return StateStore(["ID"], False, ["ID", "DAY", "AT", "AMOUNT", "TAGS"],
                      ["STRING", "DATE", "TIMESTAMP", "DECIMAL(6,2)", "ARRAY<STRING>"])


MS = 1_764_410_400_123                                       # 2025-11-29T10:00:00.123Z


def test_json_and_delimited_outputs_restore_dates_and_timestamps() -> None:
    store = _store()
    sink = DataSource("T", "TABLE", "t", (), "KAFKA", "JSON", None)
    row = decode_output(b"k", json.dumps({"DAY": 20421, "AT": MS, "AMOUNT": 1.5, "TAGS": ["a"]}).encode(),
                        sink, store, None)
    assert row == {"ID": "k", "DAY": datetime.date(2025, 11, 29), "AT": datetime.datetime.fromtimestamp(MS / 1000),
                   "AMOUNT": 1.5, "TAGS": ["a"]}
    assert json_value(row["AT"]) == datetime.datetime.fromtimestamp(MS / 1000).isoformat(timespec="milliseconds")
    old = decode_output(b"k", b'{"DAY": "2025-11-29", "AT": null}', sink, store, None)   # written as text before
    assert old is not None and old["DAY"] == datetime.date(2025, 11, 29) and old["AT"] is None
    # a topic written by hand (a windowed table read for a pull query): fields in any case, as
    # ksqlDB matches them; a value that is not a JSON object is a record this cannot read
    by_hand = decode_output(b"k", b'{"day": 20421, "Amount": 2.5}', sink, store, None)
    assert by_hand is not None and by_hand["DAY"] == datetime.date(2025, 11, 29) and by_hand["AMOUNT"] == 2.5
    assert decode_output(b"k", b'[1, 2]', sink, store, None) is None
    delimited = DataSource("T", "TABLE", "t", (), "KAFKA", "DELIMITED", None)
    row = decode_output(b"k", f"-1,{MS},2.50,".encode(), delimited, store, None)
    assert row is not None and row["DAY"] == datetime.date(1969, 12, 31)
    assert row["AT"] == datetime.datetime.fromtimestamp(MS / 1000)


def test_an_avro_output_is_restored_through_the_registry(monkeypatch: Any) -> None:
    schema = avro_of_spark("T", [("DAY", "date"), ("AT", "timestamp"), ("AMOUNT", "decimal(6,2)"),
                               ("TAGS", "array<string>")])
    lookups: list[int] = []

    def by_id(self: Any, schema_id: int) -> Any:
        lookups.append(schema_id)
        if schema_id != 7:
            raise registry_client.RegistryClientError("Schema not found", 40403, 404)
        return registry_client.RegisteredSchema(7, "AVRO", schema)
    monkeypatch.setattr(registry_client.RegistryClient, "by_id", by_id)
    engine = Engine(KsqlConfig(schema_registry_url="http://127.0.0.1:1"), lambda: None)
    avro = engine._avro_decoder()
    sink = DataSource("T", "TABLE", "t", (), "KAFKA", "AVRO", None)
    at = datetime.datetime.fromtimestamp(MS / 1000, datetime.timezone.utc)
    value = encode(7, parse_avro(schema), {"DAY": datetime.date(2025, 11, 29), "AT": at,
                                           "AMOUNT": decimal.Decimal("12.50"), "TAGS": ["x", None]})
    row = decode_output(b"k", value, sink, _store(), None, avro)
    assert row == {"ID": "k", "DAY": datetime.date(2025, 11, 29), "AT": datetime.datetime.fromtimestamp(MS / 1000),
                   "AMOUNT": decimal.Decimal("12.50"), "TAGS": ["x", None]}
    assert decode_output(b"k", value, sink, _store(), None, avro) == row and lookups == [7]   # fetched once
    assert decode_output(b"k", b"\x00\x00\x00\x00\x09xx", sink, _store(), None, avro) is None  # unknown id
    assert decode_output(b"k", b"not avro", sink, _store(), None, avro) is None
    assert decode_output(b"k", None, sink, _store(), None, avro) == {"ID": "k", "__deleted": True}
    assert decode_output(b"k", value, sink, _store(), None) is None           # no decoder: not read


def test_a_json_key_with_a_date_is_restored_as_a_date() -> None:
    store = StateStore(["DAY", "ID"], False, ["DAY", "ID", "N"], ["DATE", "STRING", "BIGINT"])
    sink = DataSource("T", "TABLE", "t", (), "JSON", "JSON", None)
    assert decode_output(b'{"DAY": 20421, "ID": "a"}', b'{"N": 3}', sink, store, None) == {
        "DAY": datetime.date(2025, 11, 29), "ID": "a", "N": 3}


def avro_of_spark(name: str, columns: list[tuple[str, str]]) -> str:
    """The value schema a query registers for output columns known by their Spark types."""
    return serde.value_avro_schema([spark_column(c, t) for c, t in columns])
