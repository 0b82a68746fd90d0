"""``__transaction_state`` for the transaction coordinator: creation, replicated writes, loading.

The I/O half of the transaction coordinator (the logic is :mod:`kafkalite.txn.coordinator`), the
twin of :mod:`kafkalite.broker.offsets_topic`. The topic is created on first use with Kafka's
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
import time
from typing import Any

from twisted.internet import defer

from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import BlockingRunner, Clock
from kafkalite.broker.txn_markers import TxnMarkerChannel
from kafkalite.broker.producer_ids import ProducerIdManager
from kafkalite.config import BrokerConfig
from kafkalite.errors import KafkaError
from kafkalite.metadata import MetadataCache
from kafkalite.records.builder import build_batch
from kafkalite.records.record import iter_records
from kafkalite.storage import PartitionLog
from kafkalite.txn.coordinator import TransactionCoordinator, TxnConfig

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
PRODUCE_VERSION = 8            # the batch the coordinator builds is plain magic 2, no zstd


class TransactionTopic:
    """The transaction service handlers use: the coordinator, its topic, where an id lives."""

    def __init__(self, config: BrokerConfig, clock: Clock, metadata: MetadataCache, topics: TopicAdmin,
                 replicas: ReplicaManager, blocking: BlockingRunner, producer_ids: ProducerIdManager,
                 markers: TxnMarkerChannel) -> None:
        self.config = config
        self.clock = clock
        self.metadata = metadata
        self.topics = topics
        self.replicas = replicas
        self.blocking = blocking
        self.markers = markers
        self.coordinator = TransactionCoordinator(TxnConfig.from_broker(config), clock.reactor, self, markers,
                                                  producer_ids.next, self.partition_count)
        self.led: dict[int, int] = {}          # partition -> leader epoch we loaded it in
        self.creating = False

    # -- topic -----------------------------------------------------------------------------------
    def partition_count(self) -> int:
        info = self.metadata.topics.get(TXN_TOPIC)
        if info is not None and info.assignment:
            return len(info.assignment)
        return self.config["transaction.state.log.num.partitions"]

    def exists(self) -> bool:
        info = self.metadata.topics.get(TXN_TOPIC)
        return info is not None and not info.deleting

    def ensure_topic(self) -> None:
        """Create the topic on first use (FindCoordinator for a transactional id). Fewer live
        brokers than ``transaction.state.log.replication.factor`` fails; callers keep answering
        COORDINATOR_NOT_AVAILABLE."""
        if self.creating or self.exists():
            return
        wanted: dict[str, str | None] = {
            "cleanup.policy": "compact", "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
            "segment.bytes": str(self.config["transaction.state.log.segment.bytes"])}
        try:
            assignment, overrides = self.topics.plan_topic(
                TXN_TOPIC, self.config["transaction.state.log.num.partitions"],
                self.config["transaction.state.log.replication.factor"], [], wanted)
        except KafkaError as exc:
            log.warning("cannot create %s yet: %s", TXN_TOPIC, exc)
            return
        self.creating = True
        d = self.topics.create_topic(TXN_TOPIC, assignment, overrides)
        d.addErrback(lambda f: log.info("creation of %s: %s", TXN_TOPIC, f.value))
        d.addBoth(lambda _: setattr(self, "creating", False))

    def coordinator_node(self, transactional_id: str) -> int:
        """Broker id leading the id's partition, or -1."""
        if not self.exists():
            return -1
        return self.metadata.leader_of(TXN_TOPIC, self.coordinator.partition_of(transactional_id))

    # -- writes (TxnStore) -----------------------------------------------------------------------
    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> defer.Deferred:
        """Append as leader and fire the error code once replicated (acks=all, bounded by
        ``request.timeout.ms`` like Kafka's transaction log writes)."""
        batch = build_batch((self.clock.now_ms(), k, v, ()) for k, v in entries)
        try:
            part, result = self.replicas.append(TXN_TOPIC, partition, batch, -1, PRODUCE_VERSION, internal=True)
        except KafkaError as exc:
            return defer.succeed(exc.code)
        d = self.replicas.await_replication([self.replicas.pending_ack(part, result)],
                                            self.config["request.timeout.ms"])
        return d.addCallback(lambda codes: codes[0])

    # -- leadership ------------------------------------------------------------------------------
    def on_partition_role(self, part: Partition) -> None:
        """ReplicaManager listener: load on becoming leader (new epoch), unload on losing it."""
        if part.topic != TXN_TOPIC:
            return
        p = part.index
        leading = part.state is not None and part.is_leader
        if leading and self.led.get(p) == part.leader_epoch:
            return
        if p in self.led:
            del self.led[p]
            self.coordinator.unload(p)
            log.info("%s-%d: unloaded (no longer leader)", TXN_TOPIC, p)
        if leading:
            epoch = part.leader_epoch
            self.led[p] = epoch
            self.coordinator.begin_load(p, epoch)
            end = part.log.log_end_offset
            d = self.blocking.run(self._read_partition, part.log, end)
            d.addCallback(self._loaded, p, epoch)
            d.addErrback(lambda f: log.error("%s-%d: loading failed: %s", TXN_TOPIC, p, f.value))

    def _read_partition(self, plog: PartitionLog, end: int) -> list[tuple[bytes, bytes | None]]:
        """Worker thread: every (key, value) from log start to ``end``, in log order."""
        entries: list[tuple[bytes, bytes | None]] = []
        offset = plog.log_start_offset
        chunk = self.config["transaction.state.log.load.buffer.size"]
        while offset < end:
            res = plog.read(offset, chunk, max_offset=end, min_one_batch=True)
            if res.last_offset < 0:
                break
            for rec in iter_records(res.records, min_offset=offset):
                if rec.key is not None:
                    entries.append((rec.key, rec.value))
            offset = res.last_offset + 1
        return entries

    def _loaded(self, entries: list[tuple[bytes, bytes | None]], p: int, epoch: int) -> None:
        if self.led.get(p) != epoch:
            return                  # leadership changed while we were reading
        started = time.monotonic()
        self.coordinator.complete_load(p, epoch, entries)
        log.info("%s-%d: loaded %d record(s) in %.3f s", TXN_TOPIC, p, len(entries), time.monotonic() - started)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.coordinator.start()

    def stop(self) -> None:
        self.coordinator.stop()
        self.markers.stop()
        for p in list(self.led):
            self.coordinator.unload(p)
        self.led.clear()

    def describe(self, transactional_id: str) -> Any:
        return self.coordinator.describe(transactional_id)

