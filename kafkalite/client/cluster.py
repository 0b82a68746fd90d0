"""The cluster as a Metadata response describes it (immutable snapshots)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kafkalite.errors import ErrorCode


class TopicPartition(NamedTuple):
    """The named form of ``kafkalite.topic_partition.TopicPartition`` for the client's API: a
    subtype of the plain ``(topic, partition)`` tuple, equal and hashing alike."""

    topic: str
    partition: int


class ConsumerGroupMetadata(NamedTuple):
    """What send_offsets_to_transaction needs of a consumer (Java's ConsumerGroupMetadata):
    TxnOffsetCommit v3 fences a zombie consumer by generation and member."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int                 # -1 when leaderless
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error: ErrorCode


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error: ErrorCode
    internal: bool
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, tuple[str, int, str | None]]
    controller_id: int
    cluster_id: str | None
    topics: dict[str, TopicMetadata]

    def leader(self, tp: TopicPartition) -> int:
        """The leader's broker id, -1 if the topic, the partition or a leader is missing."""
        topic = self.topics.get(tp.topic)
        if topic is None:
            return -1
        part = topic.partitions.get(tp.partition)
        return -1 if part is None else part.leader


#: ErrorCode by value: a dict look-up per partition instead of the Enum constructor's call (10,000
#: partitions are 10,000 look-ups in an all-topics answer)
_CODES: dict[int, ErrorCode] = {c.value: c for c in ErrorCode}


def _code(value: int) -> ErrorCode:
    """``ErrorCode(value)``; a code this build does not know is UNKNOWN_SERVER_ERROR."""
    return _CODES.get(value, ErrorCode.UNKNOWN_SERVER_ERROR)


def from_response(resp: dict) -> ClusterMetadata:
    """Build a snapshot from a decoded MetadataResponse body."""
    brokers = {b["node_id"]: (b["host"], b["port"], b.get("rack")) for b in resp["brokers"]}
    topics: dict[str, TopicMetadata] = {}
    for t in resp["topics"]:
        parts = {
            p["partition_index"]: PartitionMetadata(
                p["partition_index"], p["leader_id"], p.get("leader_epoch", -1), list(p["replica_nodes"] or []),
                list(p["isr_nodes"] or []), list(p.get("offline_replicas") or []), _code(p["error_code"]))
            for p in t["partitions"] or []
        }
        topics[t["name"]] = TopicMetadata(t["name"], _code(t["error_code"]), bool(t.get("is_internal")), parts)
    return ClusterMetadata(brokers, resp.get("controller_id", -1), resp.get("cluster_id"), topics)
