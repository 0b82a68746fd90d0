"""Fetch sessions (KIP-227) with real clients: kafka-python 3.0.12 consumes through an incremental
session (its session handler holds a broker-given non-zero id and an epoch past the first
incremental fetch) and gets every record in order; confluent-kafka (librdkafka fetches
sessionless) still consumes the same topic."""
from __future__ import annotations

import time

from confluent_kafka import Consumer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.interop.test_interop_kafka_python import create_topic

TOPIC = "fetch-sessions"
PARTITIONS = 3


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i, v in enumerate(values):
            producer.send(TOPIC, value=v, partition=i % PARTITIONS)
        producer.flush(30)
    finally:
        producer.close(10)


def test_kafka_python_consumes_through_incremental_session_and_librdkafka_sessionless(broker) -> None:
    """Three produce rounds, polled between them: kafka-python sees all 300 values in per-partition
    order, its session with the broker has a non-zero id and epoch > 2 (two or more incremental
    fetches answered without a session error); confluent-kafka then reads all 300 too."""
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                             fetch_max_wait_ms=100)
    got: list[tuple[int, bytes]] = []
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        for round_ in range(3):
            produce(broker.bootstrap, [f"{round_}-{i:03d}".encode() for i in range(100)])
            deadline = time.monotonic() + 30
            while len(got) < 100 * (round_ + 1) and time.monotonic() < deadline:
                for tp, msgs in consumer.poll(timeout_ms=200).items():
                    got.extend((tp.partition, m.value) for m in msgs)
        handlers = consumer._fetcher._session_handlers          # kafka-python's FetchSessionHandler per node
        assert handlers, "kafka-python kept no fetch session handler"
        metas = [h.next_metadata for h in handlers.values()]
        assert any(m.session_id != 0 and m.epoch > 2 for m in metas), [(m.session_id, m.epoch) for m in metas]
    finally:
        consumer.close()
    assert len(got) == 300
    for p in range(PARTITIONS):
        values = [v for q, v in got if q == p]
        expected = [f"{r}-{i:03d}".encode() for r in range(3) for i in range(100) if i % PARTITIONS == p]
        assert values == expected

    ck = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-sessions-ck",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        ck.subscribe([TOPIC])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 300 and time.monotonic() < deadline:
            msg = ck.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        assert seen == 300
    finally:
        ck.close()
