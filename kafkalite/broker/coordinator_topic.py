"""What ``__consumer_offsets`` and ``__transaction_state`` have in common: an internal, compacted
topic a coordinator keeps its state in.

Kafka's group and transaction coordinators share this life cycle (``CoordinatorLoader`` and the
partition-leadership callbacks of ``KafkaApis``): the topic is created on first use with the
coordinator's own settings; the coordinator's writes are batches appended as leader through the
replica manager and answered once the whole ISR has them (the replica manager's one acks=all wait),
so a new leader replays every acknowledged change; becoming leader of a partition replays it into
the coordinator, reading the log in a worker thread (a big partition would stall the reactor) while
requests for that partition answer COORDINATOR_LOAD_IN_PROGRESS; losing leadership unloads it (a
new leader epoch while staying leader, e.g. an ISR change, does neither).

:class:`CoordinatorTopic` holds that cycle; :class:`~kafkalite.broker.offsets_topic.OffsetsTopic`
and :class:`~kafkalite.broker.txn_topic.TransactionTopic` say what their topic is called, which
settings create it, and how a replayed partition reaches their coordinator.
"""
from __future__ import annotations

import logging
import time
from typing import Any, ClassVar, Iterator, Protocol

from twisted.internet import defer

from kafkalite.broker.admin import TopicAdmin
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.runtime import BlockingRunner, Clock
from kafkalite.config import BrokerConfig
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.metadata import MetadataCache
from kafkalite.storage import PartitionLog

log = logging.getLogger(__name__)


class PartitionedCoordinator(Protocol):
    """What the shared cycle asks of a coordinator."""

    def partition_of(self, key: str) -> int: ...

    def unload(self, partition: int) -> None: ...


def read_chunks(plog: PartitionLog, end: int, chunk_bytes: int) -> Iterator[tuple[int, Any]]:
    """Worker thread: the log from its start to ``end`` as (first offset wanted, records) reads of
    about ``chunk_bytes`` each (the coordinators' ``*.load.buffer.size``); a batch may begin
    before the offset wanted, so callers skip the records below it."""
    offset = plog.log_start_offset
    while offset < end:
        res = plog.read(offset, chunk_bytes, max_offset=end, min_one_batch=True)
        if res.last_offset < 0:
            return
        yield offset, res.records
        offset = res.last_offset + 1


