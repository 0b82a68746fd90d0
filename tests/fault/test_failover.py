"""Replication keeps every acknowledged record when brokers die (RF 3, min.insync.replicas 2).

Each test runs three real brokers on one real ZooKeeper. Sessions are 4 s here so a kill -9 is
noticed sooner; every wait is on a condition with a generous deadline. Failover times (kill -9
to the next acknowledged acks=all record enqueued after the kill, on the partitions the victim
led) are printed and written to var/test-reports/failover.json; they are not asserted.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.fault.cluster_support import (Streamer, controller_id, full_isr, leaders, metadata_agrees, report,
                                         verify_exactly_once, zk_states)
from tests.support.waiting import wait_for

PARTITIONS = 6
KILLS = 5
OVERRIDES = {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "10000",
             "auto.leader.rebalance.enable": "false"}


def _topic(cluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    wait_for(lambda: len(zk_states(cluster, name)) == PARTITIONS and full_isr(cluster, name, 3), 30, "leaders")


@pytest.mark.slow
@pytest.mark.parametrize("victim_kind", ["leader", "controller"])
def test_acks_all_survives_repeated_kill_9(cluster_factory, victim_kind: str) -> None:
    """An idempotent acks=all producer streams numbered records while the leader of a partition
    (or the controller) is killed with -9 five times and restarted each time. After every
    failover and every rejoin all brokers' metadata agrees with ZooKeeper; afterwards each
    partition holds every acknowledged number exactly once, in order, with no gap."""
    cluster = cluster_factory(3, OVERRIDES)
    topic = f"failover-{victim_kind}"
    _topic(cluster, topic)
    kills = []
    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        for i in range(KILLS):
            wait_for(lambda: all(stream.count(p) > 20 * (i + 1) for p in range(PARTITIONS)), 60, "records flowing")
            now_leading = leaders(cluster, topic)
            victim_id = now_leading[i % PARTITIONS] if victim_kind == "leader" else controller_id(cluster)
            victim = cluster.broker(victim_id)
            led = sorted(p for p, b in now_leading.items() if b == victim_id)
            killed = time.monotonic()
            victim.kill()
            wait_for(lambda: all(stream.first_ack_enqueued_after(p, killed) for p in led), 90,
                     "acks=all writes to resume on the partitions the victim led")
            failover = max((stream.first_ack_enqueued_after(p, killed) - killed for p in led), default=None)
            wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "metadata agreement after failover")
            victim.start()
            wait_for(lambda: full_isr(cluster, topic, 3), 90, "the restarted broker back in every ISR")
            wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "metadata agreement after rejoin")
            kills.append({"victim": victim_id, "led": led,
                          "failover_s": None if failover is None else round(failover, 3)})
    checked = verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)
    report(f"kill_9_{victim_kind}", {"kills": kills, "acknowledged_checked": checked})
    assert checked > 1000


def test_two_of_three_dead_refuses_acks_all(cluster_factory) -> None:
    """With two of three replicas dead the survivor leads with ISR [itself]: an acks=all produce
    is refused with NOT_ENOUGH_REPLICAS (the code the client reports) and nothing is appended;
    after both return, every record acknowledged before is still there."""
    cluster = cluster_factory(3, OVERRIDES)
    topic = "two-dead"
    _topic(cluster, topic)
    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        wait_for(lambda: stream.count() > 600, 60, "records flowing")
    survivor = cluster.broker(controller_id(cluster))
    dead = [b for b in cluster.brokers if b is not survivor]
    for b in dead:
        b.kill()
    wait_for(lambda: all(s["leader"] == survivor.broker_id and s["isr"] == [survivor.broker_id]
                         for s in zk_states(cluster, topic).values()), 60, "ISR shrunk to the survivor")
    wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "metadata agreement")
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": survivor.bootstrap, "acks": "all", "retries": 0,
                         "message.timeout.ms": 20000})
    for p in range(PARTITIONS):
        producer.produce(topic, b"refused", partition=p, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS] * PARTITIONS
    for b in dead:
        b.start()
    wait_for(lambda: full_isr(cluster, topic, 3), 90, "both brokers back in every ISR")
    verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)
