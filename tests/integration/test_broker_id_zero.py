"""Broker id 0 (Kafka's default ``broker.id``) is an id like any other, never "none".

Kafka's sample configuration starts at ``broker.id=0``; a truth test on a broker id (``if
controller:``, ``x or -1``, a poll that waits for a truthy id) turns broker 0 into "nobody".
These tests run brokers 0.. as real processes: the launcher must see controller 0 elected, and
broker 0 must lead, follow, fail over and rejoin like broker 1.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fault.cluster_support import full_isr, leaders, zk_states
from tests.support import wire
from tests.support.brokers import Cluster
from tests.support.waiting import wait_for


def tool(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=180)


def produce(bootstrap: str, topic: str, partitions: int, n: int, tag: str) -> None:
    """acks=all, idempotent; every record acknowledged without error."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)
    for i in range(n):
        producer.produce(topic, f"{tag}-{i}".encode(), partition=i % partitions, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert errors == []


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> list[str]:
    """The values of the first ``n`` records of every partition together (60 s at most)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []

    def read_some() -> bool:
        for m in c.consume(1000, 0.5):
            value = m.value()
            if m.error() is None and value is not None:
                got.append(value.decode())
        return len(got) >= n
    try:
        wait_for(read_some, 60, f"{n} records")
    finally:
        c.close()
    return got


def metadata_controller(bootstrap: str) -> int:
    return wire.request(bootstrap, 3, 8, {"topics": [], "allow_auto_topic_creation": False,
                                          "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False})["controller_id"]


def test_up_with_first_id_0_elects_a_controller(tmp_path: Path) -> None:
    """`kafkalite-cluster up --first-id 0` with one broker: broker 0 is the controller, `up`
    says so instead of timing out, `status` shows it, and a record round-trips."""
    data_dir = tmp_path / "cluster"
    try:
        up = tool(data_dir, "up", "--first-id", "0", "--brokers", "1", "--timeout", "60")
        assert up.returncode == 0, up.stderr
        assert re.search(r"^controller\s+0$", up.stdout, re.M), up.stdout
        status = tool(data_dir, "status").stdout
        assert re.search(r"broker 0\s+alive\s+pid \d+\s+port \d+\s+registered", status), status
        assert "controller: 0\n" in status, status
        found = re.search(r"bootstrap servers\s+(\S+)", up.stdout)
        assert found, up.stdout
        bootstrap = found.group(1)
        assert metadata_controller(bootstrap) == 0
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("id-zero", 1, 1)])["id-zero"].result(30)
        produce(bootstrap, "id-zero", 1, 10, "v")
        assert consume(bootstrap, "id-zero", 1, 10) == [f"v-{i}" for i in range(10)]
    finally:
        tool(data_dir, "down", "--timeout", "10")


def test_broker_0_leads_follows_fails_over_and_rejoins(zookeeper: Any, tmp_path: Path) -> None:
    """Brokers 0-2 (started in order, so broker 0 is the controller) with an RF-3 topic: broker 0
    leads one partition and follows the others; after kill -9 of broker 0 its partition gets a
    new leader and the cluster a new controller; restarted, broker 0 is back in every ISR and
    sees the new controller; every acknowledged record is read back."""
    cluster = Cluster(zookeeper, tmp_path / "cluster", 3, {"min.insync.replicas": "2",
                                                           "zookeeper.session.timeout.ms": "4000",
                                                           "auto.leader.rebalance.enable": "false"}, first_id=0)
    try:
        cluster.start()
        assert cluster.wait_for_controller(30) == 0
        assert metadata_controller(cluster.broker(2).bootstrap) == 0
        wait_for(lambda: all(len(wire.request(b.bootstrap, 3, 8, wire.metadata_body([]))
                                 ["brokers"]) == 3 for b in cluster.brokers), 30, "every broker seen by every broker")
        topic = "id-zero-rf3"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_for(lambda: len(zk_states(cluster, topic)) == 3 and full_isr(cluster, topic, 3), 30, "leaders")
        led_by_0 = [p for p, b in leaders(cluster, topic).items() if b == 0]
        assert led_by_0, f"broker 0 leads nothing: {leaders(cluster, topic)}"
        produce(cluster.bootstrap, topic, 3, 300, "before")

        cluster.broker(0).kill()
        wait_for(lambda: all(leaders(cluster, topic)[p] in (1, 2) for p in led_by_0), 60, "a new leader for broker 0's partitions")
        assert cluster.wait_for_controller(60) in (1, 2)
        produce(cluster.broker(1).bootstrap, topic, 3, 300, "during")

        cluster.broker(0).start()
        wait_for(lambda: full_isr(cluster, topic, 3), 60, "broker 0 back in every ISR")
        assert metadata_controller(cluster.broker(0).bootstrap) == cluster.controller_id()
        got = consume(cluster.bootstrap, topic, 3, 600)
        assert sorted(got) == sorted([f"before-{i}" for i in range(300)] + [f"during-{i}" for i in range(300)])
    finally:
        cluster.stop()
