"""ksqlDB's collection constructors and element access in ``INSERT INTO ... VALUES``: ``ARRAY[...]``,
``MAP(k := v)``, ``STRUCT(f := v)``, ``arr[i]`` (1-based, negative from the end), ``m[k]``,
``s->f``; parsed, evaluated without Spark, coerced strictly into ARRAY/MAP/STRUCT columns with
ksqlDB's messages, and encoded as JSON and as Avro (read back with fastavro); the Avro schema a
CREATE STREAM with declared collection columns registers; ``/inserts-stream`` rows with JSON
arrays and objects written as Avro."""
from __future__ import annotations

import datetime
import decimal
import io
import json
from dataclasses import replace
from typing import Any

import fastavro
import pytest

from kafkalite.registry.serde import parse_avro
from kafkalite.sql import ast, serde, values
from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.inserts import InsertsSubscriber
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.parser import parse
from tests.unit.sql.test_sql_engine_statements import FakeProducer, engine  # noqa: F401  (the fixture)

T = ast.SqlType
ORDER = T("STRUCT", fields=(("SKU", T("STRING")), ("QTY", T("INT")),
                            ("AT", T("STRUCT", fields=(("DAY", T("DATE")), ("TIME", T("TIME")))))))
SOURCE = DataSource("ORDERS", "STREAM", "orders", (
    ast.ColumnDef("ID", T("STRING"), key=True), ast.ColumnDef("TAGS", T("ARRAY", items=(T("STRING"),))),
    ast.ColumnDef("SCORES", T("ARRAY", items=(T("BIGINT"),))),
    ast.ColumnDef("PRICES", T("MAP", items=(T("STRING"), T("DECIMAL", (6, 2))))),
    ast.ColumnDef("ORDER", ORDER), ast.ColumnDef("LINES", T("ARRAY", items=(ORDER,))),
    ast.ColumnDef("N", T("INT"))), "KAFKA", "JSON")
INSERT = ("INSERT INTO orders (id, tags, scores, prices, `ORDER`, lines, n) VALUES ('o-1', ARRAY['a', 'b'], "
          "ARRAY[1, 2, NULL], MAP('tea' := 1.5, 'cake' := 3), "
          "STRUCT(sku := 'T-1', qty := 2, at := STRUCT(day := '2025-11-29', time := '10:00:00.250')), "
          "ARRAY[STRUCT(sku := 'C-9', qty := ARRAY[5, 6][-1])], "
          "ARRAY[10, 20, 30][2] + MAP('k' := 1)['k'] + STRUCT(a := STRUCT(b := 7))->a->b);")


def _value(expr: str) -> Any:
    stmt = parse(f"INSERT INTO r (x) VALUES ({expr});")[0].statement
    assert isinstance(stmt, ast.InsertValues)
    return values.constant(stmt.values[0])


def _row(sql: str, source: DataSource = SOURCE) -> dict[str, Any]:
    stmt = parse(sql)[0]
    assert isinstance(stmt.statement, ast.InsertValues)
    return serde.row_of(stmt.statement, source, stmt.text)[0]


def test_constructors_and_element_access_parse_as_ksqldb_writes_them() -> None:
    stmt = parse("INSERT INTO s (a, m, st) VALUES (ARRAY[1, 2], MAP('k' := 1), STRUCT(a := 1, `b` := 'x'));")[0]
    assert isinstance(stmt.statement, ast.InsertValues)
    assert stmt.statement.values == (
        ast.ArrayConstructor((ast.Literal(1), ast.Literal(2))),
        ast.MapConstructor(((ast.Literal("k"), ast.Literal(1)),)),
        ast.StructConstructor((("A", ast.Literal(1)), ("b", ast.Literal("x")))))
    q = parse("SELECT arr[1], m['k'], s->a->b, v - 1 FROM x EMIT CHANGES;")[0].statement
    assert isinstance(q, ast.Query)
    assert [i.expr for i in q.query.items] == [
        ast.Subscript(ast.Column("ARR"), ast.Literal(1)), ast.Subscript(ast.Column("M"), ast.Literal("k")),
        ast.Dereference(ast.Dereference(ast.Column("S"), "A"), "B"), ast.Binary("-", ast.Column("V"), ast.Literal(1))]
    empty = parse("INSERT INTO s (a, m, st) VALUES (ARRAY[], MAP(), STRUCT());")[0].statement
    assert isinstance(empty, ast.InsertValues)
    assert empty.values == (ast.ArrayConstructor(()), ast.MapConstructor(()), ast.StructConstructor(()))


