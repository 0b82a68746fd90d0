"""A replica joining the ISR holds the high watermark back from the moment the leader decides to
add it, not from the moment ZooKeeper has the new ISR.

The rolling-restart test lost an acknowledged record this way: broker 101 led with ISR {101, 102}
and wrote {101, 103, 102} when 103 reached the high watermark (877); before that write came back,
102 fetched record 877, the high watermark moved to 878 over {101, 102} alone and the producer got
its ack. The controller then shut 101 down and elected 103, whose log ended at 877. Kafka keeps a
"maximal ISR" while an expansion is in flight (KIP-497) for this reason.

A real Partition and log; ZooKeeper's answer to the ISR write is a Deferred the test fires.
"""
from __future__ import annotations

import os
from typing import Any

import pytest
from twisted.internet import defer, task

from kafkalite.broker.partition import Partition
from kafkalite.broker.purgatory import Purgatory
from kafkalite.metadata import LeaderAndIsr
from kafkalite.records.batch import validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogConfig, PartitionLog

pytestmark = pytest.mark.unit

LEADER, IN_SYNC, JOINING = 101, 102, 103


class PendingWrites:
    """ZooKeeper's side of the leader's ISR writes: each one waits until the test answers it."""

    def __init__(self) -> None:
        self.writes: list[tuple[LeaderAndIsr, defer.Deferred]] = []

    def update_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.writes.append((state, d))
        return d

    def answer(self, version: int = 1) -> None:
        state, d = self.writes.pop(0)
        d.callback(LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version))


@pytest.fixture
def leader(tmp_path: Any) -> tuple[Partition, PendingWrites]:
    zk = PendingWrites()
    plog = PartitionLog.open(os.path.join(str(tmp_path), "t-0"), LogConfig(), 0)
    part = Partition("t", 0, LEADER, plog, Purgatory(task.Clock()), zk)
    part.become_leader(LeaderAndIsr(LEADER, 2, (LEADER, IN_SYNC), 1), [LEADER, JOINING, IN_SYNC], 1000)
    return part, zk


def append(part: Partition, n: int) -> None:
    raw = build_batch([(1000, None, b"v%d" % i, ()) for i in range(n)])
    part.append_as_leader(raw, validate_batches(raw, max_batch_bytes=1 << 20), 1000, -1, 1)


def test_a_joining_replica_holds_the_high_watermark_while_its_isr_write_is_in_flight(leader: Any) -> None:
    part, zk = leader
    append(part, 10)
    part.record_follower_fetch(IN_SYNC, 10, 1000)
    assert part.high_watermark == 10

    part.record_follower_fetch(JOINING, 10, 1001)          # at the high watermark: it joins
    assert [set(w.isr) for w, _ in zk.writes] == [{LEADER, IN_SYNC, JOINING}]
    assert part.isr == (LEADER, IN_SYNC)                 # not before ZooKeeper has it

    append(part, 1)                                      # record 10
    part.record_follower_fetch(IN_SYNC, 11, 1002)
    assert part.high_watermark == 10, "acknowledged past a replica the controller may elect next"

    zk.answer()
    assert set(part.isr) == {LEADER, IN_SYNC, JOINING}
    assert part.high_watermark == 10
    part.record_follower_fetch(JOINING, 11, 1003)
    assert part.high_watermark == 11


def test_a_failed_expansion_releases_the_high_watermark(leader: Any) -> None:
    part, zk = leader
    append(part, 5)
    part.record_follower_fetch(IN_SYNC, 5, 1000)
    part.record_follower_fetch(JOINING, 5, 1001)
    append(part, 1)
    part.record_follower_fetch(IN_SYNC, 6, 1002)
    assert part.high_watermark == 5

    _, d = zk.writes.pop(0)
    d.errback(RuntimeError("ZooKeeper connection lost"))
    assert part.isr == (LEADER, IN_SYNC)
    assert part.high_watermark == 6                      # at once, over the ISR ZooKeeper has


def test_a_shrink_in_flight_still_counts_the_leaving_replica(leader: Any) -> None:
    """The other half of the maximal ISR, which the in-memory ISR already gives: until ZooKeeper
    has the smaller ISR, the replica leaving it still holds the high watermark back."""
    part, zk = leader
    append(part, 3)
    part.record_follower_fetch(IN_SYNC, 3, 1000)
    part.write_isr((LEADER,), "test")
    append(part, 2)
    assert part.high_watermark == 3
    zk.answer()
    assert part.isr == (LEADER,)
    part.maybe_advance_high_watermark()
    assert part.high_watermark == 5


def test_a_replica_joins_only_once_it_has_the_previous_leaders_records(tmp_path: Any) -> None:
    """A new leader's high watermark can lag (here 5 of its 10 records): a follower at 7 has
    reached it, yet records 7-9 may have been acknowledged by the previous leader, so it joins
    only at 10, where this leader epoch started (Kafka's leaderEpochStartOffset check)."""
    zk = PendingWrites()
    plog = PartitionLog.open(os.path.join(str(tmp_path), "t-0"), LogConfig(), 0)
    part = Partition("t", 0, LEADER, plog, Purgatory(task.Clock()), zk)
    part.become_leader(LeaderAndIsr(LEADER, 0, (LEADER,), 1), [LEADER, JOINING, IN_SYNC], 1000)
    append(part, 10)                                     # 10 records, here as anywhere
    part.become_follower(LeaderAndIsr(IN_SYNC, 1, (IN_SYNC, LEADER), 1), [LEADER, JOINING, IN_SYNC])
    part.high_watermark = 5                              # what the next leader's last answer told us
    part.become_leader(LeaderAndIsr(LEADER, 2, (LEADER, IN_SYNC), 1), [LEADER, JOINING, IN_SYNC], 1000)
    assert part.high_watermark == 5

    part.record_follower_fetch(JOINING, 7, 1001)
    assert zk.writes == [], "joined the ISR without records 7-9"
    part.record_follower_fetch(JOINING, 10, 1002)
    assert [set(w.isr) for w, _ in zk.writes] == [{LEADER, IN_SYNC, JOINING}]
