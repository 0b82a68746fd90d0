"""Replication keeps every acknowledged record when leaders die (replication factor 3)."""
from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.waiting import wait_for

TOPIC = "failover"
PARTITIONS = 3


def leader_of(admin: AdminClient, partition: int) -> int:
    return admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[partition].leader


def test_acks_all_survives_leader_kill_9(cluster_factory) -> None:
    """An acks=all producer streams numbered records while the leader of partition 0 is killed
    with -9 twice and restarted. Afterwards each partition holds every acknowledged number
    exactly once, in order, and the restarted brokers are back in every ISR."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2", "replica.lag.time.max.ms": "10000"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    wait_for(lambda: all(leader_of(admin, p) >= 0 for p in range(PARTITIONS)), 30, "leaders")

    acked: dict[int, list[int]] = defaultdict(list)
    failures: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def delivered(err, msg) -> None:
        if err is None:
            with lock:
                acked[msg.partition()].append(int(msg.value()))
        else:
            failures.append(str(err))

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True, "message.timeout.ms": 60000})
        n = 0
        started = time.monotonic()
        while not stop.is_set():
            try:
                producer.produce(TOPIC, str(n).encode(), partition=n % PARTITIONS, on_delivery=delivered)
            except BufferError:            # queue full while a leader is away: wait for deliveries
                producer.poll(0.1)
                continue
            n += 1
            producer.poll(0)
            ahead = n / 2000.0 - (time.monotonic() - started)    # pace at about 2,000 records/s
            if ahead > 0:
                time.sleep(ahead)
        producer.flush(90)

    thread = threading.Thread(target=produce)
    thread.start()
    gaps = []
    try:
        for _ in range(2):
            wait_for(lambda: len(acked[0]) > 200, 30, "records on partition 0")
            victim = cluster.broker(leader_of(admin, 0))
            before = len(acked[0])
            killed_at = time.monotonic()
            victim.kill()
            wait_for(lambda: len(acked[0]) > before + 50, 60, "produce to resume after failover")
            gaps.append(time.monotonic() - killed_at)
            victim.start()
            wait_for(lambda: all(victim.broker_id in admin.list_topics(TOPIC, timeout=10)
                                 .topics[TOPIC].partitions[p].isrs for p in range(PARTITIONS)), 60,
                     "the restarted broker to rejoin every ISR")
    finally:
        stop.set()
        thread.join(120)
    print(f"failover gaps (kill -9 to next acknowledged record on partition 0): {[round(g, 2) for g in gaps]} s")
    total = sum(len(v) for v in acked.values())
    assert total > 1000 and not failures, failures[:5]

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[int]] = defaultdict(list)
    deadline = time.monotonic() + 60
    while sum(len(v) for v in seen.values()) < total and time.monotonic() < deadline:
        for msg in consumer.consume(5000, 1.0):
            assert not msg.error(), msg.error()
            seen[msg.partition()].append(int(msg.value()))
    consumer.close()
    for p in range(PARTITIONS):
        assert len(seen[p]) == len(set(seen[p])), f"duplicates in partition {p}"
        assert seen[p] == sorted(seen[p]), f"partition {p} out of order"
        assert set(acked[p]) <= set(seen[p]), f"partition {p} lost {len(set(acked[p]) - set(seen[p]))} acknowledged records"
