"""Replication throttles as Kafka 2.x has them (KIP-73): a leader's and a follower's byte rate.

Only the replicas a topic lists in ``leader.replication.throttled.replicas`` (the replicas a
leader sends from) or ``follower.replication.throttled.replicas`` (the replicas a follower
fetches into) are throttled, at the broker's ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate``; an in-sync replica never is. The leader leaves a
throttled partition out of a follower's Fetch answer while its rate is over the bound, the
follower leaves it out of its Fetch request; both count the bytes of throttled partitions that
went through (Kafka's ReplicationQuotaManager), so a reassignment's copy moves at about the rate
while replicas already in sync keep replicating at full speed.
"""
from __future__ import annotations

from typing import Iterable

from kafkalite.quota.core import Rate, RateConfig

#: no bound (the rates' default, Long.MAX_VALUE)
UNBOUNDED = 2**63 - 1
#: every partition of the topic (the config value ``*``)
ALL = "*"


def parse_throttled_replicas(value: str | None, broker_id: int) -> frozenset[int] | str:
    """The partitions of one topic throttled on ``broker_id`` (Kafka's QuotaConfigHandler):
    ``*`` is every partition; otherwise the ``partition:broker`` pairs naming this broker.
    A malformed pair is skipped (the config's validator refuses them on the way in)."""
    text = (value or "").strip()
    if text == ALL:
        return ALL
    out = set()
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            continue
        try:
            partition, broker = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        if broker == broker_id:
            out.add(partition)
    return frozenset(out)


def format_throttled_replicas(pairs: Iterable[tuple[int, int]]) -> str:
    """``partition:broker`` pairs as the config value the reassignment tool writes (sorted, unique)."""
    return ",".join(f"{p}:{b}" for p, b in sorted(set(pairs)))


class ReplicationQuota:
    """One direction (leader or follower) of one broker's replication throttle."""

    def __init__(self, config: RateConfig, bound: float = UNBOUNDED) -> None:
        self.config = config
        self.bound = bound
        self.rate = Rate(config)
        #: topic -> its throttled partitions on this broker (ALL for every one)
        self.throttled: dict[str, frozenset[int] | str] = {}

    def update_bound(self, bound: float) -> None:
        """A new rate (bytes/s) from the dynamic broker config; the samples stay."""
        self.bound = bound

    def mark_throttled(self, topic: str, partitions: frozenset[int] | str) -> None:
        if partitions == ALL or partitions:
            self.throttled[topic] = partitions
        else:
            self.throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        which = self.throttled.get(topic)
        return which is not None and (which == ALL or partition in which)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        """Kafka's ``sensor.checkQuotas``: the measured rate is above the bound."""
        if self.bound >= UNBOUNDED:
            return False
        return self.rate.measure(now_ms) > self.bound

    def record(self, size: int, now_ms: int) -> None:
        """Bytes of throttled partitions that went through."""
        if size > 0:
            self.rate.record(size, now_ms)

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """Leave this partition out now? (never an in-sync replica: Kafka's shouldLeaderThrottle /
        shouldFollowerThrottle)."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_quota_exceeded(now_ms)


class ReplicationQuotas:
    """A broker's two replication quotas."""

    def __init__(self, config: RateConfig, leader_rate: float = UNBOUNDED, follower_rate: float = UNBOUNDED) -> None:
        self.leader = ReplicationQuota(config, leader_rate)
        self.follower = ReplicationQuota(config, follower_rate)
        #: copying future replicas between this broker's log dirs (every one is throttled, as
        #: Kafka's ReplicaAlterLogDirsThread does with replica.alter.log.dirs.io.max.bytes.per.second)
        self.alter_log_dirs = ReplicationQuota(config)

    def update_topic(self, topic: str, leader_value: str | None, follower_value: str | None, broker_id: int) -> None:
        """A topic's throttled replica lists changed (or were first read)."""
        self.leader.mark_throttled(topic, parse_throttled_replicas(leader_value, broker_id))
        self.follower.mark_throttled(topic, parse_throttled_replicas(follower_value, broker_id))

    def remove_topic(self, topic: str) -> None:
        self.leader.throttled.pop(topic, None)
        self.follower.throttled.pop(topic, None)
