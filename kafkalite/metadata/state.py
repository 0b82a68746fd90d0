"""``LeaderAndIsr``: one partition's leader, leader epoch and ISR, with the znode version they came from.

Kafka's ``LeaderAndIsr`` carries ``zkVersion`` from the ZooKeeper read through the controller's
context to the partition, so every later write of the state znode is conditional on the version
it was computed from; a write that loses that race fails with a typed version conflict and the
writer waits for the newer state its watch delivers. This is the only partition-state type: the
controller's decisions, the served metadata cache and each partition replica all hold it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

#: Leader id of a partition with no leader (Kafka's ``LeaderAndIsr.NoLeader``).
NO_LEADER = -1


@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    #: zkVersion of the state znode this value was read from or written as; -1 = not written yet.
    zk_version: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.isr, tuple):
            object.__setattr__(self, "isr", tuple(self.isr))

    def with_isr(self, isr: tuple[int, ...] | list[int]) -> "LeaderAndIsr":
        """The same leadership with another ISR (a leader's ISR change keeps its leader epoch,
        as Kafka before 2.7 does; the znode version moves)."""
        return replace(self, isr=tuple(isr))

    def with_version(self, zk_version: int) -> "LeaderAndIsr":
        return replace(self, zk_version=zk_version)

    def same_state(self, other: "LeaderAndIsr") -> bool:
        """Equal apart from the znode version (a re-read after a lost reply shows our own write)."""
        return (self.leader, self.leader_epoch, self.isr, self.controller_epoch) == \
            (other.leader, other.leader_epoch, other.isr, other.controller_epoch)
