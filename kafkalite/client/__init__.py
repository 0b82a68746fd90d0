"""kafkalite's own blocking Kafka client (tools, perf tests, the Spark reader).

Built on the project's codec (:mod:`kafkalite.protocol`) and record batch code
(:mod:`kafkalite.records`); see CLIENT_CONTRACT.md for the core contract.
"""
from .cluster import ClusterMetadata, ConsumerGroupMetadata, PartitionMetadata, TopicMetadata, TopicPartition
from .core import FetchedPartition, KafkaClient
from .errors import ClientError, ConnectionFailed
from .producer import Producer, RecordMetadata
from .consumer import Consumer, ConsumerRecord
from .admin import Admin, NewTopic

__all__ = ["Admin", "Consumer", "ConsumerGroupMetadata", "ConsumerRecord", "NewTopic", "ClientError", "ClusterMetadata", "ConnectionFailed", "FetchedPartition", "KafkaClient",
           "PartitionMetadata", "Producer", "RecordMetadata", "TopicMetadata", "TopicPartition"]
