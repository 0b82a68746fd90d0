"""The transaction coordinator: Kafka 2.8's ``TransactionCoordinator`` as logic over metadata (no I/O).

Every broker runs one; it coordinates the transactional ids whose ``__transaction_state``
partition (Java ``hashCode`` of the id, as for groups) it leads. Requests become transitions of
:class:`TransactionMetadata` (state.py's table) that are written to that partition through a
:class:`TxnStore` and applied once replicated; COMMIT/ABORT markers go to the partitions of a
transaction through a :class:`MarkerSender`, after which the Complete state is written. Time goes
through an ``IReactorTime`` (the reactor in the broker, ``task.Clock`` in tests): the timed-out
transaction abort and the transactional-id expiry run every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` /
``transaction.remove.expired.transaction.cleanup.interval.ms``.

Errors are Kafka 2.8's: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while the id's partition
is not (yet) ours, CONCURRENT_TRANSACTIONS while a change or the markers of the previous
transaction are in flight, INVALID_PRODUCER_ID_MAPPING for an unknown id or another producer id,
PRODUCER_FENCED for an old epoch (INVALID_PRODUCER_EPOCH for EndTxn/AddPartitions before v2,
chosen by the handler), INVALID_TXN_STATE for an EndTxn that does not fit the state,
INVALID_TRANSACTION_TIMEOUT above ``transaction.max.timeout.ms``.

One timing differs from Kafka 2.8, never an answer: an AddPartitionsToTxn (or AddOffsetsToTxn)
that arrives while the previous transaction's markers are still being written waits up to
:data:`COMPLETION_WAIT_S` for that transaction to complete and is then handled, instead of being
answered CONCURRENT_TRANSACTIONS at once. A client that begins its next transaction right after a
commit meets that window every time, and backs off 20 ms (Java, KAFKA-5477) or more (librdkafka)
per transaction; Kafka 4 retries such requests broker-side for the same reason (KAFKA-18654).
The Complete state the markers lead to and the waiting requests' Ongoing state are then written as
one batch (two records, Kafka's order, both or neither), so the next transaction starts after one
replicated write of ``__transaction_state`` instead of two in series; one that arrives while the
Complete state is being written has its Ongoing state appended right behind it (one replication
wait covers both, applied in order). The log holds what Kafka's would and a new coordinator
replays it the same way.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from twisted.internet import defer

from kafkalite.errors import ErrorCode
from kafkalite.coordinator_runtime import LOADED, CoordinatorRuntime, coordinator_append_error
from kafkalite.txn import records
from kafkalite.txn.state import (MAX_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, IllegalStateTransition,
                                 TopicPartition, TransactionMetadata, TxnState, TxnTransition)

log = logging.getLogger(__name__)

#: How long an AddPartitionsToTxn meeting the previous transaction's markers in flight waits for
#: its completion before it is answered CONCURRENT_TRANSACTIONS (see the module docstring).
COMPLETION_WAIT_S = 0.1
T = TxnState


class TxnStore(Protocol):
    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> defer.Deferred:
        """Append key/value records to a ``__transaction_state`` partition (acks=all); fires
        with an ErrorCode."""


class MarkerSender(Protocol):
    def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, partitions: frozenset[TopicPartition]) -> defer.Deferred:
        """Write the marker to the leader of every partition, retrying through leader changes,
        until each is written or its partition is gone; fires (with None) then."""


@dataclass(frozen=True)
class TxnConfig:
    """Kafka's ``TransactionConfig`` (property names in :meth:`from_broker`)."""

    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expire_interval_ms: int = 3_600_000

    @classmethod
    def from_broker(cls, config: Any) -> "TxnConfig":
        return cls(config["transaction.state.log.num.partitions"], config["transaction.max.timeout.ms"],
                   config["transactional.id.expiration.ms"],
                   config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   config["transaction.remove.expired.transaction.cleanup.interval.ms"])


