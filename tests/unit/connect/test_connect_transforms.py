"""Kafka 2.8's SMTs and predicates, with and without schemas, and the transforms/predicates chain."""
from __future__ import annotations

import datetime as dt

import pytest

from kafkalite.connect.data import (
    FLOAT64_SCHEMA, INT32_SCHEMA, INT64_SCHEMA, OPTIONAL_INT64_SCHEMA, STRING_SCHEMA, Date, SchemaBuilder, Struct,
    Timestamp,
)
from kafkalite.connect.errors import ConfigException, DataException
from kafkalite.connect.plugins import load_class
from kafkalite.connect.records import ConnectHeaders, SinkRecord, SourceRecord
from kafkalite.connect.transforms import TransformationChain, enrich
from kafkalite.connect.transforms.chain import transforms_config_def

K = "org.apache.kafka.connect.transforms."
TS = 1_609_459_200_000  # 2021-01-01T00:00:00Z


def make(name, **configs):
    transform = load_class(K + name)()
    transform.configure({k.replace("_", "."): v for k, v in configs.items()})
    return transform


def value_schema():
    return (SchemaBuilder.struct().name("order").field("id", INT64_SCHEMA).field("name", STRING_SCHEMA)
            .field("price", FLOAT64_SCHEMA).build())


def value_struct():
    return Struct(value_schema()).put("id", 5).put("name", "pen").put("price", 1.5)


def sink(value, schema=None, key=None, key_schema=None, topic="orders", headers=None):
    return SinkRecord(topic, 3, key_schema, key, schema, value, 42, TS, headers=headers)


def test_insert_field_with_and_without_schema():
    t = make("InsertField$Value", topic_field="t!", partition_field="p", offset_field="o", timestamp_field="ts",
             static_field="s", static_value="v")
    out = t.apply(sink(value_struct(), value_schema()))
    assert out.value_schema.field("t").schema == STRING_SCHEMA and out.value_schema.field("o").schema.optional
    assert (out.value.get("t"), out.value.get("p"), out.value.get("o"), out.value.get("s")) == ("orders", 3, 42, "v")
    assert out.value.get("ts") == Timestamp.to_logical(Timestamp.SCHEMA, TS)
    assert out.value_schema.name == "order"
    plain = t.apply(sink({"a": 1}))
    assert plain.value == {"a": 1, "t": "orders", "p": 3, "o": 42, "ts": TS, "s": "v"}
    assert t.apply(sink(None)).value is None
    with pytest.raises(DataException, match="Only SinkRecord supported"):
        t.apply(SourceRecord({}, {}, "t", None, None, None, None, {"a": 1}))
    with pytest.raises(DataException, match="Only Map objects supported"):
        t.apply(sink("text"))


def test_replace_field_include_exclude_renames():
    t = make("ReplaceField$Value", exclude="price", renames="name:title")
    out = t.apply(sink(value_struct(), value_schema()))
    assert [f.name for f in out.value_schema.fields] == ["id", "title"] and out.value.get("title") == "pen"
    assert make("ReplaceField$Value", include="id").apply(sink({"id": 1, "x": 2})).value == {"id": 1}
    assert make("ReplaceField$Value", blacklist="x").apply(sink({"id": 1, "x": 2})).value == {"id": 1}
    with pytest.raises(ConfigException, match="Invalid rename mapping"):
        make("ReplaceField$Value", renames="a:b:c")


def test_mask_field():
    out = make("MaskField$Value", fields="name,price").apply(sink(value_struct(), value_schema()))
    assert (out.value.get("name"), out.value.get("price"), out.value.get("id")) == ("", 0.0, 5)
    assert make("MaskField$Value", fields="a,b", replacement="99").apply(sink({"a": 5, "b": "x"})).value == \
        {"a": 99, "b": "99"}
    with pytest.raises(DataException, match="Unable to convert"):
        make("MaskField$Value", fields="a", replacement="abc").apply(sink({"a": 5}))
    with pytest.raises(ConfigException):
        make("MaskField$Value", fields="")


def test_value_to_key_extract_and_hoist():
    out = make("ValueToKey", fields="id").apply(sink(value_struct(), value_schema()))
    assert out.key_schema.fields[0].name == "id" and out.key.get("id") == 5
    assert make("ValueToKey", fields="a").apply(sink({"a": 1, "b": 2})).key == {"a": 1}
    with pytest.raises(DataException, match="Field does not exist"):
        make("ValueToKey", fields="nope").apply(sink(value_struct(), value_schema()))
    extracted = make("ExtractField$Key", field="id").apply(out)
    assert (extracted.key_schema, extracted.key) == (INT64_SCHEMA, 5)
    assert make("ExtractField$Value", field="a").apply(sink({"a": 1})).value == 1
    assert make("ExtractField$Value", field="a").apply(sink(None)).value is None
    hoisted = make("HoistField$Value", field="line").apply(sink("hello", STRING_SCHEMA))
    assert hoisted.value_schema.field("line").schema == STRING_SCHEMA and hoisted.value.get("line") == "hello"
    assert make("HoistField$Key", field="k").apply(sink(None, key=7)).key == {"k": 7}


