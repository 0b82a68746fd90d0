"""The reassignment tool's throttle lists (Kafka's calculateLeaderThrottles /
calculateFollowerThrottles: every current replica of a moving partition sends, every new one
receives; partitions that do not move are not throttled) and the decommission plan (each replica
on the broker goes to the least-loaded live broker not already holding the partition, keeping its
position; impossible moves are one-line errors)."""
from __future__ import annotations

import pytest

from kafkalite.cli import reassign_partitions as tool
from kafkalite.cli.common import ToolError
from kafkalite.client.cluster import TopicPartition


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def test_throttled_replica_lists_name_sources_and_destinations_per_topic() -> None:
    current = {tp("a", 0): [1, 2], tp("a", 1): [2, 3], tp("b", 0): [1, 2], tp("c", 0): [3]}
    plan = {tp("a", 0): [1, 4], tp("a", 1): [2, 3], tp("b", 0): [3, 4], tp("c", 0): [3]}
    assert tool.throttled_replicas(plan, current) == {"a": ("0:1,0:2", "0:4"), "b": ("0:1,0:2", "0:3,0:4")}


def test_decommission_spreads_the_replicas_of_a_broker_over_the_least_loaded_others() -> None:
    current = {tp("t", 0): [3, 1], tp("t", 1): [1, 3], tp("t", 2): [2, 3], tp("t", 3): [1, 2], tp("u", 0): [1]}
    plan = tool.decommission_plan(current, 3, [1, 2, 3, 4])
    # loads of the others: 1 holds 4 replicas, 2 holds 2, 4 none: 4 takes each move while least loaded
    assert plan == {tp("t", 0): [4, 1], tp("t", 1): [1, 4], tp("t", 2): [2, 4]}
    for key, replicas in plan.items():
        assert 3 not in replicas and len(set(replicas)) == len(replicas) == len(current[key])
        assert [b for b in replicas if b in current[key]] == [b for b in current[key] if b != 3]
    assert tool.decommission_plan(current, 4, [1, 2, 3, 4]) == {}
    with pytest.raises(ToolError, match="cannot move t-0 off broker 3: its replication factor is 2 and only 1"):
        tool.decommission_plan(current, 3, [1, 3])
