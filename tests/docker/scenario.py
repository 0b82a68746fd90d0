"""The produce/consume/failover scenario, run against any 3-broker cluster: the docker-compose
cluster (tests/docker/test_compose_cluster.py) and local processes (tests/integration)."""
from __future__ import annotations

import time
from typing import Callable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_for


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """``count`` keyed records with acks=all and idempotence; every one must be acknowledged."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(first, first + count):
        p.produce(topic, f"value-{i}".encode(), key=f"key-{i % 20}".encode(),
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
        p.poll(0)
    assert p.flush(90) == 0, "records still in flight after 90 s"
    assert errors == []


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[str, list[str]]:
    """Every record from the beginning, per key in order (no group: assign)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "scenario-unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        by_key: dict[str, list[str]] = {}
        seen = 0
        deadline = time.monotonic() + 60
        while seen < expected and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error():
                    raise KafkaException(m.error())
                by_key.setdefault(m.key().decode(), []).append(m.value().decode())
                seen += 1
    finally:
        c.close()
    assert seen == expected, f"consumed {seen} of {expected}"
    return by_key


def produce_consume_failover(bootstrap: str, kill: Callable[[int], None], topic: str = "scenario") -> float:
    """Create a 3-partition topic with RF 3 and min.insync.replicas 2, produce, kill -9 the leader
    of partition 0, produce again (acks=all still succeeds with two in-sync replicas), then read
    everything back: nothing lost, nothing duplicated, per-key order kept. Returns the seconds
    from the kill until partition 0 had a new leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
             30, "leaders for every partition")
    produce(bootstrap, topic, 0, 300)
    victim = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    killed_at = time.monotonic()
    kill(victim)

    def new_leader() -> bool:
        try:
            leader = admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
        except KafkaException:
            return False
        return leader not in (-1, victim)
    wait_for(new_leader, 90, "a new leader for partition 0", interval=0.2)
    failover = time.monotonic() - killed_at
    produce(bootstrap, topic, 300, 300)
    by_key = consume_all(bootstrap, topic, 3, 600)
    for k in range(20):
        want = [f"value-{i}" for i in range(600) if i % 20 == k]
        assert by_key[f"key-{k}"] == want, f"key-{k}: lost, duplicated or reordered records"
    return failover
