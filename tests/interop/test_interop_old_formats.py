"""Clients of Kafka 0.9 and 0.10 against kafkalite: kafka-python pinned to ``api_version=(0, 9)``
(Produce v1 and Fetch v1 with message format v0, ListOffsets v0) and ``(0, 10, 0)`` (Produce v2 and
Fetch v2 with format v1) round-trips keyed records per codec; what they wrote reads back
unchanged through confluent-kafka (v2 batches on disk), and what confluent-kafka wrote reads back
through them (down-converted). Kafka 2.x serves these versions; so must we."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import codec as kafka_codec

T0 = 1_700_000_000_000
COUNT = 500
OLD = {"0.9": (0, 9), "0.10.0": (0, 10, 0)}
CODECS = [c for c in ("none", "gzip", "snappy", "lz4")
          if c == "none" or getattr(kafka_codec, f"has_{c}")()]


def new_topic(bootstrap: str) -> str:
    name = f"old-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    return name


def rows(tag: str) -> list[tuple[bytes | None, bytes]]:
    return [(None if i % 10 == 0 else b"key-%d" % i, b"%s-%d-" % (tag.encode(), i) + b"x" * (i % 50))
            for i in range(COUNT)]


def old_produce(bootstrap: str, topic: str, version: tuple, codec: str, data: list) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks=1, linger_ms=5,
                             compression_type=None if codec == "none" else codec)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0, timestamp_ms=T0 + i)
                   for i, (k, v) in enumerate(data)]
        producer.flush(30)
        offsets = [f.get(30).offset for f in futures]
    finally:
        producer.close(10)
    assert offsets == list(range(offsets[0], offsets[0] + len(data)))


def old_consume(bootstrap: str, topic: str, version: tuple, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=version, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got += batch
        end = consumer.end_offsets([tp])[tp]          # ListOffsets v0 (0.9) / v0 (0.10.0) latest
    finally:
        consumer.close()
    assert end == expected
    return got


def new_consume(bootstrap: str, topic: str, expected: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "old-formats", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            got += [m for m in c.consume(1000, 0.5) if m.error() is None]
    finally:
        c.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("label", list(OLD))
def test_old_client_round_trip_and_cross_reads(broker, label: str, codec: str) -> None:
    version = OLD[label]
    magic = 0 if version == (0, 9) else 1
    topic = new_topic(broker.bootstrap)
    data = rows(f"{label}-{codec}")
    old_produce(broker.bootstrap, topic, version, codec, data)

    got = old_consume(broker.bootstrap, topic, version, len(data))
    assert [(m.key, m.value) for m in got] == data
    assert [m.offset for m in got] == list(range(len(data)))
    assert [m.timestamp for m in got] == ([T0 + i for i in range(len(data))] if magic else [None] * len(data))

    fresh = new_consume(broker.bootstrap, topic, len(data))       # stored as v2 batches
    assert [(m.key(), m.value()) for m in fresh] == data
    assert {m.timestamp()[1] for m in fresh} == ({T0 + i for i in range(len(data))} if magic else {-1})


@pytest.mark.parametrize("label", list(OLD))
def test_old_consumer_reads_what_a_current_producer_wrote(broker, label: str) -> None:
    topic = new_topic(broker.bootstrap)
    data = rows(f"new-{label}")
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip", "linger.ms": 5})
    for i, (k, v) in enumerate(data):
        p.produce(topic, key=k, value=v, partition=0, timestamp=T0 + i, headers=[("h", b"dropped for old readers")])
    assert p.flush(30) == 0
    got = old_consume(broker.bootstrap, topic, OLD[label], len(data))
    assert [(m.key, m.value) for m in got] == data
    assert [m.offset for m in got] == list(range(len(data)))
    if OLD[label] != (0, 9):
        assert [m.timestamp for m in got] == [T0 + i for i in range(len(data))]