@pytest.mark.parametrize("sql, message", [
    ("INSERT INTO s VALUES (MAP('k' = 1));", "line 1:34: mismatched input ')' expecting ':='"),
    ("INSERT INTO s VALUES (ARRAY[1,]);", "line 1:31: mismatched input ']' expecting {'(', '-', 'ARRAY'"),
    ("INSERT INTO s VALUES (STRUCT(a := 1, A := 2));", "Duplicate field names found in STRUCT: 'A'"),
])
def test_bad_constructors_are_statement_errors(sql: str, message: str) -> None:
    with pytest.raises(KsqlError) as err:
        parse(sql)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("expr, expected", [
    ("ARRAY[1, 2, 3]", [1, 2, 3]),
    ("ARRAY[1, 2.5, '3']", [decimal.Decimal(1), decimal.Decimal("2.5"), decimal.Decimal(3)]),   # widened
    ("ARRAY[NULL, CAST(2 AS DOUBLE), 1]", [None, 2.0, 1.0]),
    ("ARRAY[true, 'no']", [True, False]),
    ("ARRAY[1, 2, 3][1]", 1), ("ARRAY[1, 2, 3][-1]", 3), ("ARRAY[1, 2, 3][4]", None), ("ARRAY[1, 2][0]", None),
    ("MAP('k' := 1, 'j' := 2)", {"k": 1, "j": 2}), ("MAP('k' := 1)['j']", None),
    ("MAP('k' := ARRAY['x', 'y'])['k'][2]", "y"),
    ("STRUCT(a := 1, b := 'x')", {"A": 1, "B": "x"}), ("STRUCT(a := 1, b := 'x')->b", "x"),
    ("STRUCT(s := STRUCT(n := 5))->s->n * 2", 10), ("CAST(NULL AS STRING) IS NULL", True),
    ("ARRAY[FROM_UNIXTIME(1000), '1970-01-01T00:00:02']",
     [datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc),
      datetime.datetime(1970, 1, 1, 0, 0, 2, tzinfo=datetime.timezone.utc)]),
    ("ARRAY[1, 2] = ARRAY[1, 2]", True), ("STRUCT(a := 1) != STRUCT(a := 2)", True),
    ("CAST(ARRAY[1, 2] AS STRING)", "[1, 2]"), ("ARRAY['a'] IS NULL", False),
])
def test_constructors_evaluate_like_ksqldb(expr: str, expected: Any) -> None:
    assert _value(expr) == expected


def test_a_struct_is_not_a_map() -> None:
    assert isinstance(_value("STRUCT(a := 1)"), values.Struct)
    assert not isinstance(_value("MAP('A' := 1)"), values.Struct)
    assert values.sql_type_text(_value("STRUCT(a := 1, b := ARRAY['x'])")) == "STRUCT<`A` INTEGER, `B` ARRAY<STRING>>"
    assert values.java_text(_value("MAP('k' := ARRAY[1, 2])")) == "{k=[1, 2]}"


