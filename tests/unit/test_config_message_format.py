"""message.format.version and inter.broker.protocol.version take Kafka 2.8's version strings
(ApiVersion): what each string means, which are refused and with what message, the broker-level
rule between the two, and a topic level above the inter-broker one being ignored as Kafka's
TopicConfigHandler ignores it."""
from __future__ import annotations

import logging

import pytest

from kafkalite.config import BrokerConfig, ConfigError, kafka_version, validate_topic_overrides

pytestmark = pytest.mark.unit

BASE = {"zookeeper.connect": "127.0.0.1:2181"}


@pytest.mark.parametrize("text,name,magic", [
    ("0.8.0", "0.8.0", 0), ("0.8.2.2", "0.8.2", 0), ("0.9.0", "0.9.0", 0), ("0.9.0.1", "0.9.0", 0),
    ("0.10.0", "0.10.0-IV1", 1), ("0.10.0.0", "0.10.0-IV1", 1), ("0.10.0-IV0", "0.10.0-IV0", 1),
    ("0.10.1", "0.10.1-IV2", 1), ("0.10.2.1", "0.10.2-IV0", 1), ("0.11.0", "0.11.0-IV2", 2),
    ("1.0", "1.0-IV0", 2), ("1.1.1", "1.1-IV0", 2), ("2.7", "2.7-IV2", 2), ("2.8", "2.8-IV1", 2),
    ("2.8-IV0", "2.8-IV0", 2), ("2.8.2", "2.8-IV1", 2), (" 2.6 ", "2.6-IV0", 2),
])
def test_kafka_versions_and_their_record_versions(text: str, name: str, magic: int) -> None:
    v = kafka_version(text)
    assert (v.name, v.record_version) == (name, magic)


def test_versions_are_ordered_as_kafka_orders_them() -> None:
    names = ["0.8.0", "0.9.0", "0.10.0-IV0", "0.10.0-IV1", "0.10.2", "0.11.0-IV0", "1.0", "2.0-IV1", "2.7-IV1", "2.8"]
    ranks = [kafka_version(n).rank for n in names]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


@pytest.mark.parametrize("bad", ["3.0", "0.10", "2.8-IV2", "0.7.0", "latest", "", "2"])
def test_invalid_versions_are_refused_with_the_valid_ones_named(bad: str) -> None:
    with pytest.raises(ConfigError, match=f"Version `{bad}` is not a valid version"):
        kafka_version(bad)
    with pytest.raises(ConfigError, match=r"Invalid value .* for configuration message\.format\.version: .*0\.10\.0-IV1"):
        validate_topic_overrides({"message.format.version": bad})
    with pytest.raises(ConfigError, match="inter.broker.protocol.version"):
        BrokerConfig.from_properties({**BASE, "inter.broker.protocol.version": bad})


def test_topic_overrides_take_kafka_versions() -> None:
    assert validate_topic_overrides({"message.format.version": "0.10.0.0"}) == {"message.format.version": "0.10.0.0"}
    cfg = BrokerConfig.from_properties(BASE)
    assert cfg.topic_config({"message.format.version": "0.9.0"})["message.format.version"] == "0.9.0"
    assert cfg.topic_config({})["message.format.version"] == "2.8-IV1"


def test_broker_default_format_needs_an_inter_broker_level_of_its_record_version() -> None:
    """Kafka's KafkaConfig rule compares record versions: 0.10.2 under 0.10.0 is fine, v2 under
    0.10.2 is not."""
    ok = BrokerConfig.from_properties({**BASE, "inter.broker.protocol.version": "0.10.0",
                                       "log.message.format.version": "0.10.2"})
    assert ok.topic_config({})["message.format.version"] == "0.10.2"
    with pytest.raises(ConfigError, match="log.message.format.version 2.0 can only be used when "
                                          "inter.broker.protocol.version is set to version 0.11.0 or higher"):
        BrokerConfig.from_properties({**BASE, "inter.broker.protocol.version": "0.10.2",
                                      "log.message.format.version": "2.0"})


def test_topic_format_above_the_inter_broker_level_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka 2.8 accepts such an override at CreateTopics/AlterConfigs and its TopicConfigHandler
    then leaves it out (excludedConfigs): the broker's default applies."""
    cfg = BrokerConfig.from_properties({**BASE, "inter.broker.protocol.version": "2.6",
                                        "log.message.format.version": "0.10.0"})
    assert validate_topic_overrides({"message.format.version": "2.7"})
    with caplog.at_level(logging.WARNING, logger="kafkalite.config"):
        assert cfg.topic_config({"message.format.version": "2.7"})["message.format.version"] == "0.10.0"
    assert "message.format.version=2.7 is ignored" in caplog.text
    assert cfg.topic_config({"message.format.version": "2.6"})["message.format.version"] == "2.6"
