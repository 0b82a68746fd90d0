"""The acks=all wait (Kafka's ``DelayedProduce``): used by Produce and by the group and
transaction coordinators' writes to their internal topics, through
``ReplicaManager.await_replication``.

It watches every appended partition and answers, in the appends' order, each one's code once all
of them are settled: replicated to the ISR with at least ``min.insync.replicas`` members (NONE, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile), leadership or the log dir lost
(NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR), or REQUEST_TIMED_OUT at the deadline for those still
waiting. The per-partition rule is ``Partition.replication_status``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kafkalite.broker.partition import Partition
from kafkalite.broker.purgatory import DelayedOperation
from kafkalite.errors import ErrorCode


@dataclass(frozen=True)
class PendingAck:
    """An acks=all append waiting for the high watermark to reach ``required_offset``."""

    partition: Partition
    required_offset: int
    min_insync_replicas: int


class DelayedProduce(DelayedOperation):
    def __init__(self, pending: Sequence[PendingAck]) -> None:
        super().__init__()
        self.pending = pending

    def watch_keys(self) -> set[tuple[str, int]]:
        return {p.partition.key for p in self.pending}

    def statuses(self) -> list[ErrorCode | None]:
        return [p.partition.replication_status(p.required_offset, p.min_insync_replicas) for p in self.pending]

    def try_complete(self) -> bool:
        return all(s is not None for s in self.statuses())

    def on_complete(self, timed_out: bool) -> list[ErrorCode]:
        return [ErrorCode.REQUEST_TIMED_OUT if s is None else s for s in self.statuses()]
