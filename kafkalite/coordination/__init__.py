"""ZooKeeper coordination for a Twisted broker: the only package that imports kazoo.

- :class:`KafkaZkClient` - Kafka-domain operations (registration, election, topics, configs,
  producer ids), Deferred-returning, reactor-thread only.
- :class:`ZooKeeperClient` - the generic session underneath (get/set/create/multi/watches).
- :mod:`.reactor_bridge` - ``as_deferred`` / ``stop_zk`` marshalling helpers.
"""
from kafkalite.coordination.client import SessionState, Watch, ZooKeeperClient
from kafkalite.coordination.connect_string import ConnectString, parse_connect_string
from kafkalite.coordination.election import ControllerFence, ElectionResult
from kafkalite.coordination.errors import (BadVersionError, BrokerIdInUseError,
                                           ClientClosedError, ConnectionLossError,
                                           ControllerMovedError, InvalidTopicError,
                                           NodeExistsError, NoNodeError, NotEmptyError,
                                           SessionExpiredError, TopicAlreadyExistsError,
                                           TransactionFailedError, ZkError, ZkTimeoutError,
                                           ZkVersionConflictError)
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.ops import (BadVersion, CheckOp, CreateOp, DeleteOp, SetDataOp,
                                        Updated, Versioned)
from kafkalite.coordination.reactor_bridge import as_deferred, stop_zk

__all__ = [
    "KafkaZkClient", "ZooKeeperClient", "SessionState", "Watch", "ElectionResult",
    "ConnectString", "parse_connect_string", "as_deferred", "stop_zk",
    "CreateOp", "SetDataOp", "CheckOp", "DeleteOp", "Updated", "BadVersion", "Versioned",
    "ZkError", "NoNodeError", "NodeExistsError", "BadVersionError", "NotEmptyError",
    "ConnectionLossError", "SessionExpiredError", "ClientClosedError", "ZkTimeoutError",
    "TransactionFailedError", "BrokerIdInUseError", "TopicAlreadyExistsError",
    "InvalidTopicError", "ControllerMovedError", "ControllerFence", "ZkVersionConflictError",
]