class CoordinatorTopic:
    """The shared half; subclasses set ``topic``, build ``coordinator`` and implement
    :meth:`configured_partitions`, :meth:`replication_factor`, :meth:`topic_settings`, :meth:`_begin_load`, :meth:`_read_partition` and :meth:`_complete_load`."""

    #: the topic's name
    topic: ClassVar[str]

    coordinator: PartitionedCoordinator

    def __init__(self, config: BrokerConfig, clock: Clock, metadata: MetadataCache, topics: TopicAdmin,
                 replicas: ReplicaManager, blocking: BlockingRunner) -> None:
        self.config = config
        self.clock = clock
        self.metadata = metadata
        self.topics = topics
        self.replicas = replicas
        self.blocking = blocking
        self.led: dict[int, int] = {}           # partition led -> leader epoch we became its leader in
        self.creating = False

    # -- topic -----------------------------------------------------------------------------------
    def partition_count(self) -> int:
        info = self.metadata.topics.get(self.topic)
        if info is not None and info.assignment:
            return len(info.assignment)
        return self.configured_partitions()

    def exists(self) -> bool:
        info = self.metadata.topics.get(self.topic)
        return info is not None and not info.deleting

    def configured_partitions(self) -> int:
        """Its partition count at creation (a broker property)."""
        raise NotImplementedError

    def replication_factor(self) -> int:
        """Its replication factor at creation (a broker property)."""
        raise NotImplementedError

    def topic_settings(self) -> dict[str, str | None]:
        """The topic configs it is created with."""
        raise NotImplementedError

    def ensure_topic(self) -> None:
        """Create the topic on first use. Fewer live brokers than its replication factor fails
        (logged); callers keep answering that the coordinator is not available."""
        if self.creating or self.exists():
            return
        try:
            assignment, overrides = self.topics.plan_topic(
                self.topic, self.configured_partitions(), self.replication_factor(), [], self.topic_settings())
        except KafkaError as exc:
            log.warning("cannot create %s yet: %s", self.topic, exc)
            return
        self.creating = True
        d = self.topics.create_topic(self.topic, assignment, overrides)
        d.addErrback(lambda f: log.info("creation of %s: %s", self.topic, f.value))
        d.addBoth(lambda _: setattr(self, "creating", False))

    def coordinator_node(self, key: str) -> int:
        """Broker id leading the partition of ``key`` (a group or transactional id), or -1."""
        if not self.exists():
            return -1
        return self.metadata.leader_of(self.topic, self.coordinator.partition_of(key))

    # -- writes ----------------------------------------------------------------------------------
    def append_batch(self, partition: int, batch: Any, acks: int, produce_version: int,
                     timeout_ms: int) -> defer.Deferred:
        """Append as leader; the Deferred fires the error code, with acks=-1 once the ISR has it
        (or ``timeout_ms`` passes)."""
        try:
            part, result = self.replicas.append(self.topic, partition, batch, acks, produce_version, internal=True)
        except KafkaError as exc:
            return defer.succeed(exc.code)
        if acks != -1:
            return defer.succeed(ErrorCode.NONE)
        d = self.replicas.await_replication([self.replicas.pending_ack(part, result)], timeout_ms)
        return d.addCallback(lambda codes: codes[0])

    # -- leadership ------------------------------------------------------------------------------
    def on_partition_role(self, part: Partition) -> None:
        """ReplicaManager listener: load on becoming leader, unload on losing leadership.

        A new leader epoch while this broker stays leader (the controller shrank or grew the
        ISR, e.g. a follower died) changes nothing: the coordinator keeps serving what it loaded
        (and the transaction coordinator its coordinator epoch), as Kafka's ``Partition.makeLeader``
        reports such a change as not ``isNewLeader`` and ``onLeadershipChange`` only calls the
        coordinators' ``onElection`` for new leaders. Reloading would throw away the groups'
        rebalances in progress and answer COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        if part.topic != self.topic:
            return
        p = part.index
        leading = part.state is not None and part.is_leader
        if leading and p in self.led:
            return
        if p in self.led:
            del self.led[p]
            self.coordinator.unload(p)
            log.info("%s-%d: unloaded (no longer leader)", self.topic, p)
        if leading:
            epoch = part.leader_epoch
            self.led[p] = epoch
            self._begin_load(p, epoch)
            d = self.blocking.run(self._read_partition, part.log, part.log.log_end_offset)
            d.addCallback(self._loaded, p, epoch)
            d.addErrback(lambda f: log.error("%s-%d: loading failed: %s", self.topic, p, f.value))

    def _begin_load(self, partition: int, epoch: int) -> None:
        """The coordinator answers LOAD_IN_PROGRESS for the partition from now on."""
        raise NotImplementedError

    def _read_partition(self, plog: PartitionLog, end: int) -> Any:
        """Worker thread: what the coordinator replays, read from the log up to ``end``."""
        raise NotImplementedError

    def _complete_load(self, partition: int, epoch: int, loaded: Any) -> int:
        """Hand what was read to the coordinator; returns how many records it held."""
        raise NotImplementedError

    def _loaded(self, loaded: Any, p: int, epoch: int) -> None:
        if self.led.get(p) != epoch:
            return                  # leadership changed while we were reading
        started = time.monotonic()
        count = self._complete_load(p, epoch, loaded)
        log.info("%s-%d: loaded %d record(s) in %.3f s", self.topic, p, count, time.monotonic() - started)

    def unload_all(self) -> None:
        """Shutdown: every loaded partition unloaded."""
        for p in list(self.led):
            self.coordinator.unload(p)
        self.led.clear()
