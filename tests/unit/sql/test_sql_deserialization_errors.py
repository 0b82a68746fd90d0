"""Poison records (ksqlDB's deserialization errors): the processing log message's shape, the
executors' logger that skips a bad record, the configuration that fails instead, and the Python
decoders refusing poison input (the Spark SQL checks run in tests/spark/test_spark_sql_poison.py)."""
from __future__ import annotations

import base64
import json
import logging
import struct
from typing import Any

import pytest

from kafkalite.sql import ast, deserialization, kafka_format
from kafkalite.sql.config import ConfigError, KsqlConfig


def test_the_message_has_ksqldb_processing_log_shape() -> None:
    m = deserialization.message("value", "orders", "Invalid JSON: nope", b"nope", True, 2, 17)
    assert m["type"] == deserialization.DESERIALIZATION_ERROR == 0
    e = m["deserializationError"]
    assert e["errorMessage"] == "Failed to deserialize value from topic: orders. Invalid JSON: nope"
    assert e["cause"] == ["Invalid JSON: nope"]
    assert (e["target"], e["topic"], e["partition"], e["offset"]) == ("value", "orders", 2, 17)
    assert base64.b64decode(e["recordB64"]) == b"nope"


def test_the_record_is_left_out_unless_rows_include() -> None:
    e = deserialization.message("key", "t", "cause", b"secret", False)["deserializationError"]
    assert e["recordB64"] is None and "partition" not in e
    assert e["errorMessage"].startswith("Failed to deserialize key from topic: t.")


def test_the_executor_logger_skips_and_logs_a_poison_record(caplog: Any) -> None:
    import pyarrow as pa

    logger = deserialization._Logger("orders", include_rows=True)

    def batch(causes: list[Any]) -> list[Any]:
        n = len(causes)
        return [pa.array(causes, pa.string()), pa.array(["key" if c else None for c in causes], pa.string()),
                pa.array([3] * n, pa.int32()), pa.array(range(40, 40 + n), pa.int64()),
                pa.array([b"\1" if c else None for c in causes], pa.binary())]
    with caplog.at_level(logging.ERROR, logger=deserialization.LOGGER):
        assert logger(*batch([None, None])).to_pylist() == [True, True]     # records that read: kept, not logged
        assert not caplog.records
        cause = "Size of data received by IntegerDeserializer is not 4"
        assert logger(*batch([None, cause, None])).to_pylist() == [True, False, True]
    [record] = caplog.records
    assert record.name == "processing.KsqlTopic.Source.deserializer" and record.levelno == logging.ERROR
    logged = json.loads(record.getMessage())["deserializationError"]
    assert (logged["topic"], logged["partition"], logged["offset"], logged["target"]) == ("orders", 3, 41, "key")
    assert logged["recordB64"] == base64.b64encode(b"\1").decode()


@pytest.mark.parametrize("fmt, columns", [("AVRO", 1), ("JSON", 0), ("KAFKA", 2)])
def test_formats_checked_elsewhere_or_with_nothing_to_check(fmt: str, columns: int) -> None:
    cols = [ast.ColumnDef(f"C{i}", ast.SqlType("STRING")) for i in range(columns)]
    assert deserialization.error_sql("value", fmt, cols) is None


def test_a_kafka_string_is_never_a_size_error() -> None:
    assert deserialization.error_sql("value", "KAFKA", [ast.ColumnDef("S", ast.SqlType("STRING"))]) is None
    assert "LongDeserializer is not 8" in str(deserialization.error_sql("value", "KAFKA",
                                                                        [ast.ColumnDef("L", ast.SqlType("BIGINT"))]))


@pytest.mark.parametrize("data, t", [(b"\0\0\1", "INT"), (b"\0" * 4, "BIGINT"), (b"", "DOUBLE")])
def test_kafka_decode_refuses_bytes_of_the_wrong_size(data: bytes, t: str) -> None:
    with pytest.raises(ValueError, match=f"no KAFKA {t}"):
        kafka_format.decode(data, ast.SqlType(t))
    assert kafka_format.decode(struct.pack(">i", -3), ast.SqlType("INT")) == -3


def test_the_properties() -> None:
    default = KsqlConfig.from_properties({})
    assert (default.fail_on_deserialization_error, default.processing_log_rows_include) == (False, False)
    set_ = KsqlConfig.from_properties({"ksql.fail.on.deserialization.error": "TRUE",
                                       "ksql.logging.processing.rows.include": "true"})
    assert (set_.fail_on_deserialization_error, set_.processing_log_rows_include) == (True, True)
    with pytest.raises(ConfigError, match="ksql.fail.on.deserialization.error"):
        KsqlConfig.from_properties({"ksql.fail.on.deserialization.error": "maybe"})


