"""server.properties parsing with Kafka's names, defaults, synonyms and one-line errors."""
from __future__ import annotations

import pytest

from kafkalite.config import (BrokerConfig, ConfigError, load_properties, parse_properties_text,
                              validate_topic_overrides)

BASE = {"zookeeper.connect": "127.0.0.1:1/kafka"}


def test_defaults_and_retention_synonyms() -> None:
    """Kafka resolves retention.ms from log.retention.ms, then .minutes, then .hours (168 h)."""
    assert BrokerConfig.from_properties(BASE).topic_config()["retention.ms"] == 168 * 3600 * 1000
    cfg = BrokerConfig.from_properties({**BASE, "log.retention.minutes": "5"})
    assert cfg.topic_config()["retention.ms"] == 300_000
    cfg = BrokerConfig.from_properties({**BASE, "log.retention.minutes": "5", "log.retention.ms": "42"})
    assert cfg.topic_config()["retention.ms"] == 42
    assert cfg.topic_config({"retention.ms": "7"})["retention.ms"] == 7


@pytest.mark.parametrize("props, message", [
    ({"no.such.thing": "1"}, "Unknown configuration 'no.such.thing'"),
    ({"num.partitions": "zero"}, "Invalid value 'zero' for configuration num.partitions: expected int"),
    ({"num.partitions": "0"}, "must be at least 1"),
    ({"log.cleanup.policy": "shred"}, "must be one of delete, compact"),
    ({"listeners": "PLAINTEXT//x:1"}, "expected NAME://host:port"),
    ({"max.connections.per.ip.overrides": "10.0.0.1:many"}, "expected host:count"),
    ({"fetch.max.bytes": "100"}, "must be at least 1024"),
    ({"max.connections.per.ip": "0"}, "can be set to zero only if max.connections.per.ip.overrides"),
    ({"log.cleaner.min.cleanable.ratio": "2"}, "must be between 0 and 1"),
])
def test_bad_properties_give_one_line_errors(props: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        BrokerConfig.from_properties({**BASE, **props})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_zookeeper_connect_is_required() -> None:
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        BrokerConfig.from_properties({})


def test_describe_sources_and_topic_override_validation() -> None:
    """An explicit broker property is STATIC_BROKER_CONFIG (4), a topic override is
    DYNAMIC_TOPIC_CONFIG (1) with the broker synonym listed after it."""
    cfg = BrokerConfig.from_properties({**BASE, "log.segment.bytes": "1048576"})
    rows = {r.name: r for r in cfg.describe_topic({"retention.ms": "1000"})}
    assert rows["segment.bytes"].value == 1048576 and rows["segment.bytes"].source == 4
    assert rows["retention.ms"].source == 1 and rows["retention.ms"].synonyms[0] == ("retention.ms", 1000, 1)
    assert rows["cleanup.policy"].source == 5
    with pytest.raises(ConfigError, match="Unknown topic config"):
        validate_topic_overrides({"retention.mss": "1"})
    with pytest.raises(ConfigError, match="retention.ms"):
        validate_topic_overrides({"retention.ms": "soon"})


def test_properties_file_syntax(tmp_path) -> None:
    """Java .properties: comments, ':' separators, continuation lines; --override wins."""
    text = "# comment\n! also\nbroker.id = 7\nlog.dirs: /a,\\\n  /b\nzookeeper.connect=h:1\n"
    assert parse_properties_text(text) == {"broker.id": "7", "log.dirs": "/a,/b", "zookeeper.connect": "h:1"}
    path = tmp_path / "server.properties"
    path.write_text(text)
    props = load_properties([str(path)], ["broker.id=9"])
    cfg = BrokerConfig.from_properties(props)
    assert cfg.broker_id == 9 and cfg.log_dirs == ["/a", "/b"]


def test_dynamic_layers_skip_per_broker_keys_at_the_default_and_invalid_listener_sets() -> None:
    """ZooKeeper's broker configs may have been written by another tool: a per-broker key in
    ``<default>`` is ignored (Kafka's "Per-broker configs defined at default cluster level will be
    ignored"), and listener configs that together are invalid leave the config as it was."""
    cfg = BrokerConfig.from_properties({"zookeeper.connect": "zk", "listeners": "PLAINTEXT://:9092"})
    changed = cfg.set_dynamic({}, {"advertised.listeners": "PLAINTEXT://h:1", "message.max.bytes": "1000"})
    assert changed == {"message.max.bytes"} and cfg["advertised.listeners"] is None
    # EXTRA has no security protocol: the whole per-broker set is refused, the default layer kept
    assert cfg.set_dynamic({"listeners": "PLAINTEXT://:9092,EXTRA://:9093", "message.max.bytes": "5"},
                           {"message.max.bytes": "1000"}) == set()
    assert [ep.listener for ep in cfg.listeners] == ["PLAINTEXT"] and cfg["message.max.bytes"] == 1000
    changed = cfg.set_dynamic({"listeners": "PLAINTEXT://:9092,EXTRA://:9093",
                               "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"}, {})
    assert changed == {"listeners", "listener.security.protocol.map", "message.max.bytes"}
    assert [ep.uri() for ep in cfg.advertised_listeners] == ["PLAINTEXT://:9092", "EXTRA://:9093"]


def test_static_advertised_listeners_follow_kafkas_rules() -> None:
    """As Kafka's KafkaConfig: advertised listeners are listeners, include the inter-broker one and
    never the 0.0.0.0 meta-address."""
    base = {"zookeeper.connect": "zk", "listeners": "PLAINTEXT://:9092,EXTRA://:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"}
    for advertised, message in (("EXTRA://h:1", "inter.broker.listener.name must be a listener name"),
                                ("PLAINTEXT://h:1,OTHER://h:2", "subset of the ones defined in listeners"),
                                ("PLAINTEXT://0.0.0.0:1", "nonroutable meta-address 0.0.0.0")):
        with pytest.raises(ConfigError, match=message):
            BrokerConfig.from_properties({**base, "advertised.listeners": advertised})
    assert [ep.listener for ep in BrokerConfig.from_properties(
        {**base, "advertised.listeners": "PLAINTEXT://h:1"}).advertised_listeners] == ["PLAINTEXT"]
