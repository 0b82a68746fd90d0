"""The data of a consumer group: its state machine, members and committed offsets (no I/O).

The states and their valid transitions are Kafka's (``GroupMetadata.scala``); :data:`TRANSITIONS`
is the only place that says which move is legal, and :meth:`Group.transition` refuses any other,
so a coordinator bug shows up as an error instead of a group in a state Kafka never reaches.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
#: state -> states it may move to (Kafka lists the inverse, "valid previous states").
TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.PREPARING_REBALANCE: frozenset({S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
    S.COMPLETING_REBALANCE: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.DEAD}),
    S.STABLE: frozenset({S.PREPARING_REBALANCE, S.DEAD}),
    S.DEAD: frozenset({S.DEAD}),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None      # explicit retention (OffsetCommit v2-4), else None


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: Parked JoinGroup / SyncGroup answers (Kafka's awaitingJoinCallback / awaitingSyncCallback).
    awaiting_join: Callable[[dict[str, Any]], None] | None = None
    awaiting_sync: Callable[[int, bytes], None] | None = None
    is_new: bool = False
    latest_heartbeat_ms: int = 0
    heartbeat_timer: Any = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED that have not joined yet (KIP-394).
    pending_members: set[str] = field(default_factory=set)
    #: group.instance.id -> current member id (static membership, KIP-345).
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    #: TxnOffsetCommit offsets per producer id, invisible until that producer's COMMIT marker
    #: reaches the group's offsets partition (dropped on ABORT), as Kafka's pendingTransactionalOffsetCommits
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    #: Members of the current generation that have not sent SyncGroup yet.
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_timer: Any = None
    sync_timer: Any = None

    def transition(self, to: GroupState, now_ms: int) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {to.value} is not allowed")
        self.state = to
        self.state_timestamp_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members ---------------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None \
                and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """JoinGroup's check: an Empty group takes any non-empty type and list, otherwise the type
        must match and one offered protocol must be supported by every current member."""
        names = [n for n, _ in protocols]
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its first protocol that every member supports."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalStateTransition(f"group {self.group_id}: no protocol common to all members")
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(n for n in member.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda n: votes[n])

    def summary_members(self) -> list[dict[str, Any]]:
        with_data = self.is_(GroupState.STABLE)
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "client_id": m.client_id, "client_host": m.client_host,
                 "member_metadata": m.metadata_for(self.protocol_name) if with_data else b"",
                 "member_assignment": m.assignment if with_data else b""}
                for m in self.members.values()]
