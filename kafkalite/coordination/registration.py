"""Ephemeral registrations a broker owns (``/brokers/ids/<id>`` first of all).

Creation follows Kafka's ``CheckedEphemeral``: one multi-op ``create(path, empty, EPHEMERAL)
+ setData(path, data, version 0)`` so the returned stat (whose ``czxid`` is the broker
epoch) belongs to this very creation. If the node already exists:

- its ``ephemeralOwner`` is our session -> it is ours (e.g. a create re-sent after a
  connection loss); success;
- another session owns it -> **policy (differs from Kafka, which fails at once)**: that owner
  may be our own previous incarnation, killed with -9 and restarted faster than its session
  expires, or a different live broker misconfigured with our id. ZooKeeper cannot tell the
  two apart, so we poll until ``session_timeout_ms + grace_ms`` has passed: a dead session
  expires within that time and we take over; a live one keeps the node and we fail with
  :class:`BrokerIdInUseError` ("broker.id N is already registered"). The cost is that a real
  duplicate id is refused only after that delay.

After a session expiry (``NEW_SESSION``) every owned node is re-created automatically and
the re-registration listeners are told the new czxid (the broker's new epoch).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer, task
from twisted.python import failure

from kafkalite.coordination.errors import (BrokerIdInUseError, NodeExistsError, ZkError,
                                           TransactionFailedError)
from kafkalite.coordination.interfaces import SessionState, ZooKeeper
from kafkalite.coordination.ops import CreateOp, Op, SetDataOp

log = logging.getLogger(__name__)


class EphemeralOwnedByOtherSession(ZkError):
    """The node is held by a session that did not expire within the wait."""

    def __init__(self, path: str, owner: int, waited_ms: int) -> None:
        super().__init__(f"held by live session 0x{owner:x} after {waited_ms} ms", path)
        self.owner = owner
        self.waited_ms = waited_ms


class EphemeralRegistry:
    """Creates and re-creates the ephemeral znodes this broker owns."""

    def __init__(self, zk: ZooKeeper, grace_ms: int = 3000, poll_ms: int = 200) -> None:
        self._zk = zk
        self.wait_limit_ms = zk.session_timeout_ms + grace_ms
        self.poll_ms = poll_ms
        self._owned: dict[str, bytes] = {}
        self._on_recreated: list[Callable[[str, int], None]] = []
        zk.add_state_listener(self._on_state)

    def add_recreated_listener(self, callback: Callable[[str, int], None]) -> None:
        """``callback(path, czxid)`` after a node was re-created in a new session."""
        self._on_recreated.append(callback)

    def _now(self) -> float:
        """The reactor's clock (a test's ``task.Clock`` drives the wait for an expiry)."""
        return float(self._zk.reactor.seconds())

    def owned(self) -> dict[str, bytes]:
        return dict(self._owned)

    def register(self, path: str, data: bytes) -> defer.Deferred:
        """Create (or confirm) the ephemeral; fires its czxid. Re-created on new sessions."""
        d = self._checked_create(path, data, self._now())

        def remember(czxid: int) -> int:
            self._owned[path] = data
            return czxid
        return d.addCallback(remember)

    def update(self, path: str, data: bytes) -> defer.Deferred:
        """Re-write an owned ephemeral's data (any version: we own it); a re-creation after a
        session expiry uses the new data. Fires the new Stat."""
        self._owned[path] = data
        return self._zk.set(path, data, -1)

    def forget(self, path: str) -> None:
        """Stop re-creating ``path`` (e.g. before a deliberate delete)."""
        self._owned.pop(path, None)

    def _checked_create(self, path: str, data: bytes, started: float) -> defer.Deferred:
        ops: list[Op] = [CreateOp(path, b"", ephemeral=True), SetDataOp(path, data, 0)]
        d = self._zk.multi(ops).addCallback(lambda results: int(results[1].czxid))

        def on_fail(f: failure.Failure) -> Any:
            f.trap(TransactionFailedError)
            if not isinstance(f.value.error, NodeExistsError):
                return f
            return self._zk.exists(path).addCallback(owner_check)

        def owner_check(stat: Any) -> Any:
            if stat is None:  # vanished in between: try again at once
                return self._checked_create(path, data, started)
            owner = int(stat.ephemeralOwner)
            if owner == self._zk.session_id:
                log.info("%s already registered by our session 0x%x", path, owner)
                return int(stat.czxid)
            waited_ms = int((self._now() - started) * 1000)
            if waited_ms >= self.wait_limit_ms:
                raise EphemeralOwnedByOtherSession(path, owner, waited_ms)
            if waited_ms < self.poll_ms:
                log.warning("%s is held by session 0x%x (a previous incarnation?); waiting up to"
                            " %d ms for it to expire", path, owner, self.wait_limit_ms)
            return task.deferLater(self._zk.reactor, self.poll_ms / 1000.0,
                                   self._checked_create, path, data, started)
        return d.addErrback(on_fail)

    def _on_state(self, state: SessionState) -> None:
        if state is not SessionState.NEW_SESSION:
            return
        for path, data in list(self._owned.items()):
            log.info("new ZooKeeper session: re-creating %s", path)
            d = self._checked_create(path, data, self._now())
            d.addCallbacks(self._recreated, self._recreate_failed,
                           callbackArgs=(path,), errbackArgs=(path,))

    def _recreated(self, czxid: int, path: str) -> None:
        for callback in list(self._on_recreated):
            callback(path, czxid)

    def _recreate_failed(self, f: failure.Failure, path: str) -> None:
        log.error("could not re-create %s after session expiry: %s", path, f.value)


def broker_id_in_use(broker_id: int) -> Callable[[failure.Failure], Any]:
    """Errback turning a lost ephemeral race on ``/brokers/ids/<id>`` into BrokerIdInUseError."""
    def translate(f: failure.Failure) -> Any:
        f.trap(EphemeralOwnedByOtherSession)
        raise BrokerIdInUseError(broker_id, f.value.owner, f.value.waited_ms)
    return translate
