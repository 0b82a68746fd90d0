"""The data of one transactional id: its state machine and metadata (no I/O).

States and their ids are Kafka's (``TransactionState.scala``; the id is what
``TransactionLogValue.TransactionStatus`` stores). :data:`TRANSITIONS` is the only place that
says which move is legal, and :meth:`TransactionMetadata.prepare` refuses any other, so a
coordinator bug shows up as an error instead of a transaction in a state Kafka never reaches.

A change is made in two steps, as Kafka does: :meth:`prepare` computes the next
:class:`TxnTransition` and marks it pending (no second change may start meanwhile:
CONCURRENT_TRANSACTIONS), the coordinator writes it to ``__transaction_state``, and
:meth:`complete` applies it once the write is replicated (or :meth:`abandon` on failure).
:meth:`prepare_after` queues a second change behind the pending one when both go into the same
write (one batch, so both or neither are in the log): the Complete state of a transaction and the
Ongoing state of the next one.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field

from kafkalite.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


T = TxnState
#: state -> states it may move to (Kafka lists the inverse, ``validPreviousStates``).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    T.EMPTY: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.ONGOING: frozenset({T.ONGOING, T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE}),
    T.PREPARE_COMMIT: frozenset({T.COMPLETE_COMMIT}),
    T.PREPARE_ABORT: frozenset({T.COMPLETE_ABORT}),
    T.COMPLETE_COMMIT: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.COMPLETE_ABORT: frozenset({T.EMPTY, T.ONGOING, T.DEAD}),
    T.DEAD: frozenset(),
    T.PREPARE_EPOCH_FENCE: frozenset({T.PREPARE_ABORT}),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(frozen=True)
class TxnTransition:
    """The metadata a pending change will leave (Kafka's ``TxnTransitMetadata``): what is written
    to ``__transaction_state``."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TxnState = T.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending: TxnTransition | None = None
    #: a change written in the same batch right after ``pending`` (see :meth:`prepare_after`)
    queued: TxnTransition | None = None

    def transition_to(self, new_state: TxnState, **changes: object) -> TxnTransition:
        """The transition to ``new_state`` with ``changes`` (fields of :class:`TxnTransition`),
        marked pending. Raises IllegalStateTransition if the table forbids it or another change
        is pending."""
        if self.pending is not None:
            raise IllegalStateTransition(f"{self.transactional_id}: a change to {self.pending.state.display} is pending")
        if new_state not in TRANSITIONS[self.state]:
            raise IllegalStateTransition(
                f"{self.transactional_id}: {self.state.display} -> {new_state.display} is not a valid transition")
        values = {"producer_id": self.producer_id, "last_producer_id": self.last_producer_id,
                  "producer_epoch": self.producer_epoch, "last_producer_epoch": self.last_producer_epoch,
                  "txn_timeout_ms": self.txn_timeout_ms, "state": new_state,
                  "partitions": frozenset(self.partitions), "txn_start_timestamp": self.txn_start_timestamp,
                  "txn_last_update_timestamp": self.txn_last_update_timestamp}
        values.update(changes)
        transition = TxnTransition(**values)  # type: ignore[arg-type]
        self.pending = transition
        return transition

    def prepare_after(self, first: TxnTransition, new_state: TxnState, **changes: object) -> TxnTransition:
        """The transition to ``new_state`` from the pending ``first`` (the table checked against
        ``first``'s state), queued behind it: the caller writes both in one batch; completing
        ``first`` makes this one pending, abandoning drops both."""
        if self.pending is not first or self.queued is not None:
            raise IllegalStateTransition(f"{self.transactional_id}: can only queue behind the one pending change")
        if new_state not in TRANSITIONS[first.state]:
            raise IllegalStateTransition(
                f"{self.transactional_id}: {first.state.display} -> {new_state.display} is not a valid transition")
        self.queued = dataclasses.replace(first, state=new_state, **changes)  # type: ignore[arg-type]
        return self.queued

    def complete(self, transition: TxnTransition) -> None:
        """The pending change is written: apply it (a queued change becomes pending)."""
        if self.pending is not transition:
            raise IllegalStateTransition(f"{self.transactional_id}: completing a change that is not pending")
        self.pending, self.queued = self.queued, None
        self.apply(transition)

    def apply(self, t: TxnTransition) -> None:
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.txn_timeout_ms, self.state = t.txn_timeout_ms, t.state
        self.partitions = set(t.partitions)
        self.txn_start_timestamp, self.txn_last_update_timestamp = t.txn_start_timestamp, t.txn_last_update_timestamp

    def abandon(self) -> None:
        """The write failed: nothing changes."""
        self.pending = self.queued = None

    @property
    def epoch_exhausted(self) -> bool:
        """Kafka bumps to a new producer id when the epoch would reach Short.MaxValue - 1."""
        return self.producer_epoch >= MAX_EPOCH - 1
