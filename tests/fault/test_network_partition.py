"""A partitioned leader cannot acknowledge acks=all writes, and drops its divergent tail on return.

Brokers run in network namespaces joined by a bridge (local-infrastructure.md §5); ZooKeeper
listens on every address of the root namespace, so brokers reach it at the bridge address. The
leader's link is cut (host-side veth down: silent drops, as in a real partition). A producer
*inside the leader's namespace* can still reach it: its acks=all write is appended there but
never acknowledged, while the other two elect a new leader and take more writes. After healing,
the old leader truncates the divergent record (it is gone from its log files) and rejoins the ISR.
Needs root (CAP_NET_ADMIN); skipped with the reason otherwise.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tests.fault.cluster_support import full_isr, leaders, metadata_agrees, zk_states
from tests.support.brokers import BrokerProcess, Cluster
from tests.support.waiting import wait_for
from tests.support.zookeeper import ZooKeeperServer

PFX, NET, TOPIC = "kcl", "10.214.0", "partitioned"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def netns_up(n: int) -> None:
    ip("link", "add", f"{PFX}-br0", "type", "bridge")
    ip("addr", "add", f"{NET}.1/24", "dev", f"{PFX}-br0")
    ip("link", "set", f"{PFX}-br0", "up")
    for i in range(1, n + 1):
        ip("netns", "add", f"{PFX}-b{i}")
        ip("link", "add", f"{PFX}-v{i}", "type", "veth", "peer", "name", "eth0", "netns", f"{PFX}-b{i}")
        ip("link", "set", f"{PFX}-v{i}", "master", f"{PFX}-br0", "up")
        ip("-n", f"{PFX}-b{i}", "addr", "add", f"{NET}.1{i}/24", "dev", "eth0")
        ip("-n", f"{PFX}-b{i}", "link", "set", "eth0", "up")
        ip("-n", f"{PFX}-b{i}", "link", "set", "lo", "up")


def netns_down(n: int) -> None:
    for i in range(1, n + 1):
        ip("link", "del", f"{PFX}-v{i}", check=False)
        ip("netns", "del", f"{PFX}-b{i}", check=False)
    ip("link", "del", f"{PFX}-br0", check=False)


def netns_unavailable() -> str | None:
    probe = f"{PFX}-probe-{uuid.uuid4().hex[:6]}"
    try:
        made = ip("netns", "add", probe, check=False)
    except FileNotFoundError:
        return "iproute2 (ip) is not installed"
    if made.returncode != 0:
        return f"ip netns add failed (needs root / CAP_NET_ADMIN): {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def allow_bridged_traffic() -> list[str] | None:
    """Where br_netfilter hands bridged frames to iptables and the FORWARD chain drops them (a
    host that once ran Docker has policy DROP), brokers in two namespaces could not reach each
    other: accept frames between ports of the test bridge. Returns the rule to delete, or None."""
    rule = ["FORWARD", "-i", f"{PFX}-br0", "-o", f"{PFX}-br0", "-j", "ACCEPT"]
    try:
        made = subprocess.run(["iptables", "-I", *rule], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return rule if made.returncode == 0 else None


PROBE_LISTEN = ("import socket; s = socket.socket(); s.bind((__import__('sys').argv[1], 0)); s.listen(); "
                "print(s.getsockname()[1], flush=True); s.settimeout(15); c, _ = s.accept(); c.sendall(b'ok')")
PROBE_CONNECT = ("import socket, sys; c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5); "
                 "print(c.recv(2).decode())")


def namespaces_unreachable() -> str | None:
    """A TCP connection from namespace 1 to a listener in namespace 2, as brokers make them."""
    listener = subprocess.Popen(["ip", "netns", "exec", f"{PFX}-b2", sys.executable, "-c", PROBE_LISTEN,
                                 f"{NET}.12"], stdout=subprocess.PIPE, text=True)
    try:
        port = (listener.stdout.readline() if listener.stdout else "").strip()
        if not port:
            return "could not listen inside a network namespace"
        dial = subprocess.run(["ip", "netns", "exec", f"{PFX}-b1", sys.executable, "-c", PROBE_CONNECT,
                               f"{NET}.12", port], capture_output=True, text=True, timeout=30)
        if dial.stdout.strip() != "ok":
            return f"namespaces on the test bridge cannot reach each other: {dial.stderr.strip()[-300:]}"
        return None
    finally:
        listener.kill()
        listener.wait()


class NamespacedBroker(BrokerProcess):
    """Broker ``i`` inside namespace ``kcl-b<i>``, listening on 10.214.0.1<i>."""

    @property
    def address(self) -> str:
        return f"{NET}.1{self.broker_id}"

    @property
    def bootstrap(self) -> str:
        return f"{self.address}:{self.port}"

    def properties(self) -> dict[str, str]:
        props = super().properties()
        props["listeners"] = f"PLAINTEXT://{self.address}:0"
        props["zookeeper.connect"] = f"{NET}.1:{self.cluster.zookeeper.port}{self.cluster.chroot}"
        return props

    def command(self, props_path: Path) -> list[str]:
        return ["ip", "netns", "exec", f"{PFX}-b{self.broker_id}", *super().command(props_path)]


INSIDE_PRODUCER = """
import sys
from confluent_kafka import Producer
errors = []
p = Producer({"bootstrap.servers": sys.argv[1], "acks": "all", "retries": 0, "enable.idempotence": False,
              "message.timeout.ms": 8000, "request.timeout.ms": 5000})
