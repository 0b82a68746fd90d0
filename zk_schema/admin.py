"""Admin request znodes under ``/admin``: topic deletion, preferred election, reassignment.

- ``/admin/delete_topics/<t>``: no data; its existence queues the topic for deletion.
- ``/admin/preferred_replica_election``: ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``
- ``/admin/reassign_partitions`` (deprecated since 2.4, kept for old tools):
  ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}``
  (entries may carry ``log_dirs``, which kafkalite reads past).
"""
from __future__ import annotations

from dataclasses import dataclass

from zk_schema import paths
from zk_schema._json import dumps, int_list, loads_object, req_int, req_list, req_str, req_version
from zk_schema._partitions import decode_partitions, encode_partitions
from zk_schema.errors import ZkDataError


class DeleteTopicsZNode:
    """``/admin/delete_topics`` and its per-topic marker children (null data)."""

    PATH = paths.DELETE_TOPICS

    @staticmethod
    def path(topic: str | None = None) -> str:
        return paths.DELETE_TOPICS if topic is None else f"{paths.DELETE_TOPICS}/{topic}"

    @staticmethod
    def encode() -> bytes:
        return b""


@dataclass(frozen=True)
class PreferredReplicaElection:
    partitions: tuple[tuple[str, int], ...]

    PATH = paths.PREFERRED_REPLICA_ELECTION

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple((t, int(p)) for t, p in self.partitions))

    @staticmethod
    def path() -> str:
        return paths.PREFERRED_REPLICA_ELECTION

    def encode(self) -> bytes:
        return dumps({"version": 1, "partitions": encode_partitions(self.partitions)})

    @classmethod
    def decode(cls, data: bytes) -> "PreferredReplicaElection":
        obj = loads_object(cls.PATH, data)
        req_version(cls.PATH, obj, (1,))
        return cls(decode_partitions(cls.PATH, obj))


@dataclass(frozen=True)
class ReassignPartitions:
    """Requested target replicas per (topic, partition)."""

    reassignments: dict[tuple[str, int], tuple[int, ...]]

    PATH = paths.REASSIGN_PARTITIONS

    def __post_init__(self) -> None:
        object.__setattr__(self, "reassignments",
                           {(t, int(p)): tuple(r) for (t, p), r in self.reassignments.items()})

    @staticmethod
    def path() -> str:
        return paths.REASSIGN_PARTITIONS

    def encode(self) -> bytes:
        return dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r)}
            for (t, p), r in self.reassignments.items()]})

    @classmethod
    def decode(cls, data: bytes) -> "ReassignPartitions":
        znode = cls.PATH
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        result: dict[tuple[str, int], tuple[int, ...]] = {}
        for entry in req_list(znode, obj, "partitions"):
            if not isinstance(entry, dict):
                raise ZkDataError(znode, f"partition entry must be an object, got {entry!r}")
            key = (req_str(znode, entry, "topic"), req_int(znode, entry, "partition"))
            result[key] = tuple(int_list(znode, req_list(znode, entry, "replicas"), "replicas"))
        return cls(result)
