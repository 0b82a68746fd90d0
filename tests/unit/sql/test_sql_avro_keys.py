"""ksqlDB's AVRO key format without brokers or Spark (kafkalite/sql/avro_keys.py): the key schemas
ksqlDB registers (one column unwrapped, several wrapped in ``<Name>Key``), the columns it infers
from ``<topic>-key``, its errors, INSERT VALUES' key bytes, a table's (windowed) Avro keys read
back, and CREATE / PRINT / DROP ... DELETE TOPIC in an engine whose registry is a double."""
from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalite.registry import client as registry_client
from kafkalite.registry.client import RegisteredSchema, RegistryClientError
from kafkalite.registry.serde import decode, encode, parse_avro
from kafkalite.sql import ast, avro_keys, serde, windowed
from kafkalite.sql.config import KsqlConfig
from kafkalite.sql.engine import Engine
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.metastore import DataSource
from kafkalite.sql.queries import StateStore, decode_output
from spark_integration import avro as spark_avro
from tests.unit.sql.conftest import RecordingAdmin
from tests.unit.sql.test_sql_engine_statements import FakeCommands, FakeSpark


def key(name: str, type_name: str, **kw: Any) -> ast.ColumnDef:
    return ast.ColumnDef(name, ast.SqlType(type_name, **kw), key=True)


@pytest.mark.parametrize("name, want", [("foo", "FooKey"), ("FOO", "FooKey"), ("FOO_BAR", "FooBarKey"),
                                        ("foo_bar", "FooBarKey"), ("fOoBaR", "FoobarKey")])
def test_the_key_record_is_named_as_ksqldbs_avro_format_names_it(name: str, want: str) -> None:
    assert avro_keys.key_record_name(name) == want


@pytest.mark.parametrize("column, want", [
    (key("K", "STRING"), "string"), (key("K", "VARCHAR"), "string"), (key("K", "INT"), "int"),
    (key("K", "BIGINT"), "long"), (key("K", "DOUBLE"), "double"), (key("K", "BOOLEAN"), "boolean"),
    (key("K", "ARRAY", items=(ast.SqlType("STRING"),)), {"type": "array", "items": ["null", "string"]}),
    (key("K", "DECIMAL", params=(4, 2)), {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}),
])
def test_one_key_column_is_unwrapped_to_its_plain_type(column: ast.ColumnDef, want: Any) -> None:
    """ksqlDB's UNWRAP_SINGLES for a single key column: the registered schema is the column's
    type itself, not in a union with null (avro.json's "- key - no inference" cases)."""
    assert json.loads(avro_keys.key_schema("INPUT", [column])) == want


def test_a_struct_key_and_several_key_columns_are_a_record_named_after_the_source() -> None:
    struct = key("K", "STRUCT", fields=(("F1", ast.SqlType("STRING")),))
    assert json.loads(avro_keys.key_schema("OUTPUT", [struct])) == {
        "type": "record", "name": "OutputKey", "namespace": "io.confluent.ksql.avro_schemas",
        "fields": [{"name": "F1", "type": ["null", "string"], "default": None}]}
    assert json.loads(avro_keys.key_schema("MY_TABLE", [key("A", "STRING"), key("B", "INT")])) == {
        "type": "record", "name": "MyTableKey", "namespace": "io.confluent.ksql.avro_schemas",
        "fields": [{"name": "A", "type": ["null", "string"], "default": None},
                   {"name": "B", "type": ["null", "int"], "default": None}]}


def registered(schema: Any, schema_type: str = "AVRO") -> RegisteredSchema:
    return RegisteredSchema(7, schema_type, schema if isinstance(schema, str) else json.dumps(schema))


def test_the_key_column_inferred_from_the_subject_is_rowkey_of_its_type() -> None:
    assert avro_keys.inferred_columns("t", registered('"int"')) == (key("ROWKEY", "INT"),)
    record = {"type": "record", "name": "key", "fields": [{"name": "F1", "type": ["null", "string"]}]}
    assert avro_keys.inferred_columns("t", registered(record)) == (
        key("ROWKEY", "STRUCT", fields=(("F1", ast.SqlType("STRING")),)),)


