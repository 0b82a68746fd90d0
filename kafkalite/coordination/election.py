"""Controller election and epoch fencing (zookeeper-layout.md §2, ``KafkaZkClient``).

Election is one multi-op: create ``/controller`` (ephemeral) + setData ``/controller_epoch``
= epoch+1 at the zkVersion just read. The winner's **epoch zkVersion** (the new version of
``/controller_epoch``) is its fencing token: every later controller write goes through
:func:`fenced_multi`, which prepends ``check(/controller_epoch, token)``, so a controller
that has been replaced cannot write even if it has not noticed yet.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from twisted.internet import defer
from twisted.python import failure

from kafkalite.coordination.errors import (BadVersionError, ControllerMovedError,
                                           NodeExistsError, TransactionFailedError)
from kafkalite.coordination.interfaces import Watch, ZooKeeper
from kafkalite.coordination.ops import CheckOp, CreateOp, Op, SetDataOp
from zk_schema import ControllerEpochZNode, ControllerZNode, ZkDataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerFence:
    """What a controller's writes are fenced on: its epoch and the zkVersion of
    ``/controller_epoch`` its election produced."""

    epoch: int
    epoch_zk_version: int


@dataclass(frozen=True)
class ElectionResult:
    won: bool
    controller_id: int | None     # who is controller now (None if unknown / vanished)
    epoch: int                    # controller epoch (ours if won, else the one last read)
    epoch_zk_version: int         # fencing token if won; zkVersion last read otherwise

    @property
    def fence(self) -> ControllerFence:
        return ControllerFence(self.epoch, self.epoch_zk_version)


@defer.inlineCallbacks
def read_controller_epoch(zk: ZooKeeper) -> Any:
    """(epoch, zkVersion) of ``/controller_epoch``, creating it as ``0`` if missing."""
    data, stat = yield zk.get_or_none(ControllerEpochZNode.PATH)
    if stat is None:
        try:
            yield zk.create(ControllerEpochZNode.PATH,
                            ControllerEpochZNode(ControllerEpochZNode.INITIAL_EPOCH).encode())
        except NodeExistsError:
            pass
        data, stat = yield zk.get(ControllerEpochZNode.PATH)
    return ControllerEpochZNode.decode(data).epoch, int(stat.version)


@defer.inlineCallbacks
def get_controller_id(zk: ZooKeeper) -> Any:
    """Broker id in ``/controller``, or None."""
    data, _ = yield zk.get_or_none(ControllerZNode.PATH)
    return None if data is None else ControllerZNode.decode(data).broker_id


@defer.inlineCallbacks
def _ours(zk: ZooKeeper, broker_id: int) -> Any:
    """Whether ``/controller`` names ``broker_id`` and was created by this very session.

    That is the case when the election multi was applied but its answer lost (the connection
    dropped; the re-sent multi then meets NodeExists on its own znode): Kafka's
    ``checkControllerAndEpoch`` treats it as won. A ``/controller`` naming this broker id but
    owned by another session is a previous process's, which ZooKeeper drops at its expiry.
    """
    data, stat = yield zk.get_or_none(ControllerZNode.PATH)
    if data is None or ControllerZNode.decode(data).broker_id != broker_id:
        return False
    return bool(stat.ephemeralOwner) and int(stat.ephemeralOwner) == zk.session_id


@defer.inlineCallbacks
def elect_controller(zk: ZooKeeper, broker_id: int) -> Any:
    """Try to become controller; fires an :class:`ElectionResult`."""
    current = yield get_controller_id(zk)
    epoch, version = yield read_controller_epoch(zk)
    if current is not None:
        won = yield _ours(zk, broker_id)
        return ElectionResult(won, current, epoch, version)
    payload = ControllerZNode(broker_id, int(zk.reactor.seconds() * 1000)).encode()
    ops: list[Op] = [CreateOp(ControllerZNode.PATH, payload, ephemeral=True),
                     SetDataOp(ControllerEpochZNode.PATH, ControllerEpochZNode(epoch + 1).encode(),
                               version)]
    try:
        results = yield zk.multi(ops)
    except TransactionFailedError as exc:
        if not isinstance(exc.error, (NodeExistsError, BadVersionError)):
            raise
        winner = yield get_controller_id(zk)
        new_epoch, new_version = yield read_controller_epoch(zk)
        won = yield _ours(zk, broker_id)
        if won and new_epoch == epoch + 1:
            log.info("broker %d elected controller, epoch %d (epoch zkVersion %d; the answer to the "
                     "election was lost and the re-sent one met our own znode)", broker_id, new_epoch, new_version)
            return ElectionResult(True, broker_id, new_epoch, new_version)
        log.info("controller election lost to broker %s (epoch %d)", winner, new_epoch)
        return ElectionResult(False, winner, new_epoch, new_version)
    token = int(results[1].version)
    log.info("broker %d elected controller, epoch %d (epoch zkVersion %d)",
             broker_id, epoch + 1, token)
    return ElectionResult(True, broker_id, epoch + 1, token)


def watch_controller(zk: ZooKeeper,
                     callback: Callable[[int | None], None]) -> defer.Deferred:
    """``callback(controller id or None)`` now and whenever ``/controller`` changes."""
    def on_data(data: bytes | None, _stat: Any) -> None:
        if data is None:
            callback(None)
            return
        try:
            callback(ControllerZNode.decode(data).broker_id)
        except ZkDataError:
            log.error("unreadable /controller payload %r", data)
            callback(None)
    return zk.watch_data(ControllerZNode.PATH, on_data)


def fenced_multi(zk: ZooKeeper, epoch_zk_version: int, ops: Sequence[Op]) -> defer.Deferred:
    """Run ``ops`` only if ``/controller_epoch`` is still at ``epoch_zk_version``.

    Fires the results of ``ops`` (the check's own result removed). A failed check raises
    :class:`ControllerMovedError`; a failure of one of ``ops`` raises
    :class:`TransactionFailedError` with its index relative to ``ops``.
    """
    all_ops = [CheckOp(ControllerEpochZNode.PATH, epoch_zk_version), *ops]

    def failed(f: failure.Failure) -> Any:
        f.trap(TransactionFailedError)
        exc = f.value
        if exc.index == 0:
            raise ControllerMovedError(
                f"controller epoch zkVersion is no longer {epoch_zk_version}: controller moved")
        raise TransactionFailedError(exc.index - 1, exc.op, exc.error, exc.results[1:])
    return zk.multi(all_ops).addCallbacks(lambda results: results[1:], failed)


__all__ = ["ControllerFence", "ElectionResult", "elect_controller", "watch_controller", "fenced_multi",
           "read_controller_epoch", "get_controller_id", "Watch"]
