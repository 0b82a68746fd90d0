"""What this broker knows of the cluster: live brokers, topics, assignments, partition states.

Filled from ZooKeeper watches (``metadata_sync``), read by every handler. Each broker watches the
same znodes, so a client bootstrapped on any broker sees the whole cluster. Waiters (CreateTopics
waiting for leaders, DeleteTopics waiting for the topic to vanish) watch the purgatory key
:data:`METADATA_CHANGED`, checked after every change.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkalite.metadata.state import LeaderAndIsr
from zk_schema.uuids import decode_uuid

ZERO_UUID = uuid.UUID(int=0)

METADATA_CHANGED = "metadata-changed"


@dataclass
class BrokerInfo:
    broker_id: int
    endpoints: dict[str, tuple[str, int]]      # listener name -> (host, port)
    rack: str | None = None

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        return self.endpoints.get(listener)


@dataclass
class TopicInfo:
    name: str
    assignment: dict[int, list[int]]           # partition -> replicas, first = preferred leader
    topic_id: str | None = None
    config: dict[str, str] = field(default_factory=dict)   # overrides from /config/topics/<t>
    deleting: bool = False
    #: A reassignment in progress (KIP-455): ``assignment`` is then RS = ORS + TRS, and these
    #: hold TRS - ORS and ORS - TRS for the partitions being reassigned.
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    zk_version: int = -1                       # of /brokers/topics/<t>, for the controller's writes

    @property
    def topic_uuid(self) -> uuid.UUID:
        """``topic_id`` (Kafka's base64 text, KIP-516) as the wire's Uuid; the zero Uuid when the
        topic has none or another tool wrote a malformed one."""
        if self.topic_id:
            try:
                return decode_uuid(self.topic_id)
            except ValueError:
                pass
        return ZERO_UUID


@dataclass
class MetadataCache:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    states: dict[tuple[str, int], LeaderAndIsr] = field(default_factory=dict)

    def partition_exists(self, topic: str, index: int) -> bool:
        info = self.topics.get(topic)
        return info is not None and index in info.assignment

    def leader_of(self, topic: str, index: int) -> int:
        state = self.states.get((topic, index))
        if state is None or state.leader not in self.brokers:
            return -1
        return state.leader

    def all_leaders_known(self, topic: str) -> bool:
        info = self.topics.get(topic)
        return info is not None and all(self.leader_of(topic, p) >= 0 for p in info.assignment)