def test_a_key_subject_ksqldb_cannot_read_is_refused_in_its_words() -> None:
    with pytest.raises(KsqlError, match=r"^Key schema is not in the expected format. You may want to set KEY_FORMAT "
                                        r"to 'JSON'.\ntopic: t\nexpected format: AVRO\nactual format from Schema "
                                        r"Registry: JSON$"):
        avro_keys.inferred_columns("t", registered('{"type": "string"}', "JSON"))
    with pytest.raises(KsqlError, match=r"(?s)^Unable to verify if the key schema for topic: t is compatible with "
                                        r"ksqlDB.\nReason: .*\nSchema:\[\"int\", \"string\"\]$"):
        avro_keys.inferred_columns("t", registered(["int", "string"]))
    with pytest.raises(KsqlError, match=r"^Map keys, including types that contain maps, are not supported .* Key "
                                        r"column name: `ROWKEY`. Column type: MAP<STRING, INTEGER>."):
        avro_keys.inferred_columns("t", registered({"type": "map", "values": "int"}))
    assert avro_keys.missing_subject("t").startswith(
        "Schema for message keys on topic 't' does not exist in the Schema Registry.\nSubject: t-key\n")


def test_key_formats_no_longer_refuse_avro_but_every_format_refuses_map_keys() -> None:
    cols = (key("ID", "STRING"), ast.ColumnDef("V", ast.SqlType("INT")))
    assert serde.format_refusal(cols, "AVRO", "JSON") is None
    nested = (key("K", "ARRAY", items=(ast.SqlType("MAP", items=(ast.SqlType("INT"), ast.SqlType("DOUBLE"))),)),)
    assert serde.format_refusal(nested, "AVRO", "AVRO") == (
        "Map keys, including types that contain maps, are not supported as they may lead to unexpected behavior due "
        "to inconsistent serialization. Key column name: `K`. Column type: ARRAY<MAP<INTEGER, DOUBLE>>. See "
        "https://github.com/confluentinc/ksql/issues/6621 for more.")


def lookup_for(schemas: dict[str, Any]) -> Any:
    """A registry lookup by subject (``serde.AvroLookup``): ids from 1 in the order given."""
    ids = {s: i + 1 for i, s in enumerate(schemas)}

    def lookup(subject: str) -> tuple[int, Any, list[str]]:
        doc = schemas[subject]
        return ids[subject], parse_avro(json.dumps(doc)), [f["name"] for f in doc.get("fields", [])] \
            if isinstance(doc, dict) else []
    return lookup


def writer_lookup(schemas: dict[str, Any]) -> Any:
    by_id = {i + 1: doc for i, doc in enumerate(schemas.values())}
    return lambda schema_id: (None, parse_avro(json.dumps(by_id[schema_id])))


def test_insert_values_frames_the_key_with_the_key_subjects_schema() -> None:
    """INSERT VALUES into an AVRO-keyed source: the key as the registry frames it with
    ``<topic>-key``'s latest schema (the value with ``-value``'s); a null single key is a null key."""
    schemas = {"t-key": "long", "t-value": json.loads(serde.value_avro_schema([ast.ColumnDef("V", ast.SqlType("INT"))]))}
    source = DataSource("S", "STREAM", "t", (key("K", "BIGINT"), ast.ColumnDef("V", ast.SqlType("INT"))), "AVRO", "AVRO")
    record = serde.encode(source, {"K": 998877665544332211, "V": 10}, 5, lookup_for(schemas), "INSERT ...")
    assert record.key is not None and record.key[:5] == b"\x00\x00\x00\x00\x01"
    assert decode(record.key, writer_lookup(schemas))[2] == 998877665544332211
    assert decode(record.value, writer_lookup(schemas))[2] == {"V": 10}
    assert serde.encode(source, {"K": None, "V": 1}, 5, lookup_for(schemas), "INSERT ...").key is None
    with pytest.raises(KsqlError, match=r"^Schema registry url is not set"):
        serde.encode(source, {"K": 1, "V": 1}, 5, None, "INSERT ...")

    multi = json.loads(avro_keys.key_schema("M", [key("A", "STRING"), key("B", "INT")]))
    two = DataSource("M", "TABLE", "m", (key("A", "STRING"), key("B", "INT"), ast.ColumnDef("V", ast.SqlType("INT"))),
                     "AVRO", "JSON")
    record = serde.encode(two, {"A": "x", "B": 2, "V": 3}, 5, lookup_for({"m-key": multi}), "INSERT ...")
    assert decode(record.key or b"", writer_lookup({"m-key": multi}))[2] == {"A": "x", "B": 2}


