"""Replicas on a failed log dir in the controller's reconciliation step (Kafka's
``onReplicasBecomeOffline``): dead for their partition only, their broker stays alive."""
from __future__ import annotations

import pytest

from kafkalite.controller.decisions import CreateState, UpdateState, plan, preferred_leader_actions
from kafkalite.metadata import LeaderAndIsr

pytestmark = pytest.mark.unit

ASSIGN = {"t": {0: [1, 2, 3], 1: [2, 1, 3], 2: [1, 3, 2]}}


def test_leader_on_an_offline_replica_is_replaced_from_the_rest_of_the_isr() -> None:
    """Broker 1's replica of t-0 is offline: t-0 (led by 1) goes to the next ISR member in
    assignment order that is alive (2), with 1 out of the ISR and epoch + 1. t-2, also led by
    broker 1 but on its healthy dir, is untouched: broker 1 is alive."""
    states = {("t", 0): LeaderAndIsr(1, 4, (1, 2, 3), 7, zk_version=10),
              ("t", 1): LeaderAndIsr(2, 1, (2, 1, 3), 7, zk_version=3),
              ("t", 2): LeaderAndIsr(1, 2, (1, 3, 2), 7, zk_version=5)}
    actions = plan({1, 2, 3}, ASSIGN, states, [], controller_epoch=8, offline_replicas={("t", 0, 1)})
    assert actions == [UpdateState("t", 0, LeaderAndIsr(2, 5, (2, 3), 8), 10, actions[0].reason)]
    assert "log dir is offline" in actions[0].reason


def test_offline_follower_replica_leaves_the_isr_and_never_below_one() -> None:
    """A follower whose replica is offline leaves the ISR (epoch + 1); an offline leader that is
    the only ISR member leaves the partition leaderless with the ISR kept, as for a dead broker."""
    states = {("t", 1): LeaderAndIsr(2, 1, (2, 1, 3), 7, zk_version=3),
              ("t", 2): LeaderAndIsr(1, 2, (1,), 7, zk_version=5)}
    actions = plan({1, 2, 3}, {"t": {1: [2, 1, 3], 2: [1, 3, 2]}}, states, [], controller_epoch=8,
                   offline_replicas=[("t", 1, 1), ("t", 2, 1)])
    assert actions[0] == UpdateState("t", 1, LeaderAndIsr(2, 2, (2, 3), 8), 3, actions[0].reason)
    assert actions[1].state == LeaderAndIsr(-1, 3, (1,), 8) and actions[1].expected_version == 5


def test_offline_replica_is_never_elected_even_uncleanly_or_as_preferred() -> None:
    """With unclean election the first live replica whose log is online leads (3, not the
    offline 2); a new partition skips the offline replica; the preferred leader is not moved
    back to a broker whose replica is offline."""
    states = {("t", 0): LeaderAndIsr(1, 4, (1,), 7, zk_version=10)}
    [action] = plan({2, 3}, {"t": {0: [1, 2, 3]}}, states, [], controller_epoch=8,
                    unclean=lambda t: True, offline_replicas={("t", 0, 2)})
    assert action.state == LeaderAndIsr(3, 5, (3,), 8)
    [create] = plan({1, 2, 3}, {"n": {0: [1, 2, 3]}}, {}, [], controller_epoch=8, offline_replicas={("n", 0, 1)})
    assert create == CreateState("n", 0, LeaderAndIsr(2, 0, (2, 3), 8))
    led_elsewhere = {("t", p): LeaderAndIsr(2, 1, (2, 1), 1, zk_version=1) for p in range(3)}
    assignment = {"t": {p: [1, 2] for p in range(3)}}
    assert len(preferred_leader_actions({1, 2}, assignment, led_elsewhere, [], 2)) == 3
    moved = preferred_leader_actions({1, 2}, assignment, led_elsewhere, [], 2, offline_replicas={("t", 1, 1)})
    assert [(a.topic, a.partition) for a in moved] == [("t", 0), ("t", 2)]


def test_no_offline_replicas_plans_nothing_new() -> None:
    """A healthy cluster with an offline replica of another broker's other partition: nothing
    but that partition changes, and without offline replicas nothing changes at all."""
    states = {("t", p): LeaderAndIsr(r[0], 0, tuple(r), 1, zk_version=0) for p, r in ASSIGN["t"].items()}
    assert plan({1, 2, 3}, ASSIGN, states, [], controller_epoch=1) == []
    [only] = plan({1, 2, 3}, ASSIGN, states, [], controller_epoch=1, offline_replicas={("t", 1, 3)})
    assert (only.topic, only.partition, only.state.isr, only.state.leader) == ("t", 1, (2, 1), 2)
