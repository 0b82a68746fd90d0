"""kafkalite/client/topic_log.py against a real broker, through the two services that keep their
state in a topic: the schema registry's store and Kafka Connect's config/offset/status logs each
create their topic compacted and led, and refuse one that would lose their state (not compacted,
or for the registry more than one partition) with their own one-line message."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from kafkalite.client import Admin, KafkaClient, NewTopic
from kafkalite.client.topic_log import TopicLogError, cleanup_policy, ensure_topic, is_compacted
from kafkalite.connect.errors import ConnectException
from kafkalite.connect.runtime.kafka_log import KafkaBasedLog
from kafkalite.connect.runtime.worker_config import WorkerConfig
from kafkalite.registry.kafkastore import KafkaStore, StoreStartError
from kafkalite.registry.state import RegistryState


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_ensure_topic_creates_a_led_compacted_topic_capping_the_replication_factor(broker: Any) -> None:
    topic = unique("log")
    with KafkaClient(broker.bootstrap) as client:
        # Kafka's default of 3 replicas on a one-broker cluster: capped to 1, not refused
        assert ensure_topic(client, topic, 2, -1, {"cleanup.policy": "compact"}, time.monotonic() + 30) == 2
        assert is_compacted(cleanup_policy(client, topic))
        # an existing topic is used as it is
        assert ensure_topic(client, topic, 5, 1, {}, time.monotonic() + 30) == 2


def test_ensure_topic_fails_at_once_on_an_error_waiting_cannot_mend(broker: Any) -> None:
    started = time.monotonic()
    with KafkaClient(broker.bootstrap) as client, pytest.raises(TopicLogError, match="cannot create topic"):
        ensure_topic(client, unique("bad"), 1, 1, {"cleanup.policy": "sometimes"}, time.monotonic() + 60)
    assert time.monotonic() - started < 30          # not retried until the deadline


@pytest.mark.parametrize("policy, word", [("compact", True), ("compact,delete", True), ("delete", False),
                                          (None, False), ("", False)])
def test_is_compacted(policy: str | None, word: bool) -> None:
    assert is_compacted(policy) is word


def test_the_registry_refuses_a_store_topic_it_would_lose_schemas_in(broker: Any) -> None:
    deleting, wide = unique("schemas-delete"), unique("schemas-wide")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(deleting, 1, 1, configs={"cleanup.policy": "delete"}),
                             NewTopic(wide, 2, 1, configs={"cleanup.policy": "compact"})])
    for topic, reason in ((deleting, "cleanup.policy='delete', expected compact"),
                          (wide, "has 2 partitions; the schema registry's store must have exactly 1")):
        store = KafkaStore(None, RegistryState(), broker.bootstrap, topic, replication_factor=1, init_timeout_ms=30000)
        try:
            with pytest.raises(StoreStartError, match=reason):
                store.start()
        finally:
            store.close()


def test_connect_refuses_a_config_topic_that_is_not_compacted(broker: Any) -> None:
    topic = unique("connect-configs")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs={"cleanup.policy": "delete"})])
    config = WorkerConfig.parse({
        "bootstrap.servers": broker.bootstrap, "group.id": "g", "config.storage.topic": topic,
        "offset.storage.topic": "o", "status.storage.topic": "s",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter"}, distributed=True)
    log = KafkaBasedLog(config, topic, 1, 1, lambda *record: None, "config.storage.topic")
    try:
        with pytest.raises(ConnectException, match=f"Topic '{topic}' supplied via the 'config.storage.topic' "
                                                   "property is required to have 'cleanup.policy=compact'"):
            log.start(timeout=30)
    finally:
        log.stop()