def test_a_tables_windowed_avro_keys_are_read_back_into_its_state_store() -> None:
    """A windowed table's topic as pull queries read it: the Avro key's bytes, then the window
    start; a record key (several key columns) matched to the columns in any case."""
    window = ast.Window("TUMBLING", 10_000)
    source = DataSource("W", "TABLE", "w", (key("UID", "STRING"), ast.ColumnDef("N", ast.SqlType("BIGINT"))), "AVRO",
                        "JSON", window=window)
    store = StateStore(["UID"], True, ["UID", "WINDOWSTART", "WINDOWEND", "N"], ["STRING", "BIGINT", "BIGINT", "BIGINT"])
    data = windowed.encode_key(encode(1, parse_avro('"string"'), "u1"), window, 20_000)
    avro = {1: "u1"}.get

    def decoder(b: bytes) -> Any:
        return avro(int.from_bytes(b[1:5], "big")) if b[5:] == encode(1, parse_avro('"string"'), "u1")[5:] else None
    assert decode_output(data, b'{"N": 3}', source, store, window, decoder) == {
        "UID": "u1", "WINDOWSTART": 20_000, "WINDOWEND": 30_000, "N": 3}
    assert decode_output(data, b'{"N": 3}', source, store, window, None) is None      # no registry: unreadable
    two = DataSource("T", "TABLE", "t", (key("A", "STRING"), key("B", "INT"), ast.ColumnDef("N", ast.SqlType("INT"))),
                     "AVRO", "JSON")
    store2 = StateStore(["A", "B"], False, ["A", "B", "N"], ["STRING", "INTEGER", "INTEGER"])
    assert decode_output(b"k", None, two, store2, None, lambda b: {"a": "x", "B": 2}) == {
        "A": "x", "B": 2, "__deleted": True}


def test_every_decoder_matches_a_records_fields_as_ksqldb_does() -> None:
    """One rule (``serde.record_field``) for a table's JSON and AVRO output read back and an AVRO
    key's columns: the field named as written, else among the upper-cased names (the last of
    several, as ksqlDB's map of them keeps it), else null."""
    record = {"n": 1, "N": 2, "Mixed": 3, "dup": 4, "DUP": 5, "dUp": 6, "Dup": 7, 8: "eight"}
    assert [serde.record_field(record, c) for c in ("N", "n", "MIXED", "DUP", "DuP", "X", "8")] == [
        2, 1, 3, 5, 7, None, "eight"]
    columns = ("N", "MIXED", "DUP", "DuP", "X")
    expected = {"N": 2, "MIXED": 3, "DUP": 5, "DuP": 7, "X": None}
    assert avro_keys.columns_of(record, columns) == expected
    assert avro_keys.columns_of("not a record", columns) == dict.fromkeys(columns)
    values = tuple(ast.ColumnDef(c, ast.SqlType("INT")) for c in columns)
    store = StateStore(["K"], False, ["K", *columns], ["STRING", "INTEGER", "INTEGER", "INTEGER", "INTEGER", "INTEGER"])
    text = {str(k): v for k, v in record.items()}
    for value_format, value, decoder in (("JSON", json.dumps(text).encode(), None), ("AVRO", b"v", lambda b: record)):
        sink = DataSource("T", "TABLE", "t", (key("K", "STRING"), *values), key_format="KAFKA", value_format=value_format)
        assert decode_output(b"k", value, sink, store, None, decoder) == {"K": "k", **expected}


