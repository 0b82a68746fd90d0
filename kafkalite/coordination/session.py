"""The Deferred layer both ZooKeeper clients share: session states, re-sending, derived calls.

:class:`DeferredSession` holds everything above "send one request": how connection states
become :class:`SessionState` changes (once per change, NEW_SESSION when the session id
changed), how a request that met a connection loss waits for the next connect and is sent
again (Kafka's ``ZooKeeperClient`` does the same; a session expiry is not retried), how a
failed multi is reported, and the calls built from others (``ensure_path``, ``get_or_none``,
``conditional_set``, ``delete_recursive``). The real client (kazoo) and the in-memory one
only supply the primitive requests and the watches, so the broker sees one behaviour.

No kazoo here.
"""
from __future__ import annotations

import abc
import logging
from typing import Any, Callable, Sequence

from twisted.internet import defer
from twisted.python import failure

from kafkalite.coordination.errors import (BadVersionError, ClientClosedError,
                                           ConnectionLossError, NodeExistsError, NoNodeError,
                                           RolledBackError, RuntimeInconsistencyError,
                                           TransactionFailedError)
from kafkalite.coordination.interfaces import SessionState, Watch
from kafkalite.coordination.ops import BadVersion, ConditionalSetResult, Op, Updated

log = logging.getLogger(__name__)


def check_multi_results(results: list[Any], ops: Sequence[Op]) -> list[Any]:
    """Raise TransactionFailedError for a rolled-back multi; the first real error is the cause.

    ``results`` holds one entry per op; a failed multi has exceptions only (RolledBackError
    before the failing op, RuntimeInconsistencyError after it).
    """
    for i, r in enumerate(results):
        if isinstance(r, BaseException) and not isinstance(
                r, (RolledBackError, RuntimeInconsistencyError)):
            raise TransactionFailedError(i, ops[i], r, results)
    if any(isinstance(r, BaseException) for r in results):
        raise TransactionFailedError(0, ops[0], RuntimeError("rolled back"), results)
    return results


def child_path(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent.rstrip("/")) + "/" + name


