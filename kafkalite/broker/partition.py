"""One topic-partition replica held by this broker: its log, its role, its ISR and high watermark.

Like Kafka's ``Partition``, this is the one owner of everything replication decides per
partition: leader or follower role (from the :class:`LeaderAndIsr` ZooKeeper delivers), the
followers' progress, ISR expansion and shrinking and their conditional write to the state znode,
the high watermark (the smallest log end offset among the in-sync replicas; consumers read only
below it) and the answer to "is this acks=all append replicated yet". Every append and every
high-watermark move wakes the requests waiting on this partition in the purgatory (fetch
long-polls, acks=all produces).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Protocol

from twisted.internet import defer

from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica import Replica
from kafkalite.coordination.errors import ZkVersionConflictError
from kafkalite.errors import ErrorCode, KafkaError, KafkaStorageError
from kafkalite.metadata.state import LeaderAndIsr
from kafkalite.records.batch import BatchInfo
from kafkalite.records.control import ControlType
from kafkalite.storage import AppendResult, PartitionLog

log = logging.getLogger(__name__)

READ_COMMITTED = 1            # Fetch / ListOffsets isolation_level


class PartitionError(KafkaError):
    """A per-partition failure: the broker answers its code in the partition's response entry."""


class FetchOutOfRangeError(PartitionError):
    """OFFSET_OUT_OF_RANGE for a fetch, with where the leader's log starts and its high watermark:
    the Fetch answer carries them, so a follower behind our log start (DeleteRecords, retention)
    restarts its log there instead of truncating in a loop."""

    def __init__(self, message: str, log_start_offset: int, high_watermark: int) -> None:
        super().__init__(message, ErrorCode.OFFSET_OUT_OF_RANGE)
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class IsrWriter(Protocol):
    """The fenced state-znode write a leader uses for ISR changes
    (``KafkaZkClient.update_leader_and_isr`` without a controller fence)."""

    def update_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr) -> defer.Deferred:
        ...


