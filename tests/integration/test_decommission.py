"""``kafkalite-cluster decommission`` on real brokers: every replica on broker 3 (a user topic's
and any internal topic's) moves to the other brokers with a throttled reassignment; the tool waits
for it, clears the throttles and says the broker may be stopped. Afterwards no partition names
broker 3 in Metadata, its partition directories are gone, no record was lost, and the cluster
serves acks=all produces with broker 3 stopped."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition as CTP

from kafkalite.client import Admin, NewTopic
from kafkalite.client.admin import BROKER
from tests.support.waiting import wait_for

TOPIC = "drain"
ASSIGNMENT = {0: [3, 1], 1: [1, 3], 2: [2, 3], 3: [1, 2]}
PER_PARTITION = 300


def produce(bootstrap: str, count: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    acked: list[int] = []
    for p in ASSIGNMENT:
        for i in range(count):
            producer.produce(TOPIC, b"v%d" % i, partition=p, on_delivery=lambda err, msg: acked.append(err is None))
    remaining = producer.flush(60)
    assert remaining == 0
    return sum(acked)


def test_decommission_moves_everything_off_a_broker(cluster_factory) -> None:
    cluster = cluster_factory(3)
    with Admin(cluster.bootstrap) as admin:
        assert admin.create_topics([NewTopic(TOPIC, replica_assignment=ASSIGNMENT)])[TOPIC] is None
        wait_for(lambda: TOPIC in admin.list_topics(), 30, "topic created")
    assert produce(cluster.bootstrap, PER_PARTITION) == len(ASSIGNMENT) * PER_PARTITION
    broker3_data = cluster.broker(3).dir / "data"
    assert (broker3_data / f"{TOPIC}-0").is_dir()

    out = subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(cluster.dir),
                          "decommission", "3", "--throttle", "20000000", "--timeout", "120"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "moving 3 replica(s) off broker 3: drain-0,drain-1,drain-2" in out.stdout
    assert "broker 3 holds no partitions: it may be stopped" in out.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3" in out.stdout

    with Admin(cluster.bootstrap) as admin:
        meta = admin.client.metadata(None)
        holders = {(name, p): list(part.replicas) for name, t in meta.topics.items() for p, part in t.partitions.items()}
        assert all(3 not in r for r in holders.values()), holders
        assert all(len(holders[(TOPIC, p)]) == 2 for p in ASSIGNMENT)
        assert admin.describe_configs(BROKER, "1")["leader.replication.throttled.rate"].source == "DEFAULT_CONFIG"
    wait_for(lambda: not any(broker3_data.glob(f"{TOPIC}-*")), 30, "broker 3's partition directories deleted")

    cluster.broker(3).terminate()
    assert cluster.broker(3).wait(30)
    assert produce(cluster.bootstrap, 10) == len(ASSIGNMENT) * 10
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "drain-check"})
    try:
        for p in ASSIGNMENT:
            low, high = consumer.get_watermark_offsets(CTP(TOPIC, p), timeout=10)
            assert (low, high) == (0, PER_PARTITION + 10)
    finally:
        consumer.close()