class FakeRegistry:
    """The registry client at the engine's boundary: subjects' latest schemas, registrations,
    deletions."""
    subjects: dict[str, RegisteredSchema] = {}
    deleted: list[str] = []

    def __init__(self, url: str) -> None:
        pass

    def latest(self, subject: str) -> RegisteredSchema:
        if subject not in FakeRegistry.subjects:
            raise RegistryClientError(f"Subject '{subject}' not found.", 40401, 404)
        return FakeRegistry.subjects[subject]

    def subject_version(self, subject: str, version: str) -> tuple[int, RegisteredSchema]:
        return 1, self.latest(subject)

    def register(self, subject: str, schema: str) -> int:
        held = FakeRegistry.subjects.get(subject)
        if held is not None and held.schema == schema:     # the same schema again: its id, as the registry does
            return held.schema_id
        FakeRegistry.subjects[subject] = RegisteredSchema(len(FakeRegistry.subjects) + 1, "AVRO", schema)
        return len(FakeRegistry.subjects)

    def delete_subject(self, subject: str) -> list[int]:
        if FakeRegistry.subjects.pop(subject, None) is None:
            raise RegistryClientError(f"Subject '{subject}' not found.", 40401, 404)
        FakeRegistry.deleted.append(subject)
        return [1]


class UdfSpark(FakeSpark):
    """The Spark double with a session's ``udf.register``: the functions registered by name."""

    def __init__(self) -> None:
        super().__init__()
        self.udf = self
        self.functions: dict[str, Any] = {}

    def register(self, name: str, f: Any, return_type: Any = None) -> None:
        self.functions[name] = f


class SelectFrame:
    """A DataFrame double that records the projection ``avro_keys.read`` adds."""

    def __init__(self) -> None:
        self.selected: list[str] = []

    def selectExpr(self, *exprs: str) -> "SelectFrame":
        self.selected = list(exprs)
        return self


@pytest.fixture
def engine(monkeypatch: Any) -> Engine:
    from kafkalite.sql import engine as engine_mod

    e = Engine(KsqlConfig(listeners=("http://127.0.0.1:18088",), schema_registry_url="http://127.0.0.1:1"),
               UdfSpark())
    e.commands = FakeCommands()  # type: ignore[assignment]
    monkeypatch.setattr(Engine, "_topic_exists", lambda self, topic: True)
    monkeypatch.setattr(Engine, "_ensure_topic", lambda self, *a: None)
    monkeypatch.setattr(Engine, "_ensure_sink_topic", lambda self, *a: None)
    monkeypatch.setattr(engine_mod, "Admin", RecordingAdmin)
    monkeypatch.setattr(registry_client, "RegistryClient", FakeRegistry)
    # the Spark source's reader-schema lookup bound the name when it was imported (maybe by an
    # earlier test in this process): it reads the key schemas of the queries' plans
    monkeypatch.setattr(spark_avro, "RegistryClient", FakeRegistry)
    RecordingAdmin.deleted, FakeRegistry.deleted = [], []
    FakeRegistry.subjects = {"v-value": RegisteredSchema(1, "AVRO", json.dumps(
        {"type": "record", "name": "V", "fields": [{"name": "amount", "type": "double"}]}))}
    return e


