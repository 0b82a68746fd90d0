"""Requests that wait (Kafka's ``DelayedOperationPurgatory``): Fetch long-polls (max_wait_ms /
min_bytes), acks=all produces, DeleteRecords, a follower's OffsetForLeaderEpoch, metadata waits.

An operation watches one or more keys (topic-partitions). Whoever changes a partition (an append,
a high-watermark move) calls :meth:`Purgatory.check` for its key; each watcher re-evaluates its
condition then and only then, never by polling. A timer completes the operation at its deadline.
"""
from __future__ import annotations

from collections import defaultdict, deque
from itertools import repeat
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Hashable, Iterable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime


@dataclass(frozen=True)
class FollowerFetches:
    """The key every parked Fetch of follower ``broker_id`` also watches. When this broker becomes
    leader of a partition, a check on this key answers its followers' long polls at once, so
    their next Fetch (and OffsetForLeaderEpoch) can name the partition instead of waiting out
    ``replica.fetch.wait.max.ms`` for a request that does not hold it; acks=all on that partition
    waits for exactly that first fetch."""
    broker_id: int


class DelayedOperation:
    """A request that waits (Kafka's ``DelayedOperation``): the purgatory completes its Deferred
    with :meth:`on_complete` once :meth:`try_complete` says it is ready, or at its deadline.

    Subclasses are the named waits of the replica layer (``DelayedFetch``, ``DelayedProduce``,
    ``DelayedDeleteRecords``, ``DelayedLeaderEpochs``). ``try_complete`` only answers "ready?";
    completing (and so answering exactly once) is the purgatory's, as Kafka's ``forceComplete``.
    """

    def __init__(self) -> None:
        self.deferred: defer.Deferred = defer.Deferred()
        self.done = False
        self.timer: Any = None
        self.keys: tuple[Hashable, ...] = ()
        #: the watcher sets of ``keys``, in their order (what completing leaves)
        self.watched: list[set[DelayedOperation]] = []
        #: the purgatory watching it (None: never watched), which forgets it as it completes
        self.watched_by: Purgatory | None = None

    def try_complete(self) -> bool:
        """Is the operation ready to answer now (Kafka's ``tryComplete``)?"""
        raise NotImplementedError

    def try_complete_key(self, key: Hashable) -> bool:
        """:meth:`try_complete` when only ``key`` changed: the operation was not ready before, so
        only that key's part can have made it ready. Override where checking everything is dear
        (a follower's Fetch watches every partition of its session, mostly idle ones)."""
        return self.try_complete()

    def try_complete_keys(self, keys: Iterable[Hashable]) -> bool:
        """:meth:`try_complete_key` when several of its keys changed at once
        (:meth:`Purgatory.checks_deferred`): every one is looked at before the answer, so an
        answer that reads only the changed partitions (``DelayedFetch``) reads them all."""
        ready = False
        for key in keys:
            ready = self.try_complete_key(key) or ready
        return ready

    def on_complete(self, timed_out: bool) -> Any:
        """The answer (Kafka's ``onComplete``; ``timed_out``: its ``onExpiration`` came first)."""
        raise NotImplementedError

    def complete(self, timed_out: bool) -> None:
        """Answer once: stop the deadline, leave the watches, then fire the Deferred. Leaving
        the watches here, not as the Deferred's first callback, spares every operation a
        callback of its own (three per acks=all cycle); nothing reads the watches in between
        (a done operation is skipped by every check anyway)."""
        if self.done:
            return
        self.done = True
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        if self.watched_by is not None:
            self.watched_by._forget(self)
        try:
            result = self.on_complete(timed_out)
        except Exception:
            self.deferred.errback()
            return
        self.deferred.callback(result)


class _FunctionOperation(DelayedOperation):
    """A one-off wait written as functions (:meth:`Purgatory.watch`)."""

    def __init__(self, try_ready: Callable[[], bool], on_complete: Callable[[bool], Any],
                 try_ready_key: Callable[[Hashable], bool] | None = None) -> None:
        super().__init__()
        self._try_ready = try_ready
        self._try_ready_key = try_ready_key
        self._on_complete = on_complete

    def try_complete(self) -> bool:
        return self._try_ready()

    def try_complete_key(self, key: Hashable) -> bool:
        return self._try_ready_key(key) if self._try_ready_key is not None else self._try_ready()

    def on_complete(self, timed_out: bool) -> Any:
        return self._on_complete(timed_out)


#: how many of the latest checks :meth:`Purgatory.changed_since` can name (at least)
_RECENT_KEPT = 256


class _DeferredChecks:
    """:meth:`Purgatory.checks_deferred`'s block."""

    __slots__ = ("purgatory",)

    def __init__(self, purgatory: "Purgatory") -> None:
        self.purgatory = purgatory

    def __enter__(self) -> None:
        self.purgatory._begin_deferring()

    def __exit__(self, *exc: object) -> None:
        self.purgatory._end_deferring()


