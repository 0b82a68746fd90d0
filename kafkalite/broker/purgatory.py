"""Requests that wait: Fetch long-polls (max_wait_ms / min_bytes) and acks=all produces.

An operation watches one or more keys (topic-partitions). Whoever changes a partition (an append,
a high-watermark move) calls :meth:`Purgatory.check` for its key; each watcher re-evaluates its
condition then and only then, never by polling. A timer completes the operation at its deadline.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable

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
    """Completes its Deferred with ``on_complete(timed_out)`` once ``try_ready()`` is true or time is up."""

    def __init__(self, try_ready: Callable[[], bool], on_complete: Callable[[bool], Any],
                 try_ready_key: Callable[[Hashable], bool] | None = None) -> None:
        self.try_ready = try_ready
        #: the same condition re-evaluated for the one key that changed: the operation was not
        #: ready before, so only that key's part can have made it ready
        self.try_ready_key = try_ready_key
        self.on_complete = on_complete
        self.deferred: defer.Deferred = defer.Deferred()
        self.done = False
        self.timer: Any = None
        self.keys: tuple[Hashable, ...] = ()

    def complete(self, timed_out: bool) -> None:
        if self.done:
            return
        self.done = True
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        try:
            result = self.on_complete(timed_out)
        except Exception:
            self.deferred.errback()
            return
        self.deferred.callback(result)


class Purgatory:
    def __init__(self, clock: IReactorTime) -> None:
        self.clock = clock
        self.watchers: dict[Hashable, set[DelayedOperation]] = defaultdict(set)
        #: checks so far per key, and in all: a key whose count has not moved has not changed
        #: (every append, high-watermark, log-start and role change checks its key), which lets
        #: a follower's fetch session skip its idle partitions (handlers/fetch.py)
        self.events: dict[Hashable, int] = {}
        self.total_events = 0

    def watch(self, keys: Iterable[Hashable], timeout_ms: int, try_ready: Callable[[], bool],
              on_complete: Callable[[bool], Any],
              try_ready_key: Callable[[Hashable], bool] | None = None) -> defer.Deferred:
        """``try_ready_key(key)``: the condition for one changed key, used by :meth:`check`
        (a follower's Fetch watches every partition of its session, mostly idle ones; checking
        them all on each append to one of them was a large part of a leader's CPU)."""
        op = DelayedOperation(try_ready, on_complete, try_ready_key)
        op.keys = tuple(keys)
        for key in op.keys:
            self.watchers[key].add(op)
        op.deferred.addBoth(self._forget, op)
        op.timer = self.clock.callLater(max(timeout_ms, 0) / 1000.0, op.complete, True)
        # Kafka's tryCompleteElseWatch: try once more now that the watches are in place. The
        # caller's own check ran before them, and whatever happened in between went unseen: a
        # follower Fetch records its offsets partition by partition while it reads; the high
        # watermark move that causes completes an acks=all Produce whose connection at once
        # dispatches the next Produce, which appends to a partition this Fetch has already read
        # as empty. Without this second try that Fetch slept replica.fetch.wait.max.ms (acks=all
        # latency went in 0.5-1 s steps whenever a leader led two or more followed partitions).
        if op.try_ready():
            op.complete(False)
        return op.deferred

    def check(self, key: Hashable) -> None:
        self.events[key] = self.events.get(key, 0) + 1
        self.total_events += 1
        ops = self.watchers.get(key)
        if not ops:
            return
        for op in list(ops):
            if op.done:
                continue
            if op.try_ready_key(key) if op.try_ready_key is not None else op.try_ready():
                op.complete(False)

    def complete_all(self) -> None:
        """Answer everything now (shutdown)."""
        for ops in list(self.watchers.values()):
            for op in list(ops):
                op.complete(True)

    def _forget(self, result: Any, op: DelayedOperation) -> Any:
        # a key's set stays when it empties: a follower's fetch watches every partition of its
        # session each round, and building the sets anew was most of watch()'s cost
        # (retire() removes a partition's for good)
        watchers = self.watchers
        for key in op.keys:
            ops = watchers.get(key)
            if ops is not None:
                ops.discard(op)
        return result

    def retire(self, key: Hashable) -> None:
        """The partition is gone from this broker: its waiters answer (they find it gone), then
        its (now empty) watcher set is forgotten."""
        self.check(key)
        ops = self.watchers.get(key)
        if ops is not None and not ops:
            del self.watchers[key]

    def __len__(self) -> int:
        return len({op for ops in self.watchers.values() for op in ops})
