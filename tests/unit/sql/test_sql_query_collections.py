"""ksqlDB's collection constructors, subscripts and ``->`` inside queries (CSAS, push queries,
EXPLAIN), without Spark: the Spark SQL the engine hands Spark, the types ksqlDB gives the results
(DESCRIBE of the output), the elements' common type as ksqlDB's ``CoercionUtil`` finds it, and
ksqlDB's refusals in its words; the Avro schema of a query's collection output; the formats' map
key rules."""
from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

import fastavro
import pytest

from kafkalite.registry import client as registry_client
from kafkalite.registry.serde import parse_avro
from kafkalite.sql import ast, expression_types, serde
from kafkalite.sql.cli import type_string
from kafkalite.sql import engine as engine_mod
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse
from kafkalite.sql.translate import Columns, map_of_entries, spark_column, sql_type_of_spark, to_spark
from tests.unit.sql.test_sql_engine_statements import FakeProducer, _spark, engine  # noqa: F401  (the fixture)

T = ast.SqlType
ORDERS = ("CREATE STREAM c (id STRING KEY, v INT, name STRING, tags ARRAY<STRING>, prices MAP<STRING, DOUBLE>, "
          "item STRUCT<sku STRING, qty INT>, lines ARRAY<STRUCT<sku STRING, qty INT>>) "
          "WITH (KAFKA_TOPIC='c', VALUE_FORMAT='JSON');")


def _expr(text: str) -> ast.Expr:
    stmt = parse(f"SELECT {text} AS r FROM c EMIT CHANGES;")[0].statement
    assert isinstance(stmt, ast.Query) and stmt.query.items[0].expr is not None
    return stmt.query.items[0].expr


COLUMNS = {"V": T("INT"), "NAME": T("STRING"), "D": T("DOUBLE"), "B": T("BIGINT"), "TAGS": T("ARRAY", items=(T("STRING"),)),
           "ITEM": T("STRUCT", fields=(("SKU", T("STRING")), ("QTY", T("INT"))))}


def _spark_sql(text: str) -> str:
    return to_spark(_expr(text), Columns(COLUMNS, COLUMNS))


def _type(text: str) -> str:
    t = expression_types.type_of(_expr(text), lambda c: COLUMNS.get(c.name))
    return "?" if t is None else serde.ksql_type_name(t)


def test_a_persistent_query_translates_constructors_subscripts_and_dereference(engine: Engine) -> None:
    engine.execute(ORDERS)
    engine.execute("CREATE STREAM out AS SELECT id, tags[1] AS first, tags[-1] AS last, tags[v] AS nth, "
                   "prices['tea'] AS tea, item->qty AS qty, lines[1]->sku AS first_sku, ARRAY[v, 2.5] AS nums, "
                   "MAP('n' := name, 'k' := id) AS m, STRUCT(sku := item->sku, n := v) AS st, ARRAY[1, '2'] AS parsed, "
                   "ARRAY[v, 3000000000][2] AS big FROM c WHERE tags[2] = 'x';")
    sql = _spark(engine).sql_texts[-1]
    for part in ["try_element_at(`TAGS`, nullif(1, 0)) AS `FIRST`",       # 1-based; 0 is null, as ksqlDB's
                 "try_element_at(`TAGS`, nullif(-1, 0)) AS `LAST`",       # negative counts from the end
                 "try_element_at(`TAGS`, nullif(`V`, 0)) AS `NTH`",
                 "try_element_at(`PRICES`, 'tea') AS `TEA`",               # a missing key is null
                 "`ITEM`.`QTY` AS `QTY`",
                 "try_element_at(`LINES`, nullif(1, 0)).`SKU` AS `FIRST_SKU`",
                 "array(CAST(`V` AS decimal(11,1)), CAST(2.5 AS decimal(11,1))) AS `NUMS`",
                 "map('n', `NAME`, 'k', `ID`) AS `M`",
                 "named_struct('SKU', `ITEM`.`SKU`, 'N', `V`) AS `ST`",
                 "array(1, CAST('2' AS int)) AS `PARSED`",               # a string literal among numbers is parsed
                 "try_element_at(array(CAST(`V` AS bigint), 3000000000), nullif(2, 0)) AS `BIG`",
                 "WHERE (try_element_at(`TAGS`, nullif(2, 0)) = 'x')"]:
        assert part in sql
    fields = {f["name"]: f["schema"] for f in engine.execute("DESCRIBE out;")[0]["sourceDescription"]["fields"]}
    assert {n: fields[n]["type"] for n in ("FIRST", "TEA", "QTY", "FIRST_SKU", "BIG")} == {
        "FIRST": "STRING", "TEA": "DOUBLE", "QTY": "INTEGER", "FIRST_SKU": "STRING", "BIG": "BIGINT"}
    assert fields["NUMS"] == {"type": "ARRAY", "fields": None, "memberSchema": {
        "type": "DECIMAL", "fields": None, "memberSchema": None, "parameters": {"precision": 11, "scale": 1}}}
    assert fields["M"]["type"] == "MAP" and fields["M"]["memberSchema"]["type"] == "STRING"
    assert [(f["name"], f["schema"]["type"]) for f in fields["ST"]["fields"]] == [("SKU", "STRING"), ("N", "INTEGER")]
    # the output's declared types reach a query that reads it
    engine.execute("CREATE STREAM again AS SELECT id, nums[1] AS n1, st->n AS n FROM out;")
    again = {f["name"]: type_string(f["schema"])
             for f in engine.execute("DESCRIBE again;")[0]["sourceDescription"]["fields"]}
    assert again == {"ID": "VARCHAR(STRING)", "N1": "DECIMAL(11, 1)", "N": "INTEGER"}


