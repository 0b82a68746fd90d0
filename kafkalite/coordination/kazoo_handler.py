"""kazoo's threading handler with a ``select`` that costs one system call.

kazoo 2.11's handler builds and closes a new epoll selector for every ``select`` it makes, and its
connection thread makes several per ZooKeeper reply (wait for the socket, then for each header and
body read): four system calls each, and each one gives up the GIL and waits to take it back while
the reactor thread is busy. After a broker failure, when thousands of watch re-reads and state
writes go through one session, those hand-overs were most of the connection thread's time. A
``poll`` object costs one system call and has no descriptor limit (kazoo switched away from
``select.select`` for descriptors above 1,023, which a broker with thousands of open segments has).
"""
from __future__ import annotations

import select
from typing import Any, Sequence

from kazoo.handlers.threading import SequentialThreadingHandler

_READ = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP | select.POLLNVAL
_WRITE = select.POLLOUT | select.POLLERR | select.POLLHUP | select.POLLNVAL


def _fileno(obj: Any) -> int:
    return obj if isinstance(obj, int) else int(obj.fileno())


def poll_select(rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any],
                timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract (the ready objects of each list; an error or hang-up counts
    as ready, so the caller's read or write reports it) on one ``poll`` call."""
    if timeout is not None and timeout < 0:
        raise ValueError("timeout must be non-negative")
    masks: dict[int, int] = {}
    for obj in rlist:
        fd = _fileno(obj)
        masks[fd] = masks.get(fd, 0) | select.POLLIN | select.POLLPRI
    for obj in wlist:
        fd = _fileno(obj)
        masks[fd] = masks.get(fd, 0) | select.POLLOUT
    poller = select.poll()
    for fd, mask in masks.items():
        poller.register(fd, mask)
    ready = dict(poller.poll(None if timeout is None else timeout * 1000.0))
    return ([o for o in rlist if ready.get(_fileno(o), 0) & _READ],
            [o for o in wlist if ready.get(_fileno(o), 0) & _WRITE],
            [o for o in xlist if ready.get(_fileno(o), 0) & select.POLLPRI])


class PollingHandler(SequentialThreadingHandler):
    """kazoo's sequential threading handler; only ``select`` differs (see the module text)."""

    def select(self, *args: Any, **kwargs: Any) -> Any:
        return poll_select(*args, **kwargs)
