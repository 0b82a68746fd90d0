"""``__transaction_state`` for the transaction coordinator: creation, replicated writes, loading.

The I/O half of the transaction coordinator (the logic is :mod:`kafkalite.txn.coordinator`); the
life cycle it shares with ``__consumer_offsets`` is :mod:`kafkalite.broker.coordinator_topic`. The topic is created on first use with Kafka's
settings (``transaction.state.log.num.partitions``, ``.replication.factor``, ``.min.isr`` as its
``min.insync.replicas``, ``.segment.bytes``, ``cleanup.policy=compact``). Writes are batches
appended as leader through the replica manager and answered once the whole ISR has them (the
replica manager's one acks=all wait; Kafka writes the transaction log with acks=-1 and
``transaction.state.log.min.isr``), so a new coordinator replays every acknowledged change. When
this broker becomes leader of a partition it replays it into the coordinator, with the
partition's leader epoch as the coordinator epoch that markers carry; the read runs in a worker
thread and requests for the partition's ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile.
Losing leadership unloads them.
"""
from __future__ import annotations

import logging
from typing import Any, ClassVar

from twisted.internet import defer

from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.coordinator_topic import CoordinatorTopic, read_chunks
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.runtime import BlockingRunner, Clock
from kafkalite.broker.txn_markers import TxnMarkerChannel
from kafkalite.broker.producer_ids import ProducerIdManager
from kafkalite.config import BrokerConfig
from kafkalite.metadata import MetadataCache
from kafkalite.records.builder import build_batch
from kafkalite.records.record import iter_records
from kafkalite.storage import PartitionLog
from kafkalite.txn.coordinator import TransactionCoordinator, TxnConfig

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
PRODUCE_VERSION = 8            # the batch the coordinator builds is plain magic 2, no zstd


class TransactionTopic(CoordinatorTopic):
    """The transaction service handlers use: the coordinator, its topic, where an id lives."""

    topic: ClassVar[str] = TXN_TOPIC

    coordinator: TransactionCoordinator

    def __init__(self, config: BrokerConfig, clock: Clock, metadata: MetadataCache, topics: TopicAdmin,
                 replicas: ReplicaManager, blocking: BlockingRunner, producer_ids: ProducerIdManager,
                 markers: TxnMarkerChannel) -> None:
        super().__init__(config, clock, metadata, topics, replicas, blocking)
        self.markers = markers
        self.coordinator = TransactionCoordinator(TxnConfig.from_broker(config), clock.reactor, self, markers,
                                                  producer_ids.next, self.partition_count)

    def configured_partitions(self) -> int:
        return self.config["transaction.state.log.num.partitions"]

    def replication_factor(self) -> int:
        return self.config["transaction.state.log.replication.factor"]

    def topic_settings(self) -> dict[str, str | None]:
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "unclean.leader.election.enable": "false",
                "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                "segment.bytes": str(self.config["transaction.state.log.segment.bytes"])}

    # -- writes (TxnStore) -----------------------------------------------------------------------
    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> defer.Deferred:
        """Append as leader and fire the error code once replicated (acks=all, bounded by
        ``request.timeout.ms`` like Kafka's transaction log writes)."""
        batch = build_batch((self.clock.now_ms(), k, v, ()) for k, v in entries)
        return self.append_batch(partition, batch, -1, PRODUCE_VERSION, self.config["request.timeout.ms"])

    # -- loading -----------------------------------------------------------------------------------
    def _begin_load(self, partition: int, epoch: int) -> None:
        # the partition's leader epoch is the coordinator epoch its markers carry
        self.coordinator.begin_load(partition, epoch)

    def _read_partition(self, plog: PartitionLog, end: int) -> list[tuple[bytes, bytes | None]]:
        """Worker thread: every (key, value) from log start to ``end``, in log order."""
        entries: list[tuple[bytes, bytes | None]] = []
        for offset, records in read_chunks(plog, end, self.config["transaction.state.log.load.buffer.size"]):
            entries.extend((rec.key, rec.value) for rec in iter_records(records, min_offset=offset)
                           if rec.key is not None)
        return entries

    def _complete_load(self, partition: int, epoch: int, loaded: list[tuple[bytes, bytes | None]]) -> int:
        self.coordinator.complete_load(partition, epoch, loaded)
        return len(loaded)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.coordinator.start()

    def stop(self) -> None:
        self.coordinator.stop()
        self.markers.stop()
        self.unload_all()

    def describe(self, transactional_id: str) -> Any:
        return self.coordinator.describe(transactional_id)
