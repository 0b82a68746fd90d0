"""The registry service: state + store + who is primary, on the reactor thread.

Writes run only on the primary, one at a time (a ``DeferredLock``): the operation computes its
records from the state, the store appends them to ``_schemas`` and fires once this instance's own
replay has applied them, then the answer goes out. So an answer is never ahead of the state,
and the next write sees the previous one. When an instance becomes primary it first *syncs*
under the same lock (writes a NOOP record and waits until its replay reaches it, Confluent's
``waitUntilKafkaReaderReachesLastOffset``): everything an earlier primary wrote is applied before
it assigns an id, so ids are never handed out twice.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol, TypeVar

from twisted.internet import defer

from . import errors
from .operations import Records
from .state import RegistryState

log = logging.getLogger(__name__)

T = TypeVar("T")


class Store(Protocol):
    """Where records go; the state is changed only by the store's replay."""

    def append(self, records: Records) -> defer.Deferred[None]:
        """Write ``records`` in order; fires when this instance's replay has applied them."""

    def sync(self) -> defer.Deferred[None]:
        """Fires when the replay has applied everything written before the call."""


class MemoryStore:
    """A store without Kafka: records are applied at once (unit tests, and a single-node sandbox)."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.log: list[tuple[bytes, bytes | None]] = []

    def append(self, records: Records) -> defer.Deferred[None]:
        for r in records:
            key, value = r.encode()
            self.log.append((key, value))
            self.state.apply_raw(key, value, len(self.log) - 1)
        return defer.succeed(None)

    def sync(self) -> defer.Deferred[None]:
        return defer.succeed(None)


class SchemaRegistry:
    """One registry instance: the state it serves, its store, and the primary it knows."""

    def __init__(self, state: RegistryState, store: Store, my_url: str) -> None:
        self.state = state
        self.store = store
        self.my_url = my_url
        self.primary_url: str | None = None
        self._lock = defer.DeferredLock()
        self._synced = False

    @property
    def is_primary(self) -> bool:
        return self.primary_url is not None and self.primary_url == self.my_url

    def set_primary(self, url: str | None) -> None:
        """The election's answer (None while a rebalance is under way)."""
        was = self.is_primary
        if url != self.primary_url:
            log.info("primary is now %s%s", url or "unknown", " (this instance)" if url == self.my_url else "")
        self.primary_url = url
        if self.is_primary and not was:
            self._synced = False
            self._lock.run(self._sync).addErrback(lambda f: log.error("sync as new primary failed: %s",
                                                                      f.getErrorMessage()))

    async def _sync_now(self) -> None:
        await self.store.sync()
        self._synced = True
        log.info("caught up with _schemas at offset %d; serving writes", self.state.applied_offset)

    def _sync(self) -> defer.Deferred[None]:
        return defer.Deferred.fromCoroutine(self._sync_now())

    def write(self, operation: Callable[[RegistryState], tuple[T, Records]]) -> defer.Deferred[T]:
        """Run a write on this (primary) instance, serialised with every other write."""
        return self._lock.run(lambda: defer.Deferred.fromCoroutine(self._write(operation)))

    async def _write(self, operation: Callable[[RegistryState], tuple[Any, Records]]) -> Any:
        if not self.is_primary:
            raise errors.unknown_leader("Leader not known." if self.primary_url is None
                                        else "This instance is no longer the primary.")
        if not self._synced:
            await self.store.sync()
            self._synced = True
        result, records = operation(self.state)
        if records:
            await self.store.append(records)
        return result
