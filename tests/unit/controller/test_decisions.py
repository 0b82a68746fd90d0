"""The controller's reconciliation step, checked against Kafka's election rules."""
from __future__ import annotations

from kafkalite.controller.decisions import CreateState, DeleteTopic, UpdateState, elect_leader, plan
from kafkalite.metadata import LeaderAndIsr


def test_new_partitions_get_first_live_replica_and_all_live_isr() -> None:
    """A partition without a state znode gets leader = first live replica in assignment order,
    ISR = live replicas, epoch 0; a partition with no live replica waits."""
    actions = plan({1, 3}, {"t": {0: [2, 3, 1], 1: [2]}}, {}, [], controller_epoch=4)
    assert actions == [CreateState("t", 0, LeaderAndIsr(3, 0, (3, 1), 4))]


def test_dead_leader_replaced_from_isr_in_assignment_order() -> None:
    """Leader 1 dies: the first replica in assignment order that is alive and in the ISR leads,
    the ISR keeps only live members, the leader epoch goes up by one."""
    states = {("t", 0): LeaderAndIsr(1, 5, (1, 2, 3), 2, zk_version=7)}
    [action] = plan({2, 3}, {"t": {0: [1, 3, 2]}}, states, [], controller_epoch=3)
    assert action == UpdateState("t", 0, LeaderAndIsr(3, 6, (2, 3), 3), 7, action.reason)


def test_no_live_isr_member_leaves_partition_offline_unless_unclean() -> None:
    """With the only ISR member dead the partition goes leaderless (once); unclean election picks
    the first live replica with ISR = [it]."""
    states = {("t", 0): LeaderAndIsr(1, 2, (1,), 1, zk_version=3)}
    [offline] = plan({2}, {"t": {0: [1, 2]}}, states, [], controller_epoch=1)
    assert offline.state.leader == -1 and offline.state.isr == (1,) and offline.state.leader_epoch == 3
    after = {("t", 0): LeaderAndIsr(-1, 3, (1,), 1, zk_version=4)}
    assert plan({2}, {"t": {0: [1, 2]}}, after, [], controller_epoch=1) == []
    [unclean] = plan({2}, {"t": {0: [1, 2]}}, states, [], controller_epoch=1, unclean=lambda t: True)
    assert unclean.state.leader == 2 and unclean.state.isr == (2,)


def test_dead_follower_leaves_isr_but_never_below_one() -> None:
    """A dead follower is removed from the ISR with an epoch bump; a healthy state plans nothing."""
    states = {("t", 0): LeaderAndIsr(1, 0, (1, 2), 1, zk_version=0)}
    [action] = plan({1}, {"t": {0: [1, 2]}}, states, [], controller_epoch=1)
    assert action.state == LeaderAndIsr(1, 1, (1,), 1)
    assert plan({1, 2}, {"t": {0: [1, 2]}}, states, [], controller_epoch=1) == []


def test_controlled_shutdown_moves_leadership_away() -> None:
    """A broker shutting down gives up leadership to another ISR member and leaves the ISR."""
    states = {("t", 0): LeaderAndIsr(1, 0, (1, 2), 1, zk_version=0)}
    [action] = plan({1, 2}, {"t": {0: [1, 2]}}, states, [], controller_epoch=1, shutting_down=[1])
    assert action.state.leader == 2 and action.state.isr == (2,)


def test_deleting_topics_are_removed_and_not_elected() -> None:
    states = {("gone", 0): LeaderAndIsr(9, 0, (9,), 1)}
    assert plan({1}, {"gone": {0: [9]}}, states, ["gone"], controller_epoch=1) == [DeleteTopic("gone")]


def test_elect_leader_respects_exclusions() -> None:
    assert elect_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, excluded={1}) == (2, (2, 3))
    assert elect_leader([1, 2], [1], {2}, False) is None


def test_pipelined_groups_state_writes_of_distinct_partitions() -> None:
    """The controller sends runs of partition-state writes together (distinct partitions, bounded),
    and every other action alone, in the plan's order."""
    from kafkalite.controller import controller as ctl
    state = LeaderAndIsr(1, 0, (1, 2), 0)
    c0, c1 = CreateState("t", 0, state), CreateState("t", 1, state)
    u0 = UpdateState("t", 0, state, 3, "again")
    d = DeleteTopic("x")
    assert list(ctl._pipelined([c0, c1, u0, d, c1])) == [[c0, c1], [u0], [d], [c1]]
    many = [CreateState("t", p, state) for p in range(ctl.MAX_PIPELINED_WRITES + 1)]
    assert [len(b) for b in ctl._pipelined(many)] == [ctl.MAX_PIPELINED_WRITES, 1]