@dataclass
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator(CoordinatorRuntime):
    """Ownership of ``__transaction_state`` partitions (with the coordinator epoch each was
    loaded under) comes from :class:`CoordinatorRuntime`."""

    def __init__(self, config: TxnConfig, clock: Any, store: TxnStore, markers: MarkerSender,
                 next_producer_id: Callable[[], defer.Deferred],
                 partition_count: Callable[[], int] | None = None) -> None:
        """``partition_count``: partitions of ``__transaction_state`` (the topic's own count once
        it exists, as Kafka; ``transaction.state.log.num.partitions`` by default)."""
        super().__init__(partition_count or (lambda: config.num_partitions))
        self.config = config
        self.clock = clock
        self.store = store
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.txns: dict[str, TransactionMetadata] = {}
        self._timers: list[Any] = []
        #: transactional id -> requests waiting for its Prepare* transaction to complete, each with
        #: the partitions its next transaction is to hold (AddPartitionsToTxn; empty otherwise)
        self._completion_waiters: dict[str, list[tuple[frozenset[TopicPartition], defer.Deferred]]] = {}
        #: transactional id -> Deferreds fired with the code of its write in flight once it settles
        self._settle_observers: dict[str, list[defer.Deferred]] = {}

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # -- scheduling --------------------------------------------------------------------------------
    def start(self) -> None:
        """Arm the periodic abort of timed-out transactions and expiry of transactional ids."""
        self._arm(self.config.abort_interval_ms, self.abort_timed_out_transactions)
        self._arm(self.config.expire_interval_ms, self.expire_transactional_ids)

    def _arm(self, interval_ms: int, job: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                job()
            except Exception:
                log.exception("transaction coordinator: periodic job failed")
            self._timers.remove(call)
            self._arm(interval_ms, job)
        call = self.clock.callLater(interval_ms / 1000, run)
        self._timers.append(call)

    def stop(self) -> None:
        for call in self._timers:
            if call.active():
                call.cancel()
        self._timers = []
        for txn_id in list(self._completion_waiters):
            self._wake_completion_waiters(txn_id)

    # -- ownership (partition_of, coordinator_error, begin_load: CoordinatorRuntime) ---------------
    def complete_load(self, partition: int, coordinator_epoch: int,
                      entries: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Replay a partition (key, value) in log order; the last record of each id wins. Then
        finish what the previous coordinator left half done: markers of PrepareCommit/PrepareAbort
        transactions are sent again (Kafka's loadTransactionsForTxnTopicPartition)."""
        if not self._loading(partition, coordinator_epoch):
            return 0
        loaded: dict[str, TransactionMetadata | None] = {}
        for key, value in entries:
            rec = records.decode(key, value)
            if rec is not None:
                loaded[rec.transactional_id] = rec.metadata
        self._loaded(partition, coordinator_epoch)
        count = 0
        for txn_id, meta in loaded.items():
            if meta is None:
                self.txns.pop(txn_id, None)
                continue
            self.txns[txn_id] = meta
            count += 1
            if meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                self._send_markers(meta, meta.state == T.PREPARE_COMMIT, coordinator_epoch)
        log.info("loaded %d transactional ids from __transaction_state-%d (coordinator epoch %d)",
                 count, partition, coordinator_epoch)
        return count

    def unload(self, partition: int) -> None:
        """Leadership of the partition moved: forget its transactional ids."""
        self._disown(partition)
        for txn_id in [t for t in self.txns if self.partition_of(t) == partition]:
            del self.txns[txn_id]
            self._wake_completion_waiters(txn_id)      # they answer NOT_COORDINATOR now

    # -- writes ------------------------------------------------------------------------------------
    def _write(self, meta: TransactionMetadata, transition: TxnTransition,
               then: TxnTransition | None = None) -> defer.Deferred:
        """Write ``transition`` (pending on ``meta``) and ``then`` (queued behind it) as one batch;
        fires with the coordinator's ErrorCode after applying them on success or dropping them on
        failure."""
        txn_id = meta.transactional_id
        partition = self.partition_of(txn_id)
        epoch = self.epoch_of(txn_id)
        changes = [transition] if then is None else [transition, then]
        key = records.txn_key(txn_id)
        d = self.store.append(partition, [(key, None if t.state == T.DEAD else records.txn_value(t)) for t in changes])

        def written(code: ErrorCode) -> ErrorCode:
            code = self._apply_written(meta, changes, ErrorCode(code), partition, epoch)
            if code == ErrorCode.NONE and meta.state == T.DEAD:
                del self.txns[txn_id]
            if code == ErrorCode.NONE and transition.state in (T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
                self._wake_completion_waiters(txn_id)
            for observer in self._settle_observers.pop(txn_id, []):
                observer.callback(code)
            return code
        return d.addErrback(self._append_failed, txn_id).addCallback(written)

    def _apply_written(self, meta: TransactionMetadata, changes: list[TxnTransition], code: ErrorCode,
                       partition: int, epoch: int) -> ErrorCode:
        """Apply ``changes`` (pending on ``meta``, in order) if their append worked and the
        partition is still ours under the same epoch; otherwise drop them. The coordinator's code."""
        if self.owned.get(partition) != (LOADED, epoch) or self.txns.get(meta.transactional_id) is not meta:
            meta.abandon()
            return ErrorCode.NOT_COORDINATOR      # the partition moved while we wrote
        if code != ErrorCode.NONE:
            meta.abandon()
            return coordinator_append_error(code, ErrorCode.UNKNOWN_SERVER_ERROR)
        for t in changes:
            meta.complete(t)
        return ErrorCode.NONE

    @staticmethod
    def _append_failed(f: Any, txn_id: str) -> ErrorCode:
        log.warning("writing transaction %s failed: %s", txn_id, f.getErrorMessage())
        return ErrorCode.UNKNOWN_SERVER_ERROR

    def _write_behind(self, meta: TransactionMetadata, partitions: frozenset[TopicPartition]) -> defer.Deferred:
        """The Complete state is being written: append the next transaction's Ongoing state right
        behind it instead of after its replication. The partition replicates in order, so one wait
        covers both; the Ongoing state is applied (and the request answered) only after the
        Complete state, and dropped with it if that write fails."""
        txn_id = meta.transactional_id
        partition, epoch = self.partition_of(txn_id), self.epoch_of(txn_id)
        first = meta.pending
        assert first is not None
        now = self.now_ms()
        then = meta.prepare_after(first, T.ONGOING, partitions=partitions, txn_start_timestamp=now,
                                  txn_last_update_timestamp=now)
        settled: defer.Deferred = defer.Deferred()
        self._settle_observers.setdefault(txn_id, []).append(settled)
        appended = self.store.append(partition, [(records.txn_key(txn_id), records.txn_value(then))])
        appended.addErrback(self._append_failed, txn_id)

        def both(codes: list[ErrorCode]) -> ErrorCode:
            first_code, code = codes
            if meta.pending is not then:           # the Complete write failed: Ongoing went with it
                return first_code if first_code != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS
            return self._apply_written(meta, [then], ErrorCode(code), partition, epoch)
        return defer.gatherResults([settled, appended]).addCallback(both)

    # -- InitProducerId ----------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, txn_timeout_ms: int, expected_producer_id: int = -1,
                         expected_epoch: int = -1) -> defer.Deferred:
        """InitProducerId with a transactional id; fires with an :class:`InitResult`. A new id gets
        a producer id; a known one an epoch bump (a new producer id when the epoch is exhausted),
        fencing the previous producer; an ongoing transaction is first aborted (the client retries
        on CONCURRENT_TRANSACTIONS). ``expected_*`` (KIP-360, v3+) let a producer bump its own
        epoch after an error: it must name the current or the previous producer id and epoch."""
        if not transactional_id:
            return defer.succeed(InitResult(ErrorCode.INVALID_REQUEST))
        if not 0 < txn_timeout_ms <= self.config.max_timeout_ms:
            return defer.succeed(InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        err = self.coordinator_error(transactional_id)
        if err is not None:
            return defer.succeed(InitResult(err))
        meta = self.txns.get(transactional_id)
        if meta is None:
            return self._init_new(transactional_id, txn_timeout_ms)
        return self._init_existing(meta, txn_timeout_ms, expected_producer_id, expected_epoch)

    def _init_new(self, transactional_id: str, txn_timeout_ms: int) -> defer.Deferred:
        def allocated(pid: int) -> Any:
            err = self.coordinator_error(transactional_id)
            if err is not None:
                return InitResult(err)
            meta = self.txns.get(transactional_id)
            if meta is None:
                meta = TransactionMetadata(transactional_id, pid, txn_timeout_ms=txn_timeout_ms,
                                           txn_last_update_timestamp=self.now_ms())
                self.txns[transactional_id] = meta
            return self._init_existing(meta, txn_timeout_ms, -1, -1)
        return self.next_producer_id().addCallback(allocated)

    def _init_existing(self, meta: TransactionMetadata, txn_timeout_ms: int, expected_pid: int,
                       expected_epoch: int) -> Any:
        """Kafka 2.8's ``prepareInitProducerIdTransit`` / ``prepareIncrementProducerEpoch``."""
        if meta.pending is not None:
            return defer.succeed(InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        if expected_pid >= 0 and not (
                meta.producer_epoch == NO_PRODUCER_EPOCH or expected_pid == meta.producer_id
                or (expected_pid == meta.last_producer_id and expected_epoch >= MAX_EPOCH - 1)):
            return defer.succeed(InitResult(ErrorCode.PRODUCER_FENCED))
        if meta.state == T.ONGOING:
            # fence the old producer: abort its transaction with a bumped epoch; the client retries
            self._fence_and_abort(meta)
            return defer.succeed(InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        if meta.state not in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
            return defer.succeed(InitResult(ErrorCode.CONCURRENT_TRANSACTIONS))   # markers in flight
        now = self.now_ms()
        common = {"txn_timeout_ms": txn_timeout_ms, "partitions": frozenset(), "txn_start_timestamp": -1,
                  "txn_last_update_timestamp": now}
        if meta.epoch_exhausted and (expected_pid < 0 or expected_epoch == meta.producer_epoch):
            record_last = expected_pid >= 0

            def with_new_id(pid: int) -> Any:
                if meta.pending is not None or self.txns.get(meta.transactional_id) is not meta:
                    return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
                t = meta.transition_to(T.EMPTY, producer_id=pid, last_producer_id=meta.producer_id, producer_epoch=0,
                                       last_producer_epoch=meta.producer_epoch if record_last else NO_PRODUCER_EPOCH,
                                       **common)
                return self._write(meta, t).addCallback(self._init_answer, meta)
            return self.next_producer_id().addCallback(with_new_id)
        if expected_pid < 0 or expected_epoch == NO_PRODUCER_EPOCH:
            bumped, last = meta.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == meta.producer_epoch:
            bumped, last = meta.producer_epoch + 1, meta.producer_epoch
        elif expected_epoch == meta.last_producer_epoch:
            # a retry of a bump that already succeeded: the current id and epoch again
            return defer.succeed(InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch))
        else:
            return defer.succeed(InitResult(ErrorCode.PRODUCER_FENCED))
        t = meta.transition_to(T.EMPTY, producer_epoch=bumped, last_producer_epoch=last, **common)
        return self._write(meta, t).addCallback(self._init_answer, meta)

    @staticmethod
    def _init_answer(code: ErrorCode, meta: TransactionMetadata) -> InitResult:
        if code != ErrorCode.NONE:
            return InitResult(code)
        return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> \
            tuple[ErrorCode | None, TransactionMetadata | None]:
        err = self.coordinator_error(transactional_id)
        if err is not None:
            return err, None
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if producer_epoch != meta.producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return None, meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], wait: bool = True) -> defer.Deferred:
        """AddPartitionsToTxn (and AddOffsetsToTxn with the group's offsets partition): the
        transaction becomes Ongoing with these partitions; fires with an ErrorCode. ``wait``:
        meeting the previous transaction's completion in flight, wait for it (up to
        :data:`COMPLETION_WAIT_S`) and try once more."""
        err, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if err is not None or meta is None:
            return defer.succeed(err)
        completing = meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT)
        writing_complete = meta.pending is not None and meta.pending.state in (T.COMPLETE_COMMIT, T.COMPLETE_ABORT)
        if completing and wait and writing_complete and meta.queued is None:
            return self._write_behind(meta, frozenset(partitions))
        if completing and wait:
            asked = list(partitions)
            # once the markers are written, the Complete state carries these partitions' Ongoing
            # state in the same write (_complete); the retry then finds them added
            return self._until_completed(transactional_id, frozenset(asked)).addCallback(
                lambda _: self.add_partitions(transactional_id, producer_id, producer_epoch, asked, wait=False))
        if meta.pending is not None or completing:
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state in (T.PREPARE_EPOCH_FENCE, T.DEAD):
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS)
        wanted = set(partitions)
        if meta.state == T.ONGOING and wanted <= meta.partitions:
            return defer.succeed(ErrorCode.NONE)
        now = self.now_ms()
        start = meta.txn_start_timestamp if meta.state == T.ONGOING else now
        t = meta.transition_to(T.ONGOING, partitions=frozenset(meta.partitions | wanted),
                               txn_start_timestamp=start, txn_last_update_timestamp=now)
        return self._write(meta, t)

    def _until_completed(self, transactional_id: str,
                         partitions: frozenset[TopicPartition] = frozenset()) -> defer.Deferred:
        """Fires (with None) when the id's transaction is written Complete, or after
        :data:`COMPLETION_WAIT_S`, whichever comes first. ``partitions``: what the waiter's next
        transaction holds, written Ongoing with the Complete state while it waits."""
        d: defer.Deferred = defer.Deferred()
        waiters = self._completion_waiters.setdefault(transactional_id, [])
        waiter = (partitions, d)
        waiters.append(waiter)

        def timed_out() -> None:
            if waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    self._completion_waiters.pop(transactional_id, None)
                d.callback(None)
        timer = self.clock.callLater(COMPLETION_WAIT_S, timed_out)
        d.addBoth(lambda r: (timer.active() and timer.cancel(), r)[1])
        return d

    def _wake_completion_waiters(self, transactional_id: str) -> None:
        for _, d in self._completion_waiters.pop(transactional_id, []):
            d.callback(None)

    def _next_partitions(self, transactional_id: str) -> frozenset[TopicPartition]:
        """The partitions the requests waiting for this transaction's completion add."""
        return frozenset().union(*(ps for ps, _ in self._completion_waiters.get(transactional_id, ())))

    # -- EndTxn ------------------------------------------------------------------------------------
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> defer.Deferred:
        """EndTxn from the client; fires with an ErrorCode once PrepareCommit/PrepareAbort is
        written (the markers follow, then the Complete state)."""
        err, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if err is not None or meta is None:
            return defer.succeed(err)
        if meta.pending is not None:
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS)
        state = meta.state
        if state == T.ONGOING:
            return self._prepare_end(meta, commit, meta.producer_epoch)
        if state == T.COMPLETE_COMMIT:
            return defer.succeed(ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE)
        if state == T.COMPLETE_ABORT:
            return defer.succeed(ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE)
        if state == T.PREPARE_COMMIT:
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if state == T.PREPARE_ABORT:
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE)
        if state == T.PREPARE_EPOCH_FENCE:
            return defer.succeed(ErrorCode.CONCURRENT_TRANSACTIONS)
        return defer.succeed(ErrorCode.INVALID_TXN_STATE)       # Empty, Dead

    def _prepare_end(self, meta: TransactionMetadata, commit: bool, epoch: int) -> defer.Deferred:
        now = self.now_ms()
        t = meta.transition_to(T.PREPARE_COMMIT if commit else T.PREPARE_ABORT, producer_epoch=epoch,
                               txn_last_update_timestamp=now)
        coordinator_epoch = self.epoch_of(meta.transactional_id)

        def prepared(code: ErrorCode) -> ErrorCode:
            if code == ErrorCode.NONE:
                self._send_markers(meta, commit, coordinator_epoch)
            return code
        return self._write(meta, t).addCallback(prepared)

    def _send_markers(self, meta: TransactionMetadata, commit: bool, coordinator_epoch: int) -> None:
        d = self.markers.send_markers(meta.transactional_id, meta.producer_id, meta.producer_epoch, commit,
                                      coordinator_epoch, frozenset(meta.partitions))
        d.addCallback(lambda _: self._complete(meta, commit, coordinator_epoch))
        d.addErrback(lambda f: log.warning("markers of %s: %s", meta.transactional_id, f.getErrorMessage()))

    def _complete(self, meta: TransactionMetadata, commit: bool, coordinator_epoch: int) -> Any:
        """Every marker is written: the transaction is complete (retried until the write works
        or the partition is no longer ours)."""
        txn_id = meta.transactional_id
        if self.txns.get(txn_id) is not meta or self.epoch_of(txn_id) != coordinator_epoch \
                or meta.state != (T.PREPARE_COMMIT if commit else T.PREPARE_ABORT):
            return None
        if meta.pending is not None:
            self.clock.callLater(0.1, self._complete, meta, commit, coordinator_epoch)
            return None
        now = self.now_ms()
        t = meta.transition_to(T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT, partitions=frozenset(),
                               txn_last_update_timestamp=now)
        # the next transaction's AddPartitionsToTxn already waiting: its Ongoing state goes into
        # the same batch (one replicated write; the waiters then find their partitions added)
        nxt = self._next_partitions(txn_id)
        then = meta.prepare_after(t, T.ONGOING, partitions=nxt, txn_start_timestamp=now) if nxt else None

        def written(code: ErrorCode) -> None:
            if code != ErrorCode.NONE and code != ErrorCode.NOT_COORDINATOR:
                self.clock.callLater(0.1, self._complete, meta, commit, coordinator_epoch)
        return self._write(meta, t, then).addCallback(written)

    # -- fencing, timeouts, expiry -----------------------------------------------------------------
    def _fence_and_abort(self, meta: TransactionMetadata) -> defer.Deferred:
        """Kafka's PrepareEpochFence: the epoch is bumped so the old producer can no longer write,
        then its transaction is aborted under the new epoch."""
        if meta.epoch_exhausted:
            # no room to bump: abort with the current epoch (Kafka does the same)
            return self._prepare_end(meta, False, meta.producer_epoch)
        t = meta.transition_to(T.PREPARE_EPOCH_FENCE, producer_epoch=meta.producer_epoch + 1,
                               txn_last_update_timestamp=self.now_ms())
        # PrepareEpochFence is not written (Kafka keeps it in memory): apply and abort at once
        meta.complete(t)
        return self._prepare_end(meta, False, meta.producer_epoch)

    def abort_timed_out_transactions(self) -> int:
        """Ongoing transactions older than their timeout are fenced and aborted."""
        now = self.now_ms()
        n = 0
        for meta in list(self.txns.values()):
            if meta.pending is not None or self.coordinator_error(meta.transactional_id) is not None:
                continue
            if meta.state == T.PREPARE_EPOCH_FENCE:
                self._prepare_end(meta, False, meta.producer_epoch)      # its abort's write failed: retry
                n += 1
                continue
            if meta.state != T.ONGOING:
                continue
            if meta.txn_start_timestamp + meta.txn_timeout_ms < now:
                log.info("aborting transaction %s: open longer than its timeout of %d ms",
                         meta.transactional_id, meta.txn_timeout_ms)
                self._fence_and_abort(meta)
                n += 1
        return n

    def expire_transactional_ids(self) -> int:
        """Ids idle for ``transactional.id.expiration.ms`` in Empty/CompleteCommit/CompleteAbort
        are written as tombstones and forgotten."""
        now = self.now_ms()
        n = 0
        for meta in list(self.txns.values()):
            if meta.state not in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT) or meta.pending is not None:
                continue
            if self.coordinator_error(meta.transactional_id) is not None:
                continue
            if meta.txn_last_update_timestamp + self.config.id_expiration_ms <= now:
                try:
                    t = meta.transition_to(T.DEAD, txn_last_update_timestamp=now)
                except IllegalStateTransition:
                    continue
                self._write(meta, t)
                n += 1
        return n

    # -- describe ----------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.txns.get(transactional_id)
