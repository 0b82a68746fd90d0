"""decisions.elect_leaders: ElectLeaders' per-partition decisions and Kafka's answers.

Preferred: the first assigned replica leads if alive, not shutting down, online and in the ISR
(ISR unchanged, epoch + 1); already leading is ELECTION_NOT_NEEDED; otherwise
PREFERRED_LEADER_NOT_AVAILABLE. Unclean: only partitions without a live leader, the first live
in-sync replica, else the first live replica alone in the ISR; ELIGIBLE_LEADERS_NOT_AVAILABLE when
no replica is alive. Unknown partitions and deleting topics get their own codes.
"""
from __future__ import annotations

import pytest

from kafkalite.controller.decisions import PREFERRED, UNCLEAN, elect_leaders
from kafkalite.errors import ErrorCode
from kafkalite.metadata.state import LeaderAndIsr

pytestmark = pytest.mark.unit

ASSIGN = {"t": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}


def state(leader: int, isr: tuple[int, ...], epoch: int = 4, version: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, 1, version)


def test_preferred_election_moves_leadership_back_only_where_needed_and_possible() -> None:
    """t-0 led by 2 with 1 in sync: 1 leads again (epoch 5, same ISR, conditional on version 7);
    t-1 already led by 2: not needed; t-2's preferred 3 is out of the ISR: not available."""
    states = {("t", 0): state(2, (2, 3, 1)), ("t", 1): state(2, (2, 3, 1)), ("t", 2): state(1, (1, 2))}
    actions, results = elect_leaders(PREFERRED, [("t", 0), ("t", 1), ("t", 2)], {1, 2, 3}, ASSIGN, states,
                                     (), controller_epoch=9)
    assert len(actions) == 1
    a = actions[0]
    assert (a.topic, a.partition, a.expected_version) == ("t", 0, 7)
    assert a.state == LeaderAndIsr(1, 5, (2, 3, 1), 9)
    assert results[("t", 0)] == (ErrorCode.NONE, None, 1)
    assert results[("t", 1)][0] == ErrorCode.ELECTION_NOT_NEEDED
    assert results[("t", 2)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert "PreferredReplicaPartitionLeaderElectionStrategy" in results[("t", 2)][1]


def test_preferred_replica_dead_or_shutting_down_is_not_available() -> None:
    states = {("t", 0): state(2, (1, 2, 3))}
    _, dead = elect_leaders(PREFERRED, [("t", 0)], {2, 3}, ASSIGN, states, (), 9)
    _, leaving = elect_leaders(PREFERRED, [("t", 0)], {1, 2, 3}, ASSIGN, states, (), 9, shutting_down={1})
    _, offline = elect_leaders(PREFERRED, [("t", 0)], {1, 2, 3}, ASSIGN, states, (), 9,
                               offline_replicas=[("t", 0, 1)])
    for results in (dead, leaving, offline):
        assert results[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_only_for_leaderless_partitions() -> None:
    """A live leader: not needed. No leader, a live ISR member: it leads (clean). No leader, the
    ISR all dead: the first live replica leads alone. No live replica at all: not available."""
    states = {("t", 0): state(1, (1,)), ("t", 1): state(-1, (2, 1)), ("t", 2): state(-1, (3,))}
    actions, results = elect_leaders(UNCLEAN, [("t", 0), ("t", 1), ("t", 2)], {1, 2}, ASSIGN, states, (), 9)
    assert results[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED
    written = {(a.topic, a.partition): a.state for a in actions}
    assert written[("t", 1)] == LeaderAndIsr(2, 5, (2, 1), 9)
    assert written[("t", 2)] == LeaderAndIsr(1, 5, (1,), 9)          # unclean: 3 was the only ISR member
    assert results[("t", 2)] == (ErrorCode.NONE, None, 1)
    _, none_alive = elect_leaders(UNCLEAN, [("t", 2)], set(), ASSIGN, states, (), 9)
    assert none_alive[("t", 2)][0] == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_unknown_and_deleting_partitions() -> None:
    states = {("t", 0): state(2, (1, 2, 3))}
    actions, results = elect_leaders(PREFERRED, [("t", 9), ("nope", 0), ("t", 0)], {1, 2, 3}, ASSIGN, states,
                                     deleting={"t"}, controller_epoch=9)
    assert actions == []
    assert results[("t", 9)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[("t", 0)] == (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted", -1)