def test_push_queries_and_explain_use_the_same_translation(engine: Engine) -> None:
    engine.execute(ORDERS)
    plan = engine.execute("EXPLAIN SELECT id, prices['tea'] * 2 AS twice, ARRAY[item->qty, v] AS q FROM c "
                          "WHERE item->qty > 1 EMIT CHANGES;")[0]["queryDescription"]
    assert "(try_element_at(`PRICES`, 'tea') * 2) AS `TWICE`" in plan["executionPlan"]
    assert "array(`ITEM`.`QTY`, `V`) AS `Q`" in plan["executionPlan"]
    assert "WHERE (`ITEM`.`QTY` > 1)" in plan["executionPlan"]


@pytest.mark.parametrize("expr, message", [
    ("ARRAY[v, name]", "operator does not exist: INTEGER = STRING (NAME)\nHint: You might need to add explicit type casts."),
    ("ARRAY[1, 'x']", 'invalid input syntax for type INTEGER: "x".'),
    ("ARRAY[TRUE, 'maybe']", 'invalid input syntax for type BOOLEAN: "maybe".'),
    ("ARRAY['1.5', 2]", "operator does not exist: STRING = INTEGER (2)\nHint: You might need to add explicit type casts."),
    ("MAP('a' := 1, 'b' := 'x')", 'invalid input syntax for type INTEGER: "x".'),
    ("ARRAY[ARRAY[1], MAP('k' := 1)]", "operator does not exist: ARRAY<INTEGER> = MAP<STRING, INTEGER> (MAP('k':=1))\n"
                                       "Hint: You might need to add explicit type casts."),
    ("ARRAY[NULL]", "Cannot construct an array with all NULL elements (see https://github.com/confluentinc/ksql/issues/"
                    "4239). As a workaround, you may cast a NULL value to the desired type."),
    ("MAP('k' := NULL)", "Cannot construct a map with all NULL values (see https://github.com/confluentinc/ksql/issues/"
                         "4239). As a workaround, you may cast a NULL value to the desired type."),
    ("v[1]", "Subscript expression (V[1]) do not apply to INTEGER."),
    ("item[1]", "Subscript expression (ITEM[1]) do not apply to STRUCT<`SKU` STRING, `QTY` INTEGER>. Use the "
                "dereference operator for STRUCTS: ITEM->1"),
    ("item->price", "Could not find field 'PRICE' in 'ITEM'."),
    ("v->x", "Expected STRUCT type, got: INTEGER"),
])
def test_ksqldbs_refusals_as_statement_errors(engine: Engine, expr: str, message: str) -> None:
    engine.execute(ORDERS)
    before = len(engine.commands.read_all())
    with pytest.raises(KsqlError) as err:
        engine.execute(f"CREATE STREAM bad AS SELECT id, {expr} AS x FROM c;")
    assert str(err.value) == message
    assert len(engine.commands.read_all()) == before          # refused before it was logged
    with pytest.raises(KsqlError):
        engine.execute(f"EXPLAIN SELECT id, {expr} AS x FROM c EMIT CHANGES;")


