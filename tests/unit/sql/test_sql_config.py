"""ksql-server.properties with ksqlDB's names, and the refusals of bad values."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.sql.command_topic import Command, command_topic_name
from kafkalite.sql.config import ConfigError, KsqlConfig, read_properties


def test_properties_file_to_config(tmp_path: Path) -> None:
    f = tmp_path / "ksql-server.properties"
    f.write_text("# comment\nlisteners=http://127.0.0.1:18088\nbootstrap.servers = b1:9092,b2:9092\n"
                 "ksql.service.id=trucks_\nksql.schema.registry.url=http://127.0.0.1:18081\n"
                 "ksql.streams.state.dir=/tmp/x\nksql.streams.auto.offset.reset=earliest\n"
                 "ksql.streams.commit.interval.ms: 500\nspark.master=spark://m:7077\nspark.executor.memory=2g\n")
    c = KsqlConfig.from_properties(read_properties(str(f)))
    assert (c.bootstrap_servers, c.service_id, c.schema_registry_url, c.state_dir) == (
        "b1:9092,b2:9092", "trucks_", "http://127.0.0.1:18081", "/tmp/x")
    assert c.listener == ("127.0.0.1", 18088) and c.spark_master == "spark://m:7077"
    assert c.spark_conf == (("spark.executor.memory", "2g"),)
    assert c.streams_property("auto.offset.reset", "latest") == "earliest"
    assert c.streams_property("commit.interval.ms", "2000") == "500"
    defaults = KsqlConfig.from_properties({})
    assert (defaults.spark_master, defaults.service_id, defaults.listener) == (
        "local[2]", "default_", ("0.0.0.0", 8088))
    assert command_topic_name("trucks_") == "_confluent-ksql-trucks__command_topic"
    assert Command("stream/`S`/create", "CREATE STREAM S ...;", {"a": "1"}).value() == (
        b'{"statement": "CREATE STREAM S ...;", "streamsProperties": {"a": "1"}, "originalProperties": {}, '
        b'"version": 1}')


@pytest.mark.parametrize("props, message", [
    ({"listeners": "ftp://x:1"}, "is not http://host:port"),
    ({"ksql.streams.auto.offset.reset": "middle"}, "is not earliest or latest"),
    ({"ksql.streams.commit.interval.ms": "soon"}, "is not a positive number"),
    ({"security.protocol": "CARRIER_PIGEON"}, "unknown security.protocol"),
])
def test_bad_properties(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KsqlConfig.from_properties(props)


def test_timestamp_throw_on_invalid_and_insert_values_enabled() -> None:
    assert KsqlConfig.from_properties({}).timestamp_throw_on_invalid is False
    assert KsqlConfig.from_properties({}).insert_values_enabled is True
    assert KsqlConfig.from_properties({"ksql.insert.into.values.enabled": "false"}).insert_values_enabled is False
    assert KsqlConfig.from_properties({"ksql.timestamp.throw.on.invalid": "TRUE"}).timestamp_throw_on_invalid is True
    with pytest.raises(ConfigError, match="ksql.timestamp.throw.on.invalid: 'maybe' is not true or false"):
        KsqlConfig.from_properties({"ksql.timestamp.throw.on.invalid": "maybe"})
