"""Every znode ZooKeeper-mode Kafka uses, with its path and versioned payload codec.

Pure data, modelled on Kafka's ``ZkData.scala``: no I/O and no kazoo, so the same classes
serve the coordination adapter, the controller logic and the tests. Each payload class
has ``encode() -> bytes`` and ``decode(bytes)`` (raising :class:`ZkDataError`, a
``ValueError``, on anything Kafka would not have written) plus ``path(...)`` helpers.
"""
from zk_schema import paths
from zk_schema.admin import DeleteTopicsZNode, PreferredReplicaElection, ReassignPartitions
from zk_schema.brokers import BrokerRegistration, BrokerSequenceIdZNode, EndPoint
from zk_schema.cluster import ClusterIdZNode
from zk_schema.config import ConfigEntityChangeNotification, ConfigEntityZNode, TopicConfigZNode, desanitize, sanitize
from zk_schema.controller import ControllerEpochZNode, ControllerZNode
from zk_schema.errors import InvalidTopicNameError, ZkDataError
from zk_schema.notifications import IsrChangeNotification, LogDirEventNotification
from zk_schema.paths import PERSISTENT_PATHS, sequence_number
from zk_schema.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdBlockZNode
from zk_schema.topic_names import (MAX_TOPIC_NAME_LENGTH, collides_with, has_collision_chars,
                                   is_valid_topic_name, unify_collision_chars,
                                   validate_topic_name)
from zk_schema.topics import (LEADER_DURING_DELETE, NO_LEADER,
                              TopicPartitionStateZNode, TopicPartitionsZNode,
                              TopicPartitionZNode, TopicZNode)
from zk_schema.uuids import decode_uuid, encode_uuid, new_cluster_id, new_topic_id

__all__ = [
    "paths", "PERSISTENT_PATHS", "sequence_number",
    "ZkDataError", "InvalidTopicNameError",
    "ClusterIdZNode", "new_cluster_id", "new_topic_id", "encode_uuid", "decode_uuid",
    "ControllerZNode", "ControllerEpochZNode",
    "EndPoint", "BrokerRegistration", "BrokerSequenceIdZNode",
    "TopicZNode", "TopicPartitionsZNode", "TopicPartitionZNode", "TopicPartitionStateZNode", "NO_LEADER", "LEADER_DURING_DELETE",
    "ConfigEntityZNode", "TopicConfigZNode", "ConfigEntityChangeNotification", "sanitize", "desanitize",
    "DeleteTopicsZNode", "PreferredReplicaElection", "ReassignPartitions",
    "IsrChangeNotification", "LogDirEventNotification",
    "ProducerIdBlockZNode", "PRODUCER_ID_BLOCK_SIZE",
    "validate_topic_name", "is_valid_topic_name", "has_collision_chars",
    "unify_collision_chars", "collides_with", "MAX_TOPIC_NAME_LENGTH",
]
