"""kafkalite.client's Consumer and Producer fail over when a partition leader is killed -9.

Three real brokers, a topic with RF 3: a group Consumer and an acks=all Producer keep working
across the kill, as Java's clients do (node marked down, metadata refreshed, the new leaders
used), with no error surfacing while the cluster still has leaders. ZooKeeper sessions are 4 s
here (as in tests/fault/test_failover.py) so the controller notices the dead broker sooner.
"""
from __future__ import annotations

import os
import uuid

from kafkalite.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.waiting import wait_for

PARTITIONS = 6
PER_PHASE = 300
OVERRIDES = {"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "10000",
             "auto.leader.rebalance.enable": "false"}


def _leaders(client, topic: str) -> dict[int, int]:
    md = client.metadata([topic])
    return {p: md.leader(TopicPartition(topic, p)) for p in range(PARTITIONS)}


def test_consumer_and_producer_survive_leader_kill_9(cluster_factory) -> None:
    """Records produced before and after a partition leader's kill -9 are all consumed by a
    subscribed Consumer (none lost, none raised), and every send after the kill is acknowledged
    by the partition's new leader."""
    cluster = cluster_factory(3, OVERRIDES)
    topic, group = f"failover-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, PARTITIONS, 3)]) == {topic: None}
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=5)
    consumer = Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                        session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        consumer.subscribe([topic])
        got: dict[bytes, tuple[int, int]] = {}

        def produce(start: int) -> list:
            return [producer.send(topic, b"v-%d" % i, partition=i % PARTITIONS)
                    for i in range(start, start + PER_PHASE)]

        def consumed(n: int) -> bool:
            for r in consumer.poll(200):
                assert r.value is not None
                got.setdefault(r.value, (r.partition, r.offset))
            return len(got) >= n

        before = produce(0)
        producer.flush(30)
        assert all(f.result(0).offset >= 0 for f in before)
        wait_for(lambda: consumed(PER_PHASE), 30, "the records produced before the kill")

        leaders = _leaders(consumer.client, topic)
        keep = {consumer.client.find_coordinator(group), consumer.client.cluster.controller_id}
        victim = next(b for b in sorted(set(leaders.values())) if b not in keep)
        led = sorted(p for p, b in leaders.items() if b == victim)
        pid = cluster.kill_broker(victim)
        assert not cluster.broker(victim).alive
        try:
            os.kill(pid, 0)
            raise AssertionError(f"broker {victim} (pid {pid}) survived kill -9")
        except ProcessLookupError:
            pass

        after = produce(PER_PHASE)
        wait_for(lambda: consumed(2 * PER_PHASE), 45, "the records produced after the kill")
        producer.flush(30)
        assert all(f.result(0).offset >= 0 for f in after)

        assert set(got) == {b"v-%d" % i for i in range(2 * PER_PHASE)}
        moved = _leaders(consumer.client, topic)
        assert all(moved[p] not in (victim, -1) for p in led), (victim, moved)
        # after the kill, the victim's partitions were written by their new leaders
        assert any(got[b"v-%d" % i][0] in led for i in range(PER_PHASE, 2 * PER_PHASE))
    finally:
        consumer.close()
        producer.close(10)
