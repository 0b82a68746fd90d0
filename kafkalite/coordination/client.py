"""``ZooKeeperClient``: one kazoo session driven from a Twisted reactor.

Threading contract (see local-infrastructure.md §2): every public method must be called in
the reactor thread and returns a Deferred that fires in the reactor thread. Requests use
kazoo's ``*_async`` calls (non-blocking); the few blocking kazoo calls (``start``, watch
construction, recursive delete) run in the reactor's thread pool; ``stop`` runs in a daemon
thread with a time limit. Watch callbacks and state changes are re-entered into the reactor
with ``callFromThread`` and never call kazoo from kazoo's own threads.

Requests that fail with a connection loss (session still alive) are re-sent once the client
is connected again, as Kafka's ``ZooKeeperClient`` does; a session expiry is not retried.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import RolledBackError, RuntimeInconsistency
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from twisted.internet import defer
from twisted.python import failure

from kafkalite.coordination import reactor_bridge
from kafkalite.coordination.connect_string import parse_connect_string
from kafkalite.coordination.errors import (BadVersionError, ClientClosedError,
                                           ConnectionLossError, NodeExistsError, NoNodeError,
                                           TransactionFailedError, translate)
from kafkalite.coordination.ops import (BadVersion, CheckOp, ConditionalSetResult, CreateOp,
                                        DeleteOp, Op, SetDataOp, Updated)

log = logging.getLogger(__name__)
logging.getLogger("kazoo").setLevel(logging.WARNING)

#: Reconnect quickly after an outage (kazoo's default back-off grows to an hour).
CONNECTION_RETRY = dict(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)


class SessionState(enum.Enum):
    """What state listeners are told, once per change."""

    CONNECTED = "connected"          # first connect, or reconnect within the same session
    SUSPENDED = "suspended"          # connection lost; session (and ephemerals) may still live
    LOST = "lost"                    # session expired: our ephemerals and watches are gone
    NEW_SESSION = "new_session"      # connected again with a different session after LOST


class Watch:
    """Handle of a child/data watch; ``cancel()`` stops deliveries (kazoo drops it on next fire)."""

    def __init__(self, path: str, callback: Callable[..., None]) -> None:
        self.path = path
        self._callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def _deliver(self, *args: Any) -> None:  # reactor thread
        if self.cancelled:
            return
        try:
            self._callback(*args)
        except Exception:  # noqa: BLE001 - a bad listener must not kill later deliveries
            log.exception("watch callback for %s failed", self.path)


class ZooKeeperClient:
    """A kazoo session with a Deferred API for the reactor thread."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connect_timeout_ms: int | None = None, reactor: Any = None) -> None:
        cs = parse_connect_string(connect)
        self.hosts = cs.hosts
        self.chroot = cs.chroot
        self.session_timeout_ms = session_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms or session_timeout_ms
        self._reactor = reactor or reactor_bridge.default_reactor()
        self._zk = KazooClient(hosts=str(cs), timeout=session_timeout_ms / 1000.0,
                               connection_retry=dict(CONNECTION_RETRY))
        self._zk.add_listener(self._kazoo_state_listener)
        self._listeners: list[Callable[[SessionState], None]] = []
        self._last_state: SessionState | None = None
        self._session_id: int | None = None
        self._connected_waiters: list[defer.Deferred] = []
        self._stopping = False

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def reactor(self) -> Any:
        return self._reactor

    @property
    def session_id(self) -> int | None:
        """Id of the current session (owner id of our ephemerals), None if never connected."""
        return self._session_id

    @property
    def kazoo_client_id(self) -> tuple[int, bytes] | None:
        """(session id, password): only for tests that force an expiry with a twin client."""
        return self._zk.client_id

    @property
    def state(self) -> SessionState | None:
        return self._last_state

    def start(self) -> defer.Deferred:
        """Connect (creating the chroot first if missing, as Kafka does). Fires None."""
        self._stopping = False

        def blocking_start() -> int:
            if self.chroot:
                self._create_chroot()
            self._zk.start(timeout=self.connect_timeout_ms / 1000.0)
            return self._zk.client_id[0]

        def started(session_id: int) -> None:
            if self._session_id is None:
                self._session_id = session_id
            log.info("ZooKeeper session 0x%x established with %s%s", session_id, self.hosts,
                     self.chroot or "")
        return reactor_bridge.in_thread(self._reactor, blocking_start).addCallback(started)

    def _create_chroot(self) -> None:  # pool thread
        bootstrap = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000.0,
                                connection_retry=dict(CONNECTION_RETRY))
        try:
            bootstrap.start(timeout=self.connect_timeout_ms / 1000.0)
            bootstrap.ensure_path(self.chroot)
        finally:
            bootstrap.stop()
            bootstrap.close()

    def stop(self, limit: float = 2.0) -> defer.Deferred:
        """Close the session (ephemerals vanish at once); fires False if it took > ``limit`` s."""
        self._stopping = True
        waiters, self._connected_waiters = self._connected_waiters, []
        for w in waiters:
            w.errback(ClientClosedError("client stopped"))
        return reactor_bridge.stop_zk(self._zk, limit, self._reactor)

    # ---- session state ---------------------------------------------------------------------

    def add_state_listener(self, callback: Callable[[SessionState], None]) -> None:
        """``callback(SessionState)`` in the reactor thread, once per change."""
        self._listeners.append(callback)

    def _kazoo_state_listener(self, state: str) -> None:
        # kazoo's connection thread: no kazoo calls here (they would deadlock the client)
        client_id = self._zk.client_id
        session = client_id[0] if client_id else None
        self._reactor.callFromThread(self._on_state, state, session)

    def _on_state(self, kazoo_state: str, session: int | None) -> None:  # reactor thread
        if kazoo_state == KazooState.CONNECTED:
            if self._session_id is not None and session is not None and session != self._session_id:
                new = SessionState.NEW_SESSION
            else:
                new = SessionState.CONNECTED
            if session is not None:
                self._session_id = session
        elif kazoo_state == KazooState.SUSPENDED:
            new = SessionState.SUSPENDED
        else:
            new = SessionState.LOST
        if new == self._last_state:
            return
        self._last_state = new
        if self._stopping:
            log.debug("ZooKeeper state %s while stopping", new.value)
            return
        if new in (SessionState.CONNECTED, SessionState.NEW_SESSION):
            log.info("ZooKeeper %s (session 0x%x)", new.value, self._session_id or 0)
            waiters, self._connected_waiters = self._connected_waiters, []
            for w in waiters:
                w.callback(None)
        else:
            log.warning("ZooKeeper %s", new.value)
        for callback in list(self._listeners):
            try:
                callback(new)
            except Exception:  # noqa: BLE001
                log.exception("ZooKeeper state listener failed")

    def _when_connected(self) -> defer.Deferred:
        if self._stopping:
            return defer.fail(ClientClosedError("client stopped"))
        d: defer.Deferred = defer.Deferred()
        self._connected_waiters.append(d)
        return d

    # ---- requests --------------------------------------------------------------------------

    def _request(self, path: str | None, issue: Callable[[], Any]) -> defer.Deferred:
        """Issue an async kazoo request; re-send it after a connection loss."""
        def attempt() -> defer.Deferred:
            try:
                d = reactor_bridge.as_deferred(issue(), self._reactor, path)
            except Exception as exc:  # noqa: BLE001 - argument errors raised synchronously
                return defer.fail(translate(exc, path))
            return d.addErrback(retry_on_loss)

        def retry_on_loss(f: failure.Failure) -> Any:
            f.trap(ConnectionLossError)
            if self._stopping:
                return f
            log.debug("connection loss on %s; re-sending when reconnected", path)
            return self._when_connected().addCallback(lambda _: attempt())
        return attempt()

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> defer.Deferred:
        """Fires the created path (with the sequence suffix); NodeExistsError/NoNodeError."""
        return self._request(path, lambda: self._zk.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath))

    def ensure_path(self, path: str) -> defer.Deferred:
        """Create a persistent path and its parents if missing (no data). Fires None."""
        def exists_ok(f: failure.Failure) -> None:
            f.trap(NodeExistsError)
        return self.create(path, b"", makepath=True).addCallbacks(lambda _: None, exists_ok)

    def get(self, path: str) -> defer.Deferred:
        """Fires (data, stat); NoNodeError if missing."""
        return self._request(path, lambda: self._zk.get_async(path))

    def get_or_none(self, path: str) -> defer.Deferred:
        """Fires (data, stat), or (None, None) if the node does not exist."""
        def missing(f: failure.Failure) -> tuple[None, None]:
            f.trap(NoNodeError)
            return None, None
        return self.get(path).addErrback(missing)

    def exists(self, path: str) -> defer.Deferred:
        """Fires the stat, or None."""
        return self._request(path, lambda: self._zk.exists_async(path))

    def get_children(self, path: str, include_data: bool = False) -> defer.Deferred:
        """Fires the list of child names (with ``include_data``: (names, stat))."""
        return self._request(path, lambda: self._zk.get_children_async(
            path, include_data=include_data))

    def set(self, path: str, data: bytes, version: int = -1) -> defer.Deferred:
        """setData; fires the new stat; BadVersionError/NoNodeError on failure."""
        return self._request(path, lambda: self._zk.set_async(path, data, version))

    def conditional_set(self, path: str, data: bytes, expected_version: int) -> defer.Deferred:
        """setData at ``expected_version``: fires :class:`Updated` or :class:`BadVersion`."""
        def bad(f: failure.Failure) -> ConditionalSetResult:
            f.trap(BadVersionError)
            return BadVersion(path, expected_version)
        return self.set(path, data, expected_version).addCallbacks(Updated, bad)

    def delete(self, path: str, version: int = -1) -> defer.Deferred:
        return self._request(path, lambda: self._zk.delete_async(path, version))

    def multi(self, ops: Sequence[Op]) -> defer.Deferred:
        """Atomic multi-op. Fires the per-op results, or fails with TransactionFailedError.

        kazoo's commit reports a failed op only inside its result list (never raises), so
        the results are checked here: the first error that is not a rollback marker is the
        cause.
        """
        def issue() -> Any:
            tx = self._zk.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
                elif isinstance(op, SetDataOp):
                    tx.set_data(op.path, op.data, op.version)
                elif isinstance(op, CheckOp):
                    tx.check(op.path, op.version)
                elif isinstance(op, DeleteOp):
                    tx.delete(op.path, op.version)
                else:
                    raise TypeError(f"not a multi-op operation: {op!r}")
            return tx.commit_async()

        def check(results: list[Any]) -> list[Any]:
            for i, r in enumerate(results):
                if isinstance(r, Exception) and not isinstance(
                        r, (RolledBackError, RuntimeInconsistency)):
                    raise TransactionFailedError(i, ops[i], translate(r, ops[i].path), results)
            if any(isinstance(r, Exception) for r in results):
                raise TransactionFailedError(0, ops[0], RuntimeError("rolled back"), results)
            return results
        return self._request(None, issue).addCallback(check)

    # ---- watches ---------------------------------------------------------------------------

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> defer.Deferred:
        """Call ``callback(children)`` now and on every change, in the reactor thread.

        The path must exist (NoNodeError otherwise). The watch survives reconnects and
        re-reads after a new session. Fires the :class:`Watch` handle after the initial
        delivery has been queued.
        """
        handle = Watch(path, callback)

        def install() -> Watch:  # pool thread: the constructor reads synchronously
            fired: list[bool] = []

            def fire(children: list[str]) -> bool | None:
                if handle.cancelled:
                    return False
                fired.append(True)
                self._reactor.callFromThread(handle._deliver, sorted(children))
                return None
            ChildrenWatch(self._zk, path, fire)
            if not fired:
                raise NoNodeError("cannot watch children of a missing node", path)
            return handle
        return reactor_bridge.in_thread(self._reactor, install)

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, Any], None]) -> defer.Deferred:
        """Call ``callback(data, stat)`` now and on every change ((None, None) while absent)."""
        handle = Watch(path, callback)

        def install() -> Watch:  # pool thread
            def fire(data: bytes | None, stat: Any) -> bool | None:
                if handle.cancelled:
                    return False
                self._reactor.callFromThread(handle._deliver, data, stat)
                return None
            DataWatch(self._zk, path, fire)
            return handle
        return reactor_bridge.in_thread(self._reactor, install)