@pytest.mark.parametrize("expr, ksql_type", [
    ("ARRAY[1, 2]", "ARRAY<INTEGER>"),
    ("ARRAY[1, 3000000000]", "ARRAY<BIGINT>"),
    ("ARRAY[v, b, 1.25]", "ARRAY<DECIMAL(21, 2)>"),                 # ksqlDB's DecimalUtil.widen
    ("ARRAY[v, d, '7']", "ARRAY<DOUBLE>"),
    ("ARRAY[NULL, v]", "ARRAY<INTEGER>"),
    ("MAP('a' := v, 'b' := b)", "MAP<STRING, BIGINT>"),
    ("ARRAY[STRUCT(a := 1), STRUCT(b := 'x')]", "ARRAY<STRUCT<`A` INTEGER, `B` STRING>>"),
    ("ARRAY[ARRAY[1], ARRAY[2.5]]", "ARRAY<ARRAY<DECIMAL(11, 1)>>"),
    ("STRUCT(s := item, t := tags[1])", "STRUCT<`S` STRUCT<`SKU` STRING, `QTY` INTEGER>, `T` STRING>"),
    ("ARRAY[LEN(name), v]", "ARRAY<INTEGER>"),
    ("ARRAY[v * 2, v]", "ARRAY<INTEGER>"),
    ("ARRAY[ROUND(d), v]", "?"),                                   # a function's type is Spark's to decide
    ("SPLIT(name, ',')[1]", "STRING"),
])
def test_element_types_follow_ksqldbs_common_type(expr: str, ksql_type: str) -> None:
    assert _type(expr) == ksql_type


def test_element_conversions_are_casts_of_the_common_type() -> None:
    assert _spark_sql("ARRAY[1, 3000000000]") == "array(CAST(1 AS bigint), 3000000000)"
    assert _spark_sql("ARRAY[v, d, '7']") == "array(CAST(`V` AS double), `D`, CAST('7' AS double))"
    assert _spark_sql("ARRAY[TRUE, 'no', NULL]") == "array(TRUE, CAST('no' AS boolean), NULL)"
    assert _spark_sql("MAP('a' := v, 'b' := b)") == "map('a', CAST(`V` AS bigint), 'b', `B`)"
    assert _spark_sql("ARRAY[ARRAY[1], ARRAY[2.5]]") == ("array(CAST(array(1) AS array<decimal(11,1)>), "
                                                         "CAST(array(2.5) AS array<decimal(11,1)>))")
    assert _spark_sql("STRUCT(`lower` := 1)->`lower`") == "named_struct('lower', 1).`lower`"
    # an operand whose type only Spark knows: an array unless the index is a string
    assert _spark_sql("SPLIT(name, ',')[2]") == "try_element_at(split(`NAME`, ','), nullif(2, 0))"
    assert _spark_sql("COALESCE(NULL, tags)[1]") == "try_element_at(coalesce(NULL, `TAGS`), nullif(1, 0))"


@pytest.mark.parametrize("value_format, message", [
    ("JSON", "JSON only supports MAP types with STRING keys"),
    ("AVRO", "Avro only supports MAPs with STRING keys"),
])
def test_map_keys_must_be_strings_in_json_and_avro(engine: Engine, value_format: str, message: str) -> None:
    engine.execute(ORDERS)
    with pytest.raises(KsqlError) as err:
        engine.execute(f"CREATE STREAM bad WITH (VALUE_FORMAT='{value_format}') AS SELECT id, MAP(v := name) AS m "
                       "FROM c;")
    assert str(err.value) == message
    with pytest.raises(KsqlError) as err:
        engine.execute(f"CREATE STREAM declared (id STRING KEY, m MAP<INT, DOUBLE>, n ARRAY<MAP<BIGINT, INT>>) "
                       f"WITH (KAFKA_TOPIC='d', VALUE_FORMAT='{value_format}');")
    assert str(err.value) == message
    # a push query is not serialized: its maps may have any key
    plan = engine.execute("EXPLAIN SELECT id, MAP(v := name) AS m FROM c EMIT CHANGES;")[0]["queryDescription"]
    assert "map(`V`, `NAME`) AS `M`" in plan["executionPlan"]


def test_delimited_output_refuses_a_collection(engine: Engine) -> None:
    engine.execute(ORDERS)
    with pytest.raises(KsqlError) as err:
        engine.execute("CREATE STREAM bad WITH (VALUE_FORMAT='DELIMITED') AS SELECT id, ARRAY[v] AS a FROM c;")
    assert str(err.value) == "The 'DELIMITED' format does not support type 'ARRAY', column: `A`"


