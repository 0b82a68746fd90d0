"""The broker's clock and where its blocking work runs: the two services every part shares.

Kept apart from ``services.py`` (the request context, which names every service by type) and free
of project imports, so that the replica manager and the coordinators, which take a clock and a
runner, do not import the module that names them back (the type-only import circle that
``services.py`` once sat in).

:class:`Clock` is the broker's one clock: the injected reactor's time (the wall clock in
production, ``task.Clock`` in the in-process tests), so timers and timestamps agree and a test
drives the whole broker by advancing one clock. :class:`BlockingRunner` is where blocking work
(fsync, file deletion, reading a whole partition) goes so it never stalls the reactor; tests run
it inline or stepped (``tests/support/inprocess.py``'s ``SteppedRunner``).
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

from twisted.internet import defer, threads
from twisted.internet.interfaces import IReactorTime

T = TypeVar("T")


class Clock:
    """Milliseconds from the reactor whose timers the broker uses."""

    def __init__(self, reactor: IReactorTime) -> None:
        self.reactor = reactor

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def seconds(self) -> float:
        """Fractional seconds (request latencies need better than whole milliseconds)."""
        return float(self.reactor.seconds())


class BlockingRunner(Protocol):
    """Runs a blocking function away from the reactor thread; the Deferred fires on the reactor."""

    def run(self, fn: Callable[..., T], *args: Any) -> defer.Deferred:
        ...


class ThreadPoolRunner:
    """Production: the reactor's thread pool (``deferToThreadPool``)."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    def run(self, fn: Callable[..., T], *args: Any) -> defer.Deferred:
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)


class InlineRunner:
    """Tests on a memory reactor: run at once on the calling thread (there is no other)."""

    def run(self, fn: Callable[..., T], *args: Any) -> defer.Deferred:
        return defer.maybeDeferred(fn, *args)
