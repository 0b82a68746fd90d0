"""Plugin names resolve as Kafka's: Java class names, Kafka's aliases, Python names, entry points."""
from __future__ import annotations

import pytest

from kafkalite.connect import plugins
from kafkalite.connect.converters.json import JsonConverter
from kafkalite.connect.converters.string import StringConverter
from kafkalite.connect.plugins import PluginError, load_class


def test_java_names_aliases_and_python_names():
    assert load_class("org.apache.kafka.connect.json.JsonConverter") is JsonConverter
    assert load_class("JsonConverter") is JsonConverter and load_class("Json") is JsonConverter
    assert load_class("kafkalite.connect.converters.string:StringConverter") is StringConverter
    assert load_class("kafkalite.connect.converters.string.StringConverter") is StringConverter
    with pytest.raises(PluginError):
        load_class("com.example.Nope")


def test_alias_rules_keep_only_unambiguous_names():
    names = plugins.aliases()
    assert names["FileStreamSource"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert names["JdbcSinkConnector"] == "io.confluent.connect.jdbc.JdbcSinkConnector"
    assert names["RegexRouter"] == "org.apache.kafka.connect.transforms.RegexRouter"
    from kafkalite.connect.connectors.jdbc import JdbcSinkConnector
    from kafkalite.connect.connectors.parquet import ParquetSinkConnector
    assert load_class("ParquetSink") is ParquetSinkConnector and load_class("JdbcSink") is JdbcSinkConnector
    assert load_class("io.confluent.connect.jdbc.JdbcSinkConnector") is JdbcSinkConnector
    assert "Value" not in names and "Key" not in names  # InsertField$Value, Cast$Value... share these


def test_entry_points_resolve(monkeypatch):
    class EP:
        name, value, group = "my-conv", "kafkalite.connect.converters.json:JsonConverter", "kafkalite.connect.converters"

    monkeypatch.setattr(plugins, "_entry_points", lambda groups: [EP()])
    assert load_class("my-conv") is JsonConverter


def test_connector_plugins_listing_has_kafkas_shape():
    listed = {p["class"]: p for p in plugins.connector_plugins()}
    assert listed["io.confluent.connect.jdbc.JdbcSourceConnector"]["type"] == "source"
    assert listed["io.confluent.connect.jdbc.JdbcSinkConnector"]["type"] == "sink"
    assert listed["kafkalite.connect.connectors.parquet.ParquetSinkConnector"]["type"] == "sink"
    assert all(set(p) == {"class", "type", "version"} for p in listed.values())
    assert list(listed) == sorted(listed)
