"""A disk error turns a partition offline: KAFKA_STORAGE_ERROR for it, service for the others.

An in-process broker with two log dirs, one partition in each; storage's failure injection
(FailingDisk) makes every file operation under one dir fail with EIO.
"""
from __future__ import annotations

import os
from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.inprocess import InProcessCluster, produce_body, records
from tests.unit.storage.storage_helpers import FailingDisk

TOPIC = "disk"
PRODUCE, FETCH = 0, 1


def fetch(cluster: InProcessCluster, partitions: list[int]) -> dict[int, dict[str, Any]]:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{"partition": p, "current_leader_epoch": -1, "fetch_offset": 0,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                                                       for p in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = cluster.client(0).request(FETCH, 11, body)
    return {p["partition_index"]: p for t in resp["responses"] for p in t["partitions"]}


def test_an_append_hitting_an_io_error_answers_kafka_storage_error_and_other_partitions_keep_working(
        inprocess_cluster_factory, monkeypatch) -> None:
    """With the dir of one partition broken, a Produce to both partitions answers
    KAFKA_STORAGE_ERROR (56) for that one and appends to the other; the connection stays open;
    later produces and fetches of the healthy partition succeed, the broken one keeps answering
    56 without touching its dir again."""
    cluster = inprocess_cluster_factory(1, log_dirs_per_broker=2)
    cluster.create_topic(TOPIC, 2, 1)
    logs = {p: cluster.partition(0, TOPIC, p).log for p in (0, 1)}
    assert logs[0].log_dir != logs[1].log_dir, "the two partitions should be spread over the two dirs"
    bad, good = 0, 1
    disk = FailingDisk(monkeypatch, logs[bad].log_dir)

    client = cluster.client(0)
    first = client.request(PRODUCE, 8, produce_body(TOPIC, {bad: records([b"a"]), good: records([b"a"])}, acks=1))
    assert {p["index"]: p["error_code"] for p in first["responses"][0]["partition_responses"]} == {bad: 0, good: 0}

    disk.broken = True
    resp = client.request(PRODUCE, 8, produce_body(TOPIC, {bad: records([b"b"]), good: records([b"b"])}, acks=1))
    codes = {p["index"]: (p["error_code"], p["base_offset"]) for p in resp["responses"][0]["partition_responses"]}
    assert codes == {bad: (ErrorCode.KAFKA_STORAGE_ERROR, -1), good: (0, 1)}
    assert not client.closed
    assert cluster.brokers[0].log_manager.failures.is_offline(os.path.abspath(logs[bad].log_dir))
    touched = len(disk.attempts)

    again = client.request(PRODUCE, 8, produce_body(TOPIC, {good: records([b"c"])}, acks=1))
    assert again["responses"][0]["partition_responses"][0]["error_code"] == 0
    refused = client.request(PRODUCE, 8, produce_body(TOPIC, {bad: records([b"c"])}, acks=1))
    assert refused["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    fetched = fetch(cluster, [bad, good])
    assert fetched[good]["error_code"] == 0 and fetched[good]["high_watermark"] == 3
    assert len(bytes(fetched[good]["records"])) > 0
    assert fetched[bad]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert not client.closed
    assert len(disk.attempts) == touched, f"the offline dir was touched again: {disk.attempts[touched:]}"
