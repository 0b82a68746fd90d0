"""The transaction coordinator's logic over a task.Clock, an in-memory store and marker sender:
the state table, Kafka's key/value formats, InitProducerId (bump, fencing, KIP-360), the
AddPartitions/EndTxn rules and error codes, markers then Complete, timeout abort, id expiry,
and replay of the written records by a new coordinator."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer, task

from kafkalite.errors import ErrorCode
from kafkalite.txn import records
from kafkalite.txn.coordinator import COMPLETION_WAIT_S, TransactionCoordinator, TxnConfig
from kafkalite.txn.state import (MAX_EPOCH, TRANSITIONS, IllegalStateTransition, TransactionMetadata,
                                 TxnState)
from tests.support.deferreds import fired as result

pytestmark = pytest.mark.unit
T = TxnState
E = ErrorCode


class Store:
    """``__transaction_state`` as a list per partition; ``fail`` answers the next appends with a code."""

    def __init__(self) -> None:
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail: list[ErrorCode] = []
        self.held: list[defer.Deferred] | None = None
        self.batches: list[list[Any]] = []        # the states of each append, one list per batch

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]]) -> defer.Deferred:
        if self.fail:
            return defer.succeed(self.fail.pop(0))
        self.batches.append([records.decode(k, v).metadata.state if v is not None else None for k, v in entries])
        self.log.setdefault(partition, []).extend(entries)
        if self.held is not None:
            d: defer.Deferred = defer.Deferred()
            self.held.append(d)
            return d
        return defer.succeed(E.NONE)


class Markers:
    def __init__(self) -> None:
        self.sent: list[tuple[str, int, int, bool, int, frozenset]] = []
        self.pending: list[defer.Deferred] = []

    def send_markers(self, txn_id: str, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                     partitions: frozenset) -> defer.Deferred:
        self.sent.append((txn_id, pid, epoch, commit, coordinator_epoch, partitions))
        d: defer.Deferred = defer.Deferred()
        self.pending.append(d)
        return d

    def deliver(self) -> None:
        pending, self.pending = self.pending, []
        for d in pending:
            d.callback(None)


class Env:
    def __init__(self, config: TxnConfig = TxnConfig(num_partitions=1)) -> None:
        self.clock = task.Clock()
        self.clock.advance(1000)
        self.store = Store()
        self.markers = Markers()
        self.next_pid = 1000
        self.coord = self.new_coordinator(config)
        self.coord.begin_load(0, 7)
        self.coord.complete_load(0, 7, [])

    def new_coordinator(self, config: TxnConfig) -> TransactionCoordinator:
        def allocate() -> defer.Deferred:
            self.next_pid += 1
            return defer.succeed(self.next_pid)
        return TransactionCoordinator(config, self.clock, self.store, self.markers, allocate)


def init(env: Env, txn_id: str = "tx", timeout: int = 60000, expected: tuple[int, int] = (-1, -1)) -> Any:
    return result(env.coord.init_producer_id(txn_id, timeout, *expected))


def test_transition_table_is_kafkas():
    """The table is Kafka's validPreviousStates inverted, and anything else is refused."""
    previous = {
        T.EMPTY: {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
        T.ONGOING: {T.ONGOING, T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT},
        T.PREPARE_COMMIT: {T.ONGOING},
        T.PREPARE_ABORT: {T.ONGOING, T.PREPARE_EPOCH_FENCE},
        T.COMPLETE_COMMIT: {T.PREPARE_COMMIT},
        T.COMPLETE_ABORT: {T.PREPARE_ABORT},
        T.DEAD: {T.EMPTY, T.COMPLETE_ABORT, T.COMPLETE_COMMIT},
        T.PREPARE_EPOCH_FENCE: {T.ONGOING},
    }
    for target, sources in previous.items():
        assert {s for s, nxt in TRANSITIONS.items() if target in nxt} == sources, target
    meta = TransactionMetadata("x", 1)
    with pytest.raises(IllegalStateTransition):
        meta.transition_to(T.PREPARE_COMMIT)
    meta.transition_to(T.ONGOING)
    with pytest.raises(IllegalStateTransition):          # one change at a time
        meta.transition_to(T.ONGOING)


def test_log_value_bytes_are_kafkas_v0_layout():
    """TransactionLogValue v0: pid, epoch, timeout, status, partitions by topic, update and start
    timestamps, after an int16 version; the key is version 0 + the id; both decode back."""
    meta = TransactionMetadata("tx", 5)
    t = meta.transition_to(T.ONGOING, producer_epoch=0, partitions=frozenset({("a", 1), ("a", 0), ("b", 2)}),
                           txn_start_timestamp=9, txn_last_update_timestamp=10)
    assert records.txn_key("tx") == bytes.fromhex("0000" "0002" "7478")
    assert records.txn_value(t) == bytes.fromhex(
        "0000" "0000000000000005" "0000" "0000ea60" "01" "00000002"
        "0001" "61" "00000002" "00000000" "00000001" "0001" "62" "00000001" "00000002"
        "000000000000000a" "0000000000000009")
    rec = records.decode(records.txn_key("tx"), records.txn_value(t))
    assert rec is not None and rec.metadata is not None
    assert (rec.metadata.state, rec.metadata.partitions) == (T.ONGOING, {("a", 0), ("a", 1), ("b", 2)})
    assert records.decode(records.txn_key("tx"), None) == records.TxnRecord("tx", None)


def test_init_bumps_the_epoch_and_fences_an_open_transaction():
    """A new id gets a producer id at epoch 0; a second InitProducerId bumps the epoch; one while
    a transaction is open aborts it under a bumped epoch (markers with that epoch) and answers
    CONCURRENT_TRANSACTIONS until the abort completes; then the epoch is bumped again."""
    env = Env()
    r = init(env)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    r = init(env)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 1)
    assert result(env.coord.add_partitions("tx", 1001, 1, [("t", 0)])) == E.NONE
    assert init(env).error == E.CONCURRENT_TRANSACTIONS
    assert env.markers.sent == [("tx", 1001, 2, False, 7, frozenset({("t", 0)}))]
    assert init(env).error == E.CONCURRENT_TRANSACTIONS         # markers still in flight
    env.markers.deliver()
    assert env.coord.describe("tx").state == T.COMPLETE_ABORT
    r = init(env)
    assert (r.error, r.producer_epoch) == (E.NONE, 3)
    # the zombie (epoch 1) is fenced everywhere
    assert result(env.coord.add_partitions("tx", 1001, 1, [("t", 1)])) == E.PRODUCER_FENCED
    assert result(env.coord.end_txn("tx", 1001, 1, True)) == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id():
    """At epoch Short.MaxValue - 1 the next InitProducerId hands out a new producer id at epoch 0."""
    env = Env()
    init(env)
    env.coord.txns["tx"].producer_epoch = MAX_EPOCH - 1
    r = init(env)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1002, 0)
    assert env.coord.txns["tx"].last_producer_id == 1001