def test_the_lenient_avro_key_decoder_reads_a_poison_key_as_null(monkeypatch: Any) -> None:
    """AVRO keys (avro_keys' query function): not framed, an id the registry does not know,
    corrupt Avro: null when lenient (the query then skips the record), an error otherwise."""
    from kafkalite.registry import client as registry_client
    from kafkalite.registry.serde import encode, parse_avro
    from kafkalite.sql import avro_keys

    class Registry:
        def __init__(self, url: str) -> None:
            pass

        def by_id(self, schema_id: int) -> Any:
            raise registry_client.RegistryClientError(404, 40403, f"Schema {schema_id} not found")
    monkeypatch.setattr(registry_client, "RegistryClient", Registry)
    good = encode(21, parse_avro('"long"'), 7)
    lenient = avro_keys._Decoder("http://poison", 21, '"long"', (), lenient=True)
    strict = avro_keys._Decoder("http://poison", 21, '"long"', ())
    assert lenient(good) == strict(good) == 7 and lenient(None) is None
    for poison in (b"plain text", b"\0\0\0\0\x63" + good[5:], good[:5] + b"\xff"):
        assert lenient(poison) is None
        with pytest.raises(Exception):
            strict(poison)


def test_the_avro_key_check_names_confluents_causes() -> None:
    sql = deserialization.avro_key_error_sql("`__raw_key`", "`__avro_key_undecoded`")
    assert sql.startswith("CASE WHEN `__avro_key_undecoded` THEN")
    assert "'Unknown magic byte!'" in sql and "'Error deserializing Avro message for id '" in sql


def test_json_fields_are_checked_only_where_bound_and_typed() -> None:
    """The JSON field checks read the fields ``bind_json_fields`` bound (their values and errors
    are evaluated on Spark in tests/spark/test_spark_sql_format_matrix.py): none without them, none
    for a STRING column (any JSON value is text), one per other column, in column order."""
    t = ast.SqlType
    cols = [ast.ColumnDef("S", t("STRING")), ast.ColumnDef("N", t("INT")), ast.ColumnDef("A", t("ARRAY", items=(t("INT"),)))]
    assert "__jf_" not in (deserialization.error_sql("v", "JSON", cols) or "")
    checked = deserialization.error_sql("v", "JSON", cols, fields="value") or ""
    assert "`__jk_value_0`" not in checked and checked.index("`__jk_value_1`") < checked.index("`__jk_value_2`")
    assert deserialization.json_field_columns("value", cols) == [
        "`__jf_value_0`", "`__jk_value_0`", "`__jv_value_0`", "`__jf_value_1`", "`__jk_value_1`", "`__jv_value_1`",
        "`__jf_value_2`", "`__jk_value_2`", "`__jv_value_2`"]
    # every column read once, by the binding, from its bound VARIANT (the record parsed once), an
    # array element by element; the value and the check name that read
    assert deserialization.json_value_sql("value", 1, cols[1]) == "`__jv_value_1`"
    assert "`__jv_value_1`" in checked                  # a text number is not parsed again by the check
    array = deserialization._bound_read("value", 2, cols[2], "$.A")
    assert "`__jf_value_2`" in array and "from_json" not in array and "transform(" in array
    # an array's elements are checked too (ksqlDB's path names the element)
    assert "concat('$.A', '[', `__ei0`, ']')" in checked


@pytest.mark.parametrize("sql_type, text", [
    (ast.SqlType("INT"), "INTEGER"), (ast.SqlType("VARCHAR"), "STRING"), (ast.SqlType("DECIMAL", (4, 2)), "DECIMAL(4, 2)"),
    (ast.SqlType("MAP", items=(ast.SqlType("STRING"), ast.SqlType("BIGINT"))), "MAP<STRING, BIGINT>"),
    (ast.SqlType("STRUCT", fields=(("X", ast.SqlType("INT")), ("Y", ast.SqlType("ARRAY", items=(ast.SqlType("DOUBLE"),))))),
     "STRUCT<X INTEGER, Y ARRAY<DOUBLE>>")])
def test_types_are_named_as_ksqldbs_messages_name_them(sql_type: ast.SqlType, text: str) -> None:
    assert deserialization.sql_type_text(sql_type) == text


def test_the_engine_binds_the_json_objects_it_reads_by_field() -> None:
    from kafkalite.sql.engine import Engine
    from kafkalite.sql.metastore import DataSource

    t = ast.SqlType
    k1, k2, v = (ast.ColumnDef("K1", t("STRING"), key=True), ast.ColumnDef("K2", t("INT"), key=True),
                 ast.ColumnDef("V", t("INT")))
    json_value = DataSource("S", "STREAM", "s", (k1, v), value_format="JSON", key_format="JSON")
    two_keys = DataSource("S", "STREAM", "s", (k1, k2, v), value_format="DELIMITED", key_format="JSON")
    avro = DataSource("S", "STREAM", "s", (k1, k2, v), value_format="AVRO", key_format="AVRO")
    assert Engine._json_fields(json_value) == [("key", (k1,), True), ("value", (v,), False)]   # unwrapped key
    assert Engine._json_fields(two_keys) == [("key", (k1, k2), False)]
    assert Engine._json_fields(avro) == []
