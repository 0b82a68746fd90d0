"""``__consumer_offsets`` for the coordinator: creation, replicated writes, loading on leadership.

This is the I/O half of the group coordinator (the logic is in :mod:`kafkalite.group.coordinator`);
the life cycle it shares with ``__transaction_state`` is :mod:`kafkalite.broker.coordinator_topic`.
The topic is created lazily with Kafka's settings (``offsets.topic.*``, ``cleanup.policy=compact``).
Writes are answered once the high watermark covers them (``offsets.commit.required.acks=-1``) or
``offsets.commit.timeout.ms`` passes, so a new leader of the partition has every acknowledged
commit. Group requests for a partition being replayed answer COORDINATOR_LOAD_IN_PROGRESS.

Transactional offset commits (TxnOffsetCommit) are batches of the producer's id and epoch with the
transactional bit; loading resolves them with the COMMIT/ABORT markers that follow (committed ones
count where their marker is, aborted ones are dropped, unfinished ones stay pending).
"""
from __future__ import annotations

import logging
from typing import ClassVar

from twisted.internet import defer, task

from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.coordinator_topic import CoordinatorTopic, read_chunks
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.runtime import BlockingRunner, Clock
from kafkalite.config import BrokerConfig
from kafkalite.group.coordinator import GroupConfig, GroupCoordinator
from kafkalite.metadata import MetadataCache
from kafkalite.records.builder import build_batch
from kafkalite.records.control import ControlType, parse_control_record
from kafkalite.records.record import iter_batches
from kafkalite.storage import PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

#: what replaying a partition yields: committed (key, value)s in log order, and per producer id
#: the offsets of its transaction that has no marker yet
Loaded = tuple[list[tuple[bytes, bytes | None]], dict[int, list[tuple[bytes, bytes | None]]]]


class OffsetsTopic(CoordinatorTopic):
    """The group service handlers use: the coordinator, its topic, and where a group lives."""

    topic: ClassVar[str] = OFFSETS_TOPIC

    coordinator: GroupCoordinator

    def __init__(self, config: BrokerConfig, clock: Clock, metadata: MetadataCache, topics: TopicAdmin,
                 replicas: ReplicaManager, blocking: BlockingRunner) -> None:
        super().__init__(config, clock, metadata, topics, replicas, blocking)
        self.coordinator = GroupCoordinator(GroupConfig.from_broker(config), clock.reactor, self,
                                            self.partition_count)
        self.expiry: task.LoopingCall | None = None

    def configured_partitions(self) -> int:
        return self.config["offsets.topic.num.partitions"]

    def replication_factor(self) -> int:
        return self.config["offsets.topic.replication.factor"]

    def topic_settings(self) -> dict[str, str | None]:
        return {"cleanup.policy": "compact", "compression.type": "producer",
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}

    # -- writes (GroupStore) -----------------------------------------------------------------------
    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> defer.Deferred:
        """Append as leader and fire the error code once replicated (``offsets.commit.required.acks``
        -1: the replica manager's one acks=all wait, as Produce's). ``producer``: a transactional
        batch of that (id, epoch), as Kafka writes TxnOffsetCommit (base sequence 0: the
        coordinator's own appends are not sequence-checked)."""
        records = ((self.clock.now_ms(), k, v, ()) for k, v in entries)
        if producer is None:
            batch = build_batch(records)
        else:
            batch = build_batch(records, producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                transactional=True)
        return self.append_batch(partition, batch, self.config["offsets.commit.required.acks"], 8,
                                 self.config["offsets.commit.timeout.ms"])

    # -- loading -----------------------------------------------------------------------------------
    def _begin_load(self, partition: int, epoch: int) -> None:
        self.coordinator.begin_load(partition)

    def _read_partition(self, plog: PartitionLog, end: int) -> Loaded:
        """Worker thread: every (key, value) from log start to ``end`` in log order, a committed
        transaction's offsets where its COMMIT marker is; and the offsets of transactions with no
        marker yet, per producer id."""
        entries: list[tuple[bytes, bytes | None]] = []
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for offset, records in read_chunks(plog, end, self.config["offsets.load.buffer.size"]):
            for info, recs in iter_batches(records):
                if info.is_control:
                    if info.base_offset >= offset and recs:
                        txn = pending.pop(info.producer_id, [])
                        if parse_control_record(recs[0]).control_type == ControlType.COMMIT:
                            entries.extend(txn)
                    continue
                target = pending.setdefault(info.producer_id, []) if info.is_transactional else entries
                target.extend((r.key, r.value) for r in recs if r.offset >= offset and r.key is not None)
        return entries, pending

    def _complete_load(self, partition: int, epoch: int, loaded: Loaded) -> int:
        entries, pending = loaded
        self.coordinator.complete_load(partition, entries, pending)
        return len(entries)

    # -- expiry ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.expiry = task.LoopingCall(self.coordinator.expire_offsets)
        self.expiry.clock = self.clock.reactor
        self.expiry.start(self.config["offsets.retention.check.interval.ms"] / 1000.0, now=False).addErrback(
            lambda f: log.error("offset expiry failed: %s", f.value))

    def stop(self) -> None:
        if self.expiry is not None and self.expiry.running:
            self.expiry.stop()
        self.unload_all()
