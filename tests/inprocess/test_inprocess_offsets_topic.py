"""Committed offsets survive a coordinator move: the new leader of the group's
``__consumer_offsets`` partition loads it from its replica of the log (three in-process brokers).
"""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.inprocess import InProcessCluster

GROUP = "billing"
TOPIC = "orders"
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10


def find_coordinator(cluster: InProcessCluster, via: int) -> int:
    """FindCoordinator until it names a node (the first call creates __consumer_offsets)."""
    found: list[int] = []

    def ask() -> bool:
        resp = cluster.client(via).request(FIND_COORDINATOR, 2, {"key": GROUP, "key_type": 0})
        if resp["error_code"] == 0:
            found.append(resp["node_id"])
        else:
            assert resp["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE, resp
        return bool(found)

    cluster.pump_until(ask, what="a coordinator for the group", step_s=0.1)
    return found[0]


def offset_fetch(cluster: InProcessCluster, coordinator: int) -> dict[str, Any]:
    return cluster.client(coordinator).request(OFFSET_FETCH, 5, {
        "group_id": GROUP, "require_stable": False,
        "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]})


def committed(resp: dict[str, Any]) -> dict[int, tuple[int, str, int]]:
    assert resp["error_code"] == 0, resp
    return {p["partition_index"]: (p["committed_offset"], p["metadata"], p["error_code"])
            for t in resp["topics"] for p in t["partitions"]}


def test_offsets_are_loaded_by_the_new_coordinator_after_the_offsets_partition_moves(
        inprocess_cluster_factory) -> None:
    """A standalone OffsetCommit (acks=all into __consumer_offsets, RF 3) is answered by the
    coordinator; its broker stops; the partition's new leader is the new coordinator and answers
    COORDINATOR_LOAD_IN_PROGRESS while it reads the partition (held back here), then the
    committed offsets and metadata, read from its own replica of the log."""
    cluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, 2, 3)
    coordinator = find_coordinator(cluster, via=0)
    offsets_partition = cluster.brokers[coordinator].groups.coordinator.partition_of(GROUP)
    cluster.pump_until(lambda: cluster.replicated("__consumer_offsets", offsets_partition),
                       what="the group's offsets partition fully replicated")

    resp = cluster.client(coordinator).request(OFFSET_COMMIT, 2, {
        "group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_metadata": "first"},
            {"partition_index": 1, "committed_offset": 7, "committed_metadata": None}]}]})
    assert [p["error_code"] for t in resp["topics"] for p in t["partitions"]] == [0, 0]
    assert committed(offset_fetch(cluster, coordinator)) == {0: (42, "first", 0), 1: (7, "", 0)}

    loads = "_read_partition"
    cluster.runner.hold(lambda fn: getattr(fn, "__name__", "") == loads)
    cluster.stop_broker(coordinator)
    survivor = min(cluster.brokers)
    cluster.pump_until(lambda: cluster.leader_of("__consumer_offsets", offsets_partition) in cluster.brokers,
                       what="a new leader for the offsets partition")
    new_coordinator = find_coordinator(cluster, via=survivor)
    assert new_coordinator != coordinator
    assert cluster.runner.waiting, "the new leader did not start loading the offsets partition"

    loading = offset_fetch(cluster, new_coordinator)
    assert loading["error_code"] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    cluster.runner.release()
    cluster.pump_until(lambda: offset_fetch(cluster, new_coordinator)["error_code"] == 0,
                       what="the offsets partition loaded")
    assert committed(offset_fetch(cluster, new_coordinator)) == {0: (42, "first", 0), 1: (7, "", 0)}
