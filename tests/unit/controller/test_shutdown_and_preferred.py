"""Controlled-shutdown and preferred-leader decisions, checked against Kafka's election rules."""
from __future__ import annotations

from kafkalite.controller.decisions import UpdateState, plan, preferred_leader_actions
from kafkalite.metadata import LeaderAndIsr


def test_controlled_shutdown_moves_leadership_within_isr_and_leaves_every_isr() -> None:
    """Broker 1 shuts down: the partition it leads goes to the first replica in assignment order
    that is alive, in the ISR and not shutting down (3, since 2 is out of sync); the partition it
    follows drops it from the ISR; both bump the leader epoch."""
    states = {("t", 0): LeaderAndIsr(1, 4, (1, 3), 2, zk_version=9),
              ("t", 1): LeaderAndIsr(2, 1, (2, 1, 3), 2, zk_version=5)}
    actions = plan({1, 2, 3}, {"t": {0: [1, 2, 3], 1: [2, 1, 3]}}, states, [], controller_epoch=3,
                   shutting_down={1})
    assert actions == [UpdateState("t", 0, LeaderAndIsr(3, 5, (3,), 3), 9, actions[0].reason),
                       UpdateState("t", 1, LeaderAndIsr(2, 2, (2, 3), 3), 5, actions[1].reason)]


def test_controlled_shutdown_never_elects_unclean() -> None:
    """The shutting-down leader is the only ISR member: it keeps the partition even with unclean
    election enabled (it is alive; moving would lose its records)."""
    states = {("t", 0): LeaderAndIsr(1, 4, (1,), 2, zk_version=9)}
    assert plan({1, 2}, {"t": {0: [1, 2]}}, states, [], controller_epoch=3,
                unclean=lambda t: True, shutting_down={1}) == []


def test_preferred_leader_returns_when_in_isr_and_imbalanced() -> None:
    """Broker 1 prefers two partitions and leads neither (100 % > 10 %): it gets back the one
    whose ISR holds it, with ISR unchanged and epoch + 1; not the one where it is out of sync."""
    assignments = {"t": {0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 3, 1]}}
    states = {("t", 0): LeaderAndIsr(2, 3, (2, 3, 1), 1, zk_version=4),
              ("t", 1): LeaderAndIsr(3, 3, (3, 2), 1, zk_version=4),
              ("t", 2): LeaderAndIsr(2, 0, (2, 3, 1), 1, zk_version=0)}
    actions = preferred_leader_actions({1, 2, 3}, assignments, states, [], controller_epoch=2)
    assert actions == [UpdateState("t", 0, LeaderAndIsr(1, 4, (2, 3, 1), 2), 4, actions[0].reason)]


def test_preferred_leader_respects_threshold_shutdown_and_deletion() -> None:
    """Below the imbalance percentage nothing moves; a shutting-down or dead preferred broker and a
    topic being deleted are never elected."""
    assignments = {"t": {p: [1, 2] for p in range(10)}}
    states = {("t", p): LeaderAndIsr(1 if p else 2, 1, (1, 2), 1, zk_version=1) for p in range(10)}
    assert preferred_leader_actions({1, 2}, assignments, states, [], 2, imbalance_percentage=10) == []
    assert len(preferred_leader_actions({1, 2}, assignments, states, [], 2, imbalance_percentage=5)) == 1
    assert preferred_leader_actions({1, 2}, assignments, states, [], 2, shutting_down={1}, imbalance_percentage=5) == []
    assert preferred_leader_actions({2}, assignments, states, [], 2, imbalance_percentage=5) == []
    assert preferred_leader_actions({1, 2}, assignments, states, ["t"], 2, imbalance_percentage=5) == []
