"""Partition reassignment as pure decisions (KIP-455 on the ZooKeeper data model)."""
from __future__ import annotations

import pytest

from kafkalite.controller.decisions import (CompleteReassignment, PartitionAssignment, UpdateState,
                                            reassignment_actions, start_reassignment)
from kafkalite.metadata import LeaderAndIsr


def test_start_writes_target_first_then_origin_with_adding_and_removing() -> None:
    """[1,2,3] -> [2,3,4]: RS = TRS + ORS (distinct, target first), adding [4], removing [1]."""
    entry = start_reassignment(PartitionAssignment((1, 2, 3)), (2, 3, 4))
    assert entry == PartitionAssignment((2, 3, 4, 1), (4,), (1,))
    assert entry.target == (2, 3, 4) and entry.origin == (2, 3, 1)


def test_replication_factor_change_is_the_same_algorithm() -> None:
    """RF 1 -> 3 adds two replicas and removes none; RF 3 -> 2 removes one and adds none."""
    assert start_reassignment(PartitionAssignment((1,)), (1, 2, 3)) == PartitionAssignment((1, 2, 3), (2, 3), ())
    assert start_reassignment(PartitionAssignment((1, 2, 3)), (1, 2)) == PartitionAssignment((1, 2, 3), (), (3,))


def test_cancel_and_retarget_start_from_the_original_replicas() -> None:
    """Cancelling (None) or re-targeting to the original set restores ORS; a new target replaces
    one in progress, computed from the original replicas, not from RS."""
    moving = PartitionAssignment((2, 3, 4, 1), (4,), (1,))
    assert start_reassignment(moving, None) == PartitionAssignment((2, 3, 1))
    assert start_reassignment(moving, (2, 3, 1)) == PartitionAssignment((2, 3, 1))
    assert start_reassignment(moving, (5, 2, 3)) == PartitionAssignment((5, 2, 3, 1), (5,), (1,))


@pytest.mark.parametrize("bad", [(), (1, 1), (-1, 2)])
def test_invalid_targets_are_refused(bad: tuple[int, ...]) -> None:
    """Empty, duplicate or negative replica lists raise ValueError (INVALID_REPLICA_ASSIGNMENT)."""
    with pytest.raises(ValueError):
        start_reassignment(PartitionAssignment((1, 2)), bad)


def test_nothing_happens_until_every_target_replica_is_in_the_isr() -> None:
    """Replica 4 is still catching up: no write."""
    entry = PartitionAssignment((2, 3, 4, 1), (4,), (1,))
    states = {("t", 0): LeaderAndIsr(2, 3, (1, 2, 3), 1, zk_version=5)}
    assert reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, states, [], 7) == []


def test_removed_leader_hands_over_then_assignment_becomes_target() -> None:
    """Every target replica in the ISR, leader 1 being removed: leadership moves to the first
    target replica in the ISR (2), the ISR drops 1, epoch + 1; once the state shows leader and
    ISR within TRS, the assignment is written as TRS."""
    entry = PartitionAssignment((2, 3, 4, 1), (4,), (1,))
    states = {("t", 0): LeaderAndIsr(1, 3, (1, 2, 3, 4), 1, zk_version=5)}
    [step] = reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, states, [], 7)
    assert isinstance(step, UpdateState)
    assert (step.state, step.expected_version) == (LeaderAndIsr(2, 4, (2, 3, 4), 7), 5)
    after = {("t", 0): LeaderAndIsr(2, 4, (2, 3, 4), 7, zk_version=6)}
    assert reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, after, [], 7) == [
        CompleteReassignment("t", 0, (2, 3, 4))]


def test_leader_that_stays_keeps_leading_and_removed_followers_leave_the_isr() -> None:
    """Leader 2 is in TRS: it keeps leading; follower 1 leaves the ISR with an epoch bump."""
    entry = PartitionAssignment((2, 3, 4, 1), (4,), (1,))
    states = {("t", 0): LeaderAndIsr(2, 3, (2, 1, 3, 4), 1, zk_version=5)}
    [step] = reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, states, [], 7)
    assert isinstance(step, UpdateState) and step.state == LeaderAndIsr(2, 4, (2, 3, 4), 7)


def test_after_cancel_stray_isr_members_leave_and_a_stray_leader_hands_over() -> None:
    """Cancelled while replica 4 had joined the ISR: 4 leaves the ISR; had 4 become leader,
    leadership goes to the first assigned replica in the ISR."""
    entry = PartitionAssignment((2, 3, 1))
    states = {("t", 0): LeaderAndIsr(2, 3, (1, 2, 3, 4), 1, zk_version=5)}
    [step] = reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, states, [], 7)
    assert step.state == LeaderAndIsr(2, 4, (1, 2, 3), 7)
    led = {("t", 0): LeaderAndIsr(4, 3, (1, 2, 4), 1, zk_version=5)}
    [step] = reassignment_actions({1, 2, 3, 4}, {"t": {0: entry}}, led, [], 7)
    assert step.state == LeaderAndIsr(2, 4, (1, 2), 7)
    assert reassignment_actions({1, 2, 3}, {"t": {0: entry}}, {("t", 0): LeaderAndIsr(2, 3, (1, 2, 3), 1)},
                                [], 7) == []


def test_dead_target_replicas_block_the_handover() -> None:
    """Leader 1 is removed but no target replica is alive: nothing is written."""
    entry = PartitionAssignment((2, 1), (2,), (1,))
    states = {("t", 0): LeaderAndIsr(1, 3, (1, 2), 1, zk_version=5)}
    assert reassignment_actions({1}, {"t": {0: entry}}, states, [], 7) == []
