"""Registry schemas named in WITH clauses (kafkalite/sql/schema_ids.py) in an engine without
Spark or brokers whose registry is the registry's own REST site in memory (``memory_registry``):
KEY_SCHEMA_ID / VALUE_SCHEMA_ID as ksqlDB's DefaultSchemaInjector and SchemaRegisterInjector
handle them, with ksqlDB's messages, and nothing logged for a statement refused."""
from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalite.registry.client import RegistryClient
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from tests.support.registry import MemoryRegistry
from tests.unit.sql.test_sql_avro_keys import UdfSpark
from tests.unit.sql.test_sql_engine_statements import FakeCommands

ORDER_V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "itemName", "type": "string"},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}}]})
ORDER_V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "itemName", "type": "string"},
    {"name": "address", "type": {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}},
    {"name": "note", "type": ["null", "string"], "default": None}]})


@pytest.fixture
def engine(monkeypatch: Any, memory_registry: MemoryRegistry) -> Engine:
    e = Engine(KsqlConfig(listeners=("http://127.0.0.1:18088",), schema_registry_url=MemoryRegistry.URL), UdfSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_ensure_sink_topic", lambda self, *a: None)
    return e


def _fields(engine: Engine, name: str) -> list[tuple[str, str, Any]]:
    described = engine.execute(f"DESCRIBE {name};")[0]["sourceDescription"]
    return [(f["name"], f["schema"]["type"], f.get("type")) for f in described["fields"]]


def _logged(engine: Engine) -> int:
    return len(engine.commands.log)                       # type: ignore[attr-defined]


def test_value_schema_id_takes_the_columns_of_that_schema_not_the_latest(engine: Engine) -> None:
    """The columns come from the schema with the id (an older one here), named as its fields are
    spelled (ksqlDB's ORIGINAL_FIELD_NAME policy, nested fields too); the schema is registered
    under ``<topic>-value`` before the statement is logged, and the source keeps the id."""
    registry = RegistryClient(MemoryRegistry.URL)
    v1 = registry.register("other-value", ORDER_V1)
    v2 = registry.register("orders-value", ORDER_V2)
    assert v1 != v2
    engine.execute(f"CREATE STREAM orders (k STRING KEY) WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='AVRO', "
                   f"VALUE_SCHEMA_ID={v1}, TIMESTAMP='`id`');")      # a column spelled in lower case: back-quoted
    assert _fields(engine, "orders") == [("K", "STRING", "KEY"), ("id", "BIGINT", None), ("itemName", "STRING", None),
                                         ("address", "STRUCT", None)]
    source = engine.metastore.sources["ORDERS"]
    assert dict(source.columns[3].type.fields)["city"].name == "STRING"
    assert (source.value_schema_id, source.key_schema_id, source.timestamp) == (v1, None, "id")
    assert [v["id"] for v in (registry.version_document("orders-value", n) for n in registry.versions("orders-value"))] \
        == [v2, v1]
    assert engine.commands.log[-1].statement.startswith("CREATE STREAM orders")   # type: ignore[attr-defined]
    # queries read with that schema: the subject's version holding it, not the latest
    assert engine._version_of_id(source, False) == "2"
    registry.register("orders-value", ORDER_V2.replace('"note"', '"remark"'))
    assert engine._version_of_id(source, False) == "2"

    # a table: the key from KEY_SCHEMA_ID (unwrapped: ROWKEY), the value from VALUE_SCHEMA_ID
    k = registry.register("keys", '"long"')
    engine.execute(f"CREATE TABLE t WITH (KAFKA_TOPIC='t', FORMAT='AVRO', KEY_SCHEMA_ID={k}, VALUE_SCHEMA_ID={v2});")
    assert _fields(engine, "t")[:2] == [("ROWKEY", "BIGINT", "KEY"), ("id", "BIGINT", None)]
    assert _fields(engine, "t")[-1] == ("note", "STRING", None)
    assert registry.latest("t-key").schema_id == k and registry.latest("t-value").schema_id == v2
    assert engine._version_of_id(engine.metastore.sources["T"], True) == "1"


@pytest.mark.parametrize("statement, message", [
    ("CREATE STREAM s (k STRING KEY) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', VALUE_SCHEMA_ID=1);",
     "VALUE_FORMAT should support schema inference when VALUE_SCHEMA_ID is provided. Current format is JSON."),
    ("CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID=1, KEY_SCHEMA_ID=1);",
     "KEY_FORMAT should support schema inference when KEY_SCHEMA_ID is provided. Current format is KAFKA."),
    ("CREATE STREAM s (v INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID=1);",
     "Table elements and VALUE_SCHEMA_ID cannot both exist for create statement."),
    ("CREATE STREAM s (k INT KEY) WITH (KAFKA_TOPIC='s', FORMAT='AVRO', KEY_SCHEMA_ID=1, VALUE_SCHEMA_ID=1);",
     "Table elements and KEY_SCHEMA_ID cannot both exist for create statement."),
    ("CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID='one');",
     "Invalid value one for configuration VALUE_SCHEMA_ID: Not a number of type INT"),
    ("CREATE TABLE s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID=1);",
     "Tables require a PRIMARY KEY. Please define the PRIMARY KEY.\nUse a partial schema to define the primary key "
     "and still load the value columns from the Schema Registry, for example:\n\tCREATE TABLE S (ID INT PRIMARY KEY) "
     "WITH (...);"),
])
def test_schema_id_refusals_in_ksqldbs_words(engine: Engine, statement: str, message: str) -> None:
    RegistryClient(MemoryRegistry.URL).register("x-value", ORDER_V1)          # id 1
    with pytest.raises(KsqlError) as caught:
        engine.execute(statement)
    assert caught.value.message == message and caught.value.statement == statement
    assert _logged(engine) == 0 and not engine.metastore.sources


def test_an_unknown_id_another_type_or_an_anonymous_value_is_refused_and_nothing_registered(
        engine: Engine, memory_registry: MemoryRegistry) -> None:
    registry = RegistryClient(MemoryRegistry.URL)
    with pytest.raises(KsqlError) as caught:
        engine.execute("CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID=42);")
    assert caught.value.message.startswith("Schema for message values on topic 's' does not exist in the Schema "
                                           "Registry.\nSubject: s-value\nSchema Id: 42\nPossible causes include:\n")
    json_id = registry.register("j-value", json.dumps({"type": "object"}), "JSON")
    with pytest.raises(KsqlError, match=r"^Value schema is not in the expected format. You may want to set "
                                        r"VALUE_FORMAT to 'JSON'.\ntopic: s, schema id: \d+\nexpected format: AVRO\n"
                                        r"actual format from Schema Registry: JSON$"):
        engine.execute(f"CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID={json_id});")
    plain = registry.register("p-value", '"string"')
    with pytest.raises(KsqlError, match=r"^Unable to verify if the value schema for topic: s, schema id: \d+ is "
                                        r"compatible with ksqlDB.\nReason: Schema returned from schema registry is "
                                        r"anonymous type. To use this schema with ksqlDB, set "
                                        r"'WRAP_SINGLE_VALUE=false' in the WITH clause properties."):
        engine.execute(f"CREATE STREAM s WITH (KAFKA_TOPIC='s', VALUE_FORMAT='AVRO', VALUE_SCHEMA_ID={plain});")
    assert _logged(engine) == 0 and "s-value" not in registry.subjects()


def test_a_subject_refusing_the_ids_schema_refuses_the_statement(engine: Engine,
                                                                 memory_registry: MemoryRegistry) -> None:
    """SchemaRegisterInjector registers the id's schema under the topic's subject: a subject whose
    BACKWARD compatibility refuses it fails the statement (ksqlDB's doubled prefix), unlogged."""
    registry = RegistryClient(MemoryRegistry.URL)
    held = registry.register("orders-value", json.dumps({"type": "record", "name": "O", "fields": [
        {"name": "other", "type": "int"}]}))
    wanted = registry.register("elsewhere", ORDER_V1)
    assert memory_registry.call("PUT", "/config/orders-value", {"compatibility": "BACKWARD"})[0] == 200
    with pytest.raises(KsqlError, match=r"^Could not register schema for topic: Could not register schema for topic: "
                                        r"Schema being registered is incompatible with an earlier schema for subject "
                                        r"\"orders-value\".*; error code: 409$"):
        engine.execute(f"CREATE STREAM orders WITH (KAFKA_TOPIC='orders', VALUE_FORMAT='AVRO', "
                       f"VALUE_SCHEMA_ID={wanted});")
    assert _logged(engine) == 0 and registry.versions("orders-value") == [1]
    assert registry.latest("orders-value").schema_id == held


def test_schema_full_names_name_the_records_ksqldb_registers(engine: Engine) -> None:
    """KEY_SCHEMA_FULL_NAME / VALUE_SCHEMA_FULL_NAME (or the older VALUE_AVRO_SCHEMA_FULL_NAME)
    name the records registered for declared columns, nested records after them; by default
    ksqlDB's ``KsqlDataSourceSchema`` and ``<Name>Key`` in ``io.confluent.ksql.avro_schemas``."""
    registry = RegistryClient(MemoryRegistry.URL)
    engine.execute("CREATE STREAM orders (a STRING KEY, b INT KEY, id BIGINT, address STRUCT<city STRING>) WITH ("
                   "KAFKA_TOPIC='orders', FORMAT='AVRO', KEY_SCHEMA_FULL_NAME='com.acme.OrderKey', "
                   "VALUE_SCHEMA_FULL_NAME='com.acme.Order');"
                   "CREATE STREAM legacy (id BIGINT) WITH (KAFKA_TOPIC='legacy', VALUE_FORMAT='AVRO', "
                   "VALUE_AVRO_SCHEMA_FULL_NAME='Plain');"
                   "CREATE STREAM dflt (k INT KEY, id BIGINT) WITH (KAFKA_TOPIC='dflt', FORMAT='AVRO');")
    value = json.loads(registry.latest("orders-value").schema)
    assert (value["name"], value["namespace"]) == ("Order", "com.acme")
    assert value["fields"][1]["type"][1]["name"] == "Order_ADDRESS"          # in com.acme too
    key = json.loads(registry.latest("orders-key").schema)
    assert (key["name"], key["namespace"], [f["name"] for f in key["fields"]]) == ("OrderKey", "com.acme", ["A", "B"])
    legacy = json.loads(registry.latest("legacy-value").schema)
    assert legacy["name"] == "Plain" and "namespace" not in legacy
    dflt = json.loads(registry.latest("dflt-value").schema)
    assert (dflt["name"], dflt["namespace"]) == ("KsqlDataSourceSchema", "io.confluent.ksql.avro_schemas")
    assert registry.latest("dflt-key").schema == '"int"'                     # one key column: unwrapped
    source = engine.metastore.sources["ORDERS"]
    assert (source.key_schema_full_name, source.value_schema_full_name) == ("com.acme.OrderKey", "com.acme.Order")


@pytest.mark.parametrize("with_clause, message", [
    ("VALUE_FORMAT='AVRO', VALUE_AVRO_SCHEMA_FULL_NAME='a.B', VALUE_SCHEMA_FULL_NAME='a.C'",
     "Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and 'VALUE_SCHEMA_FULL_NAME' properties. Please only set "
     "'VALUE_SCHEMA_FULL_NAME'."),
    ("VALUE_FORMAT='JSON', VALUE_SCHEMA_FULL_NAME='a.B'", "JSON does not support the following configs: [fullSchemaName]"),
    ("VALUE_FORMAT='AVRO', KEY_SCHEMA_FULL_NAME='a.B'", "KAFKA does not support the following configs: [fullSchemaName]"),
])
def test_full_name_refusals(engine: Engine, with_clause: str, message: str) -> None:
    for statement in (f"CREATE STREAM s (k INT KEY, v INT) WITH (KAFKA_TOPIC='s', {with_clause});",
                      f"CREATE STREAM src (k INT KEY, v INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON');"
                      f"CREATE STREAM out WITH ({with_clause}) AS SELECT * FROM src;"):
        with pytest.raises(KsqlError) as caught:
            engine.execute(statement)
        assert caught.value.message == message
    assert not RegistryClient(MemoryRegistry.URL).subjects()


def test_query_outputs_are_registered_before_the_statement_is_logged(engine: Engine) -> None:
    """ksqlDB's SchemaRegisterInjector for CREATE ... AS SELECT: the output's key and value schemas
    registered before the command is logged (with the full names given), and the query's own
    registration when it starts is the same schema (no second version); a column whose type
    only Spark knows (ROUND) is typed by compiling the query."""
    registry = RegistryClient(MemoryRegistry.URL)
    engine.execute("CREATE STREAM src (k STRING KEY, v INT, d DOUBLE) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON');")
    registered: list[tuple[int, list[str]]] = []
    original = type(engine.commands).append

    def append(commands: Any, *a: Any) -> int:       # what the registry held when the statement was logged
        registered.append((len(commands.log), sorted(registry.subjects())))
        return original(commands, *a)
    setattr(engine.commands, "append", append.__get__(engine.commands))
    engine.execute("CREATE STREAM out WITH (KAFKA_TOPIC='out', FORMAT='AVRO', VALUE_SCHEMA_FULL_NAME='com.acme.Out') "
                   "AS SELECT k, v, ROUND(d) AS r FROM src;")
    assert registered == [(1, ["out-key", "out-value"])]
    value = json.loads(registry.latest("out-value").schema)
    assert (value["name"], value["namespace"]) == ("Out", "com.acme")
    assert [(f["name"], f["type"][1]) for f in value["fields"]] == [("V", "int"), ("R", "string")]
    assert registry.latest("out-key").schema == '"string"'
    assert registry.versions("out-value") == [1] and registry.versions("out-key") == [1]
    assert engine.metastore.queries["CSAS_OUT_1"].state == "RUNNING"
    # IF NOT EXISTS over an existing stream creates nothing, so registers nothing
    engine.execute("CREATE STREAM IF NOT EXISTS out WITH (KAFKA_TOPIC='out', FORMAT='AVRO') AS SELECT k, d FROM src;")
    assert registry.versions("out-value") == [1]


def test_an_incompatible_output_schema_fails_the_statement_unlogged(engine: Engine,
                                                                    memory_registry: MemoryRegistry) -> None:
    """A subject with BACKWARD compatibility holding a schema the query's output cannot follow:
    ksqlDB's error, nothing logged, no query, no sink, the subject unchanged."""
    registry = RegistryClient(MemoryRegistry.URL)
    engine.execute("CREATE STREAM src (k STRING KEY, v INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON');")
    logged = _logged(engine)
    registry.register("out-value", json.dumps({"type": "record", "name": "Held", "fields": [
        {"name": "other", "type": "string"}]}))
    assert memory_registry.call("PUT", "/config/out-value", {"compatibility": "BACKWARD"})[0] == 200
    statement = "CREATE STREAM out WITH (KAFKA_TOPIC='out', VALUE_FORMAT='AVRO') AS SELECT k, v FROM src;"
    with pytest.raises(KsqlError) as caught:
        engine.execute(statement)
    assert caught.value.message.startswith("Could not register schema for topic: Could not register schema for "
                                           "topic: Schema being registered is incompatible with an earlier schema "
                                           "for subject \"out-value\"")
    assert caught.value.message.endswith("; error code: 409") and caught.value.statement == statement
    assert _logged(engine) == logged and engine.metastore.get("OUT") is None and not engine.metastore.queries
    assert registry.versions("out-value") == [1]


def test_an_avro_output_without_a_registry_is_refused(monkeypatch: Any) -> None:
    e = Engine(KsqlConfig(listeners=("http://127.0.0.1:18088",)), UdfSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    e.execute("CREATE STREAM src (k STRING KEY, v INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON');")
    with pytest.raises(KsqlError, match=r"^Cannot create topic 'out' with format AVRO without configuring "
                                        r"'ksql.schema.registry.url'$"):
        e.execute("CREATE STREAM out WITH (KAFKA_TOPIC='out', VALUE_FORMAT='AVRO') AS SELECT k, v FROM src;")
    assert _logged(e) == 1


def test_a_query_output_with_schema_ids_is_checked_against_them_and_written_with_them(engine: Engine) -> None:
    """CREATE ... AS SELECT with KEY_SCHEMA_ID / VALUE_SCHEMA_ID (DefaultSchemaInjector's
    ``checkColumnsCompatibility``): the query's columns must be the schema's, same names, types and
    order (a key: ``ROWKEY``), else ksqlDB's message; accepted, the schemas are registered as
    they are before the statement is logged, no generated schema, and the output is written
    with them (the subject's version holding each id, INSERT VALUES too)."""
    registry = RegistryClient(MemoryRegistry.URL)
    value_id = registry.register("elsewhere", json.dumps({"type": "record", "name": "Out", "namespace": "com.acme",
                                                           "fields": [{"name": "V", "type": ["null", "int"]},
                                                                      {"name": "NOTE", "type": ["null", "string"],
                                                                       "default": None}]}))
    key_id = registry.register("keys", '"string"')
    engine.execute("CREATE STREAM src (k STRING KEY, v INT, d DOUBLE) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON');")
    logged = _logged(engine)
    for select, message in [
        ("SELECT k AS rowkey, d AS v FROM src", "The following value columns are changed, missing or reordered: "
         "[`V` DOUBLE]. Schema from schema registry is [`V` INTEGER, `NOTE` STRING]"),
        ("SELECT k AS rowkey, v, d FROM src", "The following value columns are changed, missing or reordered: "
         "[`D` DOUBLE]. Schema from schema registry is [`V` INTEGER, `NOTE` STRING]"),
        ("SELECT k, v FROM src", "The following key columns are changed, missing or reordered: [`K` STRING KEY]. "
         "Schema from schema registry is [`ROWKEY` STRING KEY]"),
    ]:
        with pytest.raises(KsqlError) as caught:
            engine.execute(f"CREATE STREAM out WITH (KAFKA_TOPIC='out', FORMAT='AVRO', KEY_SCHEMA_ID={key_id}, "
                           f"VALUE_SCHEMA_ID={value_id}) AS {select};")
        assert caught.value.message == message
    with pytest.raises(KsqlError, match=r"^VALUE_FORMAT should support schema inference when VALUE_SCHEMA_ID is "
                                        r"provided. Current format is JSON.$"):
        engine.execute(f"CREATE STREAM out WITH (KAFKA_TOPIC='out', VALUE_SCHEMA_ID={value_id}) AS SELECT * FROM src;")
    assert _logged(engine) == logged and "out-value" not in registry.subjects()

    registry.register("out-value", json.dumps({"type": "record", "name": "Out", "namespace": "com.acme",
                                               "fields": [{"name": "V", "type": ["null", "int"]}]}))
    engine.execute(f"CREATE STREAM out WITH (KAFKA_TOPIC='out', FORMAT='AVRO', KEY_SCHEMA_ID={key_id}, "
                   f"VALUE_SCHEMA_ID={value_id}) AS SELECT k AS rowkey, v FROM src;")
    assert [registry.version_document("out-value", n)["id"] for n in registry.versions("out-value")][-1] == value_id
    assert registry.latest("out-key").schema_id == key_id
    sink = engine.metastore.sources["OUT"]
    assert (sink.key_schema_id, sink.value_schema_id) == (key_id, value_id)
    assert engine._version_of_id(sink, False) == "2"
    spark_options = engine.spark.options                  # type: ignore[attr-defined]
    assert spark_options.get("valueAvroVersion") == "2"
    registry.register("out-value", json.dumps({"type": "record", "name": "Out", "namespace": "com.acme", "fields": [
        {"name": "V", "type": ["null", "int"]}, {"name": "Y", "type": ["null", "int"], "default": None}]}))
    lookup = engine._avro_lookup_for(sink)
    assert lookup("out-value")[0] == value_id and lookup("out-key")[0] == key_id


def test_a_registry_that_fails_otherwise_is_ksqldbs_fetch_failure(monkeypatch: Any) -> None:
    """A registry answering 500 (or unreachable): ``Schema registry fetch for topic value request
    failed for topic: t, schema id: 7``, not the unknown-id message."""
    from kafkalite.registry.client import RegistryClientError
    from kafkalite.sql import schema_ids

    def failing(client: Any, method: str, path: str, body: Any = None) -> Any:
        raise RegistryClientError("Internal Server Error", 50001, 500)
    monkeypatch.setattr(RegistryClient, "_call", failing)
    with pytest.raises(KsqlError) as caught:
        schema_ids.fetch("http://registry:8081", "t", 7, False, "CREATE ...")
    assert caught.value.message == "Schema registry fetch for topic value request failed for topic: t, schema id: 7"
    with pytest.raises(KsqlError, match=r"^Cannot create topic 't' with format AVRO without configuring "):
        schema_ids.fetch(None, "t", 7, True, "CREATE ...")
