"""High watermark and ISR on three in-process brokers (memory reactor, in-memory ZooKeeper).

The leader's Partition computes the high watermark from its followers' fetch offsets, shrinks
the ISR after ``replica.lag.time.max.ms`` of simulated time, expands it when the follower
catches up, and writes each change to the state znode conditional on its version.
"""
from __future__ import annotations

import json

import pytest
from twisted.internet import defer

from kafkalite.coordination.errors import ZkVersionConflictError
from kafkalite.metadata import LeaderAndIsr
from tests.support.inprocess import InProcessCluster, produce_body, records

TOPIC = "hw"
FETCH = 1


def state_znode(cluster: InProcessCluster, topic: str = TOPIC, partition: int = 0) -> tuple[dict, int]:
    path = f"{cluster.chroot}/brokers/topics/{topic}/partitions/{partition}/state"
    stat = cluster.zk_server.stat(path)
    assert stat is not None, f"no state znode at {path}"
    return json.loads(cluster.zk_server.dump(path)[path]), int(stat.version)


def produce(cluster: InProcessCluster, leader: int, values: list[bytes], acks: int = 1) -> dict:
    resp = cluster.client(leader).request(0, 8, produce_body(TOPIC, {0: records(values)}, acks))
    entry = resp["responses"][0]["partition_responses"][0]
    assert entry["error_code"] == 0, entry
    return entry


def consumer_high_watermark(cluster: InProcessCluster, leader: int) -> int:
    """The high watermark a consumer's Fetch (replica id -1) is told."""
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": 0, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = cluster.client(leader).request(FETCH, 11, body)
    part = resp["responses"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["high_watermark"]


def test_high_watermark_is_the_smallest_log_end_over_the_isr_and_a_stalled_follower_is_shrunk_then_expanded(
        inprocess_cluster_factory) -> None:
    """The HW stays at the stalled follower's log end while it is in the ISR (consumers are
    told that HW), the leader removes it from the ISR (state znode too) only once
    replica.lag.time.max.ms has passed, the HW then moves to the log end, and when the follower
    fetches again it catches up and is added back."""
    cluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, 1, 3)
    leader = cluster.leader_of(TOPIC, 0)
    stalled, healthy = [b for b in sorted(cluster.brokers) if b != leader]
    part = cluster.partition(leader, TOPIC, 0)

    produce(cluster, leader, [b"a", b"b", b"c"])
    cluster.pump_until(lambda: part.high_watermark == 3, what="HW 3 once both followers fetched")
    assert cluster.partition(stalled, TOPIC, 0).log_end_offset == 3

    cluster.stop_fetching(stalled)
    stalled_at = cluster.reactor.seconds()
    produce(cluster, leader, [b"d", b"e"])
    cluster.pump_until(lambda: part.followers[healthy].log_end_offset == 5, what="the healthy follower at 5")
    cluster.advance(0.5)
    assert part.log_end_offset == 5
    assert part.high_watermark == 3, "the HW must wait for the stalled follower while it is in the ISR"
    assert consumer_high_watermark(cluster, leader) == 3
    assert set(part.isr) == {leader, stalled, healthy}

    lag_s = cluster.config(leader)["replica.lag.time.max.ms"] / 1000.0
    cluster.pump_until(lambda: stalled not in part.isr, what="the stalled follower shrunk out of the ISR")
    assert cluster.reactor.seconds() - stalled_at >= lag_s, "shrunk before replica.lag.time.max.ms"
    znode, _ = state_znode(cluster)
    assert sorted(znode["isr"]) == sorted([leader, healthy])
    cluster.pump_until(lambda: part.high_watermark == 5, what="the HW at the log end over the smaller ISR")
    assert consumer_high_watermark(cluster, leader) == 5
    cluster.pump_until(lambda: all(stalled not in b.metadata.states[(TOPIC, 0)].isr for b in cluster.brokers.values()),
                       what="every broker's metadata without the stalled follower")

    cluster.resume_fetching(stalled)
    cluster.pump_until(lambda: stalled in part.isr, what="the follower expanded back into the ISR")
    assert cluster.partition(stalled, TOPIC, 0).log_end_offset == 5
    znode, _ = state_znode(cluster)
    assert sorted(znode["isr"]) == sorted([leader, stalled, healthy])
    assert part.high_watermark == 5


