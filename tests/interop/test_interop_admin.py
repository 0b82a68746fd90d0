"""Topic administration through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient:
create (partitions, replication factor 1, configs), describe configs (the override shows with its
source), create partitions, delete — each effect checked through Metadata, and the refusals a
client relies on (topic exists, replication factor above the broker count)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic
from kafka import KafkaProducer
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KNewPartitions
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError

from tests.support.waiting import wait_for


def metadata_partitions(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """partition -> (leader, replicas, isrs) from a fresh Metadata request; None if not listed."""
    md = admin.list_topics(topic=None, timeout=10)
    t = md.topics.get(topic)
    if t is None:
        return None
    return {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in t.partitions.items()}


def test_confluent_admin_topic_lifecycle(broker) -> None:
    """AdminClient creates a 2-partition topic with retention.ms=123456 (Metadata: 2 partitions led
    by the broker), DescribeConfigs shows retention.ms=123456 as DYNAMIC_TOPIC_CONFIG and an
    untouched key as a default, CreatePartitions grows it to 5 (Metadata shows 5 and partition 4
    takes a record), a duplicate create and replication factor 3 are refused with the right
    errors, and DeleteTopics removes it from Metadata."""
    bid = broker.broker_id
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "ck-admin"
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "123456", "cleanup.policy": "delete"})],
                        operation_timeout=30)[topic].result(30)
    assert metadata_partitions(admin, topic) == {0: (bid, [bid], [bid]), 1: (bid, [bid], [bid])}

    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "123456"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].source in (ConfigSource.DEFAULT_CONFIG.value,
                                               ConfigSource.STATIC_BROKER_CONFIG.value)

    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
    assert exc.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
    with pytest.raises(KafkaException) as exc:
        admin.create_topics([NewTopic("ck-admin-rf3", 1, 3)], operation_timeout=30)["ck-admin-rf3"].result(30)
    assert exc.value.args[0].name() == "INVALID_REPLICATION_FACTOR"
    assert metadata_partitions(admin, "ck-admin-rf3") is None

    admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=30)[topic].result(30)
    parts = wait_for(lambda: (m := metadata_partitions(admin, topic)) and len(m) == 5 and m, 10, "5 partitions")
    assert all(leader == bid for leader, _, _ in parts.values())
    producer = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 500})
    delivered = []
    producer.produce(topic, b"to-the-new-partition", partition=4, on_delivery=lambda e, m: delivered.append((e, m.offset())))
    assert producer.flush(30) == 0 and delivered == [(None, 0)]

    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    wait_for(lambda: metadata_partitions(admin, topic) is None, 10, "the topic to leave Metadata")


def test_kafka_python_admin_topic_lifecycle(broker) -> None:
    """KafkaAdminClient creates a 3-partition topic with retention.ms=7654321 (list/describe_topics
    show it), describe_configs returns the override with source DYNAMIC_TOPIC_CONFIG,
    create_partitions grows it to 4 (a KafkaProducer can then write partition 3), duplicate
    creation and replication factor 2 are refused with the right exceptions, and delete_topics
    removes it from Metadata."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    topic = "kp-admin"
    try:
        admin.create_topics([KNewTopic(topic, 3, 1, topic_configs={"retention.ms": "7654321"})], timeout_ms=30000)
        assert topic in admin.list_topics()
        (desc,) = admin.describe_topics([topic])
        assert desc["error_code"] == 0 and sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1, 2]
        assert all(p["leader_id"] == broker.broker_id for p in desc["partitions"])

        result = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        entry = _find_config(result, topic, "retention.ms")
        assert entry["value"] == "7654321", entry
        assert entry["config_source"] in ("DYNAMIC_TOPIC_CONFIG", 1), entry
        assert _find_config(result, topic, "segment.bytes")["config_source"] in (
            "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG", 4, 5)

        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KNewTopic(topic, 1, 1)], timeout_ms=30000)
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([KNewTopic("kp-admin-rf2", 1, 2)], timeout_ms=30000)

        admin.create_partitions({topic: KNewPartitions(total_count=4)}, timeout_ms=30000)
        wait_for(lambda: len(admin.describe_topics([topic])[0]["partitions"]) == 4, 10, "4 partitions")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, metadata_max_age_ms=500)
        try:
            meta = producer.send(topic, b"p3", partition=3).get(30)
            assert (meta.partition, meta.offset) == (3, 0)
        finally:
            producer.close(10)

        admin.delete_topics([topic], timeout_ms=30000)
        wait_for(lambda: topic not in admin.list_topics(), 10, "the topic to leave Metadata")
    finally:
        admin.close()


def _find_config(result, topic: str, key: str) -> dict:
    """The entry of ``key`` in kafka-python's describe_configs answer (its shape changed across
    releases: a list of responses, or nested dicts by resource type and name)."""
    if isinstance(result, dict):
        for by_name in result.values():
            if topic in by_name:
                entry = by_name[topic][key]
                return {**entry, "name": key} if isinstance(entry, dict) else entry
        raise AssertionError(f"{topic} not in {result}")
    for resp in result:
        obj = resp.to_object()
        for res in obj.get("results", obj.get("resources", [])):
            if res["resource_name"] == topic:
                for c in res["configs"]:
                    if c.get("name", c.get("config_names")) == key:
                        return c
    raise AssertionError(f"{key} of {topic} not in {result}")


def test_confluent_admin_delete_records_and_elect_leaders(broker) -> None:
    """librdkafka's AdminClient speaks our DeleteRecords and ElectLeaders (whatever versions it
    negotiates, flexible v2 included): delete_records moves the low watermark to 7 of 10 and the
    consumer's earliest offset with it; a preferred election on a single-replica partition
    already led by its preferred replica is ELECTION_NOT_NEEDED, as Kafka answers."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka import ElectionType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "ck-trim"
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(30)
    wait_for(lambda: metadata_partitions(admin, topic) == {0: (broker.broker_id, [broker.broker_id],
                                                               [broker.broker_id])}, 10, "the topic led")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(30) == 0

    [(tp, fut)] = admin.delete_records([TopicPartition(topic, 0, 7)]).items()
    assert fut.result(30).low_watermark == 7
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-trim"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (7, 10)
    finally:
        consumer.close()

    with pytest.raises(KafkaException) as exc:
        result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
        for partition in result.values():      # per-partition errors, if not raised as a whole
            if partition is not None:
                raise KafkaException(partition)
    assert exc.value.args[0].name() == "ELECTION_NOT_NEEDED"