def test_kip360_expected_producer_id_and_epoch():
    """A producer naming its current id and epoch gets a bump; naming the previous epoch after the
    bump succeeded is a retry (same answer); any other id or epoch is PRODUCER_FENCED."""
    env = Env()
    init(env)
    r = init(env, expected=(1001, 0))
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 1)
    r = init(env, expected=(1001, 0))
    assert (r.error, r.producer_epoch) == (E.NONE, 1)
    assert init(env, expected=(999, 1)).error == E.PRODUCER_FENCED
    assert init(env, expected=(1001, 5)).error == E.PRODUCER_FENCED


def test_request_errors():
    """Kafka's codes for bad input: timeout above transaction.max.timeout.ms, an unknown id or
    producer id, EndTxn on an Empty transaction or against the state, a partition not ours."""
    env = Env(TxnConfig(num_partitions=1, max_timeout_ms=1000))
    assert init(env, timeout=1001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert init(env, txn_id="").error == E.INVALID_REQUEST
    assert result(env.coord.add_partitions("nope", 1, 0, [("t", 0)])) == E.INVALID_PRODUCER_ID_MAPPING
    r = init(env, timeout=1000)
    assert result(env.coord.add_partitions("tx", r.producer_id + 1, 0, [("t", 0)])) == E.INVALID_PRODUCER_ID_MAPPING
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.INVALID_TXN_STATE    # Empty
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, False)) == E.INVALID_TXN_STATE   # PrepareCommit
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.CONCURRENT_TRANSACTIONS
    waiting = env.coord.add_partitions("tx", r.producer_id, 0, [("t", 1)])
    env.clock.advance(COMPLETION_WAIT_S)             # the markers do not come in time
    assert result(waiting) == E.CONCURRENT_TRANSACTIONS
    env.markers.deliver()
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE                 # retry of a commit
    env.coord.unload(0)
    assert init(env, timeout=1000).error == E.NOT_COORDINATOR
    env.coord.begin_load(0, 8)
    assert init(env, timeout=1000).error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_failed_write_changes_nothing_and_maps_the_code():
    """A write that fails leaves the metadata as it was; NOT_ENOUGH_REPLICAS becomes
    COORDINATOR_NOT_AVAILABLE and NOT_LEADER_OR_FOLLOWER NOT_COORDINATOR, as in Kafka."""
    env = Env()
    r = init(env)
    env.store.fail = [E.NOT_ENOUGH_REPLICAS, E.NOT_LEADER_OR_FOLLOWER]
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.COORDINATOR_NOT_AVAILABLE
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NOT_COORDINATOR
    meta = env.coord.describe("tx")
    assert (meta.state, meta.partitions, meta.pending) == (T.EMPTY, set(), None)