def test_cast():
    t = make("Cast$Value", spec="id:int8,price:string,name:boolean")
    out = t.apply(sink(value_struct().put("id", 300), value_schema()))
    assert out.value.get("id") == 44 and out.value.get("price") == "1.5" and out.value.get("name") is False
    assert out.value_schema.field("id").schema.type.name == "INT8"
    assert make("Cast$Value", spec="int32").apply(sink("17", STRING_SCHEMA)).value == 17
    assert make("Cast$Value", spec="a:float64,b:int64").apply(sink({"a": "2.5", "b": True})).value == {"a": 2.5, "b": 1}
    assert make("Cast$Value", spec="string").apply(sink(b"\x00\x01", SchemaBuilder.bytes_().build())).value == "AAE="
    with pytest.raises(DataException, match="out of range"):
        make("Cast$Value", spec="int8").apply(sink("1000", STRING_SCHEMA))
    with pytest.raises(ConfigException, match="Invalid type found in casting spec"):
        make("Cast$Value", spec="a:varchar")
    ts_schema = SchemaBuilder.struct().field("at", Timestamp.SCHEMA).build()
    at = Timestamp.to_logical(Timestamp.SCHEMA, TS)
    assert make("Cast$Value", spec="at:int64").apply(sink(Struct(ts_schema).put("at", at), ts_schema)).value.get("at") == TS


def test_timestamp_converter():
    to_string = make("TimestampConverter$Value", field="at", target_type="string", format="yyyy-MM-dd'T'HH:mm:ss.SSSX")
    schema = SchemaBuilder.struct().field("at", INT64_SCHEMA).build()
    out = to_string.apply(sink(Struct(schema).put("at", TS + 5), schema))
    assert out.value.get("at") == "2021-01-01T00:00:00.005Z" and out.value_schema.field("at").schema == STRING_SCHEMA
    back = make("TimestampConverter$Value", field="at", target_type="unix", format="yyyy-MM-dd'T'HH:mm:ss.SSSX")
    assert back.apply(sink({"at": "2021-01-01T00:00:00.005Z"})).value == {"at": TS + 5}
    whole = make("TimestampConverter$Value", target_type="Date").apply(sink(TS + 3_600_000, INT64_SCHEMA))
    assert whole.value == dt.date(2021, 1, 1) and whole.value_schema == Date.SCHEMA
    stamp = make("TimestampConverter$Value", target_type="Timestamp").apply(sink(TS))
    assert stamp.value == dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
    with pytest.raises(ConfigException, match="requires format"):
        make("TimestampConverter$Value", target_type="string")
    with pytest.raises(DataException, match="does not match pattern"):
        back.apply(sink({"at": "yesterday"}))


def test_routers():
    r = make("RegexRouter", regex="(.*)-(\\d+)", replacement="$1_archive_$2")
    assert r.apply(sink({}, topic="orders-7")).topic == "orders_archive_7"
    assert r.apply(sink({}, topic="orders")).topic == "orders"
    tr = make("TimestampRouter", topic_format="${topic}-${timestamp}", timestamp_format="yyyy.MM.dd")
    routed = tr.apply(sink({}))
    assert routed.topic == "orders-2021.01.01" and routed.original_topic == "orders"
    with pytest.raises(DataException, match="Timestamp missing"):
        tr.apply(SinkRecord("t", 0, None, None, None, {}, 1, None))


def test_flatten():
    inner = SchemaBuilder.struct().field("city", STRING_SCHEMA).field("zip", OPTIONAL_INT64_SCHEMA).build()
    outer = (SchemaBuilder.struct().field("id", INT32_SCHEMA)
             .field("addr", SchemaBuilder.struct().field("city", STRING_SCHEMA).optional().build())
             .field("home", inner).build())
    value = (Struct(outer).put("id", 1).put("home", Struct(inner).put("city", "Oslo")))
    out = make("Flatten$Value", delimiter="_").apply(sink(value, outer))
    assert [f.name for f in out.value_schema.fields] == ["id", "addr_city", "home_city", "home_zip"]
    assert out.value_schema.field("addr_city").schema.optional and not out.value_schema.field("home_city").schema.optional
    assert out.value.get("home_city") == "Oslo" and out.value.get("addr_city") is None
    assert make("Flatten$Value").apply(sink({"a": {"b": {"c": 1}}, "d": [1]})).value == {"a.b.c": 1, "d": [1]}