def test_a_querys_collection_output_registers_ksqldbs_avro_schema() -> None:
    inner = T("STRUCT", fields=(("X", T("DECIMAL", (4, 2))),))
    assert sql_type_of_spark("struct<A:int,B:array<double>,C:map<string,struct<X:decimal(4,2)>>>") == T(
        "STRUCT", fields=(("A", T("INT")), ("B", T("ARRAY", items=(T("DOUBLE"),))),
                          ("C", T("MAP", items=(T("STRING"), inner)))))
    assert sql_type_of_spark("void") is None
    doc = json.loads(avro_of_spark("OUT", [("ST", "struct<SKU:string,N:int>"), ("NUMS", "array<decimal(11,1)>"),
                                         ("M", "map<string,date>")]))
    fields = {f["name"]: f["type"][1] for f in doc["fields"]}
    assert fields["ST"]["name"] == "KsqlDataSourceSchema_ST"
    assert fields["ST"]["fields"][1] == {"name": "N", "type": ["null", "int"], "default": None}
    assert fields["NUMS"] == {"type": "array", "items": ["null", {"type": "bytes", "logicalType": "decimal",
                                                                   "precision": 11, "scale": 1}]}
    assert fields["M"] == {"type": "map", "values": ["null", {"type": "int", "logicalType": "date"}]}
    with pytest.raises(ValueError, match="^Avro only supports MAPs with STRING keys$"):
        avro_of_spark("OUT", [("M", "map<int,string>")])
    with pytest.raises(KsqlError, match="Column X of type void cannot be written as AVRO"):
        avro_of_spark("OUT", [("X", "void")])


def test_unknown_column_types_leave_the_common_type_to_spark(engine: Any) -> None:
    """A computed column of an upstream query has no declared type: its elements are not checked."""
    assert expression_types.type_of(_expr("ARRAY[x, 1]"), lambda c: None) is None
    assert to_spark(_expr("ARRAY[x, 1]"), {"X"}) == "array(`X`, 1)"


def test_connects_non_string_keyed_avro_maps_are_read_as_ksqldb_reads_them(engine: Engine, monkeypatch: Any) -> None:
    """Confluent's AvroData writes a Connect map with INT keys as an array of ``MapEntry``
    records; ksqlDB reads it as MAP<STRING, V> (its ConnectKsqlSchemaTranslator), the query as
    a map of the keys' text, and INSERT VALUES writes the keys back as the entry's type."""
    def entries(key: str) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "record", "name": "MapEntry", "namespace": "io.confluent.connect.avro",
                                           "fields": [{"name": "key", "type": key}, {"name": "value", "type": "double"}]}}
    schemas = {"m-value": {"type": "record", "name": "M", "fields": [{"name": "prices", "type": entries("int")}]},
               "f-value": {"type": "record", "name": "F", "fields": [{"name": "odd", "type": entries("double")}]}}
    monkeypatch.setattr(registry_client.RegistryClient, "latest", lambda self, subject: registry_client.RegisteredSchema(
        1, "AVRO", json.dumps(schemas[subject])))
    engine.config = replace(engine.config, schema_registry_url="http://127.0.0.1:1")
    engine.execute("CREATE STREAM m WITH (KAFKA_TOPIC='m', VALUE_FORMAT='AVRO');")
    [field] = engine.execute("DESCRIBE m;")[0]["sourceDescription"]["fields"]
    assert (field["name"], field["schema"]["type"], field["schema"]["memberSchema"]["type"]) == (
        "PRICES", "MAP", "DOUBLE")
    with pytest.raises(KsqlError, match="Field odd of f-value has an Avro type this server cannot map"):
        engine.execute("CREATE STREAM f WITH (KAFKA_TOPIC='f', VALUE_FORMAT='AVRO');")   # a DOUBLE key
    assert map_of_entries("value.`prices`") == (
        "map_from_entries(transform(value.`prices`, `__entry` -> struct(CAST(`__entry`.`key` AS STRING) AS `key`, "
        "`__entry`.`value` AS `value`)))")
    monkeypatch.setattr(engine_mod, "Producer", FakeProducer)
    parsed = parse_avro(json.dumps(schemas["m-value"]))
    monkeypatch.setattr(Engine, "_avro_lookup", lambda self, subject: (1, parsed, ["prices"]))
    FakeProducer.sent = []
    engine.execute("INSERT INTO m (prices) VALUES (MAP('1' := 1.5, '100' := 2));")
    value = FakeProducer.sent[0][2]
    assert fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None) == {
        "prices": [{"key": 1, "value": 1.5}, {"key": 100, "value": 2.0}]}
    with pytest.raises(KsqlError, match="Invalid map key for PRICES: 'x' is not a int"):
        engine.execute("INSERT INTO m (prices) VALUES (MAP('x' := 1.5));")


def avro_of_spark(name: str, columns: list[tuple[str, str]]) -> str:
    """The value schema a query registers for output columns known by their Spark types."""
    return serde.value_avro_schema([spark_column(c, t) for c, t in columns])
