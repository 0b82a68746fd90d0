"""kafka-python, aiokafka and kcat keep producing and consuming across a leader change.

One 3-broker cluster (RF 3, min.insync.replicas 2, one partition). Each client writes acks=all
records, the partition's leader is killed with -9 (its successor is elected from the ISR), each
client writes again through the new leader, and each reads the whole partition back: every
record it was told was written is there once, in order.
"""
from __future__ import annotations

import asyncio
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tests.fault.cluster_support import full_isr, leaders, metadata_agrees, zk_states
from tests.interop.interop_support import KCAT_FRAMED, kcat, parse_kcat_framed
from tests.support.waiting import wait_for

TOPIC = "interop-failover"
N = 50


def _kafka_python_produce(bootstrap: str, tag: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                             request_timeout_ms=20000, max_block_ms=60000)
    try:
        for i in range(N):
            producer.send(TOPIC, f"kp-{tag}-{i}".encode(), partition=0).get(timeout=60)
    finally:
        producer.close(10)


def _aiokafka_produce(bootstrap: str, tag: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=20000,
                                    retry_backoff_ms=200)
        await producer.start()
        try:
            for i in range(N):
                for attempt in range(30):          # aiokafka surfaces NotLeader once: retry like an app
                    try:
                        await producer.send_and_wait(TOPIC, f"aio-{tag}-{i}".encode(), partition=0)
                        break
                    except Exception:
                        if attempt == 29:
                            raise
                        await asyncio.sleep(0.5)
        finally:
            await producer.stop()

    asyncio.run(run())


def _kcat_produce(bootstrap: str, tag: str) -> None:
    data = b"".join(f"kcat-{tag}-{i}\n".encode() for i in range(N))
    out = kcat("-b", bootstrap, "-P", "-t", TOPIC, "-p", "0", "-X", "request.required.acks=all",
               "-X", "message.timeout.ms=60000", data=data, timeout=90)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]


def _kafka_python_read(bootstrap: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000,
                             auto_offset_reset="earliest")
    consumer.assign([TopicPartition(TOPIC, 0)])
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()


def _aiokafka_read(bootstrap: str, expected: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, 0)])
            await consumer.seek_to_beginning()
            got: list[bytes] = []
            while len(got) < expected:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def test_clients_survive_a_leader_change(cluster_factory) -> None:
    if subprocess.run(["which", "kcat"], capture_output=True).returncode != 0:
        pytest.skip("kcat is not installed")
    cluster = cluster_factory(3, {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "4000",
                                  "auto.leader.rebalance.enable": "false"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_for(lambda: len(zk_states(cluster, TOPIC)) == 1 and full_isr(cluster, TOPIC, 3), 30, "leader")
    producers = [_kafka_python_produce, _aiokafka_produce, _kcat_produce]
    for produce in producers:
        produce(cluster.bootstrap, "before")
    old = leaders(cluster, TOPIC)[0]
    cluster.broker(old).kill()
    wait_for(lambda: leaders(cluster, TOPIC)[0] not in (-1, old), 60, "a new leader")
    wait_for(lambda: metadata_agrees(cluster, TOPIC) is None, 30, "metadata agreement")
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers if b.alive)
    for produce in producers:
        produce(bootstrap, "after")
    # same order as written: each client finished before the next one started
    expected = ([f"kp-before-{i}".encode() for i in range(N)] + [f"aio-before-{i}".encode() for i in range(N)]
                + [f"kcat-before-{i}".encode() for i in range(N)] + [f"kp-after-{i}".encode() for i in range(N)]
                + [f"aio-after-{i}".encode() for i in range(N)] + [f"kcat-after-{i}".encode() for i in range(N)])
    assert _kafka_python_read(bootstrap) == expected
    assert _aiokafka_read(bootstrap, len(expected)) == expected
    out = kcat("-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-f", KCAT_FRAMED, timeout=90)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert [g.value for g in parse_kcat_framed(out.stdout)] == expected
