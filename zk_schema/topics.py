"""``/brokers/topics/<t>`` (replica assignment) and its ``partitions/<p>/state`` children.

Assignment, version 3 (2.8+; v1 had only ``partitions``, v2 added the reassignment maps)::

    {"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]},
     "adding_replicas":{},"removing_replicas":{},"topic_id":"HvJtL8vqT6aZ3m5Q0mU7aA"}

Partition numbers are string keys; the first replica is the preferred leader; the
reassignment maps hold only non-empty entries; ``topic_id`` is optional.

Partition state, version 1 (its zkVersion is the optimistic-concurrency token)::

    {"version":1,"leader":1,"leader_epoch":4,"controller_epoch":7,"isr":[1,3]}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from zk_schema import paths
from zk_schema._json import (dumps, int_list, loads_object, opt_str, partition_key, req_int,
                             req_list, req_object, req_version)
from zk_schema.errors import ZkDataError
from zk_schema.uuids import decode_uuid

#: ``leader`` value meaning "no leader"; -2 marks a partition being deleted.
NO_LEADER = -1
LEADER_DURING_DELETE = -2


def _assignment_map(znode: str, raw: dict[str, Any], what: str) -> dict[int, tuple[int, ...]]:
    return {partition_key(znode, k): tuple(int_list(znode, v, f"{what}[{k!r}]"))
            for k, v in raw.items()}


def _freeze(assign: Mapping[int, Sequence[int]]) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(r) for p, r in sorted(assign.items())}


@dataclass(frozen=True)
class TopicZNode:
    """A topic's replica assignment: partition -> replica broker ids (preferred leader first)."""

    partitions: dict[int, tuple[int, ...]]
    adding_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None

    def __post_init__(self) -> None:
        # normalise so equality does not depend on list/tuple or key order
        object.__setattr__(self, "partitions", _freeze(self.partitions))
        object.__setattr__(self, "adding_replicas",
                           {p: r for p, r in _freeze(self.adding_replicas).items() if r})
        object.__setattr__(self, "removing_replicas",
                           {p: r for p, r in _freeze(self.removing_replicas).items() if r})
        if self.topic_id is not None:
            decode_uuid(self.topic_id)

    @staticmethod
    def path(topic: str) -> str:
        return f"{paths.BROKER_TOPICS}/{topic}"

    def assignment(self) -> dict[int, list[int]]:
        return {p: list(r) for p, r in self.partitions.items()}

    def encode(self) -> bytes:
        def as_json(m: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in m.items()}
        obj: dict[str, Any] = {
            "version": 3,
            "partitions": as_json(self.partitions),
            "adding_replicas": as_json(self.adding_replicas),
            "removing_replicas": as_json(self.removing_replicas),
        }
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        return dumps(obj)

    @classmethod
    def decode(cls, data: bytes, topic: str = "<topic>") -> "TopicZNode":
        znode = cls.path(topic)
        obj = loads_object(znode, data)
        version = req_version(znode, obj, (1, 2, 3))
        partitions = _assignment_map(znode, req_object(znode, obj, "partitions"), "partitions")
        adding: dict[int, tuple[int, ...]] = {}
        removing: dict[int, tuple[int, ...]] = {}
        if version >= 2:
            if obj.get("adding_replicas") is not None:
                adding = _assignment_map(znode, req_object(znode, obj, "adding_replicas"),
                                         "adding_replicas")
            if obj.get("removing_replicas") is not None:
                removing = _assignment_map(znode, req_object(znode, obj, "removing_replicas"),
                                           "removing_replicas")
        topic_id = opt_str(znode, obj, "topic_id") if version >= 3 else None
        try:
            return cls(partitions, adding, removing, topic_id)
        except ValueError as exc:
            raise ZkDataError(znode, str(exc)) from None


class TopicPartitionsZNode:
    """``/brokers/topics/<t>/partitions``: no data, parent of the partition nodes."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/<t>/partitions/<p>``: no data, parent of ``state``."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{int(partition)}"


@dataclass(frozen=True)
class TopicPartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader and ISR as the controller (or leader)
    last wrote them (the payload only; ``kafkalite.metadata.LeaderAndIsr`` adds its zkVersion)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    def encode(self) -> bytes:
        return dumps({"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch,
                      "controller_epoch": self.controller_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, data: bytes) -> "TopicPartitionStateZNode":
        znode = "partition state"
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        return cls(req_int(znode, obj, "leader"), req_int(znode, obj, "leader_epoch"),
                   tuple(int_list(znode, req_list(znode, obj, "isr"), "isr")),
                   req_int(znode, obj, "controller_epoch"))