def test_commit_path_and_replay_by_a_new_coordinator():
    """Add, commit, markers, CompleteCommit; a new coordinator replaying the partition's records
    (the I/O half does this on leadership) has the same metadata, and one that loads a
    PrepareCommit left by a crash sends its markers again and completes it."""
    env = Env()
    r = init(env)
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0), ("u", 3)])) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE
    assert env.coord.describe("tx").state == T.PREPARE_COMMIT
    written = list(env.store.log[0])
    env.markers.deliver()
    meta = env.coord.describe("tx")
    assert (meta.state, meta.partitions) == (T.COMPLETE_COMMIT, set())

    other = env.new_coordinator(TxnConfig(num_partitions=1))
    other.begin_load(0, 8)
    assert other.complete_load(0, 8, env.store.log[0]) == 1
    again = other.describe("tx")
    assert (again.state, again.producer_id, again.producer_epoch) == (T.COMPLETE_COMMIT, r.producer_id, 0)

    crashed = env.new_coordinator(TxnConfig(num_partitions=1))
    crashed.begin_load(0, 9)
    crashed.complete_load(0, 9, written)                   # the log ended at PrepareCommit
    assert env.markers.sent[-1] == ("tx", r.producer_id, 0, True, 9, frozenset({("t", 0), ("u", 3)}))
    env.markers.deliver()
    assert crashed.describe("tx").state == T.COMPLETE_COMMIT


def test_timed_out_transaction_is_aborted_and_idle_ids_expire():
    """An Ongoing transaction older than its timeout is fenced (epoch + 1) and aborted by the
    periodic job; an id idle for transactional.id.expiration.ms is tombstoned and forgotten."""
    env = Env(TxnConfig(num_partitions=1, abort_interval_ms=1000, id_expiration_ms=50_000, expire_interval_ms=10_000))
    env.coord.start()
    r = init(env, timeout=5000)
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NONE
    env.clock.advance(4)
    assert env.markers.sent == []
    env.clock.advance(2)
    assert env.markers.sent == [("tx", r.producer_id, 1, False, 7, frozenset({("t", 0)}))]
    env.markers.deliver()
    assert env.coord.describe("tx").state == T.COMPLETE_ABORT
    env.clock.advance(60)
    assert env.coord.describe("tx") is None
    assert env.store.log[0][-1] == (records.txn_key("tx"), None)
    env.coord.stop()


