"""ConfigDef: typed parsing with Kafka's messages, validation of everything at once, the ConfigInfos body."""
from __future__ import annotations

import pytest

from kafkalite.connect.config import (
    ConfigDef, ConfigValue, Importance, Password, Range, Type, ValidList, ValidString, Width, config_infos,
)
from kafkalite.connect.errors import ConfigException


def definition() -> ConfigDef:
    return (ConfigDef()
            .define("connection.url", Type.STRING, importance=Importance.HIGH, documentation="JDBC URL",
                    group="Database", order_in_group=1, width=Width.LONG, display_name="JDBC URL")
            .define("batch.max.rows", Type.INT, 100, Range.at_least(1), Importance.LOW, "rows per poll",
                    "Connector", 2, Width.SHORT, "Max Rows Per Batch")
            .define("mode", Type.STRING, "bulk", ValidString.in_("bulk", "incrementing"), Importance.HIGH, "m",
                    "Mode", 1, Width.MEDIUM, "Table Loading Mode", dependents=["tables"])
            .define("tables", Type.LIST, "", ValidList.in_("a", "b"), Importance.LOW, "t")
            .define("enabled", Type.BOOLEAN, False, importance=Importance.LOW)
            .define("connection.password", Type.PASSWORD, None, importance=Importance.HIGH))


def test_parse_gives_typed_values_and_kafka_messages():
    values = definition().parse({"connection.url": " jdbc:x ", "batch.max.rows": "5", "tables": "a, b",
                                 "enabled": "TRUE", "connection.password": "s3cret"})
    assert values["connection.url"] == "jdbc:x" and values["batch.max.rows"] == 5
    assert values["tables"] == ["a", "b"] and values["enabled"] is True and values["mode"] == "bulk"
    assert str(values["connection.password"]) == "[hidden]" and values["connection.password"] == Password("s3cret")
    with pytest.raises(ConfigException, match='Missing required configuration "connection.url" which has no default'):
        definition().parse({})
    with pytest.raises(ConfigException, match="Invalid value x for configuration batch.max.rows: Not a number of type INT"):
        definition().parse({"connection.url": "u", "batch.max.rows": "x"})
    with pytest.raises(ConfigException, match="Invalid value 0 for configuration batch.max.rows: Value must be at least 1"):
        definition().parse({"connection.url": "u", "batch.max.rows": "0"})
    with pytest.raises(ConfigException, match="String must be one of: bulk, incrementing"):
        definition().parse({"connection.url": "u", "mode": "oops"})
    with pytest.raises(ConfigException, match="Expected value to be either true or false"):
        definition().parse({"connection.url": "u", "enabled": "yes"})


def test_validate_collects_every_error():
    results = {v.name: v for v in definition().validate({"batch.max.rows": "0", "mode": "nope"})}
    assert results["connection.url"].error_messages == [
        'Missing required configuration "connection.url" which has no default value.']
    assert results["batch.max.rows"].error_messages == [
        "Invalid value 0 for configuration batch.max.rows: Value must be at least 1"]
    assert results["mode"].value == "nope" and len(results["mode"].error_messages) == 1
    assert results["tables"].error_messages == []
    assert definition().validate({"connection.url": "u", "batch.max.rows": "x"})[1].error_messages == [
        "Invalid value x for configuration batch.max.rows: Not a number of type INT",
        "Invalid value null for configuration batch.max.rows: Value must be non-null"]  # as Kafka: both


def test_config_infos_has_kafkas_shape():
    definition_ = definition()
    values = definition_.validate({"batch.max.rows": "0", "tables": "a,b"})
    values.append(ConfigValue("extra", "v", [], ["unknown key"], True))
    body = config_infos("io.confluent.connect.jdbc.JdbcSourceConnector", definition_, values)
    assert body["name"] == "io.confluent.connect.jdbc.JdbcSourceConnector"
    assert body["error_count"] == 3 and body["groups"] == ["Database", "Connector", "Mode"]
    assert body["configs"][0] == {"definition": None, "value": {
        "name": "extra", "value": "v", "recommended_values": [], "errors": ["unknown key"], "visible": True}}
    url = body["configs"][1]
    assert list(url["definition"]) == ["name", "type", "required", "default_value", "importance", "documentation",
                                       "group", "width", "display_name", "dependents", "order"]
    assert url["definition"]["required"] is True and url["definition"]["default_value"] is None
    assert url["definition"]["order"] == 1 and url["definition"]["width"] == "LONG"
    rows = {c["definition"]["name"]: c for c in body["configs"][1:]}
    assert rows["batch.max.rows"]["definition"]["default_value"] == "100"
    assert rows["batch.max.rows"]["value"]["value"] == "0"
    assert rows["tables"]["value"]["value"] == "a,b"
    assert rows["enabled"]["definition"]["default_value"] == "false"
    assert rows["mode"]["definition"]["dependents"] == ["tables"]


def test_undefined_dependents_are_reported_as_kafka_does():
    broken = ConfigDef().define("a", Type.STRING, "", importance=Importance.LOW, dependents=["b"])
    with pytest.raises(ConfigException, match="referred in the dependents, but not defined: b"):
        broken.parse({})
    [a, b] = broken.validate({})
    assert (b.name, b.error_messages, b.visible) == ("b", ["b is referred in the dependents, but not defined."], False)


def test_embed_prefixes_keys_for_transform_configs():
    child = ConfigDef().define("field", Type.STRING, importance=Importance.MEDIUM)
    parent = ConfigDef().embed("transforms.x.", "Transforms: x", 0, child)
    assert parent.names() == ["transforms.x.field"]
    assert parent.validate({})[0].error_messages == [
        'Missing required configuration "transforms.x.field" which has no default value.']
