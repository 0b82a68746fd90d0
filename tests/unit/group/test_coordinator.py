"""The group coordinator's state machine against a fake clock and an in-memory offsets log."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer, task

from kafkalite.errors import ErrorCode
from kafkalite.group import records
from kafkalite.group.coordinator import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig, GroupCoordinator
from kafkalite.group.hashing import java_string_hash, partition_for
from kafkalite.group.state import TRANSITIONS, Group, GroupState, IllegalStateTransition, OffsetAndMetadata
from tests.support.deferreds import answer as result

S = GroupState
SESSION = 10_000
REBALANCE = 30_000


class FakeStore:
    """The offsets topic as a list of (partition, key, value); ``fail`` makes appends fail."""

    def __init__(self) -> None:
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.fail: ErrorCode | None = None

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> defer.Deferred:
        if self.fail is not None:
            return defer.succeed(self.fail)
        self.log.extend((partition, k, v) for k, v in entries)
        return defer.succeed(ErrorCode.NONE)

    def entries(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return [(k, v) for p, k, v in self.log if p == partition]


def make(delay_ms: int = 0, **cfg: Any) -> tuple[GroupCoordinator, task.Clock, FakeStore]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    store = FakeStore()
    coord = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=delay_ms, **cfg), clock, store, lambda: 5)
    for p in range(5):
        coord.begin_load(p)
        coord.complete_load(p, [])
    return coord, clock, store


def join(coord: GroupCoordinator, group: str = "g", member: str = "", protocols: Any = None,
         instance: str | None = None, v4: bool = True, session: int = SESSION) -> defer.Deferred:
    return coord.join_group(group, member, instance, v4, "client", "/127.0.0.1", REBALANCE, session, "consumer",
                            protocols or [("range", b"r"), ("roundrobin", b"rr")])


def join_two_step(coord: GroupCoordinator, clock: task.Clock, group: str = "g", **kw: Any) -> tuple[str, defer.Deferred]:
    first = result(join(coord, group, **kw))
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"].startswith("client-")
    return first["member_id"], join(coord, group, member=first["member_id"], **kw)


def stable_group(coord: GroupCoordinator, clock: task.Clock, n: int) -> list[str]:
    pending = [join_two_step(coord, clock) for _ in range(n)]
    clock.advance(0)
    answers = [result(d) for _, d in pending]
    assert all(a["error_code"] == 0 for a in answers), answers
    leader = answers[0]["leader"]
    gen = answers[0]["generation_id"]
    syncs = []
    for a in answers:
        assignments = {x["member_id"]: x["member_id"].encode() for x in a["members"]}
        syncs.append(coord.sync_group("g", gen, a["member_id"], None, assignments))
    assert [result(s)[0] for s in syncs] == [0] * n
    assert coord.groups["g"].state is S.STABLE and coord.groups["g"].leader_id == leader
    return [a["member_id"] for a in answers]


def test_transition_table_is_kafkas() -> None:
    assert TRANSITIONS[S.EMPTY] == {S.PREPARING_REBALANCE, S.DEAD}
    assert TRANSITIONS[S.STABLE] == {S.PREPARING_REBALANCE, S.DEAD}
    assert TRANSITIONS[S.COMPLETING_REBALANCE] == {S.STABLE, S.PREPARING_REBALANCE, S.DEAD}
    assert TRANSITIONS[S.PREPARING_REBALANCE] == {S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}
    g = Group("g")
    with pytest.raises(IllegalStateTransition):
        g.transition(S.STABLE, 0)


@pytest.mark.parametrize("group,expected", [("my-group", 12), ("test-consumer-group", 31), ("kafkalite", 4),
                                            ("polygenelubricants", 0), ("consumer-ß", 32), ("grüppe-😀", 14)])
def test_partition_for_matches_kafka(group: str, expected: int) -> None:
    assert partition_for(group, 50) == expected


def test_java_hash_min_value() -> None:
    assert java_string_hash("polygenelubricants") == -2**31


def test_member_id_required_then_join_sync_stable() -> None:
    coord, clock, store = make()
    m1, d1 = join_two_step(coord, clock)
    assert coord.groups["g"].state is S.PREPARING_REBALANCE
    clock.advance(0)
    r = result(d1)
    assert r["error_code"] == 0 and r["generation_id"] == 1 and r["leader"] == m1
    assert r["protocol_name"] == "range" and r["members"] == [{"member_id": m1, "group_instance_id": None, "metadata": b"r"}]
    s = result(coord.sync_group("g", 1, m1, None, {m1: b"assign"}))
    assert s[0] == 0 and s[1] == b"assign"
    assert coord.groups["g"].state is S.STABLE
    value = records.decode(*store.entries(partition_for("g", 5))[-1])
    assert value.value["generation"] == 1 and value.value["members"][0]["assignment"] == b"assign"


def test_unknown_member_and_bad_session() -> None:
    coord, clock, _ = make()
    assert result(join(coord, member="nobody"))["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert result(join(coord, session=100))["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert result(join(coord, group=""))["error_code"] == ErrorCode.INVALID_GROUP_ID


def test_second_member_rebalances_and_heartbeat_says_so() -> None:
    coord, clock, _ = make()
    (m1,) = stable_group(coord, clock, 1)
    m2, d2 = join_two_step(coord, clock)
    assert coord.groups["g"].state is S.PREPARING_REBALANCE
    assert coord.heartbeat("g", m1, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert result(d2) is None                       # parked until m1 rejoins
    d1 = join(coord, member=m1)
    r1, r2 = result(d1), result(d2)
    assert r1["generation_id"] == r2["generation_id"] == 2
    assert len(r1["members"]) == 2 and r2["members"] == []          # only the leader gets the list
    assert coord.heartbeat("g", m1, None, 1) == ErrorCode.ILLEGAL_GENERATION
    assert coord.heartbeat("g", m2, None, 2) == ErrorCode.NONE     # CompletingRebalance
    follower = coord.sync_group("g", 2, m2, None, {})
    assert result(follower) is None                                  # waits for the leader
    result(coord.sync_group("g", 2, m1, None, {m1: b"a1", m2: b"a2"}))
    assert result(follower)[:2] == (0, b"a2")


def test_session_timeout_removes_member() -> None:
    coord, clock, _ = make()
    m1, m2 = stable_group(coord, clock, 2)
    for _ in range(4):
        clock.advance(SESSION / 5000)
        assert coord.heartbeat("g", m1, None, 1) == 0
    clock.advance(SESSION / 5000 + 0.001)
    assert coord.groups["g"].state is S.PREPARING_REBALANCE        # m2 went silent
    assert coord.heartbeat("g", m1, None, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert m2 not in coord.groups["g"].members
    assert coord.heartbeat("g", m2, None, 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    coord, clock, _ = make()
    m1, m2 = stable_group(coord, clock, 2)
    d1 = join(coord, member=m1, protocols=[("roundrobin", b"x")])   # changed protocols: rebalance
    assert result(d1) is None
    for _ in range(int(REBALANCE / 5000)):
        clock.advance(5)
        coord.heartbeat("g", m2, None, 1)                           # alive but not rejoining
    r = result(d1)
    assert r["error_code"] == 0 and r["generation_id"] == 2 and [m["member_id"] for m in r["members"]] == [m1]
    assert r["protocol_name"] == "roundrobin"


def test_protocol_vote_and_inconsistent_protocol() -> None:
    coord, clock, _ = make()
    ma, da = join_two_step(coord, clock, protocols=[("range", b""), ("roundrobin", b"")])
    mb, db = join_two_step(coord, clock, protocols=[("roundrobin", b"")])
    clock.advance(0)
    assert result(da)["protocol_name"] == "roundrobin"
    bad = result(join(coord, protocols=[("sticky", b"")]))
    assert bad["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_leave_group_batch_and_unknown() -> None:
    coord, clock, _ = make()
    m1, m2, m3 = stable_group(coord, clock, 3)
    error, per_member = coord.leave_group("g", [(m1, None), ("ghost", None), (m3, None)])
    assert error == 0 and per_member == [0, ErrorCode.UNKNOWN_MEMBER_ID, 0]
    assert coord.groups["g"].state is S.PREPARING_REBALANCE
    d2 = join(coord, member=m2)
    assert result(d2)["generation_id"] == 2 and coord.groups["g"].leader_id == m2


def test_last_member_leaves_group_becomes_empty_with_record() -> None:
    coord, clock, store = make()
    (m1,) = stable_group(coord, clock, 1)
    coord.leave_group("g", [(m1, None)])
    clock.advance(REBALANCE / 1000)
    g = coord.groups["g"]
    assert g.state is S.EMPTY and g.generation == 2 and g.protocol_name is None
    last = records.decode(*store.entries(partition_for("g", 5))[-1])
    assert last.value["members"] == [] and last.value["protocol"] is None


def test_offset_commit_generation_rules() -> None:
    coord, clock, store = make()
    m1, m2 = stable_group(coord, clock, 2)
    om = OffsetAndMetadata(42, 3, "meta", 1)
    assert result(coord.commit_offsets("g", m1, None, 1, {("t", 0): om})) == {("t", 0): 0}
    assert result(coord.commit_offsets("g", m1, None, 0, {("t", 0): om})) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert result(coord.commit_offsets("g", "x", None, 1, {("t", 0): om})) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    join(coord, member=m1, protocols=[("roundrobin", b"x")])        # PreparingRebalance: still allowed
    assert result(coord.commit_offsets("g", m2, None, 1, {("t", 1): om})) == {("t", 1): 0}
    join(coord, member=m2, protocols=[("roundrobin", b"x")])        # -> CompletingRebalance
    assert coord.groups["g"].state is S.COMPLETING_REBALANCE
    assert result(coord.commit_offsets("g", m2, None, 2, {("t", 1): om})) == {("t", 1): ErrorCode.REBALANCE_IN_PROGRESS}
    err, found = coord.fetch_offsets("g", None)
    assert err == 0 and found == {("t", 0): om, ("t", 1): om}
    assert coord.fetch_offsets("g", [("t", 9)])[1] == {("t", 9): None}
    big = OffsetAndMetadata(1, -1, "x" * 5000, 1)
    assert result(coord.commit_offsets("solo", "", None, -1, {("t", 0): big})) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}


def test_standalone_commit_and_failed_append() -> None:
    coord, clock, store = make()
    om = OffsetAndMetadata(7, -1, "", 1)
    assert result(coord.commit_offsets("solo", "", None, 5, {("t", 0): om})) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert result(coord.commit_offsets("solo", "", None, -1, {("t", 0): om})) == {("t", 0): 0}
    store.fail = ErrorCode.NOT_ENOUGH_REPLICAS
    om2 = OffsetAndMetadata(8, -1, "", 2)
    assert result(coord.commit_offsets("solo", "", None, -1, {("t", 0): om2})) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert coord.fetch_offsets("solo", [("t", 0)])[1][("t", 0)].offset == 7   # failed commit not visible


def test_failover_replay_restores_groups_and_offsets() -> None:
    coord, clock, store = make()
    m1, m2 = stable_group(coord, clock, 2)
    om = OffsetAndMetadata(99, 1, "hello", 5)
    result(coord.commit_offsets("g", m1, None, 1, {("t", 3): om}))
    result(coord.commit_offsets("solo", "", None, -1, {("u", 0): om}))
    p = partition_for("g", 5)
    other, _, _ = make()
    other.unload(p)
    other.begin_load(p)
    assert other.fetch_offsets("g", None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert other.heartbeat("g", m1, None, 1) == ErrorCode.NONE
    other.complete_load(p, store.entries(p))
    g = other.groups["g"]
    assert g.state is S.STABLE and g.generation == 1 and set(g.members) == {m1, m2}
    assert g.members[m2].assignment == m2.encode()
    assert other.fetch_offsets("g", None)[1] == {("t", 3): om}
    assert other.heartbeat("g", m1, None, 1) == ErrorCode.NONE
    ps = partition_for("solo", 5)
    other.unload(ps)
    other.begin_load(ps)
    other.complete_load(ps, store.entries(ps))
    assert other.fetch_offsets("solo", None)[1] == {("u", 0): om} and other.groups["solo"].state is S.EMPTY


def test_unload_answers_parked_joins_not_coordinator() -> None:
    coord, clock, _ = make()
    m1, d1 = join_two_step(coord, clock)
    coord_partition = partition_for("g", 5)
    coord.unload(coord_partition)
    assert result(d1)["error_code"] == ErrorCode.NOT_COORDINATOR
    assert coord.heartbeat("g", m1, None, 1) == ErrorCode.NOT_COORDINATOR


def test_delete_groups() -> None:
    coord, clock, store = make()
    stable_group(coord, clock, 1)
    result(coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", 1)}))
    out = result(coord.delete_groups(["g", "solo", "nope"]))
    assert out == {"g": ErrorCode.NON_EMPTY_GROUP, "solo": 0, "nope": ErrorCode.GROUP_ID_NOT_FOUND}
    tail = store.entries(partition_for("solo", 5))[-2:]
    assert all(v is None for _, v in tail)
    assert coord.describe_group("solo")["group_state"] == "Dead"


def test_offsets_expire_after_group_is_empty() -> None:
    coord, clock, store = make(offsets_retention_ms=60_000)
    result(coord.commit_offsets("solo", "", None, -1, {("t", 0): OffsetAndMetadata(1, -1, "", coord.now_ms())}))
    assert result(coord.expire_offsets()) == 0
    clock.advance(61)
    assert result(coord.expire_offsets()) == 1
    assert "solo" not in coord.groups
    assert [v for _, v in store.entries(partition_for("solo", 5))][-2:] == [None, None]


def test_initial_rebalance_delay_collects_members() -> None:
    coord, clock, _ = make(delay_ms=3000)
    _, d1 = join_two_step(coord, clock)
    clock.pump([1, 1])
    _, d2 = join_two_step(coord, clock)
    clock.pump([1, 1])
    assert result(d1) is None                     # t=4: the delay was extended by the new member
    clock.pump([1, 1])
    assert result(d1)["generation_id"] == 1 and len(result(d1)["members"]) == 2


def test_static_member_rejoin_keeps_generation() -> None:
    coord, clock, store = make()
    first = result(join(coord, instance="host-1"))     # static members skip MEMBER_ID_REQUIRED
    assert first is None
    clock.advance(0)
    first = result(first_d := join(coord, member=coord.groups["g"].static_members["host-1"], instance="host-1"))
    old_id = coord.groups["g"].static_members["host-1"]
    result(coord.sync_group("g", 1, old_id, None, {old_id: b"a"}))
    assert coord.groups["g"].state is S.STABLE
    again = result(join(coord, instance="host-1"))    # restarted: new member id, no rebalance
    assert again["error_code"] == 0 and again["generation_id"] == 1 and again["member_id"] != old_id
    assert coord.heartbeat("g", old_id, "host-1", 1) == ErrorCode.FENCED_INSTANCE_ID
    assert coord.heartbeat("g", again["member_id"], "host-1", 1) == 0


def test_new_member_join_timeout_constant() -> None:
    assert NEW_MEMBER_JOIN_TIMEOUT_MS == 300_000


def test_txn_offset_commit_v3_checks_generation_member_and_instance() -> None:
    """TxnOffsetCommit v3 (KIP-447) as Kafka 2.8's validateOffsetCommit: the current member and
    generation commit; an older generation is ILLEGAL_GENERATION, an unknown member
    UNKNOWN_MEMBER_ID, a replaced static instance FENCED_INSTANCE_ID; without member and
    generation (v0-2) nothing is checked; a group the request creates has no such member."""
    coord, clock, store = make()
    (member,) = stable_group(coord, clock, 1)
    gen = coord.groups["g"].generation
    tp = ("in", 0)

    def commit(group: str = "g", **kw: Any) -> ErrorCode:
        return result(coord.commit_txn_offsets(group, 7, 0, {tp: OffsetAndMetadata(1)}, **kw))[tp]

    assert commit(member_id=member, generation=gen) == ErrorCode.NONE
    assert commit(member_id=member, generation=gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert commit(member_id="consumer-zombie", generation=gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(member_id=member, generation=gen, instance_id="host-unknown") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit() == ErrorCode.NONE
    assert commit("fresh", member_id="", generation=0) == ErrorCode.UNKNOWN_MEMBER_ID

    first = result(join(coord, group="s", instance="host-1"))
    assert first is None
    clock.advance(0)
    old_id = coord.groups["s"].static_members["host-1"]
    result(coord.sync_group("s", 1, old_id, None, {old_id: b"a"}))
    again = result(join(coord, group="s", instance="host-1"))  # restarted: a new member id
    new_id = again["member_id"]
    assert commit("s", member_id=old_id, generation=1, instance_id="host-1") == ErrorCode.FENCED_INSTANCE_ID
    assert commit("s", member_id=new_id, generation=1, instance_id="host-1") == ErrorCode.NONE