def test_set_schema_metadata_and_filter_and_predicates():
    out = make("SetSchemaMetadata$Value", schema_name="com.acme.Order", schema_version="4").apply(
        sink(value_struct(), value_schema()))
    assert (out.value_schema.name, out.value_schema.version) == ("com.acme.Order", 4)
    assert out.value.schema == out.value_schema
    with pytest.raises(ConfigException, match="Neither schema name nor version"):
        make("SetSchemaMetadata$Value")
    assert make("Filter").apply(sink({})) is None
    p = load_class(K + "predicates.TopicNameMatches")()
    p.configure({"pattern": "ord.*"})
    assert p.test(sink({})) and not p.test(sink({}, topic="x-orders"))
    h = load_class("HasHeaderKey")()
    h.configure({"name": "trace"})
    assert h.test(sink({}, headers=ConnectHeaders().add_string("trace", "1"))) and not h.test(sink({}))
    assert load_class("RecordIsTombstone")().test(sink(None))


def test_chain_with_predicates_and_negate():
    props = {
        "transforms": "dropTombstones,route,tag",
        "transforms.dropTombstones.type": K + "Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "transforms.route.type": K + "RegexRouter",
        "transforms.route.regex": "orders", "transforms.route.replacement": "sales",
        "transforms.tag.type": K + "InsertField$Value",
        "transforms.tag.static.field": "src", "transforms.tag.static.value": "db",
        "transforms.tag.predicate": "fromSales", "transforms.tag.negate": "true",
        "predicates": "isTombstone,fromSales",
        "predicates.isTombstone.type": K + "predicates.RecordIsTombstone",
        "predicates.fromSales.type": K + "predicates.TopicNameMatches",
        "predicates.fromSales.pattern": "sales",
    }
    chain = TransformationChain.from_config(props)
    assert len(chain) == 3
    assert chain.apply(sink(None)) is None
    out = chain.apply(sink({"a": 1}))
    assert out.topic == "sales" and out.value == {"a": 1}
    other = chain.apply(sink({"a": 1}, topic="stock"))
    assert other.value == {"a": 1, "src": "db"}
    calls = []
    chain.apply_with(sink({"a": 1}), lambda stage, t: calls.append(type(t).__name__) or stage())
    assert calls == ["PredicatedTransformation", "RegexRouter", "PredicatedTransformation"]
    with pytest.raises(ConfigException, match="Duplicate alias"):
        TransformationChain.from_config({"transforms": "a,a", "transforms.a.type": K + "Filter"})
    with pytest.raises(ConfigException):
        TransformationChain.from_config({"transforms": "a", "transforms.a.type": "com.example.Missing"})
    with pytest.raises(ConfigException):
        TransformationChain.from_config({"transforms": "a", "transforms.a.type": K + "Filter",
                                         "transforms.a.predicate": "undeclared"})


def test_enrich_adds_transform_keys_for_validation():
    definition = enrich(transforms_config_def(), {"transforms": "r", "transforms.r.type": K + "RegexRouter"})
    assert {"transforms.r.type", "transforms.r.predicate", "transforms.r.negate", "transforms.r.regex",
            "transforms.r.replacement"} <= set(definition.names())
    results = {v.name: v for v in definition.validate({"transforms": "r", "transforms.r.type": K + "RegexRouter"})}
    assert results["transforms.r.regex"].error_messages == [
        'Missing required configuration "transforms.r.regex" which has no default value.']
    assert "Transforms: r" in definition.groups()
    bad = enrich(transforms_config_def(), {"transforms": "x", "transforms.x.type": "org.apache.kafka.connect.json.JsonConverter"})
    errors = {v.name: v.error_messages for v in bad.validate({"transforms": "x",
                                                              "transforms.x.type": "org.apache.kafka.connect.json.JsonConverter"})}
    assert errors["transforms.x.type"] and "Not a Transformation" in errors["transforms.x.type"][0]


def test_schemaless_type_inference_is_kafkas_and_shared_by_cast_and_json():
    """One ConnectSchema.schemaType for the JSON converter and Cast: a Python value's class picks
    the type; Decimal and dates/times (BigDecimal, java.util.Date in Kafka) have none, so both
    refuse them with their own Kafka message instead of guessing."""
    import decimal

    from kafkalite.connect.converters.json import JsonConverter
    from kafkalite.connect.data import Type, schema_type_of

    assert [schema_type_of(v) for v in (True, 3, 2.5, "s", b"b", [1], (1,), {"a": 1})] == [
        Type.BOOLEAN, Type.INT64, Type.FLOAT64, Type.STRING, Type.BYTES, Type.ARRAY, Type.ARRAY, Type.MAP]
    odd = [decimal.Decimal("1.5"), dt.date(2021, 1, 1), dt.datetime(2021, 1, 1), dt.time(1, 2), object()]
    assert [schema_type_of(v) for v in odd] == [None] * 5
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false"}, False)
    cast = make("Cast$Value", spec="a:float64")
    assert cast.apply(sink({"a": 2})).value == {"a": 2.0}
    for value in odd[:4]:
        with pytest.raises(DataException, match=f"Java class {type(value).__name__} does not have corresponding"):
            conv.from_connect_data("t", None, {"a": value})
        with pytest.raises(DataException, match="which is not supported by Connect's data API"):
            cast.apply(sink({"a": value}))