class Purgatory:
    def __init__(self, clock: IReactorTime) -> None:
        self.clock = clock
        self.watchers: dict[Hashable, set[DelayedOperation]] = defaultdict(set)
        #: checks so far per key, and in all: a key whose count has not moved has not changed
        #: (every append, high-watermark, log-start and role change checks its key), which lets
        #: a follower's fetch session skip its idle partitions (broker/delayed_fetch.py)
        self.events: dict[Hashable, int] = {}
        self.total_events = 0
        #: the keys of the latest checks, oldest first: ``_recent[i]`` is check number
        #: ``_recent_base + i`` (:meth:`changed_since`); trimmed to the last few hundred
        self._recent: list[Hashable] = []
        self._recent_base = 0
        #: inside :meth:`checks_deferred`: the keys checked so far, in order (None: check at once)
        self._deferred: dict[Hashable, None] | None = None
        self._depth = 0                 #: nested :meth:`checks_deferred` blocks now open
        self._deferring = _DeferredChecks(self)

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable],
                                timeout_ms: int) -> defer.Deferred:
        """Kafka's ``tryCompleteElseWatch``: watch ``keys`` for ``op``, arm its deadline, and try
        it once more now that the watches are in place; returns its Deferred."""
        op.keys = tuple(keys)
        # the sets' adds here and discards in _forget run in C (map drained by a zero-length
        # deque): a follower's Fetch watches every partition of its session, once per round trip;
        # for a few keys (an acks=all Produce's) the iterators cost more than a loop
        watched = op.watched = list(map(self.watchers.__getitem__, op.keys))
        if len(watched) > 4:
            deque(map(set.add, watched, repeat(op)), 0)
        else:
            for ops in watched:
                ops.add(op)
        op.watched_by = self
        op.timer = self.clock.callLater(max(timeout_ms, 0) / 1000.0, op.complete, True)
        # The caller's own check ran before the watches, and whatever happened in between went
        # unseen: a follower Fetch records its offsets partition by partition while it reads; the
        # high watermark move that causes completes an acks=all Produce whose connection at once
        # dispatches the next Produce, which appends to a partition this Fetch has already read
        # as empty. Without this second try that Fetch slept replica.fetch.wait.max.ms (acks=all
        # latency went in 0.5-1 s steps whenever a leader led two or more followed partitions).
        if op.try_complete():
            op.complete(False)
        return op.deferred

    def watch(self, keys: Iterable[Hashable], timeout_ms: int, try_ready: Callable[[], bool],
              on_complete: Callable[[bool], Any],
              try_ready_key: Callable[[Hashable], bool] | None = None) -> defer.Deferred:
        """:meth:`try_complete_else_watch` for a one-off wait written as functions (a service's
        "until the metadata shows it" wait); the replica layer's waits are named classes."""
        return self.try_complete_else_watch(_FunctionOperation(try_ready, on_complete, try_ready_key),
                                            keys, timeout_ms)

    def checks_deferred(self) -> ContextManager[None]:
        """Within this block, :meth:`check` counts its key's event at once but wakes its watchers
        only at the end, once per key and each operation once for all its keys (Kafka 2.8's
        ``ActionQueue``, run after a request's appends: a follower's parked Fetch is answered
        with every partition one Produce appended to, not at the first with the others left for
        its next round trip). Nested blocks join the outermost. The block is one object made
        with the purgatory (every Produce enters it; a generator-based context manager cost a
        generator and its frames per request)."""
        return self._deferring

    def _begin_deferring(self) -> None:
        self._depth += 1
        if self._depth == 1:
            self._deferred = {}

    def _end_deferring(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            keys, self._deferred = self._deferred, None
            if keys:
                self._wake(keys)

    def check(self, key: Hashable) -> None:
        self.events[key] = self.events.get(key, 0) + 1
        self.total_events += 1
        recent = self._recent
        recent.append(key)
        if len(recent) > _RECENT_KEPT * 2:
            del recent[:_RECENT_KEPT]
            self._recent_base += _RECENT_KEPT
        if self._deferred is not None:
            self._deferred[key] = None
            return
        ops = self.watchers.get(key)
        if not ops:
            return
        for op in list(ops):
            if op.done:
                continue
            if op.try_complete_key(key):
                op.complete(False)

    def changed_since(self, total_events: int) -> list[Hashable] | None:
        """The keys checked since :attr:`total_events` was ``total_events``, in order, repeats
        included; None when those checks are no longer kept (ask :attr:`events` instead). A
        parked follower Fetch asks which of its hundreds of idle partitions changed on its own
        request's stack: usually one or two keys, where comparing every idle partition's count
        cost a pass over the whole session."""
        start = total_events - self._recent_base
        if start < 0:
            return None
        return self._recent[start:]

    def _wake(self, keys: Iterable[Hashable]) -> None:
        """The deferred checks of ``keys``: each waiting operation tries once with all of its keys
        among them, in the order the keys changed."""
        by_op: dict[DelayedOperation, list[Hashable]] = {}
        for key in keys:
            for op in self.watchers.get(key, ()):
                by_op.setdefault(op, []).append(key)
        for op, changed in list(by_op.items()):
            if not op.done and op.try_complete_keys(changed):
                op.complete(False)

    def complete_all(self) -> None:
        """Answer everything now (shutdown)."""
        for ops in list(self.watchers.values()):
            for op in list(ops):
                op.complete(True)

    def _forget(self, op: DelayedOperation) -> None:
        """``op`` completed (:meth:`DelayedOperation.complete`): it leaves its keys' watcher sets."""
        # a key's set stays when it empties: a follower's fetch watches every partition of its
        # session each round, and building the sets anew was most of watch()'s cost
        # (retire() removes a partition's for good, and only once it is empty: the sets this
        # operation was added to are still the watchers')
        watched = op.watched
        if len(watched) > 4:
            deque(map(set.discard, watched, repeat(op)), 0)
        else:
            for ops in watched:
                ops.discard(op)

    def retire(self, key: Hashable) -> None:
        """The partition is gone from this broker: its waiters answer (they find it gone), then
        its (now empty) watcher set is forgotten."""
        self.check(key)
        ops = self.watchers.get(key)
        if ops is not None and not ops:
            del self.watchers[key]

    def __len__(self) -> int:
        return len({op for ops in self.watchers.values() for op in ops})
