"""The partitions this broker holds and the routes from requests to them.

Partition state arrives from ZooKeeper (the broker calls :meth:`apply_states` with each batch); requests arrive
from handlers. Like Kafka's ``ReplicaManager`` this only routes: what replication decides per
partition (role, ISR, high watermark, "replicated yet?") is :class:`Partition`'s. The acks=all
wait lives here once, for every writer: Produce, the group coordinator's ``__consumer_offsets``
writes and, later, transaction markers.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

from twisted.internet import defer

from kafkalite.broker.delayed_delete_records import DelayedDeleteRecords
from kafkalite.broker.delayed_fetch import DelayedFetch
from kafkalite.broker.delayed_leader_epoch import DelayedLeaderEpochs
from kafkalite.broker.delayed_produce import DelayedProduce, PendingAck
from kafkalite.broker.fetch_reader import FetchParams, FetchRead, FetchReader, Wanted
from kafkalite.broker.partition import READ_COMMITTED, FetchOutOfRangeError, IsrWriter, Partition, PartitionError
from kafkalite.broker.purgatory import FollowerFetches, Purgatory
from kafkalite.broker.runtime import Clock
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.config import LONG_MAX, BrokerConfig, kafka_version
from kafkalite.errors import ErrorCode, KafkaError, KafkaStorageError, RecordValidationError
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.protocol.messages_typed import DescribeLogDirsResponseDescribeLogDirsPartition, DescribeLogDirsResponseDescribeLogDirsResult
from kafkalite.records.batch import BatchInfo, validate_batches
from kafkalite.records.control import ControlType
from kafkalite.records.legacy import to_stored_format
from kafkalite.records.record import decode_batch
from kafkalite.storage import AppendResult, LogManager, ReadResult

if TYPE_CHECKING:
    from kafkalite.broker.fetch_session import CachedPartition, FetchSession
    from kafkalite.replication.fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
ZSTD = 4


#: how long a follower's Fetch parks while it has not yet fetched a partition whose leadership
#: this broker just took (:meth:`ReplicaManager.awaits_first_fetch`): short, so it asks again soon
#: with the partition in, few enough that a follower slow to hear of the change costs no CPU
FIRST_FETCH_WAIT_MS = 20


@dataclass(frozen=True)
class StateToApply:
    """One partition's state for :meth:`ReplicaManager.apply_states`: its assigned replicas, the
    state the watch delivered, whether the partition is newer than this process (``is_new``)."""
    topic: str
    partition: int
    replicas: list[int]
    state: LeaderAndIsr
    is_new: bool = True


class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, log_manager: LogManager, purgatory: Purgatory,
                 topic_configs: TopicConfigs, clock: Clock, metadata: MetadataCache,
                 isr_writer: IsrWriter) -> None:
        self.broker_id = broker_id
        self.config = config
        self.logs = log_manager
        self.purgatory = purgatory
        self.topic_configs = topic_configs
        self.clock = clock
        self.metadata = metadata
        self.isr_writer = isr_writer
        self.partitions: dict[tuple[str, int], Partition] = {}
        #: Replicas on a failed log dir (Kafka's ``HostedPartition.Offline``): every request for
        #: them answers KAFKA_STORAGE_ERROR and state changes are ignored until restart.
        self.offline: set[tuple[str, int]] = set()
        self.fetchers: "ReplicaFetcherManager | None" = None
        #: Called with the Partition after each role change or removal (the group coordinator
        #: loads/unloads __consumer_offsets partitions from here).
        self.role_listeners: list[Callable[[Partition], None]] = []
        #: Told (old ISR, new ISR) after each ISR change a partition here wrote (metrics).
        self.isr_listener: Callable[[tuple[int, ...], tuple[int, ...]], None] | None = None
        #: follower id -> {partition: until (ms)}: partitions whose leadership this broker took
        #: that the follower has not fetched since (see :meth:`awaits_first_fetch`)
        self.first_fetch_due: dict[int, dict[tuple[str, int], int]] = {}

    # -- lookups ---------------------------------------------------------------------------------
    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        if (topic, index) in self.offline:
            raise KafkaStorageError(f"{topic}-{index} is in an offline log dir on broker {self.broker_id}")
        part = self.partitions.get((topic, index))
        if part is None or part.state is None:
            raise PartitionError(f"{topic}-{index} is not hosted here",
                                 ErrorCode.NOT_LEADER_OR_FOLLOWER if self.metadata.partition_exists(topic, index)
                                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        part.check_leader(current_leader_epoch)
        return part

    def leads_replicated_partitions(self) -> bool:
        return any(p.is_leader and len(p.replicas) > 1 for p in self.partitions.values())

    # -- state changes from ZooKeeper ------------------------------------------------------------
    def apply_state(self, topic: str, index: int, replicas: list[int], state: LeaderAndIsr, *,
                    is_new: bool = True) -> Partition | None:
        """:meth:`apply_states` for one partition; its Partition here, or None (not a replica
        here, offline, or its log cannot be created)."""
        return self.apply_states([StateToApply(topic, index, replicas, state, is_new)]).get((topic, index))

    def apply_states(self, batch: Sequence["StateToApply"]) -> dict[tuple[str, int], Partition]:
        """Make our replica of each partition leader or follower as its state says, in one pass
        (Kafka's ``becomeLeaderOrFollower`` over one LeaderAndIsr request): new leaderships first
        take their role, then followers change leaders, then the wake-ups are done once per key
        (each partition's waiters, each follower whose parked Fetch must see the new leaderships)
        and the role listeners run. Returns the partitions of the batch hosted here.

        ``is_new``: the partition's state appeared after this process started, so no log of it can
        be on a dir that was already offline (Kafka's LeaderAndIsr ``isNew``); a replica that is not
        new is never created afresh while a dir is offline (storage refuses, the replica goes
        offline here), since its data may be on the failed disk."""
        hosted: dict[tuple[str, int], Partition] = {}
        changed: list[Partition] = []
        new_leaderships: dict[int, list[tuple[str, int]]] = {}     # follower -> partitions
        now_ms = self.clock.now_ms()
        fetchers = self.fetchers
        for item in batch:
            if self.broker_id not in item.replicas:
                continue
            key = (item.topic, item.partition)
            part = self._replica_for(key, item.is_new)
            if part is None:
                continue
            hosted[key] = part
            state = item.state
            old = part.state
            if old is not None and state.leader_epoch < old.leader_epoch:
                continue          # a stale notification; ZooKeeper already told us newer
            if state.leader == self.broker_id:
                part.become_leader(state, item.replicas, now_ms)
                if fetchers is not None:
                    fetchers.unfollow(key)
                if old is None or old.leader != self.broker_id or old.leader_epoch != state.leader_epoch:
                    for follower in state.isr:
                        if follower != self.broker_id:
                            new_leaderships.setdefault(follower, []).append(key)
            else:
                part.become_follower(state, item.replicas)
                new_term = old is None or old.leader != state.leader or old.leader_epoch != state.leader_epoch
                if fetchers is not None and (new_term or key not in fetchers.leader_of):
                    fetchers.follow(part, state.leader)
            changed.append(part)
        if new_leaderships:
            self._expect_first_fetches(new_leaderships)
        check = self.purgatory.check
        for part in changed:
            check(part.key)
        for part in changed:
            self._notify_role(part)
        return hosted

    def _replica_for(self, key: tuple[str, int], is_new: bool) -> Partition | None:
        """Our replica of ``key``, created (with its log) on its first state; None while offline."""
        if key in self.offline:
            log.debug("%s-%d: offline here, ignoring its state", key[0], key[1])
            return None
        part = self.partitions.get(key)
        if part is not None:
            return part
        topic, index = key
        try:
            plog = self.logs.get_or_create(topic, index, self.topic_configs.log_config(topic), is_new=is_new)
        except KafkaStorageError as exc:
            log.error("%s-%d: replica offline on broker %d: %s", topic, index, self.broker_id, exc)
            self.offline.add(key)
            return None
        part = self.partitions[key] = Partition(topic, index, self.broker_id, plog, self.purgatory, self.isr_writer,
                                                isr_listener=self.isr_listener)
        return part

    def take_offline(self, keys: Sequence[tuple[str, int]]) -> list[Partition]:
        """Kafka's ``handleLogDirFailure`` for the replicas in ``keys`` (their dir failed): stop
        following them, stop leading them (acks=all waiters answer KAFKA_STORAGE_ERROR, fetch
        long-polls wake and answer it), tell the role listeners (the group coordinator unloads
        ``__consumer_offsets`` partitions) and refuse every later request and state change for
        them. Returns the partitions that were hosted here."""
        gone: list[Partition] = []
        for key in keys:
            if key in self.offline:
                continue
            self.offline.add(key)
            part = self._stop_replica(key, delete=False, offline=True)
            if part is not None:
                gone.append(part)
        if gone:
            log.error("broker %d: %d replica(s) offline (failed log dir): %s", self.broker_id, len(gone),
                      ", ".join(f"{p.topic}-{p.index}" for p in gone))
        return gone

    def describe_log_dirs(self, topics: dict[str, set[int]] | None) -> list[DescribeLogDirsResponseDescribeLogDirsResult]:
        """DescribeLogDirs' ``results``: every configured dir, an offline one with
        KAFKA_STORAGE_ERROR and no topics; ``topics`` filters (None: all). The offset lag of a
        current log is max(0, high watermark - log end), as Kafka's ``getLogEndOffsetLag``."""
        results: list[DescribeLogDirsResponseDescribeLogDirsResult] = []
        for info in self.logs.describe_dirs():
            by_topic: dict[str, list[DescribeLogDirsResponseDescribeLogDirsPartition]] = {}
            for (topic, index), size in info.partitions.items():
                if topics is not None and index not in topics.get(topic, ()):
                    continue
                plog = self.logs.get(topic, index)
                lag = max(0, plog.high_watermark - plog.log_end_offset) if plog is not None else 0
                by_topic.setdefault(topic, []).append({"partition_index": index, "partition_size": size,
                                                       "offset_lag": lag, "is_future_key": False})
            for (topic, index), size in self.logs.future_sizes(info.path).items():
                if topics is not None and index not in topics.get(topic, ()):
                    continue
                plog = self.logs.get(topic, index)
                future = self.logs.future(topic, index)
                lag = max(0, plog.log_end_offset - future.log_end_offset) if plog is not None and future else 0
                by_topic.setdefault(topic, []).append({"partition_index": index, "partition_size": size,
                                                       "offset_lag": lag, "is_future_key": True})
            results.append({"error_code": int(info.error), "log_dir": info.path,
                            "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]})
        return results

    def alter_log_dir(self, topic: str, index: int, log_dir: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition, with Kafka 2.8's answers: LOG_DIR_NOT_FOUND for a
        dir that is not configured, KAFKA_STORAGE_ERROR for an offline one or an offline replica,
        REPLICA_NOT_AVAILABLE when the replica is not here yet (it will be created in ``log_dir``),
        else NONE with a future replica copying there (or none needed: already there)."""
        d = os.path.abspath(log_dir)
        if d not in [os.path.abspath(x) for x in self.logs.log_dirs]:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if d in self.logs.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.logs.is_offline(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.get(topic, index) is None or self.logs.get(topic, index) is None:
            self.logs.set_preferred_dir(topic, index, d)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        try:
            self.logs.create_future(topic, index, d)
        except KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def _notify_role(self, part: Partition) -> None:
        for listener in self.role_listeners:
            try:
                listener(part)
            except Exception:
                log.exception("%s-%d: role listener failed", part.topic, part.index)

    def update_config(self, topic: str) -> None:
        log_config = self.topic_configs.log_config(topic)
        for (t, _), part in self.partitions.items():
            if t == topic:
                part.log.config = log_config

    def hosted(self, topic: str) -> list[tuple[str, int]]:
        """The replicas of ``topic`` this broker holds (online, offline, or only a log on disk:
        one loaded at start-up for a partition that was moved away while this broker was down)."""
        return sorted({k for k in self.partitions if k[0] == topic} | {k for k in self.offline if k[0] == topic}
                      | {k for k in self.logs.logs() if k[0] == topic})

    def _stop_replica(self, key: tuple[str, int], *, delete: bool, offline: bool = False) -> Partition | None:
        """Kafka's ``stopReplicas`` for one hosted partition, the one path every way of losing a
        replica takes (a reassignment moved it away, its topic was deleted, its log dir failed):
        the fetcher stops following it, the partition leaves its role (``offline``: for good, it
        answers KAFKA_STORAGE_ERROR), the role listeners are told (coordinators unload), acks=all
        waiters and fetch long-polls are woken (they find it gone), and with ``delete`` its log
        goes. Returns the partition that was hosted, if any."""
        if self.fetchers is not None:
            self.fetchers.unfollow(key)
        part = self.partitions.pop(key, None)
        if part is not None:
            if offline:
                part.mark_offline()
            else:
                part.state = None
            self._notify_role(part)
        self.purgatory.retire(key)
        if delete:
            self.logs.delete(key[0], key[1])
        return part

    def _forget_offline(self, key: tuple[str, int], delete: bool) -> None:
        """An offline replica no longer assigned here: only forgotten (its files are on the failed disk)."""
        self.offline.discard(key)
        if delete:
            self.logs.delete(key[0], key[1])

    def remove_replica(self, topic: str, index: int, delete: bool = True) -> None:
        """Stop our replica of one partition (no longer assigned here: a reassignment moved it
        away) and delete its log (:meth:`_stop_replica`)."""
        key = (topic, index)
        if key in self.offline:
            self._forget_offline(key, delete)
            return
        if key not in self.partitions:
            if delete and self.logs.delete(topic, index):
                log.info("%s-%d: stray log deleted on broker %d (not assigned here)", topic, index, self.broker_id)
            return
        self._stop_replica(key, delete=delete)
        log.info("%s-%d: replica removed from broker %d%s", topic, index, self.broker_id,
                 ", log deleted" if delete else "")

    def remove_topic(self, topic: str, delete: bool = True) -> None:
        """Stop every replica of a deleted topic (:meth:`_stop_replica`)."""
        for key in [k for k in self.offline if k[0] == topic]:
            self._forget_offline(key, delete)
        for key in [k for k in self.partitions if k[0] == topic]:
            self._stop_replica(key, delete=delete)
            log.info("%s-%d: %s", topic, key[1], "deleted" if delete else "stopped")

    # -- replication (leader side) ---------------------------------------------------------------
    def _expect_first_fetches(self, new_leaderships: dict[int, list[tuple[str, int]]]) -> None:
        """This broker just took these leaderships (in-sync follower -> partitions): each such
        follower's parked Fetch is answered now (it cannot name the partitions yet), and until
        the follower fetches a partition, or ``replica.fetch.wait.max.ms`` has passed, its
        Fetches park only briefly. A follower usually hears of the new leader a moment before
        the leader does, and then its request is the one woken; when it hears after, its next
        request would otherwise sit out a whole long poll before it can ask for the partition,
        with acks=all produces waiting on it. (Followers out of the ISR hold up no acks=all,
        and may be dead.) One wake-up per follower for a whole batch of leaderships."""
        until = self.clock.now_ms() + self.config["replica.fetch.wait.max.ms"]
        for follower, keys in new_leaderships.items():
            due = self.first_fetch_due.setdefault(follower, {})
            for key in keys:
                due.pop(key, None)                # to the end: the dict stays ordered by deadline
                due[key] = until
            self.purgatory.check(FollowerFetches(follower))

    def awaits_first_fetch(self, replica_id: int) -> bool:
        """Has this broker begun leading a partition that follower ``replica_id`` has not
        fetched since (within ``replica.fetch.wait.max.ms``)? Its Fetch then parks for at most
        :data:`FIRST_FETCH_WAIT_MS`."""
        due = self.first_fetch_due.get(replica_id)
        if not due:
            return False
        now = self.clock.now_ms()
        expired = []
        for key, until in due.items():            # deadlines ascend: the expired are a prefix
            if until > now:
                break
            expired.append(key)
        for key in expired:
            del due[key]
        if due:
            return True
        del self.first_fetch_due[replica_id]
        return False

    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int,
                              log_start_offset: int = -1) -> None:
        """A follower's Fetch says how far it has copied ``part`` and where its log starts."""
        part.record_follower_fetch(replica_id, fetch_offset, self.clock.now_ms(), log_start_offset)
        due = self.first_fetch_due.get(replica_id)
        if due and due.pop(part.key, None) is not None and not due:
            del self.first_fetch_due[replica_id]

    def shrink_isrs(self) -> None:
        """Every ``replica.lag.time.max.ms / 2``: drop followers that stopped catching up."""
        lag_max = self.config["replica.lag.time.max.ms"]
        now = self.clock.now_ms()
        for part in list(self.partitions.values()):
            part.maybe_shrink_isr(now, lag_max)

    # -- produce ---------------------------------------------------------------------------------
    def batched_wakeups(self) -> ContextManager[None]:
        """A block (one request's appends) whose purgatory checks wake the waiters once at its
        end, with every partition it changed (``Purgatory.checks_deferred``, Kafka 2.8's
        ActionQueue): a follower's parked Fetch then carries all of a Produce's partitions."""
        return self.purgatory.checks_deferred()

    def append(self, topic: str, index: int, records: Any, acks: int, produce_version: int,
               internal: bool = False) -> tuple[Partition, AppendResult]:
        """Validate and append one partition's batches as leader; raises KafkaError subclasses.
        ``internal``: the broker itself writes (group coordinator), internal topics allowed."""
        if topic in INTERNAL_TOPICS and not internal:
            raise KafkaError(f"clients may not write to internal topic {topic}", ErrorCode.INVALID_TOPIC_EXCEPTION)
        part = self.leader(topic, index)
        if records is None or len(records) == 0:
            raise KafkaError("produce request without records", ErrorCode.CORRUPT_MESSAGE)
        cfg = self.topic_configs.effective(topic)
        infos = validate_batches(records, max_batch_bytes=cfg["max.message.bytes"])
        if produce_version < 7 and any(i.compression == ZSTD for i in infos):
            raise KafkaError("zstd needs Produce v7 or later", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        compacted = "compact" in cfg["cleanup.policy"]
        max_diff = cfg["message.timestamp.difference.max.ms"] if cfg["message.timestamp.type"] == "CreateTime" else LONG_MAX
        if compacted or max_diff < LONG_MAX:
            _validate_records(records, infos, topic, index, compacted, max_diff, self.clock.now_ms())
        if not internal:
            # message.format.version below 0.11.0: Kafka's LogValidator conversion (records/legacy.py);
            # the broker's own writes stay v2, whatever the topic says
            magic = kafka_version(cfg["message.format.version"]).record_version
            records, infos = to_stored_format(records, infos, magic)
        result = part.append_as_leader(records, infos, self.clock.now_ms(), acks, cfg["min.insync.replicas"],
                                       client=not internal)
        return part, result

    def append_txn_marker(self, topic: str, index: int, control_type: ControlType, producer_id: int,
                          producer_epoch: int, coordinator_epoch: int) -> tuple[Partition, AppendResult]:
        """Write a transaction marker as leader (the WriteTxnMarkers handler; internal topics
        included: ``__consumer_offsets`` partitions get markers for transactional offsets)."""
        part = self.leader(topic, index)
        result = part.append_txn_marker(control_type, producer_id, producer_epoch, coordinator_epoch,
                                        self.clock.now_ms())
        return part, result

    def pending_ack(self, part: Partition, result: AppendResult) -> PendingAck:
        return PendingAck(part, result.last_offset + 1, self.topic_configs.effective(part.topic)["min.insync.replicas"])

    def await_replication(self, pending: Sequence[PendingAck], timeout_ms: int) -> defer.Deferred:
        """The one acks=all wait (Kafka's DelayedProduce): fires, in ``pending``'s order, each
        append's code once every one of them is settled (replicated to the ISR with at least
        ``min.insync.replicas`` members, or leadership lost), or at ``timeout_ms`` with
        REQUEST_TIMED_OUT for those still waiting."""
        op = DelayedProduce(pending)
        if op.try_complete():
            return defer.succeed(op.on_complete(False))
        return self.purgatory.try_complete_else_watch(op, op.watch_keys(), timeout_ms)

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------------
    def behind_epoch(self, topic: str, index: int, current_leader_epoch: int) -> bool:
        """Does an asker naming ``current_leader_epoch`` know a newer leader epoch of this
        partition than this broker (which then has a replica of it that is not offline)?"""
        info = self.metadata.topics.get(topic)
        if current_leader_epoch < 0 or info is None or self.broker_id not in info.assignment.get(index, ()):
            return False                  # no replica here: nothing to wait for
        part = self.partitions.get((topic, index))
        known = part.state.leader_epoch if part is not None and part.state is not None else -1
        return known < current_leader_epoch and (topic, index) not in self.offline

    def await_leader_epochs(self, requests: list[tuple[str, Any]], timeout_ms: int,
                            answer: Callable[[], Any]) -> defer.Deferred:
        """Fires ``answer()`` once this broker knows the epochs ``requests`` (topic, requested
        partition) name, or at ``timeout_ms`` (:class:`DelayedLeaderEpochs`)."""
        op = DelayedLeaderEpochs(requests, self.behind_epoch, answer)
        return self.purgatory.try_complete_else_watch(op, op.watch_keys(), timeout_ms)

    # -- DeleteRecords ---------------------------------------------------------------------------
    def delete_records(self, topic: str, index: int, offset: int) -> tuple[Partition, int]:
        """Kafka's ``deleteRecordsOnLocalLog``: move the leader's log start; returns the partition
        and the offset its low watermark must reach (see :meth:`await_low_watermarks`)."""
        if topic in INTERNAL_TOPICS:
            raise KafkaError(f"Cannot delete records of internal topic {topic}", ErrorCode.INVALID_TOPIC_EXCEPTION)
        part = self.leader(topic, index)
        if "delete" not in self.topic_configs.effective(topic)["cleanup.policy"]:
            raise KafkaError(f"Records of partition {topic}-{index} can not be deleted due to the configured policy",
                             ErrorCode.POLICY_VIOLATION)
        return part, part.delete_records_before(offset, self.clock.now_ms())

    def await_low_watermarks(self, pending: Sequence[tuple[Partition, int]], timeout_ms: int) -> defer.Deferred:
        """Kafka's DelayedDeleteRecords: fires [(code, low watermark)] in ``pending``'s order once
        every replica on a live broker has moved its log start to the requested offset, leadership
        is lost (NOT_LEADER_OR_FOLLOWER), or at ``timeout_ms`` (REQUEST_TIMED_OUT)."""
        op = DelayedDeleteRecords(pending, lambda part: self.partitions.get(part.key) is part,
                                  lambda: set(self.metadata.brokers))
        if op.try_complete():
            return defer.succeed(op.on_complete(False))
        return self.purgatory.try_complete_else_watch(op, op.watch_keys(), timeout_ms)

    # -- fetch -----------------------------------------------------------------------------------
    def fetch_messages(self, params: FetchParams, wanted: list[Wanted], session: "FetchSession | None",
                       respond: Callable[[FetchRead], Any]) -> Any:
        """Kafka's ``fetchMessages``: record a follower's progress, read, and answer at once
        (``respond(read)``) when there is enough (MinBytes), an error, or no wait; else park a
        :class:`DelayedFetch` and return its Deferred. ``session``: a follower's incremental fetch
        session whose idle partitions are skipped (``params.tracked``)."""
        purgatory = self.purgatory
        events_at_start = purgatory.total_events
        idle: dict[Any, CachedPartition] = {}
        if session is not None and params.tracked:
            wanted, idle = session.split(purgatory.events, params.replica_id, self.clock.now_ms())
        reader = FetchReader(self, params, wanted, idle)
        if params.is_follower:
            reader.record_follower_progress()
        first = reader.read()
        if params.max_wait_ms <= 0 or first.total >= params.min_bytes or first.had_error \
                or not (reader.wanted or reader.idle):
            return respond(first)
        op = DelayedFetch(reader, first, respond, purgatory, events_at_start)
        max_wait_ms = params.max_wait_ms
        if params.is_follower and self.awaits_first_fetch(params.replica_id):
            max_wait_ms = min(max_wait_ms, FIRST_FETCH_WAIT_MS)
        waiting = purgatory.try_complete_else_watch(op, op.watch_keys(), max_wait_ms)
        reader.resolved = reader.not_diverged = None   # later checks run in later reactor turns: look up afresh
        return waiting

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, replica_id: int,
             isolation_level: int, current_leader_epoch: int,
             min_one_batch: bool) -> tuple[Partition, ReadResult | None]:
        part = self.leader(topic, index, current_leader_epoch)
        return part, self.read_from(part, fetch_offset, max_bytes, replica_id, isolation_level, min_one_batch)

    @staticmethod
    def read_from(part: Partition, fetch_offset: int, max_bytes: int, replica_id: int, isolation_level: int,
                  min_one_batch: bool, as_region: bool = False) -> ReadResult | None:
        """:meth:`read` on a partition already looked up (and its leadership checked) by the caller;
        ``as_region``: the records as a FileRegion of the segment, unread (zero-copy Fetch)."""
        upper = part.fetch_upper_bound(replica_id, isolation_level)
        if fetch_offset > part.log_end_offset or fetch_offset < part.log_start_offset:
            raise FetchOutOfRangeError(f"offset {fetch_offset} outside [{part.log_start_offset}, {part.log_end_offset}]",
                                       part.log_start_offset, part.high_watermark)
        committed = replica_id < 0 and isolation_level == READ_COMMITTED
        if fetch_offset >= upper:
            return None
        res = part.log.read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch,
                            as_region=as_region)
        if committed and res.last_offset >= 0:
            # the aborted transactions overlapping what is returned (Kafka's upper bound: the
            # offset after the last fetched batch)
            res = res._replace(aborted_transactions=part.log.collect_aborted_txns(fetch_offset, res.last_offset + 1))
        return res


def _validate_records(records: Any, infos: list[BatchInfo], topic: str, index: int, compacted: bool,
                      max_timestamp_diff: int, now_ms: int) -> None:
    """Kafka's LogValidator record checks: a compacted topic refuses records without a key, and
    a CreateTime topic records whose timestamp is more than ``message.timestamp.difference.max.ms``
    away from now. Every bad record of the first bad batch is named (KIP-467), by its index in
    the batch. Only topics with such a rule pay for decoding; the CRCs were checked just before."""
    for info in infos:
        errors: list[tuple[int, str]] = []
        bad_timestamp = False
        for i, rec in enumerate(decode_batch(records, info, verify_crc=False)):
            if compacted and rec.key is None:
                errors.append((i, f"Compacted topic cannot accept message without key in topic partition {topic}-{index}."))
            if max_timestamp_diff < LONG_MAX and rec.timestamp >= 0 and abs(rec.timestamp - now_ms) > max_timestamp_diff:
                bad_timestamp = True
                errors.append((i, f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of range. "
                                  f"The timestamp should be within [{now_ms - max_timestamp_diff}, "
                                  f"{now_ms + max_timestamp_diff}]"))
        if bad_timestamp:
            raise RecordValidationError("One or more records have been rejected due to invalid timestamp",
                                        ErrorCode.INVALID_TIMESTAMP, errors)
        if errors:
            raise RecordValidationError("One or more records have been rejected", ErrorCode.INVALID_RECORD, errors)