@pytest.mark.parametrize("expr, message", [
    ("ARRAY[1, true]", "operator does not exist: INTEGER = BOOLEAN (true)\nHint: You might need to add explicit "
                       "type casts."),
    ("ARRAY[1, 'x']", 'invalid input syntax for type INTEGER: "x".'),
    ("ARRAY['a', 1]", "operator does not exist: STRING = INTEGER (1)"),
    ("MAP('a' := 1, 'b' := 'c')", 'invalid input syntax for type INTEGER: "c".'),
    ("MAP(NULL := 1)", "MAP key cannot be null"),
    ("ARRAY[FROM_UNIXTIME(0), 'soon']", 'invalid input syntax for type TIMESTAMP: "soon".'),
    ("STRUCT(a := 1)->c", "Could not find field 'C' in 'STRUCT(A:=1)'."),
    ("MAP('a' := 1)->a", "Expected STRUCT type, got: MAP"),
    ("STRUCT(a := 1)[1]", "Subscript expression is only supported on ARRAY or MAP, got STRUCT"),
    ("ARRAY[1]['x']", "array index must be INTEGER, got STRING"),
    ("STRUCT(a := 1) < STRUCT(a := 2)", "Cannot compare STRUCT to STRUCT with <"),
    ("MAP('a' := 1) = ARRAY[1]", "Cannot compare MAP to ARRAY with ="),
    ("ARRAY[1] IN (ARRAY[1])", "Cannot compare ARRAY to ARRAY"),
    ("MAP(STRUCT(a := 1) := 1)", "MAP keys must be of a primitive type, got STRUCT<`A` INTEGER>"),
    ("UCASE(ARRAY['a'])", "Function 'UCASE' does not accept parameters (ARRAY)"),
    ("ARRAY[1] + 1", "Unsupported arithmetic types. ARRAY +"),
])
def test_bad_elements_are_ksqldb_errors(expr: str, message: str) -> None:
    with pytest.raises(values.EvaluationError) as err:
        _value(expr)
    assert message in str(err.value)


def test_values_are_coerced_into_collection_columns_and_encoded_as_json() -> None:
    row = _row(INSERT)
    order = {"SKU": "T-1", "QTY": 2, "AT": {"DAY": "2025-11-29", "TIME": "10:00:00.250000"}}
    assert row == {"ID": "o-1", "TAGS": ["a", "b"], "SCORES": [1, 2, None],
                   "PRICES": {"tea": decimal.Decimal("1.50"), "cake": decimal.Decimal("3.00")},
                   "ORDER": order, "LINES": [{"SKU": "C-9", "QTY": 6, "AT": None}], "N": 28}
    record = serde.encode(SOURCE, row, 5, None, "")
    assert record.key == b"o-1"
    # ksqlDB's JSON: decimals as numbers, a TIME as milliseconds of the day, also inside a STRUCT
    assert json.loads(record.value or b"") == {
        "TAGS": ["a", "b"], "SCORES": [1, 2, None], "PRICES": {"tea": 1.5, "cake": 3.0},
        "ORDER": {"SKU": "T-1", "QTY": 2, "AT": {"DAY": 20421, "TIME": 36000250}},
        "LINES": [{"SKU": "C-9", "QTY": 6, "AT": None}], "N": 28}


@pytest.mark.parametrize("column, value, message", [
    ("tags", "ARRAY[1, 2]", "Expected type ARRAY<STRING> for field `TAGS` but got ARRAY<INTEGER>([1, 2])"),
    ("scores", "ARRAY[1.5]", "Expected type ARRAY<BIGINT> for field `SCORES` but got ARRAY<DECIMAL(2, 1)>([1.5])"),
    ("prices", "MAP('k' := 'v')", "Expected type MAP<STRING, DECIMAL(6, 2)> for field `PRICES` but got "
                                  "MAP<STRING, STRING>({k=v})"),
    ("prices", "MAP('k' := 12345.6)", "for field `PRICES` but got MAP<STRING, DECIMAL(6, 1)>({k=12345.6})"),
    ("`ORDER`", "STRUCT(sku := 'x', colour := 'red')",
     "Expected type STRUCT<`SKU` STRING, `QTY` INTEGER, `AT` STRUCT<`DAY` DATE, `TIME` TIME>> for field `ORDER` but "
     "got STRUCT<`SKU` STRING, `COLOUR` STRING>(Struct{SKU=x,COLOUR=red})"),
    ("`ORDER`", "MAP('SKU' := 'x')", "for field `ORDER` but got MAP<STRING, STRING>({SKU=x})"),
    ("tags", "'a'", "Expected type ARRAY<STRING> for field `TAGS` but got STRING(a)"),
    ("n", "ARRAY[1]", "Expected type INTEGER for field `N` but got ARRAY<INTEGER>([1])"),
])
def test_mismatched_collections_are_refused_in_ksqldb_words(column: str, value: str, message: str) -> None:
    with pytest.raises(KsqlError) as err:
        _row(f"INSERT INTO orders (id, {column}) VALUES ('o', {value});")
    assert str(err.value).startswith("Failed to insert values into 'ORDERS'. ")
    assert message in str(err.value)


