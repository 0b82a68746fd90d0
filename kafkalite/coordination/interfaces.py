"""What the broker may rely on from a ZooKeeper session: one Protocol, two implementations.

:class:`ZooKeeper` is the Deferred API of :class:`~kafkalite.coordination.client.ZooKeeperClient`
(kazoo against a real server) and of :class:`~kafkalite.coordination.memory.MemoryZooKeeperClient`
(the in-process tier's fake); the Kafka-domain layer (:mod:`.kafka_zk_client`, :mod:`.election`,
:mod:`.registration`, :mod:`.producer_ids`) and the broker are typed against it, never against
either class. Contract of every method: called in the reactor thread, returns a Deferred that
fires in the reactor thread, errors are :mod:`.errors` types. Paths are relative to the chroot.

This module imports neither kazoo nor the broker.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from twisted.internet import defer

from kafkalite.coordination.ops import ConditionalSetResult, Op

log = logging.getLogger(__name__)


class SessionState(enum.Enum):
    """What state listeners are told, once per change."""

    CONNECTED = "connected"          # first connect, or reconnect within the same session
    SUSPENDED = "suspended"          # connection lost; session (and ephemerals) may still live
    LOST = "lost"                    # session expired: our ephemerals and watches are gone
    NEW_SESSION = "new_session"      # connected again with a different session after LOST


class Watch:
    """Handle of a child/data watch; ``cancel()`` stops deliveries at once (queued ones too)."""

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


class Stat(Protocol):
    """A znode's stat, as ZooKeeper returns it (kazoo's ``ZnodeStat`` has these fields)."""

    @property
    def czxid(self) -> int: ...
    @property
    def mzxid(self) -> int: ...
    @property
    def pzxid(self) -> int: ...
    @property
    def ctime(self) -> int: ...
    @property
    def mtime(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def cversion(self) -> int: ...
    @property
    def aversion(self) -> int: ...
    @property
    def ephemeralOwner(self) -> int: ...  # noqa: N802 - ZooKeeper's field name
    @property
    def dataLength(self) -> int: ...  # noqa: N802
    @property
    def numChildren(self) -> int: ...  # noqa: N802


@runtime_checkable
class ZooKeeper(Protocol):
    """One ZooKeeper session with a Deferred API (see the module docstring for the contract)."""

    @property
    def reactor(self) -> Any:
        """The reactor every Deferred fires on (an ``IReactorTime`` at least)."""
    @property
    def session_id(self) -> int | None:
        """Current session id (the ``ephemeralOwner`` of our ephemerals); None before start."""
    @property
    def state(self) -> SessionState | None: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def chroot(self) -> str | None: ...

    def start(self) -> defer.Deferred[Any]:
        """Connect (creating the chroot first if missing). Fires None."""
    def stop(self, limit: float = 2.0) -> defer.Deferred[Any]:
        """Close the session (our ephemerals vanish); fires False if it took over ``limit`` s."""
    def add_state_listener(self, callback: Callable[[SessionState], None]) -> None: ...
    def remove_state_listener(self, callback: Callable[[SessionState], None]) -> None: ...

    def create(self, path: str, data: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> defer.Deferred[Any]:
        """Fires the created path (with a sequence node's 10-digit suffix)."""
    def ensure_path(self, path: str) -> defer.Deferred[Any]: ...
    def get(self, path: str) -> defer.Deferred[Any]:
        """Fires (data, stat); NoNodeError if missing."""
    def get_or_none(self, path: str) -> defer.Deferred[Any]:
        """Fires (data, stat), or (None, None)."""
    def exists(self, path: str) -> defer.Deferred[Any]:
        """Fires the stat, or None."""
    def get_children(self, path: str, include_data: bool = False) -> defer.Deferred[Any]:
        """Fires the child names (with ``include_data``: (names, parent stat))."""
    def set(self, path: str, data: bytes, version: int = -1) -> defer.Deferred[Any]:
        """Fires the new stat; BadVersionError / NoNodeError."""
    def conditional_set(self, path: str, data: bytes,
                        expected_version: int) -> defer.Deferred[ConditionalSetResult]: ...
    def delete(self, path: str, version: int = -1) -> defer.Deferred[Any]: ...
    def delete_recursive(self, path: str) -> defer.Deferred[Any]:
        """Delete ``path`` and its subtree; fires True if it existed."""
    def multi(self, ops: Sequence[Op]) -> defer.Deferred[Any]:
        """Atomic: fires the per-op results, or fails with TransactionFailedError."""
    def watch_children(self, path: str,
                       callback: Callable[[list[str]], None]) -> defer.Deferred[Watch]:
        """``callback(sorted children)`` now and after every change; NoNodeError if missing."""
    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, Any], None]) -> defer.Deferred[Watch]:
        """``callback(data, stat)`` now and after every change; (None, None) while absent."""


__all__ = ["SessionState", "Watch", "Stat", "ZooKeeper"]
