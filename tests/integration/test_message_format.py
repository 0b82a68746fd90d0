"""message.format.version on a real broker with real clients, as librdkafka's 0092_mixed_msgver
does it: confluent-kafka produces 30 records (v2), the topic is altered to 0.10.0 with
IncrementalAlterConfigs, 30 more are produced; confluent-kafka, kafka-python and kafkalite's own
consumer read all 60 with their offsets and values, and a raw Fetch v12 decoded with kafkalite's codec shows the second
half as magic 1. An idempotent producer on a 0.10.0 topic is refused with
UNSUPPORTED_FOR_MESSAGE_FORMAT and nothing is appended."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.protocol.api_keys import ApiKey
from kafkalite.records.batch import offset_and_length
from kafkalite.records.legacy import read_message_set
from tests.support.waiting import wait_for
from tests.support.wire import request
from tests.support.topics import create_topic

UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
HALF = 30


def topic_format(bootstrap: str, name: str) -> str:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(30)["message.format.version"].value


def set_topic_format(bootstrap: str, name: str, version: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("message.format.version", version, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    # the broker applies it from ZooKeeper's watch; DescribeConfigs reads the same view
    wait_for(lambda: topic_format(bootstrap, name) == version, 30, "the new message format")


def produce(bootstrap: str, topic: str, first: int, n: int, idempotent: bool = False) -> list[Any]:
    """Values first..first+n-1, one partition; returns the delivery errors (and fatal errors)."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": idempotent,
                  "message.timeout.ms": 10000, "error_cb": errors.append})

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(first, first + n):
        p.produce(topic, b"value-%d" % i, key=b"k%d" % i, partition=0, on_delivery=report)
    p.flush(30)
    return errors


def read_confluent(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        wait_for(lambda: [got.append((m.offset(), m.value())) for m in c.consume(100, 0.5) if m.error() is None]
                 and len(got) >= count, 30, "confluent-kafka's records")
    finally:
        c.close()
    return got


def read_kafka_python(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got: list[tuple[int, bytes]] = []
    try:
        wait_for(lambda: [got.extend((r.offset, r.value) for r in rs) for rs in c.poll(500).values()]
                 is not None and len(got) >= count, 30, "kafka-python's records")
    finally:
        c.close()
    return got


def read_kafkalite(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    """kafkalite's own consumer (and so the Spark reader's decoding): v2 only, v0/v1 entries
    converted back (records/legacy.py ``as_v2_batches``)."""
    from kafkalite.client import Consumer, TopicPartition

    c = Consumer(bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got: list[tuple[int, bytes]] = []
    try:
        wait_for(lambda: [got.append((r.offset, r.value)) for r in c.poll(500)] is not None and len(got) >= count,
                 30, "kafkalite's records")
    finally:
        c.close(autocommit=False)
    return got


def fetched_magics(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(offset, magic) of each entry of a raw Fetch v12 from offset 0: a v2 batch (its base
    offset) or a v0/v1 message (its offset); both keep the magic at byte 16 of the entry."""
    resp = request(bootstrap, ApiKey.FETCH, 12, {
        "cluster_id": None, "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    data = bytes(resp["responses"][0]["partitions"][0]["records"])
    out, pos = [], 0
    while pos < len(data):
        offset, size = offset_and_length(data, pos)
        out.append((offset, data[pos + 16]))
        if data[pos + 16] < 2:    # a legacy entry decodes as a message set with kafkalite's reader
            assert read_message_set(data[pos:pos + size])[2][0].value == b"value-%d" % offset
        pos += size
    return out


def test_a_topic_altered_to_0_10_0_mid_stream_reads_back_whole_with_both_clients(broker: Any) -> None:
    topic = f"mixed-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic)
    assert produce(broker.bootstrap, topic, 0, HALF) == []
    set_topic_format(broker.bootstrap, topic, "0.10.0")
    assert produce(broker.bootstrap, topic, HALF, HALF) == []
    expected = [(i, b"value-%d" % i) for i in range(2 * HALF)]
    assert read_confluent(broker.bootstrap, topic, 2 * HALF) == expected
    assert read_kafka_python(broker.bootstrap, topic, 2 * HALF) == expected
    assert read_kafkalite(broker.bootstrap, topic, 2 * HALF) == expected
    magics = fetched_magics(broker.bootstrap, topic)
    assert {m for o, m in magics if o < HALF} == {2}
    assert [(o, m) for o, m in magics if o >= HALF] == [(o, 1) for o in range(HALF, 2 * HALF)]


def test_an_idempotent_producer_on_a_0_10_0_topic_is_refused(broker: Any) -> None:
    topic = f"old-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, configs={"message.format.version": "0.10.0"})
    errors = produce(broker.bootstrap, topic, 0, 3, idempotent=True)
    assert errors and any(getattr(e, "code", lambda: None)() == UNSUPPORTED_FOR_MESSAGE_FORMAT for e in errors), errors
    assert read_confluent_end(broker.bootstrap, topic) == 0


def read_confluent_end(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


pytestmark = pytest.mark.integration