def test_declared_collection_columns_register_ksqldbs_avro_schema() -> None:
    doc = json.loads(serde.value_avro_schema(SOURCE.columns))
    assert (doc["name"], doc["namespace"]) == ("KsqlDataSourceSchema", "io.confluent.ksql.avro_schemas")
    fields = {f["name"]: f["type"] for f in doc["fields"]}
    assert "ID" not in fields                                 # the key is not in the value schema
    assert fields["TAGS"] == ["null", {"type": "array", "items": ["null", "string"]}]
    assert fields["PRICES"] == ["null", {"type": "map", "values": [
        "null", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}]}]
    order = fields["ORDER"][1]
    assert (order["type"], order["name"]) == ("record", "KsqlDataSourceSchema_ORDER")
    assert order["fields"][2]["type"][1]["name"] == "KsqlDataSourceSchema_ORDER_AT"
    assert fields["LINES"][1]["items"][1]["name"] == "KsqlDataSourceSchema_LINES"
    fastavro.parse_schema(doc)                                # a schema Avro accepts
    with pytest.raises(ValueError, match="^Avro only supports MAPs with STRING keys$"):
        serde.value_avro_schema([ast.ColumnDef("M", T("MAP", items=(T("INT"), T("STRING"))))])


def _avro_source() -> tuple[DataSource, Any, serde.AvroLookup]:
    source = replace(SOURCE, value_format="AVRO")
    schema = serde.value_avro_schema(source.columns)
    parsed = parse_avro(schema)
    return source, parsed, lambda subject: (42, parsed, [f["name"] for f in json.loads(schema)["fields"]])


def _read_avro(value: bytes | None, parsed: Any) -> Any:
    assert value is not None and value[:5] == b"\x00\x00\x00\x00\x2a"      # magic byte, schema id 42
    return fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None)


def test_collections_are_written_as_avro_arrays_maps_and_records() -> None:
    source, parsed, lookup = _avro_source()
    row = _row(INSERT, source)
    datum = _read_avro(serde.encode(source, row, 5, lookup, "").value, parsed)
    assert datum == {
        "TAGS": ["a", "b"], "SCORES": [1, 2, None],
        "PRICES": {"tea": decimal.Decimal("1.50"), "cake": decimal.Decimal("3.00")},
        "ORDER": {"SKU": "T-1", "QTY": 2, "AT": {"DAY": datetime.date(2025, 11, 29),
                                                 "TIME": datetime.time(10, 0, 0, 250000)}},
        "LINES": [{"SKU": "C-9", "QTY": 6, "AT": None}], "N": 28}


def test_timestamps_decimals_and_bytes_inside_collections_are_written_as_avro_and_json() -> None:
    source = DataSource("S", "STREAM", "s", (
        ast.ColumnDef("AT", T("ARRAY", items=(T("TIMESTAMP"),))),
        ast.ColumnDef("B", T("STRUCT", fields=(("D", T("DECIMAL", (4, 1))), ("Y", T("BYTES")))))), "KAFKA", "AVRO")
    parsed = parse_avro(serde.value_avro_schema(source.columns))
    row = _row("INSERT INTO s (at, b) VALUES (ARRAY[FROM_UNIXTIME(1000), '2025-01-01T00:00:00'], "
               "STRUCT(d := 1.25, y := 'AQI='));", source)
    assert row == {"AT": [1000, 1735689600000], "B": {"D": decimal.Decimal("1.3"), "Y": b"\x01\x02"}}
    datum = _read_avro(serde.encode(source, row, 1, lambda subject: (42, parsed, ["AT", "B"]), "").value, parsed)
    assert datum == {"AT": [datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.timezone.utc),
                            datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)],
                     "B": {"D": decimal.Decimal("1.3"), "Y": b"\x01\x02"}}
    as_json = serde.encode(replace(source, value_format="JSON"), row, 1, None, "").value
    assert as_json == b'{"AT":[1000,1735689600000],"B":{"D":1.3,"Y":"AQI="}}'