def test_create_registers_declared_key_columns_and_infers_undeclared_ones(engine: Engine) -> None:
    """ksqlDB's SchemaRegisterInjector and DefaultSchemaInjector for keys: declared key columns'
    schema registered as ``<topic>-key`` (an existing subject kept); none declared, the key column
    comes from the subject (``ROWKEY``); a missing subject refuses the statement unlogged."""
    engine.execute("CREATE STREAM views (uid VARCHAR KEY, page STRING) WITH (KAFKA_TOPIC='views', FORMAT='AVRO');"
                   "CREATE TABLE pairs (a STRING PRIMARY KEY, b INT PRIMARY KEY, n INT) WITH (KAFKA_TOPIC='pairs', "
                   "KEY_FORMAT='AVRO', VALUE_FORMAT='JSON');")
    assert FakeRegistry.subjects["views-key"].schema == '"string"'
    assert json.loads(FakeRegistry.subjects["pairs-key"].schema)["name"] == "PairsKey"
    assert "pairs-value" not in FakeRegistry.subjects

    FakeRegistry.subjects["v-key"] = RegisteredSchema(9, "AVRO", '"long"')
    engine.execute("CREATE STREAM v WITH (KAFKA_TOPIC='v', FORMAT='AVRO');")
    described = engine.execute("DESCRIBE v;")[0]["sourceDescription"]
    assert [(f["name"], f["schema"]["type"], f.get("type")) for f in described["fields"]] == [
        ("ROWKEY", "BIGINT", "KEY"), ("AMOUNT", "DOUBLE", None)]
    assert (described["keyFormat"], described["valueFormat"]) == ("AVRO", "AVRO")

    logged = len(engine.commands.log)                          # type: ignore[attr-defined]
    with pytest.raises(KsqlError, match=r"^Schema for message keys on topic 'nokey' does not exist in the Schema "
                                        r"Registry.\nSubject: nokey-key\n"):
        engine.execute("CREATE STREAM nokey (v INT) WITH (KAFKA_TOPIC='nokey', KEY_FORMAT='AVRO', VALUE_FORMAT='JSON');")
    with pytest.raises(KsqlError, match=r"^Map keys, including types that contain maps"):
        engine.execute("CREATE STREAM m (k MAP<STRING, INT> KEY, v INT) WITH (KAFKA_TOPIC='m', FORMAT='AVRO');")
    assert len(engine.commands.log) == logged                  # type: ignore[attr-defined]
    assert engine.metastore.get("NOKEY") is None and "m-key" not in FakeRegistry.subjects


def test_drop_delete_topic_deletes_the_key_subject_too(engine: Engine) -> None:
    engine.execute("CREATE STREAM a (id STRING KEY, v INT) WITH (KAFKA_TOPIC='a', FORMAT='AVRO');"
                   "CREATE STREAM b (id STRING KEY, v INT) WITH (KAFKA_TOPIC='b', KEY_FORMAT='AVRO', "
                   "VALUE_FORMAT='JSON');")
    engine.execute("DROP STREAM a DELETE TOPIC; DROP STREAM b DELETE TOPIC;")
    assert RecordingAdmin.deleted == ["a", "b"] and FakeRegistry.deleted == ["a-key", "a-value", "b-key"]


def test_print_shows_an_avro_string_key_as_its_text(engine: Engine, monkeypatch: Any) -> None:
    """ksqlDB's PRINT shows a deserialized Avro object as Java's toString: a string as it is, a
    record as JSON."""
    decoded = {b"\x00k": "u1", b"\x00r": {"F1": "x"}}
    monkeypatch.setattr(Engine, "_avro_decoder", lambda self: decoded.get)
    assert engine._avro_text(b"\x00k") == "u1"
    assert json.loads(engine._avro_text(b"\x00r") or "") == {"F1": "x"}


def test_the_query_functions_encode_as_the_registry_frames_and_decode_any_writer_schema(monkeypatch: Any) -> None:
    """The functions the queries call on executors: a key value (a Row for a record) framed with
    the output's schema id; framed bytes decoded to the reader schema, a writer schema fetched
    by id once (an older ``int`` key widening to the reader's ``long``), a TIME as ms of the day."""
    import datetime

    from pyspark.sql import Row

    framed = avro_keys._Encoder(3, json.dumps(json.loads(avro_keys.key_schema("T", [key("A", "STRING"),
                                                                                    key("B", "INT")]))))
    data = framed(Row(A="x", B=2))
    assert data is not None and data[:5] == b"\x00\x00\x00\x00\x03" and framed(None) is None
    assert avro_keys._Decoder("http://r", 3, framed.schema, ())(data) == {"A": "x", "B": 2}
    stamp = avro_keys._Encoder(4, json.dumps({"type": "long", "logicalType": "timestamp-millis"}))
    moment = datetime.datetime(2026, 1, 1, 10, 0, tzinfo=datetime.timezone.utc)
    assert stamp(moment.astimezone().replace(tzinfo=None))[5:] == encode(4, parse_avro(stamp.schema), moment)[5:]

    fetched: list[int] = []

    class Registry:
        def __init__(self, url: str) -> None:
            pass

        def by_id(self, schema_id: int) -> RegisteredSchema:
            fetched.append(schema_id)
            return RegisteredSchema(schema_id, "AVRO", '"int"')
    monkeypatch.setattr(registry_client, "RegistryClient", Registry)
    reader = avro_keys._Decoder("http://other", 5, '"long"', ())
    assert [reader(encode(6, parse_avro('"int"'), 41)), reader(encode(6, parse_avro('"int"'), 42))] == [41, 42]
    assert fetched == [6]
    time_ms = avro_keys._Decoder("http://r", 8, json.dumps({"type": "int", "logicalType": "time-millis"}), ())
    assert time_ms(encode(8, parse_avro(time_ms.schema), datetime.time(1, 0, 1))) == 3_601_000


