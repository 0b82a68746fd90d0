"""``/cluster/id``: the cluster id, written once by the first broker to start.

Payload: ``{"version":"1","id":"<22-char Kafka UUID>"}``. The version is a JSON *string*
in Kafka's encoder; we also accept the integer 1 on decode since Kafka's reader only looks
at ``id``.
"""
from __future__ import annotations

from dataclasses import dataclass

from zk_schema import paths
from zk_schema._json import dumps, loads_object, req_str
from zk_schema.errors import ZkDataError
from zk_schema.uuids import new_cluster_id

__all__ = ["ClusterIdZNode", "new_cluster_id"]


@dataclass(frozen=True)
class ClusterIdZNode:
    id: str

    PATH = paths.CLUSTER_ID

    @staticmethod
    def path() -> str:
        return paths.CLUSTER_ID

    @classmethod
    def generate(cls) -> "ClusterIdZNode":
        return cls(new_cluster_id())

    def encode(self) -> bytes:
        return dumps({"version": "1", "id": self.id})

    @classmethod
    def decode(cls, data: bytes) -> "ClusterIdZNode":
        obj = loads_object("/cluster/id", data)
        if obj.get("version") not in ("1", 1):
            raise ZkDataError("/cluster/id", f"unsupported version {obj.get('version')!r}")
        cluster_id = req_str("/cluster/id", obj, "id")
        if not cluster_id:
            raise ZkDataError("/cluster/id", "empty id")
        return cls(cluster_id)
