"""Zero-copy fetch with real clients: on the broker's PLAINTEXT listener a Fetch's record bytes go
by os.sendfile (kafkalite/net/sendfile.py). Batches far bigger than a socket buffer (the sender
meets EAGAIN and resumes), small ones, compressed ones and transactional ones (read_committed skips
the aborted) reach librdkafka and kafka-python byte for byte, and consumers asking for less than a
big batch still get it whole (KIP-74)."""
from __future__ import annotations

import os

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition

from tests.support.waiting import wait_for

BIG = 900_000          # one record per batch, each far above a socket buffer
SMALL = 200


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)


def consume_confluent(bootstrap: str, topic: str, expected: int, **conf: object) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"zc-{topic}", "enable.auto.commit": False,
                  "fetch.max.bytes": 1 << 20, "max.partition.fetch.bytes": 4096, **conf})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def more() -> bool:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            return len(got) >= expected
        wait_for(more, 90, f"{expected} records of {topic}")
    finally:
        c.close()
    return got


def test_big_small_and_compressed_batches_reach_clients_byte_for_byte(broker) -> None:
    topic = "zero-copy-mixed"
    create_topic(broker.bootstrap, topic)
    values: list[bytes] = []
    for codec in ("none", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5,
                      "message.max.bytes": 2_000_000})
        for size in (BIG, SMALL, SMALL, BIG):
            v = os.urandom(size // 2) * 2       # half random: compressible, still checked byte for byte
            values.append(v)
            p.produce(topic, value=v)
            p.flush(30)
        for i in range(500):                    # many small records in few batches
            v = f"{codec}-{i}".encode() * 5
            values.append(v)
            p.produce(topic, value=v)
        assert p.flush(30) == 0
    assert consume_confluent(broker.bootstrap, topic, len(values)) == values
    k = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=20_000,
                      max_partition_fetch_bytes=4096, fetch_max_bytes=1 << 20)
    try:
        k.assign([KPTopicPartition(topic, 0)])
        k.seek_to_beginning()
        got = []
        for m in k:
            got.append(m.value)
            if len(got) == len(values):
                break
    finally:
        k.close()
    assert got == values


def test_read_committed_consumer_skips_aborted_big_batches(broker) -> None:
    topic = "zero-copy-txn"
    create_topic(broker.bootstrap, topic)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "zc-txn", "message.max.bytes": 2_000_000})
    p.init_transactions(30)
    committed = []
    for n in range(4):
        p.begin_transaction()
        vals = [os.urandom(BIG if i == 0 else SMALL) for i in range(3)]
        for v in vals:
            p.produce(topic, value=v)
        if n % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += vals
    assert consume_confluent(broker.bootstrap, topic, len(committed), **{"isolation.level": "read_committed"}) \
        == committed
