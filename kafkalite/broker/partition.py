"""One topic-partition replica held by this broker: its log, its role and its high watermark.

The leader appends client batches and advances the high watermark to the smallest log end offset
among the in-sync replicas (itself alone when the ISR is just the leader); consumers read only
below it. Every append and every high-watermark move wakes the requests waiting on this
partition in the purgatory (fetch long-polls, acks=all produces).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.records.batch import BatchInfo

log = logging.getLogger(__name__)


class PartitionError(KafkaError):
    """A per-partition failure: the broker answers its code in the partition's response entry."""


@dataclass
class PartitionState:
    """The partition's state znode, as last read from ZooKeeper."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1


@dataclass
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Any                                 # kafkalite.storage.PartitionLog
    replicas: list[int] = field(default_factory=list)
    state: PartitionState | None = None
    #: Leader only: log end offset each follower last fetched from (replica id -> offset).
    follower_end_offsets: dict[int, int] = field(default_factory=dict)
    follower_caught_up_ms: dict[int, int] = field(default_factory=dict)
    #: Leader only: (leader log end, time) at each follower's previous fetch (Kafka's rule for
    #: "caught up": it fetched up to where the leader's log ended at its previous fetch).
    follower_last_fetch: dict[int, tuple[int, int]] = field(default_factory=dict)
    isr_write_pending: bool = False

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
        return self.state is not None and self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch if self.state else -1

    @property
    def isr(self) -> list[int]:
        return self.state.isr if self.state else []

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise unless this replica leads, and the client's epoch (if given) matches ours."""
        if not self.is_leader:
            raise PartitionError(f"{self.topic}-{self.index}: not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise PartitionError("client leader epoch is older", ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise PartitionError("client leader epoch is newer", ErrorCode.UNKNOWN_LEADER_EPOCH)

    # -- roles -----------------------------------------------------------------------------------
    def become_leader(self, state: PartitionState, replicas: list[int], now_ms: int) -> None:
        new_term = not self.is_leader or self.leader_epoch != state.leader_epoch
        self.state = state
        self.replicas = list(replicas)
        if new_term:
            self.follower_end_offsets = {r: -1 for r in replicas if r != self.broker_id}
            self.follower_caught_up_ms = {r: now_ms for r in replicas if r != self.broker_id}
            self.follower_last_fetch = {}
            self.isr_write_pending = False
            # Mark where this epoch starts, so a follower's OffsetForLeaderEpoch for an older
            # epoch learns where that epoch ended here (KIP-101).
            if state.leader_epoch > self.log.epochs.latest_epoch:
                self.log.epochs.assign(state.leader_epoch, self.log.log_end_offset)
            # Kafka: the new leader's high watermark starts at its own checkpointed value and
            # only moves once the ISR's end offsets are known.
            self.high_watermark = min(max(self.high_watermark, self.log.log_start_offset), self.log.log_end_offset)
            log.info("%s-%d: leader in epoch %d (ISR %s, log end %d)", self.topic, self.index,
                     state.leader_epoch, state.isr, self.log.log_end_offset)
        self.maybe_advance_high_watermark()

    def become_follower(self, state: PartitionState, replicas: list[int]) -> None:
        self.state = state
        self.replicas = list(replicas)
        self.follower_end_offsets.clear()
        self.follower_last_fetch.clear()

    # -- ISR (leader only) -------------------------------------------------------------------------
    def record_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower asked for ``fetch_offset``: its log ends there (everything before is copied)."""
        self.follower_end_offsets[replica_id] = fetch_offset
        leo = self.log.log_end_offset
        previous = self.follower_last_fetch.get(replica_id)
        if fetch_offset >= leo:
            self.follower_caught_up_ms[replica_id] = now_ms
        elif previous is not None and fetch_offset >= previous[0]:
            self.follower_caught_up_ms[replica_id] = max(self.follower_caught_up_ms.get(replica_id, 0), previous[1])
        self.follower_last_fetch[replica_id] = (leo, now_ms)

    def isr_to_expand(self, replica_id: int) -> list[int] | None:
        """New ISR with ``replica_id`` added, if it is out of the ISR and has caught up to the HW."""
        if not self.is_leader or replica_id in self.isr or replica_id not in self.replicas:
            return None
        if self.follower_end_offsets.get(replica_id, -1) >= self.high_watermark:
            return sorted(set(self.isr) | {replica_id}, key=self.replicas.index)
        return None

    def isr_to_shrink(self, now_ms: int, lag_max_ms: int) -> list[int] | None:
        """New ISR without followers that have not caught up within ``replica.lag.time.max.ms``."""
        if not self.is_leader:
            return None
        leo = self.log.log_end_offset
        lagging = [r for r in self.isr if r != self.broker_id
                   and self.follower_end_offsets.get(r, -1) < leo
                   and now_ms - self.follower_caught_up_ms.get(r, now_ms) > lag_max_ms]
        if not lagging:
            return None
        return [r for r in self.isr if r not in lagging]

    # -- high watermark ----------------------------------------------------------------------------
    def maybe_advance_high_watermark(self) -> bool:
        """HW = min log end offset over the ISR; returns True when it moved forward."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.isr:
            if replica != self.broker_id:
                new_hw = min(new_hw, self.follower_end_offsets.get(replica, -1))
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    # -- produce / fetch -----------------------------------------------------------------------------
    def append_as_leader(self, buf: Any, infos: list[BatchInfo], now_ms: int, required_acks: int,
                         min_insync_replicas: int) -> Any:
        self.check_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise PartitionError(f"ISR {self.isr} is smaller than min.insync.replicas={min_insync_replicas}",
                                 ErrorCode.NOT_ENOUGH_REPLICAS)
        result = self.log.append(buf, infos, leader_epoch=self.leader_epoch, now_ms=now_ms)
        self.maybe_advance_high_watermark()
        return result

    def fetch_upper_bound(self, replica_id: int, isolation_level: int) -> int:
        """Consumers read below the high watermark (= last stable offset: no transactions);
        followers read up to the log end."""
        if replica_id >= 0:
            return self.log.log_end_offset
        return self.high_watermark
