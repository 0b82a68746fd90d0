"""kazoo's exceptions -> :mod:`.errors`: the one place that knows kazoo's exception types."""
from __future__ import annotations

from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError

from kafkalite.coordination.errors import (BadArgumentsError, BadVersionError, ClientClosedError,
                                           ConnectionLossError, NoChildrenForEphemeralsError,
                                           NodeExistsError, NoNodeError, NotEmptyError,
                                           RolledBackError, RuntimeInconsistencyError,
                                           SessionExpiredError, ZkError, ZkTimeoutError)

_MAP: tuple[tuple[type[BaseException], type[ZkError]], ...] = (
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.BadArgumentsError, BadArgumentsError),
    (kz.RolledBackError, RolledBackError),
    (kz.RuntimeInconsistency, RuntimeInconsistencyError),
    (kz.ConnectionLoss, ConnectionLossError),
    # before SessionExpiredError: kazoo's ConnectionClosedError (client stopped) subclasses it
    (kz.ConnectionClosedError, ClientClosedError),
    (kz.SessionExpiredError, SessionExpiredError),
    (KazooTimeoutError, ZkTimeoutError),
)


def translate(exc: BaseException, path: str | None = None) -> BaseException:
    """Our exception for a kazoo one; anything else is returned unchanged."""
    if isinstance(exc, ZkError):
        return exc
    for kazoo_type, ours in _MAP:
        if isinstance(exc, kazoo_type):
            return ours(type(exc).__name__, path)
    if isinstance(exc, kz.ZookeeperError):
        return ZkError(f"{type(exc).__name__}: {exc}", path)
    return exc


__all__ = ["translate"]