def test_avro_struct_fields_take_the_registered_schemas_spelling() -> None:
    """A registered schema written by another producer spells a record's fields in lower case;
    ksqlDB matches them case-insensitively."""
    source = DataSource("S", "STREAM", "s", (ast.ColumnDef("P", T("STRUCT", fields=(("X", T("INT")),))),),
                        "KAFKA", "AVRO")
    schema = {"type": "record", "name": "V", "fields": [{"name": "p", "type": ["null", {
        "type": "record", "name": "Point", "fields": [{"name": "x", "type": ["null", "int"]}]}]}]}
    parsed = parse_avro(json.dumps(schema))
    row = _row("INSERT INTO s (p) VALUES (STRUCT(x := 3));", source)
    value = serde.encode(source, row, 1, lambda subject: (42, parsed, ["p"]), "").value
    assert _read_avro(value, parsed) == {"p": {"x": 3}}


def test_inserts_stream_rows_with_json_arrays_and_objects_are_written_as_avro() -> None:
    """Through the real InsertsSubscriber over a producer double."""
    source, parsed, lookup = _avro_source()
    sent: list[tuple[str, Any, Any]] = []

    class Producer:
        def send(self, topic: str, value: Any, key: Any, *, timestamp_ms: int, callback: Any) -> None:
            sent.append((topic, key, value))
    sub = InsertsSubscriber(source, Producer(), lookup)  # type: ignore[arg-type]
    sub.send({"id": "o-2", "tags": ["x"], "prices": {"tea": 2.25}, "order": {"sku": "T-2", "at": {"day": "2025-11-30"}},
              "lines": [{"SKU": "A", "QTY": 1}], "n": 1}, lambda outcome: None)
    (topic, key, value), = sent
    assert (topic, key) == ("orders", b"o-2")
    datum = _read_avro(value, parsed)
    assert datum["TAGS"] == ["x"] and datum["PRICES"] == {"tea": decimal.Decimal("2.25")}
    assert datum["ORDER"] == {"SKU": "T-2", "QTY": None, "AT": {"DAY": datetime.date(2025, 11, 30), "TIME": None}}
    assert datum["LINES"] == [{"SKU": "A", "QTY": 1, "AT": None}]
    with pytest.raises(KsqlError, match=r"Can't coerce a field of type class io.vertx.core.json.JsonArray into "
                                        r"type MAP<STRING, DECIMAL\(6, 2\)>"):
        serde.row_from_json({"id": "o-3", "prices": [1]}, source)