class DeferredSession(abc.ABC):
    """State listeners, connect waiters, re-send on connection loss; subclasses do the I/O.

    A subclass implements the primitives (``_create``, ``_get``, ``_exists``, ``_get_children``,
    ``_set``, ``_delete``, ``_multi``: each returns a Deferred failing with :mod:`.errors`
    types, ``_multi``'s results already translated), plus start/stop and the watches, and
    reports connection changes with :meth:`_on_state`.
    """

    def __init__(self, reactor: Any, session_timeout_ms: int, chroot: str | None) -> None:
        self._reactor = reactor
        self.session_timeout_ms = session_timeout_ms
        self.chroot = chroot
        self._listeners: list[Callable[[SessionState], None]] = []
        self._last_state: SessionState | None = None
        self._session_id: int | None = None
        self._connected_waiters: list[defer.Deferred[None]] = []
        self._stopping = False

    # ---- session state ---------------------------------------------------------------------

    @property
    def reactor(self) -> Any:
        return self._reactor

    @property
    def session_id(self) -> int | None:
        """Id of the current session (owner id of our ephemerals), None if never connected."""
        return self._session_id

    @property
    def state(self) -> SessionState | None:
        return self._last_state

    def add_state_listener(self, callback: Callable[[SessionState], None]) -> None:
        """``callback(SessionState)`` in the reactor thread, once per change."""
        self._listeners.append(callback)

    def remove_state_listener(self, callback: Callable[[SessionState], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _on_state(self, connection: SessionState, session: int | None) -> None:
        """A connection change (CONNECTED, SUSPENDED or LOST) in session ``session``."""
        if connection is SessionState.CONNECTED:
            if self._session_id is not None and session is not None and session != self._session_id:
                new = SessionState.NEW_SESSION
            else:
                new = SessionState.CONNECTED
            if session is not None:
                self._session_id = session
        else:
            new = connection
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

    def _when_connected(self) -> defer.Deferred[None]:
        if self._stopping:
            return defer.fail(ClientClosedError("client stopped"))
        d: defer.Deferred[None] = defer.Deferred()
        self._connected_waiters.append(d)
        return d

    def _fail_waiters(self) -> None:
        waiters, self._connected_waiters = self._connected_waiters, []
        for w in waiters:
            w.errback(ClientClosedError("client stopped"))

    def _translate(self, exc: BaseException, path: str | None) -> BaseException:
        """Exceptions raised while issuing a request (argument checks); the real client maps kazoo's."""
        return exc

    # ---- requests --------------------------------------------------------------------------

    def _request(self, path: str | None, issue: Callable[[], defer.Deferred[Any]]) -> defer.Deferred[Any]:
        """Issue a request; re-send it after a connection loss once connected again."""
        def attempt() -> defer.Deferred[Any]:
            try:
                d = issue()
            except Exception as exc:  # noqa: BLE001 - argument errors raised synchronously
                return defer.fail(self._translate(exc, path))
            return d.addErrback(retry_on_loss)

        def retry_on_loss(f: failure.Failure) -> Any:
            f.trap(ConnectionLossError)
            if self._stopping:
                return f
            log.debug("connection loss on %s; re-sending when reconnected", path)
            return self._when_connected().addCallback(lambda _: attempt())
        return attempt()

    @abc.abstractmethod
    def start(self) -> defer.Deferred[Any]:
        """Connect (creating the chroot first if missing). Fires None."""

    @abc.abstractmethod
    def stop(self, limit: float = 2.0) -> defer.Deferred[Any]:
        """Close the session (ephemerals vanish at once); fires False if it took > ``limit`` s."""

    @abc.abstractmethod
    def watch_children(self, path: str,
                       callback: Callable[[list[str]], None]) -> defer.Deferred[Watch]:
        """``callback(sorted children)`` now and on every change; NoNodeError if missing."""

    @abc.abstractmethod
    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, Any], None]) -> defer.Deferred[Watch]:
        """``callback(data, stat)`` now and on every change ((None, None) while absent)."""

    @abc.abstractmethod
    def _create(self, path: str, data: bytes, ephemeral: bool, sequence: bool,
                makepath: bool) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _get(self, path: str) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _exists(self, path: str) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _get_children(self, path: str, include_data: bool) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _set(self, path: str, data: bytes, version: int) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _delete(self, path: str, version: int) -> defer.Deferred[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _multi(self, ops: Sequence[Op]) -> defer.Deferred[Any]:
        raise NotImplementedError

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> defer.Deferred[Any]:
        """Fires the created path (with the sequence suffix); NodeExistsError/NoNodeError."""
        return self._request(path, lambda: self._create(path, data, ephemeral, sequence, makepath))

    def ensure_path(self, path: str) -> defer.Deferred[Any]:
        """Create a persistent path and its parents if missing (no data). Fires None."""
        def exists_ok(f: failure.Failure) -> None:
            f.trap(NodeExistsError)
        return self.create(path, b"", makepath=True).addCallbacks(lambda _: None, exists_ok)

    def get(self, path: str) -> defer.Deferred[Any]:
        """Fires (data, stat); NoNodeError if missing."""
        return self._request(path, lambda: self._get(path))

    def get_or_none(self, path: str) -> defer.Deferred[Any]:
        """Fires (data, stat), or (None, None) if the node does not exist."""
        def missing(f: failure.Failure) -> tuple[None, None]:
            f.trap(NoNodeError)
            return None, None
        return self.get(path).addErrback(missing)

    def exists(self, path: str) -> defer.Deferred[Any]:
        """Fires the stat, or None."""
        return self._request(path, lambda: self._exists(path))

    def get_children(self, path: str, include_data: bool = False) -> defer.Deferred[Any]:
        """Fires the list of child names (with ``include_data``: (names, stat))."""
        return self._request(path, lambda: self._get_children(path, include_data))

    def set(self, path: str, data: bytes, version: int = -1) -> defer.Deferred[Any]:
        """setData; fires the new stat; BadVersionError/NoNodeError on failure."""
        return self._request(path, lambda: self._set(path, data, version))

    def conditional_set(self, path: str, data: bytes,
                        expected_version: int) -> defer.Deferred[ConditionalSetResult]:
        """setData at ``expected_version``: fires :class:`Updated` or :class:`BadVersion`."""
        def bad(f: failure.Failure) -> ConditionalSetResult:
            f.trap(BadVersionError)
            return BadVersion(path, expected_version)
        return self.set(path, data, expected_version).addCallbacks(Updated, bad)

    def delete(self, path: str, version: int = -1) -> defer.Deferred[Any]:
        """Fires True; NoNodeError, BadVersionError, NotEmptyError."""
        return self._request(path, lambda: self._delete(path, version))

    @defer.inlineCallbacks
    def delete_recursive(self, path: str) -> Any:
        """Delete ``path`` and its subtree, children first; fires True if it existed.

        Not atomic (as kazoo's and Kafka's ``deleteRecursive``): one request per znode, each
        re-sent after a connection loss; a child created meanwhile fails it with NotEmptyError.
        """
        try:
            children = yield self.get_children(path)
        except NoNodeError:
            return False
        for name in children:
            yield self.delete_recursive(child_path(path, name))
        try:
            yield self.delete(path)
        except NoNodeError:
            pass  # someone else deleted it meanwhile: the goal is reached
        return True

    def multi(self, ops: Sequence[Op]) -> defer.Deferred[Any]:
        """Atomic multi-op. Fires the per-op results, or fails with TransactionFailedError."""
        ops = list(ops)
        return self._request(None, lambda: self._multi(ops)).addCallback(check_multi_results, ops)


__all__ = ["DeferredSession", "check_multi_results", "child_path"]
