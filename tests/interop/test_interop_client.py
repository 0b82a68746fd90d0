"""kafkalite.client against real clients: what it produces kcat and confluent-kafka read
identically, what they produce it reads identically, and its murmur2 partition choice equals
librdkafka's murmur2_random (Java's choice) for keyed records."""
from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from kafkalite.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.waiting import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


RECORDS = [(None if i % 9 == 0 else b"k%d" % i, None if i % 13 == 0 else bytes([i % 256]) * (i % 50 + 1),
            [("h", b"%d" % i)] if i % 4 == 0 else []) for i in range(200)]


def read_ours(bs: str, topic: str, partitions: int, n: int) -> list:
    with Consumer(bs, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        got: list = []
        wait_for(lambda: got.extend(c.poll(200)) or len(got) >= n, timeout=30, what="records")
        return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_what_we_produce(broker, codec):
    topic = unique(f"ours-{codec}")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])
    with Producer(broker.bootstrap, compression_type=codec, linger_ms=5, enable_idempotence=True, acks="all") as p:
        futs = [p.send(topic, v, k, headers=h) for k, v, h in RECORDS]
        metas = [f.result(30) for f in futs]
    expected = sorted((m.partition, m.offset, k, v, h or None) for m, (k, v, h) in zip(metas, RECORDS))
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"),
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(3)])
    got = []
    try:
        def more() -> bool:
            for m in c.consume(500, 0.5):
                if not m.error():
                    got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers()))
            return len(got) >= len(RECORDS)
        wait_for(more, timeout=60, what="confluent reads all")
    finally:
        c.close()
    norm = sorted((p, o, k, v, [(hk, hv) for hk, hv in h] if h else None) for p, o, k, v, h in got)
    assert norm == [(p, o, k, v, list(h) if h else None) for p, o, k, v, h in expected]


def test_we_read_what_confluent_produces_and_murmur2_matches(broker):
    """confluent-kafka with partitioner=murmur2_random places keyed records as Java does; our
    partitioner picks the same partition for every key, and our consumer reads every record."""
    topic = unique("theirs")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 7, 1)])
    prod = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random",
                                     "compression.type": "lz4", "linger.ms": 5})
    placed = {}

    def report(err, msg):
        assert err is None, err
        placed[msg.key()] = msg.partition()
    keys = [b"user-%d" % i for i in range(100)] + [b"kafka", b"a", b"hello world", b"order#2024-11-21"]
    for k in keys:
        prod.produce(topic, value=b"v-" + k, key=k, headers=[("src", b"rdk")], on_delivery=report)
    assert prod.flush(30) == 0
    from kafkalite.client.partitioner import partition_for_key
    assert {k: partition_for_key(k, 7) for k in keys} == placed
    with Producer(broker.bootstrap) as p:
        ours = {k: p.send(topic, b"x", k).result(30).partition for k in keys}
    assert ours == placed
    got = read_ours(broker.bootstrap, topic, 7, 2 * len(keys))
    theirs = {(r.key, r.value, tuple(r.headers)) for r in got if r.value != b"x"}
    assert theirs == {(k, b"v-" + k, (("src", b"rdk"),)) for k in keys}


@pytest.mark.skipif(KCAT is None, reason="kcat not installed")
def test_kcat_round_trip_both_ways(broker):
    topic = unique("kcat")
    with Producer(broker.bootstrap, compression_type="zstd") as p:
        for i in range(50):
            p.send(topic, b"ours-%d" % i, b"k%d" % i, partition=0)
    out = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
                          "-f", "%k|%s|%o\n"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"k{i}|ours-{i}|{i}" for i in range(50)]
    lines = "".join(f"kk{i}:theirs-{i}\n" for i in range(50))
    r = subprocess.run([KCAT, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", "snappy"],
                       input=lines, text=True, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = read_ours(broker.bootstrap, topic, 1, 100)
    assert [(r.offset, r.key, r.value) for r in got[50:]] == [(50 + i, b"kk%d" % i, b"theirs-%d" % i) for i in range(50)]
