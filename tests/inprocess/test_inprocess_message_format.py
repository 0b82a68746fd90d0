"""message.format.version per topic on in-process brokers (Kafka 2.8's LogValidator, KafkaApis,
Log.fetchOffsetByTimestamp): a topic altered to 0.10.0 mid-stream keeps its v2 batches and
serves what came after as magic 1 to every consumer's Fetch version, followers copy the marked
batches byte for byte, and what format v0/v1 cannot hold is refused with Kafka's codes."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.errors import ErrorCode
from kafkalite.records import Codec
from kafkalite.records.builder import build_batch
from tests.support.inprocess import InProcessClient, InProcessCluster

memory_records = pytest.importorskip("kafka.record.memory_records")

PRODUCE, FETCH, LIST_OFFSETS, INCREMENTAL_ALTER_CONFIGS = 0, 1, 2, 44
TOPIC_RESOURCE = 2
T0 = 1_700_000_000_000


def produce(client: InProcessClient, topic: str, batch: bytes, version: int = 8) -> dict[str, Any]:
    resp = client.request(PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp["responses"][0]["partition_responses"][0]


def values_batch(first: int, n: int, codec: int = Codec.NONE, **options: Any) -> bytes:
    return bytes(build_batch([(T0 + first + i, None, b"m%d" % (first + i), ()) for i in range(n)],
                             compression=codec, **options))


def fetch(client: InProcessClient, topic: str, version: int, offset: int = 0) -> bytes:
    body: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                            "isolation_level": 0, "topics": [{"topic": topic, "partitions": [{
                                "partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}
    if version >= 7:
        body.update(session_id=0, session_epoch=-1, forgotten_topics_data=[])
    if version >= 9:
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = -1
    if version >= 5:
        body["topics"][0]["partitions"][0]["log_start_offset"] = -1
    if version >= 11:
        body["rack_id"] = ""
    if version >= 12:
        body.update(cluster_id=None)
        body["topics"][0]["partitions"][0]["last_fetched_epoch"] = -1
    if version < 3:
        del body["max_bytes"]
    if version < 4:
        del body["isolation_level"]
    resp = client.request(FETCH, version, body)
    entry = resp["responses"][0]["partitions"][0]
    assert entry["error_code"] == 0, entry
    return bytes(entry["records"])


def read(data: bytes) -> list[tuple[int, int, int | None, bytes | None]]:
    """(magic, offset, timestamp, value) per record, as kafka-python's consumer reads a fetch."""
    out = []
    records = memory_records.MemoryRecords(data)
    while (b := records.next_batch()) is not None:
        out += [(b.magic, r.offset, r.timestamp, r.value) for r in b]
    return out


def set_format(cluster: InProcessCluster, client: InProcessClient, topic: str, version: str) -> None:
    resp = client.request(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic,
         "configs": [{"name": "message.format.version", "config_operation": 0, "value": version}]}]})
    assert resp["responses"][0]["error_code"] == 0, resp
    cluster.pump_until(lambda: all(b.topic_configs.effective(topic)["message.format.version"] == version
                                   for b in cluster.brokers.values()), what="the new message format on every broker")


def test_a_topic_altered_to_0_10_0_serves_the_later_records_as_magic_1(inprocess_cluster_factory) -> None:
    cluster: InProcessCluster = inprocess_cluster_factory(2)
    cluster.create_topic("mixed", 1, 2)
    leader = cluster.leader_of("mixed", 0)
    client = cluster.client(leader)
    assert produce(client, "mixed", values_batch(0, 3))["error_code"] == 0
    set_format(cluster, client, "mixed", "0.10.0.0")
    assert produce(client, "mixed", values_batch(3, 3))["error_code"] == 0
    assert produce(client, "mixed", values_batch(6, 2, Codec.GZIP))["error_code"] == 0
    assert produce(client, "mixed", values_batch(8, 2, Codec.NONE), version=3)["base_offset"] == 8
    expected = [(2 if o < 3 else 1, o, T0 + o, b"m%d" % o) for o in range(10)]
    for version in (4, 7, 12):
        assert read(fetch(client, "mixed", version)) == expected
    assert read(fetch(client, "mixed", 12, offset=4))[0][1] == 4          # whole v1 messages from the offset
    assert {m for m, *_ in read(fetch(client, "mixed", 2))} == {1}       # Fetch v2-3: all magic 1
    assert {m for m, *_ in read(fetch(client, "mixed", 1))} == {0}       # Fetch v0-1: all magic 0
    follower = 1 - leader
    cluster.pump_until(lambda: cluster.partition(follower, "mixed", 0).log.log_end_offset == 10, what="replication")
    logs = [cluster.partition(b, "mixed", 0).log for b in (leader, follower)]
    assert all(log.holds_old_formats for log in logs)
    assert bytes(logs[0].read(0, 1 << 20).records) == bytes(logs[1].read(0, 1 << 20).records)


def test_format_v0_has_no_timestamps_and_refuses_timestamp_lookups(inprocess_cluster_factory) -> None:
    cluster: InProcessCluster = inprocess_cluster_factory(1)
    cluster.create_topic("old", 1, 1, configs={"message.format.version": "0.9.0"})
    cluster.create_topic("v1", 1, 1, configs={"message.format.version": "0.10.2"})
    client = cluster.client(0)
    for topic in ("old", "v1"):
        assert produce(client, topic, values_batch(0, 2))["error_code"] == 0
    assert read(fetch(client, "old", 12)) == [(0, 0, None, b"m0"), (0, 1, None, b"m1")]

    def lookup(topic: str, ts: int) -> dict[str, Any]:
        resp = client.request(LIST_OFFSETS, 6, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
        return resp["topics"][0]["partitions"][0]
    assert lookup("old", T0)["error_code"] == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert lookup("old", -1)["offset"] == 2                            # latest and earliest still answer
    assert (lookup("v1", T0 + 1)["error_code"], lookup("v1", T0 + 1)["offset"]) == (0, 1)


@pytest.mark.parametrize("options,code", [
    ({"producer_id": 1000, "producer_epoch": 0, "base_sequence": 0}, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    ({"producer_id": 1000, "producer_epoch": 0, "base_sequence": 0, "transactional": True},
     ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    ({"compression": Codec.ZSTD}, ErrorCode.UNKNOWN_SERVER_ERROR),
])
def test_what_format_v1_cannot_hold_is_refused_and_nothing_is_appended(inprocess_cluster_factory, options: dict,
                                                                      code: ErrorCode) -> None:
    cluster: InProcessCluster = inprocess_cluster_factory(1)
    cluster.create_topic("v1", 1, 1, configs={"message.format.version": "0.10.0"})
    client = cluster.client(0)
    batch = bytes(build_batch([(T0, None, b"v", ())], **options))
    resp = client.request(PRODUCE, 8, {"transactional_id": "t" if options.get("transactional") else None, "acks": 1,
                                       "timeout_ms": 5000,
                                       "topic_data": [{"name": "v1", "partition_data": [{"index": 0, "records": batch}]}]})
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == code
    headers = bytes(build_batch([(T0, None, b"v", [("h", b"x")])]))
    assert produce(client, "v1", headers)["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert cluster.partition(0, "v1", 0).log.log_end_offset == 0
