"""The broker's periodic tasks and its fsync-bound work off the reactor (Kafka's ``KafkaScheduler``).

Periodic tasks (retention, producer expiry, ISR shrinking, ...) are ``LoopingCall`` s on the
broker's reactor; fsync-bound work (checkpoint files, log flushes, cleaner passes) runs in the
blocking runner, one run of each kind at a time, and none starts once the broker is stopping.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer, task

from kafkalite.broker.runtime import BlockingRunner

log = logging.getLogger(__name__)


class BrokerScheduler:
    """``stopping`` says whether the broker's shutdown has begun (no new work off the reactor then)."""

    def __init__(self, reactor: Any, blocking: BlockingRunner, stopping: Callable[[], bool]) -> None:
        self.reactor = reactor
        self.blocking = blocking
        self.stopping = stopping
        self.loops: list[task.LoopingCall] = []
        #: kind -> the run of that kind still going in its thread
        self.background: dict[str, defer.Deferred] = {}

    def every(self, ms: int, fn: Callable[[], Any]) -> task.LoopingCall:
        """Run ``fn`` every ``ms`` on the reactor (first after ``ms``); it stops with :meth:`stop`."""
        loop = self.loop(ms, fn)
        self.loops.append(loop)
        return loop

    def loop(self, ms: int, fn: Callable[[], Any]) -> task.LoopingCall:
        """A started ``LoopingCall`` of ``fn`` every ``ms`` that its owner stops (not :meth:`stop`)."""
        loop = task.LoopingCall(fn)
        loop.clock = self.reactor
        loop.start(ms / 1000.0, now=False).addErrback(lambda f: log.error("periodic task failed: %s", f.value))
        return loop

    def off_reactor(self, name: str, work: Callable[[], Any]) -> defer.Deferred | None:
        """Run fsync-bound work (checkpoint files, log flushes) in a worker thread: storage allows
        flush() and checkpoint writes beside the reactor thread's appends. One run of each kind at
        a time; the LoopingCall waits for the returned Deferred."""
        if name in self.background or self.stopping():
            return None
        d = self.blocking.run(work)
        d.addErrback(lambda f: log.error("%s failed: %s", name, f.value))
        # (returning the popped Deferred itself would chain d onto itself: the LoopingCall would
        # wait for ever and the job would run once)
        d.addBoth(lambda _: self.background.pop(name, None) and None)
        self.background[name] = d
        return d

    def stop(self) -> None:
        """Stop the periodic tasks (runs in threads go on: :meth:`wait` for them)."""
        for loop in self.loops:
            if loop.running:
                loop.stop()

    @defer.inlineCallbacks
    def wait(self) -> Any:
        """Until every run still going in its thread (a checkpoint, a flush) has finished."""
        for pending in list(self.background.values()):
            yield pending
