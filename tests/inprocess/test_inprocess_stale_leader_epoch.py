"""Error precedence on a former leader (issue 28): a request carrying the client's
current_leader_epoch is checked against the replica's epoch first, then its leadership, as Kafka
2.8's ``Partition.getLocalLog`` does (``checkCurrentLeaderEpoch``, then ``isLeader``).

Broker ``old`` led the partition in epoch E and follows in a later epoch after a restart. A client
still at E (it has not seen the change) asking ``old`` gets FENCED_LEADER_EPOCH (74), not
NOT_LEADER_OR_FOLLOWER (6); one with the current epoch gets NOT_LEADER_OR_FOLLOWER; one with a newer
epoch UNKNOWN_LEADER_EPOCH. Two in-process brokers.
"""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.support.inprocess import InProcessCluster

TOPIC = "stale"


def fetch(client: Any, epoch: int) -> int:
    resp = client.request(ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    return int(resp["responses"][0]["partitions"][0]["error_code"])


def list_offsets(client: Any, epoch: int) -> int:
    resp = client.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}]}]})
    return int(resp["topics"][0]["partitions"][0]["error_code"])


def offset_for_leader_epoch(client: Any, epoch: int) -> int:
    resp = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, {"replica_id": -1, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0}]}]})
    return int(resp["topics"][0]["partitions"][0]["error_code"])


@pytest.fixture
def moved(inprocess_cluster_factory) -> tuple[InProcessCluster, int, int, int, int]:
    """(cluster, former leader, new leader, epoch the former led in, current epoch)."""
    cluster = inprocess_cluster_factory(2)
    cluster.create_topic(TOPIC, 1, 2)
    old = cluster.leader_of(TOPIC, 0)
    old_epoch = cluster.partition(old, TOPIC, 0).leader_epoch
    cluster.stop_broker(old)
    new = next(iter(cluster.brokers))
    cluster.pump_until(lambda: cluster.leader_of(TOPIC, 0) == new, what="the other broker leading")
    cluster.start_broker(old)
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0), what="the former leader back as a follower in the ISR")
    current = cluster.partition(new, TOPIC, 0).leader_epoch
    assert not cluster.partition(old, TOPIC, 0).is_leader and cluster.partition(old, TOPIC, 0).leader_epoch == current
    assert current > old_epoch
    return cluster, old, new, old_epoch, current


@pytest.mark.parametrize("ask", [fetch, list_offsets, offset_for_leader_epoch], ids=lambda f: f.__name__)
def test_an_older_epoch_at_a_former_leader_is_fenced_first(moved, ask) -> None:
    cluster, old, new, old_epoch, current = moved
    former = cluster.client(old)
    assert ask(former, old_epoch) == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(former, current) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ask(former, -1) == ErrorCode.NOT_LEADER_OR_FOLLOWER          # no epoch: leadership only
    leader = cluster.client(new)
    assert ask(leader, old_epoch) == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(leader, current) == ErrorCode.NONE


def test_a_newer_epoch_at_a_follower_is_unknown(moved) -> None:
    cluster, old, _new, _old_epoch, current = moved
    assert list_offsets(cluster.client(old), current + 1) == ErrorCode.UNKNOWN_LEADER_EPOCH
