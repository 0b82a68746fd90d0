"""Leadership moves that need no failure: controlled shutdown and preferred leader election."""
from __future__ import annotations

import json
import signal
import statistics
import time

from confluent_kafka.admin import AdminClient, NewTopic
from kafkalite.protocol.api_keys import ApiKey
from tests.fault.cluster_support import (Streamer, full_isr, leaders, metadata_agrees, report,
                                         verify_exactly_once, zk_assignment, zk_states)
from tests.support import wire
from tests.support.waiting import wait_for

PARTITIONS = 6


def _every_broker_known(cluster) -> bool:
    """Every broker's Metadata lists every broker. A broker counts as started when its znode
    exists; the others learn of it through their watches a moment later, and a topic created in
    between gets INVALID_REPLICATION_FACTOR (seen under heavy machine load)."""
    ids = sorted(b.broker_id for b in cluster.brokers)
    for b in cluster.brokers:
        try:
            r = wire.request(b.bootstrap, ApiKey.METADATA, 8, wire.metadata_body([]), timeout=10)
        except Exception:  # noqa: BLE001 - not answering yet: keep waiting
            return False
        if sorted(x["node_id"] for x in r["brokers"]) != ids:
            return False
    return True


def _topic(cluster, name: str) -> None:
    wait_for(lambda: _every_broker_known(cluster), 30, "every broker in every broker's metadata")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    wait_for(lambda: len(zk_states(cluster, name)) == PARTITIONS and full_isr(cluster, name, 3), 30, "leaders")


def test_sigterm_moves_leadership_before_exit(cluster_factory) -> None:
    """SIGTERM to the leader of partition 0 while an acks=all producer streams: ZooKeeper shows
    every partition it led moved to another in-sync replica, and every ISR without it, in writes
    ordered before its registration vanished (zxids); it exits 0; nothing acknowledged is lost.
    The longest acknowledgement gap on the partitions it led and the median acknowledgement
    latency after the move are recorded (not asserted)."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    topic = "controlled"
    _topic(cluster, topic)
    victim = cluster.broker(leaders(cluster, topic)[0])
    led = sorted(p for p, b in leaders(cluster, topic).items() if b == victim.broker_id)
    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        wait_for(lambda: all(stream.count(p) > 50 for p in range(PARTITIONS)), 30, "records flowing")
        sigterm = time.monotonic()
        victim.proc.send_signal(signal.SIGTERM)
        assert victim.proc.wait(30) == 0
        exited = time.monotonic()
        deregistered = cluster.zk.get(f"{cluster.chroot}/brokers/ids")[1].pzxid
        states = zk_states(cluster, topic)
        for p, s in states.items():
            assert s["leader"] != victim.broker_id and victim.broker_id not in s["isr"], (p, s)
        for p in led:
            assert states[p]["mzxid"] < deregistered, f"partition {p} moved only after the broker left"
        wait_for(lambda: all(stream.count(p) > 100 for p in range(PARTITIONS)), 30, "records after the move")
        wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "metadata agreement after shutdown")
        agreed = time.monotonic()

        def latencies_since_agreement() -> list[float]:
            with stream.lock:
                return [ack - enq for p in range(PARTITIONS) for _, enq, ack in stream.acked[p] if enq > agreed]
        wait_for(lambda: len(latencies_since_agreement()) >= 600, 60, "records enqueued after the move acknowledged")
        gap = max(stream.longest_ack_gap(p, sigterm - 0.5, time.monotonic()) for p in led)
        median = statistics.median(latencies_since_agreement())
    assert "controlled shutdown succeeded" in victim.log_path.read_text()
    checked = verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)
    report("controlled_shutdown", {"partitions_moved": led, "longest_ack_gap_s": round(gap, 3),
                                   "median_ack_latency_after_s": round(median, 4),
                                   "sigterm_to_exit_s": round(exited - sigterm, 3), "acknowledged_checked": checked})


def test_controller_sigterm_hands_over(cluster_factory) -> None:
    """The controller itself shuts down: it moves its own leaderships (a local request), then a
    new controller is elected and the cluster still takes acks=all writes on every partition."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    topic = "controller-exit"
    _topic(cluster, topic)
    victim = cluster.broker(json.loads(cluster.zk_get("/controller"))["brokerid"])
    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        wait_for(lambda: stream.count() > 300, 30, "records flowing")
        victim.proc.send_signal(signal.SIGTERM)
        assert victim.proc.wait(30) == 0
        deregistered = cluster.zk.get(f"{cluster.chroot}/brokers/ids")[1].pzxid
        for p, s in zk_states(cluster, topic).items():
            assert s["leader"] != victim.broker_id and s["mzxid"] < deregistered, (p, s)
        wait_for(lambda: json.loads(cluster.zk_get("/controller") or b'{"brokerid": -1}')["brokerid"]
                 not in (-1, victim.broker_id), 30, "a new controller")
        before = {p: stream.count(p) for p in range(PARTITIONS)}
        wait_for(lambda: all(stream.count(p) > before[p] + 20 for p in range(PARTITIONS)), 30, "writes continue")
    assert "controlled shutdown succeeded" in victim.log_path.read_text()
    verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)


def test_preferred_leader_returns_after_restart(cluster_factory) -> None:
    """Kill -9 a broker: its preferred partitions fail over. Restarted, it catches up, rejoins the
    ISRs, and the controller's auto rebalance gives it back leadership of every partition it
    prefers; all brokers' metadata agrees with ZooKeeper."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2", "leader.imbalance.check.interval.seconds": "1",
                                  "zookeeper.session.timeout.ms": "4000"})
    topic = "preferred"
    _topic(cluster, topic)
    preferred = {p: r[0] for p, r in zk_assignment(cluster, topic).items()}
    wait_for(lambda: leaders(cluster, topic) == preferred, 30, "preferred leaders at start")
    victim = cluster.broker(preferred[0])
    mine = sorted(p for p, b in preferred.items() if b == victim.broker_id)
    victim.kill()
    wait_for(lambda: all(leaders(cluster, topic)[p] not in (-1, victim.broker_id) for p in mine), 30, "failover")
    victim.start()
    wait_for(lambda: full_isr(cluster, topic, 3), 60, "the restarted broker back in every ISR")
    wait_for(lambda: leaders(cluster, topic) == preferred, 30, "leadership back on the preferred replicas")
    wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "metadata agreement")