def test_add_partitions_meeting_the_previous_commit_waits_for_it_to_complete():
    """An AddPartitionsToTxn sent right after EndTxn (markers still being written) is not answered
    CONCURRENT_TRANSACTIONS at once: it waits for the Complete state and then starts the next
    transaction; if the markers take longer than COMPLETION_WAIT_S it gets CONCURRENT_TRANSACTIONS,
    as from Kafka, and the client retries."""
    env = Env()
    r = init(env)
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE
    waiting = env.coord.add_partitions("tx", r.producer_id, 0, [("t", 1)])
    answers: list[Any] = []
    waiting.addBoth(answers.append)
    assert not answers                                # PrepareCommit: markers in flight
    env.clock.advance(COMPLETION_WAIT_S / 2)
    assert not answers
    env.markers.deliver()                             # markers written, then CompleteCommit
    assert answers == [E.NONE]
    meta = env.coord.txns["tx"]
    assert meta.state == T.ONGOING and meta.partitions == frozenset({("t", 1)})
    # one replicated write: CompleteCommit and the next transaction's Ongoing in one batch
    assert env.store.batches[-1] == [T.COMPLETE_COMMIT, T.ONGOING]
    assert (meta.pending, meta.queued) == (None, None)
    assert not env.coord._completion_waiters
    env.clock.advance(COMPLETION_WAIT_S)              # the cancelled timer does not fire again
    assert answers == [E.NONE]
    replayed = env.new_coordinator(TxnConfig(num_partitions=1))
    replayed.begin_load(0, 8)
    replayed.complete_load(0, 8, env.store.log[0])
    again = replayed.describe("tx")
    assert (again.state, again.partitions) == (T.ONGOING, {("t", 1)})


def test_complete_and_next_ongoing_fail_together():
    """The shared batch is written whole or not at all: when it fails, the transaction stays
    PrepareCommit with nothing pending, the waiting AddPartitionsToTxn gets
    CONCURRENT_TRANSACTIONS once its wait is over, and the Complete state is written again alone
    (no one is waiting any more)."""
    env = Env()
    r = init(env)
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE
    waiting = env.coord.add_partitions("tx", r.producer_id, 0, [("t", 1)])
    answers: list[Any] = []
    waiting.addBoth(answers.append)
    env.store.fail = [E.NOT_ENOUGH_REPLICAS]
    env.markers.deliver()
    meta = env.coord.txns["tx"]
    assert (meta.state, meta.pending, meta.queued) == (T.PREPARE_COMMIT, None, None)
    assert not answers
    env.clock.advance(COMPLETION_WAIT_S)
    assert answers == [E.CONCURRENT_TRANSACTIONS]
    assert meta.state == T.COMPLETE_COMMIT and env.store.batches[-1] == [T.COMPLETE_COMMIT]
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 1)])) == E.NONE   # the client's retry


def test_queued_change_follows_the_table():
    """prepare_after checks the move from the pending change's state and needs one pending."""
    meta = TransactionMetadata("tx", 1, state=T.PREPARE_COMMIT)
    with pytest.raises(IllegalStateTransition):
        meta.prepare_after(meta.transition_to(T.COMPLETE_COMMIT), T.PREPARE_ABORT)
    meta.abandon()
    first = meta.transition_to(T.COMPLETE_COMMIT, partitions=frozenset())
    then = meta.prepare_after(first, T.ONGOING, partitions=frozenset({("t", 0)}))
    with pytest.raises(IllegalStateTransition):
        meta.prepare_after(first, T.ONGOING)
    meta.complete(first)
    assert (meta.state, meta.pending) == (T.COMPLETE_COMMIT, then)
    meta.complete(then)
    assert (meta.state, meta.partitions, meta.pending) == (T.ONGOING, {("t", 0)}, None)