p.produce(sys.argv[2], sys.argv[3].encode(), partition=0, on_delivery=lambda err, msg: errors.append(err))
p.flush(20)
print(errors[0].name() if errors and errors[0] else "ACKNOWLEDGED")
"""


def _log_bytes(broker: BrokerProcess) -> bytes:
    return b"".join(p.read_bytes() for p in (broker.dir / "data" / f"{TOPIC}-0").glob("*.log"))


def _knows_cluster(broker: BrokerProcess) -> bool:
    """The broker's own metadata names all three brokers and a controller."""
    try:
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=5)
    except KafkaException:
        return False
    return len(md.brokers) == 3 and md.controller_id in (1, 2, 3)


def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for v in values:
        producer.produce(TOPIC, v, partition=0)
    assert producer.flush(60) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="network namespaces are Linux-only")
def test_partitioned_leader_truncates_divergent_tail(tmp_path) -> None:
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    netns_down(3)                      # leftovers of an interrupted run
    netns_up(3)
    rule = allow_bridged_traffic()
    zk = cluster = None
    try:
        blocked = namespaces_unreachable()
        if blocked:
            pytest.skip(blocked)
        # on every root-namespace address (the bridge too), so namespaced brokers reach it
        zk = ZooKeeperServer(tmp_path / "zk", listen_address="0.0.0.0").start()
        cluster = Cluster(zk, tmp_path / "cluster", 0)
        overrides = {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": "4000",
                     "replica.lag.time.max.ms": "3000", "auto.leader.rebalance.enable": "false"}
        cluster.brokers = [NamespacedBroker(cluster, i, dict(overrides)) for i in (1, 2, 3)]
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        # every broker's metadata names all three and the controller: the controller reached them
        wait_for(lambda: all(_knows_cluster(b) for b in cluster.brokers), 60, "metadata naming all brokers")
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
        wait_for(lambda: len(zk_states(cluster, TOPIC)) == 1 and full_isr(cluster, TOPIC, 3), 30, "leader")
        before = [f"before-{i}".encode() for i in range(100)]
        _produce(cluster.bootstrap, before)
        old = cluster.broker(leaders(cluster, TOPIC)[0])
        divergent = f"divergent-{uuid.uuid4().hex}"

        ip("link", "set", f"{PFX}-v{old.broker_id}", "down")          # partition the leader
        inside = subprocess.run(["ip", "netns", "exec", f"{PFX}-b{old.broker_id}", sys.executable, "-c",
                                 INSIDE_PRODUCER, old.bootstrap, TOPIC, divergent],
                                capture_output=True, text=True, timeout=60)
        assert inside.returncode == 0, inside.stderr[-2000:]
        assert inside.stdout.strip() != "ACKNOWLEDGED", "an isolated leader acknowledged an acks=all write"
        assert divergent.encode() in _log_bytes(old), "the isolated leader should have appended the record"

        wait_for(lambda: leaders(cluster, TOPIC)[0] not in (-1, old.broker_id), 60, "a new leader")
        others = ",".join(b.bootstrap for b in cluster.brokers if b is not old)
        after = [f"after-{i}".encode() for i in range(100)]
        _produce(others, after)

        ip("link", "set", f"{PFX}-v{old.broker_id}", "up")            # heal
        wait_for(lambda: full_isr(cluster, TOPIC, 3), 90, "the old leader back in the ISR")
        assert divergent.encode() not in _log_bytes(old), "the divergent tail was not truncated"
        wait_for(lambda: metadata_agrees(cluster, TOPIC) is None, 30, "metadata agreement")

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "np", "enable.auto.commit": False})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        deadline_msgs = len(before) + len(after)
        for _ in range(60):
            got += [m.value() for m in consumer.consume(1000, 1.0) if not m.error()]
            if len(got) >= deadline_msgs:
                break
        consumer.close()
        assert got == before + after
        states = json.dumps(zk_states(cluster, TOPIC))
        print(f"network partition: old leader {old.broker_id}, isolated produce -> {inside.stdout.strip()}, "
              f"state after heal {states}")
    finally:
        if cluster is not None:
            cluster.stop()
        if zk is not None:
            zk.stop()
        if rule is not None:
            subprocess.run(["iptables", "-D", *rule], capture_output=True)
        netns_down(3)