def test_create_stream_with_collection_columns_registers_the_schema_once(engine: Engine, monkeypatch: Any) -> None:
    from kafkalite.registry import client as registry_client

    registered: dict[str, str] = {}

    def latest(self: Any, subject: str) -> Any:
        if subject not in registered:
            raise registry_client.RegistryClientError(f"Subject '{subject}' not found.", 40401, 404)
        return registry_client.RegisteredSchema(1, "AVRO", registered[subject])

    def register(self: Any, subject: str, schema: str, *a: Any) -> int:
        registered[subject] = schema
        return 1
    monkeypatch.setattr(registry_client.RegistryClient, "latest", latest)
    monkeypatch.setattr(registry_client.RegistryClient, "register", register)
    create = ("CREATE STREAM orders (id STRING KEY, tags ARRAY<STRING>, prices MAP<STRING, DECIMAL(6, 2)>, "
              "`ORDER` STRUCT<sku STRING, qty INT>) WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='AVRO');")
    with pytest.raises(KsqlError, match="Cannot create topic 'orders' with format AVRO without configuring "
                                        "'ksql.schema.registry.url'"):
        engine.execute(create)
    engine.config = replace(engine.config, schema_registry_url="http://127.0.0.1:1")
    engine.execute(create)
    doc = json.loads(registered["orders-value"])
    assert [f["name"] for f in doc["fields"]] == ["TAGS", "PRICES", "ORDER"]
    assert doc["fields"][2]["type"][1]["fields"][1] == {"name": "QTY", "type": ["null", "int"], "default": None}
    # INSERT VALUES encodes with the registered schema
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    monkeypatch.setattr(Engine, "_avro_lookup", lambda self, subject: (
        1, parse_avro(registered[subject]), [f["name"] for f in json.loads(registered[subject])["fields"]]))
    FakeProducer.sent = []
    engine.execute("INSERT INTO orders (id, tags, prices, `ORDER`) VALUES "
                   "('o-1', ARRAY['a'], MAP('tea' := 1.5), STRUCT(sku := 'T', qty := 2));")
    _, key, value, _ = FakeProducer.sent[0]
    datum = fastavro.schemaless_reader(io.BytesIO(value[5:]), parse_avro(registered["orders-value"]), None)
    assert key == b"o-1"
    assert datum == {"TAGS": ["a"], "PRICES": {"tea": decimal.Decimal("1.50")}, "ORDER": {"SKU": "T", "QTY": 2}}
    with pytest.raises(KsqlError, match=r"Failed to insert values into 'ORDERS'. operator does not exist"):
        engine.execute("INSERT INTO orders (id, tags) VALUES ('o-2', ARRAY['a', 1]);")
    # a registered subject is left as it is (a second source over the same topic, a replay)
    registered["orders-value"] = before = registered["orders-value"].replace("TAGS", "TAGS")
    engine.execute(create.replace("STREAM orders", "STREAM orders2"))
    assert registered["orders-value"] is before
    # a replayed CREATE (the command topic at startup) does not need the registry, as in ksqlDB
    def unreachable(self: Any, *a: Any) -> Any:
        raise AssertionError("the registry was called during replay")
    monkeypatch.setattr(registry_client.RegistryClient, "latest", unreachable)
    monkeypatch.setattr(registry_client.RegistryClient, "register", unreachable)
    engine._apply(parse(create.replace("STREAM orders", "STREAM replayed"))[0], {}, 99)
    assert engine.metastore.get("REPLAYED") is not None
    monkeypatch.setattr(registry_client.RegistryClient, "latest", latest)
    # the registry's record types read back as STRUCT columns
    engine.execute("CREATE STREAM orders3 WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='AVRO');")
    fields = engine.execute("DESCRIBE orders3;")[0]["sourceDescription"]["fields"]
    assert [(f["name"], f["schema"]["type"]) for f in fields] == [("TAGS", "ARRAY"), ("PRICES", "MAP"),
                                                                  ("ORDER", "STRUCT")]


@pytest.mark.parametrize("columns, formats, message", [
    ("id STRING KEY, tags ARRAY<STRING>", "VALUE_FORMAT='DELIMITED'",
     "The 'DELIMITED' format does not support type 'ARRAY', column: `TAGS`"),
    ("id STRING KEY, m MAP<STRING, INT>", "VALUE_FORMAT='KAFKA'", "The 'KAFKA' format does not support type 'MAP'"),
    ("id STRUCT<a INT> KEY, v INT", "VALUE_FORMAT='JSON'", "The 'KAFKA' format does not support type 'STRUCT'"),
])
def test_formats_without_collections_refuse_collection_columns(engine: Engine, columns: str, formats: str,
                                                               message: str) -> None:
    with pytest.raises(KsqlError) as err:
        engine.execute(f"CREATE STREAM c ({columns}) WITH (KAFKA_TOPIC='c', {formats});")
    assert str(err.value) == message
    engine.execute(f"CREATE STREAM c ({columns}) WITH (KAFKA_TOPIC='c', VALUE_FORMAT='JSON', KEY_FORMAT='JSON');")