def test_queries_read_and_write_avro_keys_through_the_sessions_functions(engine: Engine) -> None:
    """A windowed CTAS over an AVRO-keyed stream: its source's key decoded by the read function of
    ``<topic>-key``'s schema; its output's key schema registered as ksqlDB would (one column
    unwrapped) and written by the write function, then the window's bytes; several key columns
    are read from the record's fields."""
    engine.execute("CREATE STREAM s (id STRING KEY, v INT) WITH (KAFKA_TOPIC='s', KEY_FORMAT='AVRO', "
                   "VALUE_FORMAT='JSON');"
                   "CREATE TABLE counts WITH (KAFKA_TOPIC='counts') AS SELECT id, COUNT(*) AS n FROM s "
                   "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY id;")
    s_key = FakeRegistry.subjects["s-key"]
    assert FakeRegistry.subjects["counts-key"].schema == '"string"'
    written = FakeRegistry.subjects["counts-key"].schema_id
    plan, _ = engine.plans["CTAS_COUNTS_1"]
    assert engine._key_sql(plan) == (f"concat(ksql_avro_key_write_{written}(`ID`), unhex(lpad(hex(unix_millis("
                                     "`__window`.start)), 16, '0'))) AS key")
    spark = engine.spark
    assert isinstance(spark, UdfSpark)
    assert {f"ksql_avro_key_read_{s_key.schema_id}_lenient", f"ksql_avro_key_write_{written}"} <= set(spark.functions)

    FakeRegistry.subjects["m-key"] = RegisteredSchema(11, "AVRO", avro_keys.key_schema("M", [key("A", "STRING"),
                                                                                          key("B", "INT")]))
    frame = SelectFrame()
    read, cols = avro_keys.read(frame, spark, "http://r", "m", [key("A", "STRING"), key("B", "BIGINT")])
    # the key decoded once, in a projection of its own; the columns read from it
    assert read is frame and frame.selected == ["*", "ksql_avro_key_read_11(key) AS `__avro_key_decoded`"]
    assert cols == ["CAST(`__avro_key_decoded`.`A` AS string) AS `A`",
                    "CAST(`__avro_key_decoded`.`B` AS bigint) AS `B`"]
    assert spark.functions["ksql_avro_key_read_11"].deterministic is False
    # a lenient read says in a column of its own which keys it could not decode: a key record whose
    # fields are all null is decoded, not poison
    _, cols = avro_keys.read(SelectFrame(), spark, "http://r", "m", [key("A", "STRING"), key("B", "BIGINT")],
                             lenient=True)
    assert cols[2:] == ["key IS NOT NULL AND `__avro_key_decoded` IS NULL AS `__avro_key_undecoded`"]
    with pytest.raises(KsqlError, match=r"^The key schema of m-key has no field for the key column\(s\) C$"):
        avro_keys.read(SelectFrame(), spark, "http://r", "m", [key("A", "STRING"), key("C", "INT")])
    with pytest.raises(KsqlError, match=r"^Schema registry url is not set"):
        avro_keys.read(SelectFrame(), spark, "", "m", [key("A", "STRING")])
