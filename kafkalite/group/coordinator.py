"""The group coordinator: Kafka's classic group protocol as a state machine over groups (no I/O).

It follows Kafka 2.8's ``GroupCoordinator``: JoinGroup (two-step join of KIP-394, static members
of KIP-345), SyncGroup, Heartbeat, LeaveGroup, session / rebalance / new-member timeouts,
generations, protocol vote, and the offset commit rules. Everything time-related goes through an
``IReactorTime`` (``callLater``): the reactor in the broker, ``twisted.internet.task.Clock`` in
unit tests. Writes to ``__consumer_offsets`` go through a :class:`GroupStore` whose ``append``
returns a Deferred firing with an :class:`ErrorCode` once the records are replicated (acks=all)
or have failed; the store also feeds :meth:`load_partition`. Parked JoinGroup/SyncGroup answers
are callbacks on the members; the handlers turn them into Deferreds.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from twisted.internet import defer

from kafkalite.errors import ErrorCode
from kafkalite.group import records
from kafkalite.coordinator_runtime import CoordinatorRuntime, coordinator_append_error
from kafkalite.group.state import Group, GroupState, Member, OffsetAndMetadata
from kafkalite.topic_partition import TopicPartition

log = logging.getLogger(__name__)
S = GroupState
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000     # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class GroupStore(Protocol):
    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> defer.Deferred:
        """Append key/value records to the offsets partition; fires with an ErrorCode.
        ``producer`` (id, epoch): a transactional batch of that producer (TxnOffsetCommit)."""


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 10080 * 60_000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_broker(cls, config: Any) -> "GroupConfig":
        return cls(config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"],
                   config["group.initial.rebalance.delay.ms"], config["group.max.size"],
                   config["offsets.retention.minutes"] * 60_000, config["offset.metadata.max.bytes"])


def join_result(member_id: str, error: int, group: Group | None = None, members: list | None = None) -> dict[str, Any]:
    return {"error_code": int(error), "member_id": member_id,
            "generation_id": group.generation if group is not None and not error else -1,
            "protocol_type": group.protocol_type if group is not None and not error else None,
            "protocol_name": group.protocol_name if group is not None and not error else None,
            "leader": (group.leader_id or "") if group is not None and not error else "",
            "members": members or []}


class GroupCoordinator(CoordinatorRuntime):
    """Ownership of ``__consumer_offsets`` partitions comes from :class:`CoordinatorRuntime`."""

    def __init__(self, config: GroupConfig, clock: Any, store: GroupStore,
                 partition_count: Callable[[], int]) -> None:
        super().__init__(partition_count)
        self.config = config
        self.clock = clock
        self.store = store
        self.groups: dict[str, Group] = {}
        self.group_partition: dict[str, int] = {}

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # -- ownership (partition_of, coordinator_error, begin_load: CoordinatorRuntime) ---------------
    def complete_load(self, partition: int, entries: Iterable[tuple[bytes, bytes | None]],
                      pending_txn: dict[int, list[tuple[bytes, bytes | None]]] | None = None) -> int:
        """Replay an offsets partition (key, value) in log order and materialise its groups.

        ``entries`` holds committed transactional offsets in place (the loader resolved the
        markers); ``pending_txn`` the offset records of transactions whose marker is not in the
        log yet, per producer id: they stay pending until :meth:`complete_txn`."""
        if not self._loading(partition):
            return 0
        now = self.now_ms()
        group_values: dict[str, dict | None] = {}
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        for key, value in entries:
            rec = records.decode(key, value)
            if isinstance(rec, records.OffsetRecord):
                bucket = offsets.setdefault(rec.group_id, {})
                if rec.value is None:
                    bucket.pop((rec.topic, rec.partition), None)
                else:
                    bucket[(rec.topic, rec.partition)] = rec.value
            elif isinstance(rec, records.GroupRecord):
                group_values[rec.group_id] = rec.value
        loaded = 0
        for group_id in set(group_values) | {g for g, o in offsets.items() if o}:
            group_value = group_values.get(group_id)
            group = (records.group_from_value(group_id, group_value, now) if group_value is not None
                     else Group(group_id, state_timestamp_ms=now))
            group.offsets = offsets.get(group_id, {})
            if group.is_(S.EMPTY) and not group.offsets and group_value is None:
                continue
            self.groups[group_id] = group
            self.group_partition[group_id] = partition
            for member in group.members.values():
                self._heartbeat(group, member)
            loaded += 1
        for pid, txn_entries in (pending_txn or {}).items():
            for key, value in txn_entries:
                rec = records.decode(key, value)
                if isinstance(rec, records.OffsetRecord) and rec.value is not None:
                    holder = self.groups.get(rec.group_id) or self._add_group(rec.group_id)
                    holder.pending_txn_offsets.setdefault(pid, {})[(rec.topic, rec.partition)] = rec.value
        self._loaded(partition)
        log.info("loaded %d group(s) from __consumer_offsets-%d", loaded, partition)
        return loaded

    def unload(self, partition: int) -> None:
        """Leadership lost: every group of the partition goes Dead, parked calls get 16."""
        self._disown(partition)
        for group_id in [g for g, p in self.group_partition.items() if p == partition]:
            group = self.groups.pop(group_id, None)
            del self.group_partition[group_id]
            if group is None:
                continue
            self._cancel_timers(group)
            group.transition(S.DEAD, self.now_ms())
            for member in group.members.values():
                self._cancel(member.heartbeat_timer)
                if member.awaiting_join is not None:
                    cb, member.awaiting_join = member.awaiting_join, None
                    cb(join_result(member.member_id, ErrorCode.NOT_COORDINATOR))
                if member.awaiting_sync is not None:
                    scb, member.awaiting_sync = member.awaiting_sync, None
                    scb(ErrorCode.NOT_COORDINATOR, b"")

    def _add_group(self, group_id: str) -> Group:
        group = Group(group_id, state_timestamp_ms=self.now_ms())
        self.groups[group_id] = group
        self.group_partition[group_id] = self.partition_of(group_id)
        return group

    def _drop_group(self, group: Group) -> None:
        self._cancel_timers(group)
        if not group.is_(S.DEAD):
            group.transition(S.DEAD, self.now_ms())
        self.groups.pop(group.group_id, None)
        self.group_partition.pop(group.group_id, None)

    # -- JoinGroup -------------------------------------------------------------------------------
    def join_group(self, group_id: str, member_id: str, instance_id: str | None, require_known_member_id: bool,
                   client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                   protocol_type: str, protocols: list[tuple[str, bytes]]) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        protocols = [(n, bytes(m)) for n, m in protocols]

        def answer(result: dict[str, Any]) -> None:
            if not d.called:
                d.callback(result)

        if not group_id:
            answer(join_result(member_id, ErrorCode.INVALID_GROUP_ID))
            return d
        err = self.coordinator_error(group_id)
        if err is not None:
            answer(join_result(member_id, err))
            return d
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            answer(join_result(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return d
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                answer(join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return d
            group = self._add_group(group_id)
        if not member_id and len(group.members) + len(group.pending_members) >= self.config.max_size \
                and not (instance_id is not None and instance_id in group.static_members):
            answer(join_result(member_id, ErrorCode.GROUP_MAX_SIZE_REACHED))
            return d
        args = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if not member_id:
            self._unknown_join(group, instance_id, require_known_member_id, args, answer)
        else:
            self._current_join(group, member_id, instance_id, args, answer)
        return d

    def _unknown_join(self, group: Group, instance_id: str | None, require_known: bool, args: tuple,
                      answer: Callable[[dict[str, Any]], None]) -> None:
        client_id, _host, _rt, session_timeout_ms, protocol_type, protocols = args
        if group.is_(S.DEAD):
            answer(join_result("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocols):
            answer(join_result("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                self._replace_static_member(group, old_id, new_id, args, answer)
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, args, answer)
        elif require_known:
            group.pending_members.add(new_id)
            self.clock.callLater(session_timeout_ms / 1000.0, self._expire_pending, group, new_id)
            answer(join_result(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_id, None, args, answer)

    def _current_join(self, group: Group, member_id: str, instance_id: str | None, args: tuple,
                      answer: Callable[[dict[str, Any]], None]) -> None:
        protocol_type, protocols = args[4], args[5]
        if group.is_(S.DEAD):
            answer(join_result(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, protocols):
            answer(join_result(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, instance_id, args, answer)
            return
        if group.is_static_member_fenced(member_id, instance_id):
            answer(join_result(member_id, ErrorCode.FENCED_INSTANCE_ID))
            return
        member = group.members.get(member_id)
        if member is None:
            answer(join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, args, answer)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                answer(join_result(member_id, ErrorCode.NONE, group,
                                   self._member_list(group) if member_id == group.leader_id else []))
            else:
                self._update_member_and_rebalance(group, member, args, answer)
        elif group.is_(S.STABLE):
            if member_id == group.leader_id or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, args, answer)
            else:
                answer(join_result(member_id, ErrorCode.NONE, group, []))
        else:
            answer(join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _member_list(self, group: Group) -> list[dict[str, Any]]:
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]

    def _add_member_and_rebalance(self, group: Group, member_id: str, instance_id: str | None, args: tuple,
                                  answer: Callable[[dict[str, Any]], None]) -> None:
        client_id, host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols = args
        member = Member(member_id, instance_id, client_id, host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols, awaiting_join=answer, is_new=True)
        group.pending_members.discard(member_id)
        if group.is_(S.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(self, group: Group, member: Member, args: tuple,
                                     answer: Callable[[dict[str, Any]], None]) -> None:
        _cid, _host, rebalance_timeout_ms, session_timeout_ms, _pt, protocols = args
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.protocols = protocols
        previous, member.awaiting_join = member.awaiting_join, answer
        if previous is not None:     # a duplicate JoinGroup replaces the parked one
            previous(join_result(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, args: tuple,
                               answer: Callable[[dict[str, Any]], None]) -> None:
        """A static member restarted (same group.instance.id, new member id): fence the old id."""
        client_id, host, rebalance_timeout_ms, session_timeout_ms, _pt, protocols = args
        old = group.members.pop(old_id)
        self._cancel(old.heartbeat_timer)
        if old.awaiting_join is not None:
            old.awaiting_join(join_result(old_id, ErrorCode.FENCED_INSTANCE_ID))
        if old.awaiting_sync is not None:
            old.awaiting_sync(ErrorCode.FENCED_INSTANCE_ID, b"")
        member = Member(new_id, old.group_instance_id, client_id, host, rebalance_timeout_ms, session_timeout_ms,
                        old.protocol_type, protocols, assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[old.group_instance_id or ""] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:
            group.pending_sync.discard(old_id)
            group.pending_sync.add(new_id)
        self._heartbeat(group, member)
        if group.is_(S.STABLE) and group.protocol_name == group.select_protocol():
            generation = group.generation

            def stored(error: ErrorCode) -> None:
                if error and group.generation == generation and group.members.get(new_id) is member:
                    answer(join_result(new_id, error))
                    self._remove_member(group, member, "static member store failed")
                    return
                answer(join_result(new_id, ErrorCode.NONE, group, []))
            self._store_group(group, {m.member_id: m.assignment for m in group.members.values()}).addCallback(stored)
        elif group.is_(S.PREPARING_REBALANCE):
            member.awaiting_join = answer
            self._try_complete_join(group)
        else:
            member.awaiting_join = answer
            self._maybe_prepare_rebalance(group, f"static member {old.group_instance_id} replaced")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_(S.PREPARING_REBALANCE):
                self._try_complete_join(group)

    # -- rebalance -------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel(group.sync_timer)
        group.sync_timer = None
        group.pending_sync.clear()
        was_empty = group.is_(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, self.now_ms())
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation, reason)
        self._cancel(group.join_timer)
        rebalance_timeout = group.rebalance_timeout_ms()
        if was_empty:
            # InitialDelayedJoin: wait for more members of a new group before the first generation
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_timeout)
            group.new_member_added = False
            group.join_timer = self.clock.callLater(delay / 1000.0, self._initial_join_expired, group,
                                                    max(rebalance_timeout - delay, 0))
        else:
            group.join_timer = self.clock.callLater(rebalance_timeout / 1000.0, self._join_expired, group)
            self._try_complete_join(group)

    def _initial_join_expired(self, group: Group, remaining_ms: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = self.clock.callLater(delay / 1000.0, self._initial_join_expired, group,
                                                    max(remaining_ms - self.config.initial_rebalance_delay_ms, 0))
            return
        self._complete_join(group)

    def _join_expired(self, group: Group) -> None:
        group.join_timer = None
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: every known member rejoined and no pending member is left.
        The initial delay of a new group only ends at its timer (Kafka's InitialDelayedJoin)."""
        if group.is_(S.PREPARING_REBALANCE) and group.has_all_members_joined() and group.join_timer is not None \
                and getattr(group.join_timer, "func", None) != self._initial_join_expired:
            self._cancel(group.join_timer)
            group.join_timer = None
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(S.PREPARING_REBALANCE):
            return
        for member in [m for m in group.members.values() if m.awaiting_join is None and not m.is_static]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            self._cancel(member.heartbeat_timer)
            group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that have not rejoined: wait for them or their session expiry
            group.join_timer = self.clock.callLater(group.rebalance_timeout_ms() / 1000.0, self._join_expired, group)
            return
        now = self.now_ms()
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition(S.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.leader_id = None
            group.transition(S.EMPTY, now)
        log.info("group %s: generation %d (%s) with %d member(s)", group.group_id, group.generation,
                 group.protocol_name, len(group.members))
        if group.is_(S.EMPTY):
            self._store_group(group, {})
            return
        everyone = self._member_list(group)
        for member in group.members.values():
            if member.awaiting_join is not None:
                cb, member.awaiting_join = member.awaiting_join, None
                cb(join_result(member.member_id, ErrorCode.NONE, group,
                               everyone if member.member_id == group.leader_id else []))
            member.is_new = False
            self._heartbeat(group, member)
        group.pending_sync = set(group.members)
        group.sync_timer = self.clock.callLater(group.rebalance_timeout_ms() / 1000.0, self._sync_expired,
                                                group, group.generation)

    def _sync_expired(self, group: Group, generation: int) -> None:
        """Members that got the new generation but never sent SyncGroup are removed (2.8 DelayedSync)."""
        group.sync_timer = None
        if group.generation != generation or not group.pending_sync or not group.is_(S.COMPLETING_REBALANCE, S.STABLE):
            return
        missing = sorted(group.pending_sync)
        log.info("group %s: member(s) %s did not sync in time", group.group_id, missing)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._cancel(member.heartbeat_timer)
                group.remove(member_id)
        self._prepare_rebalance(group, "members failed to sync")

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync is not None:
                cb, member.awaiting_sync = member.awaiting_sync, None
                cb(error, member.assignment if not error else b"")
                if not error:
                    self._heartbeat(group, member)

    # -- SyncGroup -------------------------------------------------------------------------------
    def sync_group(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                   assignments: dict[str, bytes], protocol_type: str | None = None,
                   protocol_name: str | None = None) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()

        def answer(error: int, assignment: bytes) -> None:
            if not d.called:
                d.callback((int(error), assignment, group.protocol_type if group else None,
                            group.protocol_name if group else None))

        group = None
        if not group_id:
            answer(ErrorCode.INVALID_GROUP_ID, b"")
            return d
        err = self.coordinator_error(group_id)
        if err is not None:
            answer(ErrorCode.REBALANCE_IN_PROGRESS if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else err, b"")
            return d
        group = self.groups.get(group_id)
        if group is None:
            answer(ErrorCode.UNKNOWN_MEMBER_ID, b"")
            return d
        if group.is_(S.DEAD):
            answer(ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
        elif group.is_static_member_fenced(member_id, instance_id):
            answer(ErrorCode.FENCED_INSTANCE_ID, b"")
        elif member_id not in group.members:
            answer(ErrorCode.UNKNOWN_MEMBER_ID, b"")
        elif generation != group.generation:
            answer(ErrorCode.ILLEGAL_GENERATION, b"")
        elif (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"")
        elif group.is_(S.EMPTY):
            answer(ErrorCode.UNKNOWN_MEMBER_ID, b"")
        elif group.is_(S.PREPARING_REBALANCE):
            answer(ErrorCode.REBALANCE_IN_PROGRESS, b"")
        elif group.is_(S.COMPLETING_REBALANCE):
            member = group.members[member_id]
            member.awaiting_sync = answer
            group.pending_sync.discard(member_id)
            if member_id == group.leader_id:
                full = {m: bytes(assignments.get(m, b"")) for m in group.members}
                self._store_group(group, full).addCallback(self._group_stored, group, group.generation, full)
        else:       # Stable
            member = group.members[member_id]
            group.pending_sync.discard(member_id)
            self._heartbeat(group, member)
            answer(ErrorCode.NONE, member.assignment)
        return d

    def _group_stored(self, error: ErrorCode, group: Group, generation: int, assignment: dict[str, bytes]) -> None:
        if not group.is_(S.COMPLETING_REBALANCE) or group.generation != generation:
            return
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"storing the assignment failed: {ErrorCode(error).name}")
            return
        for member_id, data in assignment.items():
            if member_id in group.members:
                group.members[member_id].assignment = data
        group.transition(S.STABLE, self.now_ms())
        self._propagate_assignment(group, ErrorCode.NONE)
        log.info("group %s: stable in generation %d", group.group_id, generation)

    # -- Heartbeat / session -----------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        err = self.coordinator_error(group_id)
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE        # Kafka lets members keep going while it loads
        if err is not None:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._heartbeat(group, member)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else ErrorCode.NONE

    def _heartbeat(self, group: Group, member: Member) -> None:
        """completeAndScheduleNextHeartbeatExpiration: restart the member's session timer."""
        member.latest_heartbeat_ms = self.now_ms()
        timeout = NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms
        self._cancel(member.heartbeat_timer)
        member.heartbeat_timer = self.clock.callLater(timeout / 1000.0, self._session_expired, group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        now = self.now_ms()
        if member.awaiting_join is not None:
            keep = not member.is_new or member.latest_heartbeat_ms + NEW_MEMBER_JOIN_TIMEOUT_MS > now
        else:
            keep = member.awaiting_sync is not None
        if keep:
            self._heartbeat(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member, f"member {member.member_id} session expired")

    def _remove_member(self, group: Group, member: Member, reason: str) -> None:
        self._cancel(member.heartbeat_timer)
        member.heartbeat_timer = None
        if member.awaiting_join is not None:
            cb, member.awaiting_join = member.awaiting_join, None
            cb(join_result(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- LeaveGroup ------------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group error, one error per (member id, instance id)) as LeaveGroup v3+ answers."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        err = self.coordinator_error(group_id)
        if err is not None:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
                results.append(ErrorCode.NONE)
            elif member_id not in group.members:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
            else:
                log.info("group %s: member %s leaves", group.group_id, member_id)
                self._remove_member(group, group.members[member_id], f"member {member_id} left")
                results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # -- offsets ---------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata]) -> defer.Deferred:
        """Fires with {tp: ErrorCode}. Records are written (acks=all) before the commit counts."""
        def all_(code: ErrorCode) -> defer.Deferred:
            return defer.succeed({tp: code for tp in offsets})

        err = self.coordinator_error(group_id)
        if err is not None:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = self._add_group(group_id)      # a standalone commit (no group management)
        if group.is_(S.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, instance_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        if not (generation < 0 and group.is_(S.EMPTY)):
            if member_id not in group.members:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if generation != group.generation:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if group.is_(S.COMPLETING_REBALANCE):
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            if not group.is_(S.STABLE, S.PREPARING_REBALANCE):
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            self._heartbeat(group, group.members[member_id])
        return self._store_offsets(group, offsets)

    def _store_offsets(self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata]) -> defer.Deferred:
        return self._write_offsets(group, offsets, group.offsets.update)

    def _write_offsets(self, group: Group, offsets: dict[TopicPartition, OffsetAndMetadata],
                       apply: Callable[[dict[TopicPartition, OffsetAndMetadata]], None],
                       txn: tuple[int, int] | None = None) -> defer.Deferred:
        """The one write path of OffsetCommit and TxnOffsetCommit: offsets whose metadata is too
        large are refused one by one (Kafka's validateOffsetMetadataLength), the rest go to the
        offsets partition in one batch (transactional when ``txn`` names the producer), and once
        written ``apply`` records them, unless the group was unloaded or replaced meanwhile.
        Fires with {tp: ErrorCode}."""
        result: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        if not valid:
            return defer.succeed(result)
        entries: list[tuple[bytes, bytes | None]] = [
            (records.offset_key(group.group_id, t, p), records.offset_value(om)) for (t, p), om in valid.items()]

        def written(error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            if error == ErrorCode.MESSAGE_TOO_LARGE or error == ErrorCode.RECORD_LIST_TOO_LARGE:
                error = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
            if not error and self.groups.get(group.group_id) is group:
                apply(valid)
            for tp in valid:
                result[tp] = ErrorCode(error)
            return result
        return self._append(group.group_id, entries, txn).addCallback(written)

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata], *, member_id: str = "",
                           instance_id: str | None = None, generation: int = -1) -> defer.Deferred:
        """TxnOffsetCommit: write the offsets as a transactional batch of the producer (acks=all);
        they stay pending (OffsetFetch does not see them) until the transaction's COMMIT marker
        reaches the offsets partition. Fires with {tp: ErrorCode}. v3 (KIP-447) names the
        consumer's generation, member and instance: checked as Kafka 2.8's validateOffsetCommit
        does, so a zombie consumer's producer cannot commit for a group that moved on."""
        err = self.coordinator_error(group_id)
        if err is not None:
            return defer.succeed({tp: err for tp in offsets})
        group = self.groups.get(group_id)
        if group is None:
            group = self._add_group(group_id)      # Kafka creates the group for a transactional commit
        if group.is_(S.DEAD):
            return defer.succeed({tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in offsets})
        if generation >= 0 or member_id or instance_id is not None:
            fenced = _txn_member_error(group, member_id, instance_id)
            if fenced is None and generation != group.generation:
                fenced = ErrorCode.ILLEGAL_GENERATION
            if fenced is not None:
                return defer.succeed({tp: fenced for tp in offsets})
        return self._write_offsets(
            group, offsets, lambda valid: group.pending_txn_offsets.setdefault(producer_id, {}).update(valid),
            (producer_id, producer_epoch))

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """The producer's COMMIT/ABORT marker is in offsets partition ``partition``: its pending
        offsets there become committed, or are dropped (Kafka's handleTxnCompletion)."""
        for group_id, p in list(self.group_partition.items()):
            if p != partition:
                continue
            group = self.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        err = self.coordinator_error(group_id)
        if err is not None:
            return err, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(stored)
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions with a transactional offset commit whose marker has not arrived (KIP-447)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for offsets in group.pending_txn_offsets.values() for tp in offsets}

    def expire_offsets(self, now_ms: int | None = None) -> defer.Deferred:
        """Remove offsets past retention (KIP-211 rules) and groups left with nothing; writes
        tombstones. Fires with the number of offsets removed."""
        now = self.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        writes = []
        for group in list(self.groups.values()):
            if not self.is_loaded(self.group_partition.get(group.group_id, -1)):
                continue
            expired: list[TopicPartition] = []
            if group.is_(S.EMPTY):
                base = group.state_timestamp_ms
                for tp, om in group.offsets.items():
                    if om.expire_timestamp is not None:
                        if om.expire_timestamp <= now:
                            expired.append(tp)
                    elif max(base, om.commit_timestamp if base < 0 else base) + retention <= now:
                        expired.append(tp)
            elif group.is_(S.STABLE) and group.protocol_type == "consumer":
                subscribed: set[str] = set()
                known = True
                for m in group.members.values():
                    topics = records.subscribed_topics(m.metadata_for(group.protocol_name))
                    if topics is None:
                        known = False
                        break
                    subscribed |= topics
                if known:
                    expired = [tp for tp, om in group.offsets.items() if tp[0] not in subscribed and (
                        om.expire_timestamp <= now if om.expire_timestamp is not None
                        else om.commit_timestamp + retention <= now)]
            entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group.group_id, t, p), None) for t, p in expired]
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if group.is_(S.EMPTY) and not group.offsets and not group.members:
                entries.append((records.group_key(group.group_id), None))
                self._drop_group(group)
                log.info("group %s removed: empty and no offsets left", group.group_id)
            if entries:
                writes.append(self._append(group.group_id, entries))
        d = defer.gatherResults(writes, consumeErrors=True) if writes else defer.succeed([])
        return d.addCallback(lambda _: removed)

    # -- admin -----------------------------------------------------------------------------------
    def describe_group(self, group_id: str) -> dict[str, Any]:
        err = self.coordinator_error(group_id)
        base = {"error_code": 0, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                "protocol_data": "", "members": [], "authorized_operations": -2147483648}
        if err is not None:
            base["error_code"] = int(err)
            base["group_state"] = ""
            return base
        group = self.groups.get(group_id)
        if group is None:
            return base
        base.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if group.is_(S.STABLE) else "",
                    members=group.summary_members())
        return base

    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[Group]]:
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.any_loading() else ErrorCode.NONE
        found = [g for g in self.groups.values() if self.is_loaded(self.group_partition.get(g.group_id, -1))
                 and (not states or g.state.value in states)]
        return error, found

    def delete_groups(self, group_ids: list[str]) -> defer.Deferred:
        """Fires with {group id: ErrorCode}; Empty groups become Dead and get tombstones."""
        results: dict[str, ErrorCode] = {}
        writes = []
        for group_id in group_ids:
            if not group_id:
                results[group_id] = ErrorCode.INVALID_GROUP_ID
                continue
            err = self.coordinator_error(group_id)
            if err is not None:
                results[group_id] = err
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(S.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_(S.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group_id, t, p), None) for t, p in group.offsets]
                entries.append((records.group_key(group_id), None))
                self._drop_group(group)

                def written(error: ErrorCode, gid: str = group_id) -> None:
                    results[gid] = ErrorCode.NONE if not error else ErrorCode(error)
                writes.append(self._append(group_id, entries).addCallback(written))
        d = defer.gatherResults(writes, consumeErrors=True) if writes else defer.succeed(None)
        return d.addCallback(lambda _: {g: results[g] for g in group_ids})

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> defer.Deferred:
        """OffsetDelete (KIP-496), Kafka 2.8's rules: fires with (group error, {partition: error}).
        An Empty group loses the offsets; a consumer group that is not Empty loses those of
        topics no member subscribes to, the others answer GROUP_SUBSCRIBED_TO_TOPIC; any other
        group with members is NON_EMPTY_GROUP. Tombstones go to ``__consumer_offsets``; an Empty
        group left with no offset becomes Dead (and gets its own tombstone)."""
        if not group_id:
            return defer.succeed((ErrorCode.INVALID_GROUP_ID, {}))
        err = self.coordinator_error(group_id)
        if err is not None:
            return defer.succeed((err, {}))
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return defer.succeed((ErrorCode.GROUP_ID_NOT_FOUND, {}))
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_(S.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == "consumer":
            subscribed = self._subscribed_topics(group)
            eligible = []
            for tp in partitions:
                if subscribed is not None and tp[0] in subscribed:
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return defer.succeed((ErrorCode.NON_EMPTY_GROUP, {}))
        removed = [tp for tp in eligible if group.offsets.pop(tp, None) is not None]
        for tp in eligible:
            results[tp] = ErrorCode.NONE
        entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group_id, t, p), None) for t, p in removed]
        if group.is_(S.EMPTY) and not group.offsets and not group.members:
            entries.append((records.group_key(group_id), None))
            self._drop_group(group)
            log.info("group %s removed: its last offsets were deleted", group_id)
        if not entries:
            return defer.succeed((ErrorCode.NONE, results))

        def written(error: ErrorCode) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
            if error:
                return ErrorCode(error), {}
            return ErrorCode.NONE, results
        return self._append(group_id, entries).addCallback(written)

    @staticmethod
    def _subscribed_topics(group: Group) -> set[str] | None:
        """The topics the members subscribe to under the group's protocol; None when unknown
        (no protocol chosen yet, or a subscription that does not parse), as Kafka's
        ``subscribedTopics`` (unknown: no topic counts as subscribed)."""
        if group.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in group.members.values():
            got = records.subscribed_topics(m.metadata_for(group.protocol_name))
            if got is None:
                return None
            topics |= got
        return topics

    # -- storage ---------------------------------------------------------------------------------
    def _store_group(self, group: Group, assignments: dict[str, bytes]) -> defer.Deferred:
        entry = (records.group_key(group.group_id), records.group_value(group, assignments))
        return self._append(group.group_id, [entry])

    def _append(self, group_id: str, entries: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> defer.Deferred:
        partition = self.group_partition.get(group_id, self.partition_of(group_id))
        d = self.store.append(partition, entries) if producer is None else \
            self.store.append(partition, entries, producer)

        def coordinator_errors(error: Any) -> ErrorCode:
            """Storage errors as the coordinator's (GroupMetadataManager.storeGroup's mapping)."""
            return coordinator_append_error(error)

        def failed(f: Any) -> ErrorCode:
            log.error("append to __consumer_offsets-%d failed: %s", partition, f.value)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return d.addCallbacks(coordinator_errors, failed)

    # -- timers ----------------------------------------------------------------------------------
    @staticmethod
    def _cancel(call: Any) -> None:
        if call is not None and call.active():
            call.cancel()

    def _cancel_timers(self, group: Group) -> None:
        self._cancel(group.join_timer)
        self._cancel(group.sync_timer)
        group.join_timer = group.sync_timer = None
        for member in group.members.values():
            self._cancel(member.heartbeat_timer)


def _txn_member_error(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
    """Kafka 2.8's validateCurrentMember for a transactional commit: a static instance must map
    to ``member_id`` (else FENCED_INSTANCE_ID; unknown: UNKNOWN_MEMBER_ID); a dynamic member
    must be in the group."""
    if instance_id is not None:
        current = group.static_members.get(instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.FENCED_INSTANCE_ID if current != member_id else None
    return None if member_id in group.members else ErrorCode.UNKNOWN_MEMBER_ID
