"""A znode data watch that re-reads without blocking kazoo's threads or starting new ones.

kazoo's ``DataWatch`` recipe does two things that do not scale to tens of thousands of watched
partition-state znodes:

- it re-reads its node with a blocking ``get`` inside the watch callback, and kazoo runs every
  callback of a session on one thread: after a broker failure, the thousands of znodes the
  controller rewrote reached each broker one ZooKeeper round trip at a time (about 150-250 a
  second here);
- after every reconnection it starts a thread per watch to re-read: 30,000 partitions made
  21,856 threads in one broker (then "can't start new thread") after its session expired.

This watch issues every read with ``get_async`` and delivers from the completion, so the re-reads
of every changed node are in flight together, and a reconnection only queues them. All
deliveries come from kazoo's one completion thread in the order of the replies, which is the
order of the requests on the session's one connection, and a later request sees the node no
older than an earlier one: a delivery never goes back in time.

Same contract as kazoo's ``DataWatch`` (the parts kafkalite uses): ``func(data, stat)`` once
before the constructor returns and after every change, ``(None, None)`` while the node is absent
(an exists watch waits for its creation), no call when a re-read finds the version already
delivered, a re-read after every reconnection (the watch may have been lost with the connection
or the session), and a ``False`` return ends it. ``func`` runs on kazoo's completion thread and
must hand over to the reactor.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, NoNodeError
from kazoo.protocol.states import KeeperState

log = logging.getLogger(__name__)


class PipelinedDataWatch:
    def __init__(self, client: KazooClient, path: str, func: Callable[[bytes | None, Any], bool | None]) -> None:
        """Blocks until the first delivery (the caller is a pool thread, never the reactor)."""
        self._client = client
        self._path = path
        self._func = func
        self._stopped = False
        self._first = threading.Event()
        self._version: int | None = None      # mzxid last delivered; None: absent
        client.add_listener(self._session_changed)
        self._read()
        # a connection loss before the first reply: the re-read after reconnecting delivers it,
        # as kazoo's DataWatch retries its first read until it succeeds or the client stops
        while not self._first.wait(0.5):
            if client.client_state == KeeperState.CLOSED:   # stop() ran (kazoo's requests refuse then)
                self._stopped = True
                client.remove_listener(self._session_changed)
                return

    # -- reading -------------------------------------------------------------------------------------
    def _read(self) -> None:
        if self._stopped:
            return
        try:
            self._client.get_async(self._path, self._watcher).rawlink(self._got)
        except ConnectionClosedError:
            self._first.set()                  # the client is closing: no more deliveries

    def _watcher(self, _event: Any) -> None:   # kazoo's callback thread
        self._read()

    def _got(self, result: Any) -> None:       # kazoo's completion thread
        try:
            data, stat = result.get_nowait()
        except NoNodeError:
            try:
                self._client.exists_async(self._path, self._watcher).rawlink(self._got_exists)
            except ConnectionClosedError:
                self._first.set()
            return
        except Exception as exc:  # noqa: BLE001 - connection loss, session expiry, closing
            log.debug("re-read of %s failed: %s", self._path, exc)
            return                             # the re-read on the next CONNECTED state covers it
        self._deliver(data, stat)

    def _got_exists(self, result: Any) -> None:
        try:
            stat = result.get_nowait()
        except Exception as exc:  # noqa: BLE001 - as in _got
            log.debug("exists of %s failed: %s", self._path, exc)
            return
        if stat is not None:
            self._read()                       # created meanwhile
        else:
            self._deliver(None, None)

    def _session_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            # not on the connection thread that tells us (kazoo forbids requests there)
            self._client.handler.callback_queue.put(self._read)

    # -- delivering (kazoo's completion thread only) -------------------------------------------------
    def _deliver(self, data: bytes | None, stat: Any) -> None:
        version = stat.mzxid if stat is not None else None
        if self._stopped or (self._first.is_set() and version == self._version):
            return
        self._version = version
        try:
            result = self._func(data, stat)
        except Exception:  # noqa: BLE001 - a bad callback must not end the watch
            log.exception("data watch callback for %s failed", self._path)
            result = None
        finally:
            self._first.set()
        if result is False:
            self._stopped = True
            self._client.remove_listener(self._session_changed)
