"""ZooKeeper coordination for a Twisted broker: the only package that imports kazoo.

- :class:`KafkaZkClient` - Kafka-domain operations (registration, election, topics, configs,
  producer ids), Deferred-returning, reactor-thread only, over any :class:`ZooKeeper` session.
- :class:`ZooKeeper` (:mod:`.interfaces`) - the session API the broker types against, with two
  implementations: :class:`ZooKeeperClient` (kazoo, a real server) and
  :class:`MemoryZooKeeperClient` (:mod:`.memory`, one in-process tree for the in-process tests).
- :mod:`.reactor_bridge` - ``as_deferred`` / ``stop_zk``: kazoo threads -> the reactor.

kazoo is imported only when a kazoo-backed name is first used (``ZooKeeperClient``,
``as_deferred``, ``stop_zk``, or a ``KafkaZkClient`` built from a connect string), so the
in-memory tier runs without loading it.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kafkalite.coordination.connect_string import ConnectString, parse_connect_string
from kafkalite.coordination.election import ControllerFence, ElectionResult
from kafkalite.coordination.errors import (BadArgumentsError, BadVersionError,
                                           BrokerIdInUseError, ClientClosedError,
                                           ConnectionLossError, ControllerMovedError,
                                           InvalidTopicError, NoChildrenForEphemeralsError,
                                           NodeExistsError, NoNodeError, NotEmptyError,
                                           RolledBackError, RuntimeInconsistencyError,
                                           SessionExpiredError, TopicAlreadyExistsError,
                                           TransactionFailedError, ZkError, ZkTimeoutError,
                                           ZkVersionConflictError)
from kafkalite.coordination.interfaces import SessionState, Stat, Watch, ZooKeeper
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperClient, MemoryZooKeeperServer
from kafkalite.coordination.ops import (BadVersion, CheckOp, CreateOp, DeleteOp, SetDataOp,
                                        Updated, Versioned)

if TYPE_CHECKING:
    from kafkalite.coordination.client import ZooKeeperClient
    from kafkalite.coordination.reactor_bridge import as_deferred, stop_zk

_LAZY = {"ZooKeeperClient": "kafkalite.coordination.client",
         "as_deferred": "kafkalite.coordination.reactor_bridge",
         "stop_zk": "kafkalite.coordination.reactor_bridge"}


def __getattr__(name: str) -> Any:
    """The kazoo-backed names, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "KafkaZkClient", "ZooKeeper", "ZooKeeperClient", "MemoryZooKeeperServer",
    "MemoryZooKeeperClient", "SessionState", "Stat", "Watch", "ElectionResult",
    "ConnectString", "parse_connect_string", "as_deferred", "stop_zk",
    "CreateOp", "SetDataOp", "CheckOp", "DeleteOp", "Updated", "BadVersion", "Versioned",
    "ZkError", "NoNodeError", "NodeExistsError", "BadVersionError", "NotEmptyError",
    "NoChildrenForEphemeralsError", "BadArgumentsError", "RolledBackError",
    "RuntimeInconsistencyError", "ConnectionLossError", "SessionExpiredError",
    "ClientClosedError", "ZkTimeoutError", "TransactionFailedError", "BrokerIdInUseError",
    "TopicAlreadyExistsError", "InvalidTopicError", "ControllerMovedError", "ControllerFence", "ZkVersionConflictError",
]
