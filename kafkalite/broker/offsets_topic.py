"""``__consumer_offsets`` for the coordinator: creation, replicated writes, loading on leadership.

This is the I/O half of the group coordinator (the logic is in :mod:`kafkalite.group.coordinator`).
The topic is created lazily with Kafka's settings (``offsets.topic.*``, ``cleanup.policy=compact``).
Writes are ordinary batches appended as leader through the replica manager and answered once the
high watermark covers them (``offsets.commit.required.acks=-1``) or ``offsets.commit.timeout.ms``
passes, so a new leader of the partition has every acknowledged commit. When this broker becomes
leader of an offsets partition it replays the partition into the coordinator; reading the log runs
in a worker thread (a big partition would stall the reactor), and group requests for that
partition answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. Losing leadership unloads the groups.

Transactional offset commits (TxnOffsetCommit) are batches of the producer's id and epoch with the
transactional bit; loading resolves them with the COMMIT/ABORT markers that follow (committed ones
count where their marker is, aborted ones are dropped, unfinished ones stay pending).
"""
from __future__ import annotations

import logging
import time
from twisted.internet import defer, task

from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import BlockingRunner, Clock
from kafkalite.config import BrokerConfig
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.group.coordinator import GroupConfig, GroupCoordinator
from kafkalite.metadata import MetadataCache
from kafkalite.records.builder import build_batch
from kafkalite.records.control import ControlType, parse_control_record
from kafkalite.records.record import iter_batches
from kafkalite.storage import PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsTopic:
    """The group service handlers use: the coordinator, its topic, and where a group lives."""

    def __init__(self, config: BrokerConfig, clock: Clock, metadata: MetadataCache, topics: TopicAdmin,
                 replicas: ReplicaManager, blocking: BlockingRunner) -> None:
        self.config = config
        self.clock = clock
        self.metadata = metadata
        self.topics = topics
        self.replicas = replicas
        self.blocking = blocking
        self.coordinator = GroupCoordinator(GroupConfig.from_broker(config), clock.reactor, self,
                                            self.partition_count)
        self.led: dict[int, int] = {}           # offsets partition -> leader epoch we loaded it in
        self.creating = False
        self.expiry: task.LoopingCall | None = None

    # -- topic -----------------------------------------------------------------------------------
    def partition_count(self) -> int:
        info = self.metadata.topics.get(OFFSETS_TOPIC)
        if info is not None and info.assignment:
            return len(info.assignment)
        return self.config["offsets.topic.num.partitions"]

    def exists(self) -> bool:
        info = self.metadata.topics.get(OFFSETS_TOPIC)
        return info is not None and not info.deleting

    def ensure_topic(self) -> None:
        """Create the topic on first use (FindCoordinator, Metadata naming it). Fewer live brokers
        than ``offsets.topic.replication.factor`` fails, and callers keep answering 15."""
        if self.creating or self.exists():
            return
        overrides = {"cleanup.policy": "compact", "compression.type": "producer",
                     "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}
        try:
            assignment, overrides = self.topics.plan_topic(
                OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"],
                self.config["offsets.topic.replication.factor"], [], overrides)
        except KafkaError as exc:
            log.warning("cannot create %s yet: %s", OFFSETS_TOPIC, exc)
            return
        self.creating = True
        d = self.topics.create_topic(OFFSETS_TOPIC, assignment, overrides)
        d.addErrback(lambda f: log.info("creation of %s: %s", OFFSETS_TOPIC, f.value))
        d.addBoth(lambda _: setattr(self, "creating", False))

    def coordinator_node(self, group_id: str) -> int:
        """Broker id leading the group's partition, or -1."""
        if not self.exists():
            return -1
        return self.metadata.leader_of(OFFSETS_TOPIC, self.coordinator.partition_of(group_id))

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
        acks = self.config["offsets.commit.required.acks"]
        try:
            part, result = self.replicas.append(OFFSETS_TOPIC, partition, batch, acks, 8, internal=True)
        except KafkaError as exc:
            return defer.succeed(exc.code)
        if acks != -1:
            return defer.succeed(ErrorCode.NONE)
        d = self.replicas.await_replication([self.replicas.pending_ack(part, result)],
                                            self.config["offsets.commit.timeout.ms"])
        return d.addCallback(lambda codes: codes[0])

    # -- leadership ------------------------------------------------------------------------------
    def on_partition_role(self, part: Partition) -> None:
        """ReplicaManager listener: load on becoming leader (new epoch), unload on losing it."""
        if part.topic != OFFSETS_TOPIC:
            return
        p = part.index
        leading = part.state is not None and part.is_leader
        if leading and self.led.get(p) == part.leader_epoch:
            return
        if p in self.led:
            del self.led[p]
            self.coordinator.unload(p)
            log.info("%s-%d: unloaded (no longer leader)", OFFSETS_TOPIC, p)
        if leading:
            epoch = part.leader_epoch
            self.led[p] = epoch
            self.coordinator.begin_load(p)
            end = part.log.log_end_offset
            d = self.blocking.run(self._read_partition, part.log, end)
            d.addCallback(lambda loaded: self._loaded(loaded[0], part, p, epoch, loaded[1]))
            d.addErrback(lambda f: log.error("%s-%d: loading failed: %s", OFFSETS_TOPIC, p, f.value))

    def _read_partition(self, plog: PartitionLog, end: int) -> tuple[list[tuple[bytes, bytes | None]],
                                                                      dict[int, list[tuple[bytes, bytes | None]]]]:
        """Worker thread: every (key, value) from log start to ``end`` in log order, a committed
        transaction's offsets where its COMMIT marker is; and the offsets of transactions with no
        marker yet, per producer id."""
        entries: list[tuple[bytes, bytes | None]] = []
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        offset = plog.log_start_offset
        chunk = self.config["offsets.load.buffer.size"]
        while offset < end:
            res = plog.read(offset, chunk, max_offset=end, min_one_batch=True)
            if res.last_offset < 0:
                break
            for info, recs in iter_batches(res.records):
                if info.is_control:
                    if info.base_offset >= offset and recs:
                        txn = pending.pop(info.producer_id, [])
                        if parse_control_record(recs[0]).control_type == ControlType.COMMIT:
                            entries.extend(txn)
                    continue
                target = pending.setdefault(info.producer_id, []) if info.is_transactional else entries
                target.extend((r.key, r.value) for r in recs if r.offset >= offset and r.key is not None)
            offset = res.last_offset + 1
        return entries, pending

    def _loaded(self, entries: list[tuple[bytes, bytes | None]], part: Partition, p: int, epoch: int,
                pending: dict[int, list[tuple[bytes, bytes | None]]] | None = None) -> None:
        if self.led.get(p) != epoch:
            return                  # leadership changed while we were reading
        started = time.monotonic()
        self.coordinator.complete_load(p, entries, pending)
        log.info("%s-%d: loaded %d record(s) in %.3f s", OFFSETS_TOPIC, p, len(entries), time.monotonic() - started)

    # -- expiry ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.expiry = task.LoopingCall(self.coordinator.expire_offsets)
        self.expiry.clock = self.clock.reactor
        self.expiry.start(self.config["offsets.retention.check.interval.ms"] / 1000.0, now=False).addErrback(
            lambda f: log.error("offset expiry failed: %s", f.value))

    def stop(self) -> None:
        if self.expiry is not None and self.expiry.running:
            self.expiry.stop()
        for p in list(self.led):
            self.coordinator.unload(p)
        self.led.clear()
