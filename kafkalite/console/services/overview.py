"""The cluster at a glance: brokers, controller, counts, under-replicated/offline partitions, health,
and (when the console knows the ensemble) ZooKeeper's members and their modes."""
from __future__ import annotations

from dataclasses import dataclass

from kafkalite.client.cluster import ClusterMetadata
from kafkalite.cluster.processes import four_letter

from ..context import ConsoleContext


@dataclass(frozen=True)
class BrokerRow:
    broker_id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    up: bool


@dataclass(frozen=True)
class ZooKeeperMember:
    address: str
    mode: str            # leader | follower | standalone | observer | down (no answer)
    detail: str = ""


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerRow]
    topics: int
    partitions: int
    under_replicated: int
    offline: int
    zookeeper: list[ZooKeeperMember]

    @property
    def health(self) -> str:
        """Kafka's usual reading: offline partitions lose availability, under-replicated ones durability."""
        if self.offline or self.controller_id < 0:
            return "unavailable"
        if self.under_replicated or any(not b.up for b in self.brokers):
            return "degraded"
        return "healthy"


def summarise(md: ClusterMetadata) -> tuple[list[BrokerRow], int, int, int, int]:
    """(brokers, topics, partitions, under-replicated, offline) from one Metadata answer. A broker
    named as a replica but absent from the answer is registered nowhere: it is down."""
    partitions = under = offline = 0
    referenced: set[int] = set()
    for topic in md.topics.values():
        for p in topic.partitions.values():
            partitions += 1
            referenced.update(p.replicas)
            if p.leader < 0:
                offline += 1
            elif len(p.isr) < len(p.replicas):
                under += 1
    rows = [BrokerRow(b, host, port, rack, b == md.controller_id, True) for b, (host, port, rack) in md.brokers.items()]
    rows += [BrokerRow(b, "", 0, None, False, False) for b in referenced - set(md.brokers)]
    return sorted(rows, key=lambda r: r.broker_id), len(md.topics), partitions, under, offline


def zookeeper_members(connect: str) -> list[ZooKeeperMember]:
    """Each server of a ``host:port,...[/chroot]`` connect string asked ``srvr`` (its Mode line)."""
    members = []
    for address in connect.split("/", 1)[0].split(","):
        address = address.strip()
        if not address:
            continue
        host, _, port = address.rpartition(":")
        try:
            reply = four_letter("srvr", int(port), host or "127.0.0.1")
        except (OSError, ValueError) as exc:
            members.append(ZooKeeperMember(address, "down", str(exc)))
            continue
        mode = next((line.split(":", 1)[1].strip() for line in reply.splitlines() if line.startswith("Mode:")), "")
        if not mode:
            detail = reply.strip().splitlines()[0] if reply.strip() else "no answer (is srvr in 4lw.commands.whitelist?)"
            members.append(ZooKeeperMember(address, "unknown", detail))
        else:
            version = next((line.split(":", 1)[1].strip() for line in reply.splitlines()
                            if line.startswith("Zookeeper version:")), "")
            members.append(ZooKeeperMember(address, mode, version.split(",")[0]))
    return members


class OverviewService:
    def __init__(self, context: ConsoleContext) -> None:
        self.context = context

    def overview(self) -> Overview:
        md = self.context.call(lambda admin: admin.client.metadata(None))
        brokers, topics, partitions, under, offline = summarise(md)
        zk = zookeeper_members(self.context.settings.zookeeper) if self.context.settings.zookeeper else []
        return Overview(md.cluster_id, md.controller_id, brokers, topics, partitions, under, offline, zk)