@dataclass
class Partition:
    topic: str
    index: int
    broker_id: int
    log: PartitionLog
    purgatory: Purgatory
    isr_writer: IsrWriter
    replicas: list[int] = field(default_factory=list)
    state: LeaderAndIsr | None = None
    #: Leader only: each follower's fetch state in this term (Kafka's Replica), by broker id;
    #: empty while following or offline
    followers: dict[int, Replica] = field(default_factory=dict)
    #: Leader only: the ISR our pending write asks for, until ZooKeeper answers (None: no write).
    #: The high watermark counts the union of it and the ISR (Kafka's "maximal ISR", KIP-497): a
    #: replica being added holds it back as a member does, since the controller may elect it as
    #: soon as the write lands; one being removed still counts until then
    isr_in_flight: tuple[int, ...] | None = None
    #: Leader only: our log end when this leader epoch began. A follower joins the ISR only once
    #: it has reached it too (Kafka's leaderEpochStartOffset check): a new leader's high
    #: watermark can lag what the previous leader had acknowledged
    epoch_start_offset: int = 0
    #: The replica's log dir failed: it neither leads nor follows any more (until restart).
    offline: bool = False
    #: Told (old ISR, new ISR) after each ISR write of ours succeeded (the IsrShrinks/IsrExpands meters).
    isr_listener: Callable[[tuple[int, ...], tuple[int, ...]], None] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def high_watermark(self) -> int:
        """Kept by the log (retention never deletes above it; it is checkpointed with it)."""
        return self.log.high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.log.high_watermark = value

    @property
    def is_leader(self) -> bool:
        return not self.offline and self.state is not None and self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def isr_write_pending(self) -> bool:
        """An ISR write of ours awaits ZooKeeper's answer (one at a time)."""
        return self.isr_in_flight is not None

    @property
    def isr(self) -> tuple[int, ...]:
        return self.state.isr if self.state else ()

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: below the high watermark and every open or unreplicated transaction."""
        return self.log.last_stable_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise unless this replica leads, and the client's epoch (if given) matches ours.

        The epoch is checked first, against this replica's epoch whether it leads or follows
        (Kafka 2.8 ``Partition.getLocalLog``: ``checkCurrentLeaderEpoch``, then ``isLeader``):
        a client with an older epoch asking a former leader gets FENCED_LEADER_EPOCH, one with
        a newer epoch UNKNOWN_LEADER_EPOCH, and only one with our epoch NOT_LEADER_OR_FOLLOWER.
        Fetch, ListOffsets and OffsetForLeaderEpoch carry an epoch; Produce, DeleteRecords and
        WriteTxnMarkers do not (-1) and only need the leadership."""
        if self.offline:
            raise KafkaStorageError(f"{self.topic}-{self.index}: the log dir of this replica is offline")
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise PartitionError(f"{self.topic}-{self.index}: client leader epoch {current_leader_epoch} is "
                                     f"older than {self.leader_epoch}", ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise PartitionError(f"{self.topic}-{self.index}: client leader epoch {current_leader_epoch} is "
                                     f"newer than {self.leader_epoch}", ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not self.is_leader:
            raise PartitionError(f"{self.topic}-{self.index}: not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # -- roles -----------------------------------------------------------------------------------
    def become_leader(self, state: LeaderAndIsr, replicas: list[int], now_ms: int) -> None:
        new_term = not self.is_leader or self.leader_epoch != state.leader_epoch
        self.state = state
        self.replicas = list(replicas)
        if new_term:
            self.followers = {r: Replica(r, now_ms) for r in replicas if r != self.broker_id}
            self.isr_in_flight = None
            # Mark where this epoch starts, so a follower's OffsetForLeaderEpoch for an older
            # epoch learns where that epoch ended here (KIP-101).
            # (memory now, the checkpoint file in the storage's background executor)
            self.log.assign_epoch(state.leader_epoch, self.log.log_end_offset)
            self.epoch_start_offset = self.log.log_end_offset
            # Kafka: the new leader's high watermark starts at its own checkpointed value and
            # only moves once the ISR's end offsets are known.
            self.high_watermark = min(max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset)
            log.info("%s-%d: leader in epoch %d (ISR %s, log end %d)", self.topic, self.index,
                     state.leader_epoch, list(state.isr), self.log.log_end_offset)
        else:
            # the assignment changed within the term (a reassignment added or dropped replicas):
            # track the new followers from now on, forget the dropped ones
            wanted = {r for r in replicas if r != self.broker_id}
            for r in wanted - set(self.followers):
                self.followers[r] = Replica(r, now_ms)
            for r in set(self.followers) - wanted:
                del self.followers[r]
        self.maybe_advance_high_watermark()

    def mark_offline(self) -> None:
        """The log dir failed (ReplicaManager.take_offline): stop leading and forget followers;
        waiters re-checking :meth:`replication_status` get KAFKA_STORAGE_ERROR."""
        self.offline = True
        self.followers.clear()

    def become_follower(self, state: LeaderAndIsr, replicas: list[int]) -> None:
        self.state = state
        self.replicas = list(replicas)
        self.followers.clear()

    # -- followers' progress and the ISR (leader only) --------------------------------------------
    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1) -> None:
        """A follower asked for ``fetch_offset``: its log ends there (everything before is
        copied), and starts at ``log_start_offset``. The ISR may grow (written to ZooKeeper), the
        high watermark and DeleteRecords' low watermark may move.

        An idle partition of a follower's fetch session (asked again at this log's end, nothing
        appended since) is recorded by ``FetchSession.split`` instead, inlined there: the
        follower is caught up now, unless this replica no longer leads or the follower is out of
        the ISR (then this full path decides)."""
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        if log_start_offset >= 0 and follower.log_start_offset != log_start_offset:
            follower.log_start_offset = log_start_offset
            self.purgatory.check(self.key)            # a DeleteRecords may be waiting for it
        moved = follower.update_fetch_state(fetch_offset, self.log.log_end_offset, now_ms)
        if replica_id not in self.isr:
            grown = self.isr_to_expand(replica_id)
            if grown is not None:
                self.write_isr(grown, f"replica {replica_id} caught up")
        if moved:        # an unchanged offset cannot move the high watermark (most partitions of a session)
            self.maybe_advance_high_watermark()

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """New ISR with ``replica_id`` added, if it is out of the ISR and has caught up to the HW
        and to the start of this leader epoch. The HW alone is not enough: a new leader's HW
        starts at what it last heard as a follower, below records the previous leader had
        acknowledged; a replica let in without them could be elected and lose them."""
        if not self.is_leader or replica_id in self.isr or replica_id not in self.replicas:
            return None
        follower = self.followers.get(replica_id)
        end = follower.log_end_offset if follower is not None else -1
        if end >= max(self.high_watermark, self.epoch_start_offset):
            return tuple(sorted(set(self.isr) | {replica_id}, key=self.replicas.index))
        return None

    def isr_to_shrink(self, now_ms: int, lag_max_ms: int) -> tuple[int, ...] | None:
        """New ISR without followers that have not caught up within ``replica.lag.time.max.ms``."""
        if not self.is_leader:
            return None
        leo = self.log.log_end_offset
        followers = self.followers
        lagging = [r for r in self.isr if r in followers and followers[r].is_lagging(leo, now_ms, lag_max_ms)]
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def maybe_shrink_isr(self, now_ms: int, lag_max_ms: int) -> None:
        shrunk = self.isr_to_shrink(now_ms, lag_max_ms)
        if shrunk is not None:
            self.write_isr(shrunk, f"replicas {sorted(set(self.isr) - set(shrunk))} fell behind")

    def write_isr(self, isr: tuple[int, ...], why: str) -> None:
        """The leader writes its ISR changes itself (Kafka before 2.7), conditional on the state
        znode's version. A lost race (the controller wrote a newer state) is settled by the newer
        state the watch delivers; the ISR in memory changes only once ZooKeeper has it, so the
        high watermark never counts a replica the znode does not list."""
        if self.isr_write_pending or self.state is None:
            return
        before = self.state
        self.isr_in_flight = isr
        d = self.isr_writer.update_leader_and_isr(self.topic, self.index, before.with_isr(isr))

        def written(state: LeaderAndIsr) -> None:
            self.isr_in_flight = None
            ours = self.state is before          # else a newer state came first and stands
            if ours:
                self.state = state
                log.info("%s-%d: ISR %s -> %s (%s)", self.topic, self.index, list(before.isr), list(isr), why)
                if self.isr_listener is not None:
                    self.isr_listener(before.isr, state.isr)
            self.maybe_advance_high_watermark()
            if ours:
                self.purgatory.check(self.key)       # acks=all waiters re-check min.insync.replicas

        def failed(f: object) -> None:
            self.isr_in_flight = None
            exc = getattr(f, "value", f)
            if isinstance(exc, ZkVersionConflictError):
                log.info("%s-%d: ISR update lost to a newer state: %s", self.topic, self.index, exc)
            else:
                log.warning("%s-%d: ISR update failed: %s", self.topic, self.index, exc)
            self.maybe_advance_high_watermark()    # the replicas it would have added hold it back no more

        d.addCallbacks(written, failed)

    # -- DeleteRecords (leader only) ----------------------------------------------------------------
    def delete_records_before(self, offset: int, now_ms: int) -> int:
        """Move our log start to ``offset`` (-1: the high watermark); followers adopt it from our
        Fetch answers. Returns the offset the low watermark has to reach."""
        self.check_leader()
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise PartitionError(f"{self.topic}-{self.index}: cannot delete records before {offset} "
                                 f"(high watermark {self.high_watermark})", ErrorCode.OFFSET_OUT_OF_RANGE)
        self.log.delete_records_before(offset, now_ms)
        self.purgatory.check(self.key)
        return offset

    def low_watermark(self, alive: set[int] | frozenset[int]) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the smallest log start offset among our replica and
        the followers on live brokers (-1 for one that has not reported it yet)."""
        low = self.log.log_start_offset
        for replica in self.replicas:
            if replica != self.broker_id and replica in alive:
                follower = self.followers.get(replica)
                low = min(low, follower.log_start_offset if follower is not None else -1)
        return low

    # -- high watermark ----------------------------------------------------------------------------
    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log end offset over the maximal ISR (the ISR and the one our pending write
        asks for, see ``isr_in_flight``); wakes this partition's waiters when it moves. Over the
        ISR alone, a record could be acknowledged past a replica that becomes an ISR member,
        then leader, without it."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        followers = self.followers
        maximal = self.isr if self.isr_in_flight is None else set(self.isr) | set(self.isr_in_flight)
        for replica in maximal:
            if replica != self.broker_id:
                follower = followers.get(replica)
                new_hw = min(new_hw, follower.log_end_offset if follower is not None else -1)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.purgatory.check(self.key)
            return True
        return False

    # -- produce / fetch -----------------------------------------------------------------------------
    def append_as_leader(self, buf: bytearray | memoryview, infos: list[BatchInfo], now_ms: int,
                         required_acks: int, min_insync_replicas: int, client: bool = True) -> AppendResult:
        self.check_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise PartitionError(f"ISR {list(self.isr)} is smaller than min.insync.replicas={min_insync_replicas}",
                                 ErrorCode.NOT_ENOUGH_REPLICAS)
        result = self.log.append(buf, infos, leader_epoch=self.leader_epoch, now_ms=now_ms, client=client)
        if not self.maybe_advance_high_watermark():
            self.purgatory.check(self.key)            # fetch long-polls wake on new data too
        return result

    def append_txn_marker(self, control_type: ControlType, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, now_ms: int) -> AppendResult:
        """Leader: write a COMMIT/ABORT control batch (WriteTxnMarkers); replicated like data."""
        self.check_leader()
        result = self.log.append_end_txn_marker(control_type, producer_id=producer_id,
                                                producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                                leader_epoch=self.leader_epoch, now_ms=now_ms)
        if not self.maybe_advance_high_watermark():
            self.purgatory.check(self.key)            # the LSO may have moved: read_committed waiters
        return result

    def replication_status(self, required_offset: int, min_insync_replicas: int) -> ErrorCode | None:
        """Kafka's ``Partition.checkEnoughReplicasReachOffset`` for an acks=all append ending at
        ``required_offset`` (exclusive): None while still waiting, else the answer's code."""
        if self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.isr) < min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def fetch_upper_bound(self, replica_id: int, isolation_level: int) -> int:
        """Followers read up to the log end; read_uncommitted consumers (isolation 0) below the
        high watermark; read_committed ones (isolation 1) below the last stable offset."""
        if replica_id >= 0:
            return self.log.log_end_offset
        if isolation_level == READ_COMMITTED:
            return self.log.last_stable_offset
        return self.high_watermark
