"""Marshalling between kazoo's threads and the Twisted reactor thread.

kazoo has no Twisted handler: its completions and watch callbacks run in kazoo threads.
Everything here turns them into Deferreds/calls that fire in the reactor thread via
``callFromThread`` (the only thread-safe entry into a reactor), so the rest of kafkalite
never sees a kazoo thread.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, TypeVar

from twisted.internet import defer, threads
from twisted.python import failure

from kafkalite.coordination.kazoo_errors import translate

log = logging.getLogger(__name__)
T = TypeVar("T")


def default_reactor() -> Any:
    from twisted.internet import reactor
    return reactor


def as_deferred(async_result: Any, reactor: Any = None, path: str | None = None) -> defer.Deferred:
    """kazoo ``IAsyncResult`` -> Deferred firing in the reactor thread (errors translated)."""
    reactor = reactor or default_reactor()
    d: defer.Deferred = defer.Deferred()

    def done(result: Any) -> None:  # a kazoo worker thread (or the caller, if already set)
        try:
            value = result.get_nowait()
        except BaseException as exc:  # noqa: BLE001 - every outcome must reach the Deferred
            reactor.callFromThread(d.errback, failure.Failure(translate(exc, path)))
        else:
            reactor.callFromThread(d.callback, value)

    async_result.rawlink(done)
    return d


def in_thread(reactor: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> defer.Deferred:
    """Run a *blocking* kazoo call in the reactor's thread pool; errors translated."""
    d = threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn, *args, **kwargs)

    def fail(f: failure.Failure) -> failure.Failure:
        return failure.Failure(translate(f.value))
    return d.addErrback(fail)


def stop_zk(client: Any, limit: float = 2.0, reactor: Any = None) -> defer.Deferred:
    """``client.stop(); client.close()`` in a daemon thread, bounded by ``limit`` seconds.

    Fires True when the stop finished, False when it was still blocked after ``limit``
    (ZooKeeper paused/partitioned: kazoo's stop then takes ~2/3 of the session timeout).
    Not ``deferToThread``: the reactor's pool is joined at shutdown, which would hang.
    """
    reactor = reactor or default_reactor()
    d: defer.Deferred = defer.Deferred()

    def fire(value: bool) -> None:
        if not d.called:
            d.callback(value)

    def run() -> None:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - stopping must not raise into a dead thread
            log.warning("error while stopping ZooKeeper client", exc_info=True)
        finally:
            reactor.callFromThread(fire, True)

    threading.Thread(target=run, daemon=True, name="kazoo-stop").start()
    timer = reactor.callLater(limit, fire, False)

    def cancel_timer(result: bool) -> bool:
        if timer.active():
            timer.cancel()
        return result
    return d.addBoth(cancel_timer)


__all__ = ["as_deferred", "in_thread", "stop_zk", "default_reactor"]