def _commit_then_hold_complete(env: Env) -> int:
    """A committed transaction whose markers are written and whose CompleteCommit append is held."""
    r = init(env)
    assert result(env.coord.add_partitions("tx", r.producer_id, 0, [("t", 0)])) == E.NONE
    assert result(env.coord.end_txn("tx", r.producer_id, 0, True)) == E.NONE
    env.store.held = []
    env.markers.deliver()
    assert env.store.batches[-1] == [T.COMPLETE_COMMIT] and len(env.store.held) == 1
    return r.producer_id


def test_add_partitions_while_complete_is_written_appends_ongoing_behind_it():
    """AddPartitionsToTxn arriving while CompleteCommit is being written appends the Ongoing state
    at once, behind it (no wait for CompleteCommit's replication first), and is answered only when
    both writes are in and applied in order, whichever append is acknowledged first."""
    env = Env()
    pid = _commit_then_hold_complete(env)
    answers: list[Any] = []
    env.coord.add_partitions("tx", pid, 0, [("t", 1)]).addBoth(answers.append)
    assert env.store.batches[-1] == [T.ONGOING] and len(env.store.held) == 2
    complete, ongoing = env.store.held
    ongoing.callback(E.NONE)                          # the later append acknowledged first
    assert not answers and env.coord.txns["tx"].state == T.PREPARE_COMMIT
    complete.callback(E.NONE)
    assert answers == [E.NONE]
    meta = env.coord.txns["tx"]
    assert (meta.state, meta.partitions, meta.pending, meta.queued) == (T.ONGOING, {("t", 1)}, None, None)
    env.store.held = None
    assert result(env.coord.end_txn("tx", pid, 0, True)) == E.NONE


def test_ongoing_behind_a_failed_complete_is_dropped_with_it():
    """If the CompleteCommit write fails, the Ongoing state appended behind it is not applied,
    whatever its own append answered: the request gets the Complete write's error, the
    transaction stays PrepareCommit and its Complete state is retried."""
    env = Env()
    pid = _commit_then_hold_complete(env)
    answers: list[Any] = []
    env.coord.add_partitions("tx", pid, 0, [("t", 1)]).addBoth(answers.append)
    complete, ongoing = env.store.held
    complete.callback(E.NOT_ENOUGH_REPLICAS)
    ongoing.callback(E.NONE)
    assert answers == [E.COORDINATOR_NOT_AVAILABLE]
    meta = env.coord.txns["tx"]
    assert (meta.state, meta.pending, meta.queued) == (T.PREPARE_COMMIT, None, None)
    env.store.held = None
    env.clock.advance(0.1)                            # the Complete state is written again
    assert meta.state == T.COMPLETE_COMMIT
    assert result(env.coord.add_partitions("tx", pid, 0, [("t", 1)])) == E.NONE


def test_ongoing_behind_complete_fails_alone():
    """The Ongoing append failing after CompleteCommit succeeded: the transaction is complete,
    the request gets the mapped error and the client's retry starts the transaction."""
    env = Env()
    pid = _commit_then_hold_complete(env)
    answers: list[Any] = []
    env.coord.add_partitions("tx", pid, 0, [("t", 1)]).addBoth(answers.append)
    complete, ongoing = env.store.held
    complete.callback(E.NONE)
    ongoing.callback(E.NOT_LEADER_OR_FOLLOWER)
    assert answers == [E.NOT_COORDINATOR]
    meta = env.coord.txns["tx"]
    assert (meta.state, meta.pending, meta.queued) == (T.COMPLETE_COMMIT, None, None)