def test_an_isr_write_against_a_stale_znode_version_is_refused_and_changes_nothing(
        inprocess_cluster_factory) -> None:
    """Another writer bumps the state znode in the same turn as the leader's ISR shrink: the
    leader's conditional write fails with ZkVersionConflictError, its in-memory ISR keeps every
    replica (and adopts the newer znode version from its watch), the znode keeps the other
    writer's data; a retry from the fresh version then succeeds."""
    cluster = inprocess_cluster_factory(3, {"replica.lag.time.max.ms": "600000"})
    cluster.create_topic(TOPIC, 1, 3)
    leader = cluster.leader_of(TOPIC, 0)
    stalled = next(b for b in sorted(cluster.brokers) if b != leader)
    part = cluster.partition(leader, TOPIC, 0)
    full_isr = set(part.isr)
    kafka_zk = cluster.brokers[leader].kafka_zk

    # the typed error itself: a write at a version the znode has left
    stale = part.state
    other = cluster.zk_server.client(f"memory{cluster.chroot}")
    cluster.wait(other.start())
    path = f"/brokers/topics/{TOPIC}/partitions/0/state"
    data, _ = cluster.wait(other.get(path))
    cluster.wait(other.set(path, data, stale.zk_version))           # "another writer": version + 1
    with pytest.raises(ZkVersionConflictError):
        cluster.wait(kafka_zk.update_leader_and_isr(TOPIC, 0, stale.with_isr((leader,))))
    cluster.pump_until(lambda: part.state.zk_version == stale.zk_version + 1, what="the leader seeing the new version")

    # the leader's own shrink, racing the other writer in one turn
    cluster.stop_fetching(stalled)
    produce(cluster, leader, [b"x"])
    healthy = next(b for b in sorted(cluster.brokers) if b not in (leader, stalled))
    cluster.pump_until(lambda: part.followers[healthy].log_end_offset == part.log_end_offset,
                       what="the healthy follower caught up")
    before_version = part.state.zk_version
    writes: list[defer.Deferred] = []
    refusals: list[type] = []

    class Spy:
        """The leader's ISR writer, seen from outside: what its write fired."""

        def update_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr) -> defer.Deferred:
            d = kafka_zk.update_leader_and_isr(topic, partition, state)
            d.addErrback(lambda f: (refusals.append(type(f.value)), f)[1])
            writes.append(d)
            return d

    part.isr_writer = Spy()
    cluster.reactor.advance(0)
    other.set(path, data, before_version)                            # queued first ...
    part.maybe_shrink_isr(cluster.brokers[leader].clock.now_ms() + 10_000, lag_max_ms=1)   # ... then ours
    assert len(writes) == 1 and part.isr_write_pending
    isr_when_refused: list[set[int]] = []
    writes[0].addBoth(lambda _: isr_when_refused.append(set(part.isr)))   # after the Partition's own handler
    cluster.pump_until(lambda: not part.isr_write_pending, what="the leader's ISR write to settle")
    assert refusals == [ZkVersionConflictError]
    assert isr_when_refused == [full_isr], "a refused ISR write must not change the in-memory ISR"
    znode, version = state_znode(cluster)
    assert set(znode["isr"]) == full_isr and version == before_version + 1
    cluster.pump_until(lambda: part.state.zk_version == version, what="the leader adopting the newer state")
    assert set(part.isr) == full_isr

    part.maybe_shrink_isr(cluster.brokers[leader].clock.now_ms() + 10_000, lag_max_ms=1)
    cluster.pump_until(lambda: stalled not in part.isr, what="the retried shrink from the fresh version")
    znode, _ = state_znode(cluster)
    assert stalled not in znode["isr"]
    cluster.wait(other.stop())
