"""The client-facing APIs at Kafka 2.8's highest versions (flexible ones included), on one
in-process broker: what each new version adds is answered with Kafka's semantics.

Every request and answer passes the strict codec (complete dicts, known keys only), so a field a
new version adds and a handler forgot fails here too.
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkalite.errors import ErrorCode
from kafkalite.protocol.schema import ZERO_UUID
from kafkalite.records.builder import build_batch
from tests.support.inprocess import InProcessClient, InProcessCluster, records
from zk_schema.uuids import decode_uuid

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 19, 20, 32, 33
DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_FOR_LEADER_EPOCH = 42, 44, 23
OFFSET_DELETE, DESCRIBE_CLUSTER = 47, 60
TOPIC_RESOURCE = 2
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = 1, 5


@pytest.fixture
def one(inprocess_cluster_factory) -> InProcessCluster:
    return inprocess_cluster_factory(1)


def metadata(client: InProcessClient, names: list[str], version: int = 11,
             topic_id: Any = ZERO_UUID) -> dict[str, Any]:
    body: dict[str, Any] = {"topics": [{"name": n, "topic_id": topic_id} for n in names],
                            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    if version <= 10:
        body["include_cluster_authorized_operations"] = False
    return client.request(METADATA, version, body)


def test_metadata_v10_v11_answer_the_topic_id_of_the_topic_znode(one: InProcessCluster) -> None:
    """KIP-516: the id written to /brokers/topics/<t> at creation comes back as a Uuid (v10+);
    a request naming a topic by id is refused (Kafka 2.8 looks topics up by name only)."""
    one.create_topic("ids", 2, 1)
    stored = one.brokers[0].metadata.topics["ids"].topic_id
    assert stored is not None
    client = one.client(0)
    for version in (10, 11):
        [topic] = metadata(client, ["ids"], version)["topics"]
        assert topic["error_code"] == 0 and len(topic["partitions"]) == 2
        assert topic["topic_id"] == decode_uuid(stored) != ZERO_UUID
    [refused] = metadata(client, ["ids"], 11, topic_id=decode_uuid(stored))["topics"]
    assert refused["error_code"] == ErrorCode.INVALID_REQUEST


def test_create_topics_v6_answers_partitions_replication_and_configs(one: InProcessCluster) -> None:
    """KIP-525: CreateTopics v5+ answers what the topic is created with (also validate_only,
    which creates nothing); a refused topic answers -1/-1 and null configs."""
    client = one.client(0)

    def topic(name: str, partitions: int, configs: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in configs.items()]}

    resp = client.request(CREATE_TOPICS, 6, {"topics": [topic("planned", 3, {"cleanup.policy": "compact"}),
                                                         topic("bad", 0, {})],
                                             "timeout_ms": 5000, "validate_only": True})
    planned, bad = resp["topics"]
    assert (planned["error_code"], planned["num_partitions"], planned["replication_factor"]) == (0, 3, 1)
    configs = {c["name"]: (c["value"], c["config_source"]) for c in planned["configs"]}
    assert configs["cleanup.policy"] == ("compact", SOURCE_DYNAMIC_TOPIC)
    assert configs["retention.ms"] == ("604800000", SOURCE_DEFAULT)
    assert bad["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert (bad["num_partitions"], bad["replication_factor"], bad["configs"]) == (-1, -1, None)
    assert "planned" not in one.brokers[0].metadata.topics


def test_delete_topics_v5_answers_an_error_message_only_on_error(one: InProcessCluster) -> None:
    """DeleteTopics v5: a missing topic gets UNKNOWN_TOPIC_OR_PARTITION, a deleted one no message."""
    one.create_topic("doomed", 1, 1)
    resp = one.client(0).request(DELETE_TOPICS, 5, {"topic_names": ["doomed", "never-was"], "timeout_ms": 5000})
    got = {r["name"]: (r["error_code"], r["error_message"]) for r in resp["responses"]}
    assert got == {"doomed": (0, None), "never-was": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}


def test_create_topics_v7_and_delete_topics_v6_speak_topic_ids(one: InProcessCluster) -> None:
    """KIP-516: CreateTopics v7 answers the id written to the topic znode; DeleteTopics v6 deletes
    by id, answers UNKNOWN_TOPIC_ID for an id no topic has, and refuses a request naming a topic
    by name and id at once (INVALID_REQUEST for every topic, nothing deleted)."""
    client = one.client(0)
    resp = client.request(CREATE_TOPICS, 7, {"topics": [
        {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for n in ("by-id", "by-name")], "timeout_ms": 5000, "validate_only": False})
    ids = {t["name"]: t["topic_id"] for t in resp["topics"]}
    assert [t["error_code"] for t in resp["topics"]] == [0, 0]
    assert ids["by-id"] == decode_uuid(one.brokers[0].metadata.topics["by-id"].topic_id) != ZERO_UUID
    stray = uuid.UUID(int=12345)
    refused = client.request(DELETE_TOPICS, 6, {"timeout_ms": 5000, "topics": [
        {"name": "by-name", "topic_id": ids["by-name"]}, {"name": None, "topic_id": ids["by-id"]}]})
    assert [r["error_code"] for r in refused["responses"]] == [ErrorCode.INVALID_REQUEST] * 2
    resp = client.request(DELETE_TOPICS, 6, {"timeout_ms": 5000, "topics": [
        {"name": None, "topic_id": ids["by-id"]}, {"name": None, "topic_id": stray},
        {"name": "by-name", "topic_id": ZERO_UUID}]})
    got = [(r["name"], r["topic_id"], r["error_code"]) for r in resp["responses"]]
    assert got == [("by-id", ids["by-id"], 0), (None, stray, ErrorCode.UNKNOWN_TOPIC_ID), ("by-name", ZERO_UUID, 0)]
    assert not {"by-id", "by-name"} & set(one.brokers[0].metadata.topics)


def produce(client: InProcessClient, topic: str, batch: bytes, version: int = 9) -> dict[str, Any]:
    resp = client.request(PRODUCE, version, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp["responses"][0]["partition_responses"][0]


def test_produce_v9_names_the_keyless_records_a_compacted_topic_refuses(one: InProcessCluster) -> None:
    """KIP-467: records 1 and 3 of the batch have no key; the answer names both by their index
    in the batch, with Kafka's messages, and nothing is appended."""
    one.create_topic("compacted", 1, 1, configs={"cleanup.policy": "compact"})
    batch = bytes(build_batch([(1000, b"k0", b"v", ()), (1000, None, b"v", ()), (1000, b"k2", b"v", ()),
                               (1000, None, b"v", ())]))
    entry = produce(one.client(0), "compacted", batch)
    assert entry["error_code"] == ErrorCode.INVALID_RECORD
    assert entry["error_message"] == "One or more records have been rejected"
    assert [e["batch_index"] for e in entry["record_errors"]] == [1, 3]
    assert entry["record_errors"][0]["batch_index_error_message"] == \
        "Compacted topic cannot accept message without key in topic partition compacted-0."
    assert one.partition(0, "compacted", 0).log_end_offset == 0


def test_produce_v8_refuses_records_outside_the_timestamp_window(inprocess_cluster_factory) -> None:
    """message.timestamp.difference.max.ms (CreateTime): the record too far from now is named,
    with INVALID_TIMESTAMP (Kafka's LogValidator)."""
    cluster = inprocess_cluster_factory(1)
    cluster.create_topic("timed", 1, 1, configs={"message.timestamp.difference.max.ms": "60000"})
    now = cluster.brokers[0].clock.now_ms()
    batch = bytes(build_batch([(now, b"a", b"v", ()), (now + 3_600_000, b"b", b"v", ())]))
    entry = produce(cluster.client(0), "timed", batch, version=8)
    assert entry["error_code"] == ErrorCode.INVALID_TIMESTAMP
    assert [e["batch_index"] for e in entry["record_errors"]] == [1]
    assert entry["error_message"] == "One or more records have been rejected due to invalid timestamp"


def fetch_v12(client: InProcessClient, topic: str, offset: int, last_fetched_epoch: int) -> dict[str, Any]:
    resp = client.request(FETCH, 12, {
        "cluster_id": None, "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": last_fetched_epoch,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return resp["responses"][0]["partitions"][0]


def test_produce_v9_fetch_v12_list_offsets_v6_offset_for_leader_epoch_v4(one: InProcessCluster) -> None:
    """Records written with Produce v9 are read with Fetch v12 (the right last fetched epoch:
    no divergence), counted by ListOffsets v6 and placed by OffsetForLeaderEpoch v4; a fetcher
    claiming an epoch above all the leader knows gets OFFSET_OUT_OF_RANGE (Kafka 2.8)."""
    one.create_topic("flex", 1, 1)
    client = one.client(0)
    assert produce(client, "flex", records([b"a", b"b", b"c"]))["error_code"] == 0
    same = fetch_v12(client, "flex", 0, 0)
    assert same["error_code"] == 0 and len(same["records"]) > 0 and same["high_watermark"] == 3
    assert same.get("diverging_epoch", {"epoch": -1, "end_offset": -1}) == {"epoch": -1, "end_offset": -1}
    assert fetch_v12(client, "flex", 2, 7)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    resp = client.request(LIST_OFFSETS, 6, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "flex", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert resp["topics"][0]["partitions"][0]["offset"] == 3
    resp = client.request(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
        {"topic": "flex", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
    assert resp["topics"][0]["partitions"][0]["end_offset"] == 3


def test_fetch_v12_answers_the_diverging_epoch_after_a_leader_change(inprocess_cluster_factory) -> None:
    """KIP-320: epoch 0 wrote offsets 0-2, then the leader stopped and epoch 1 (the other broker)
    wrote 3-4. A fetcher at offset 5 whose last fetched epoch is 0 (it had copied epoch-0 records
    the new leader never had) gets ``diverging_epoch`` {0, 3} and no records: truncate to 3."""
    cluster = inprocess_cluster_factory(2)
    cluster.create_topic("moved", 1, 2)
    first = cluster.leader_of("moved", 0)
    assert produce(cluster.client(first), "moved", records([b"a", b"b", b"c"]))["error_code"] == 0
    cluster.pump_until(lambda: all(cluster.partition(b, "moved", 0).log_end_offset == 3 for b in cluster.brokers),
                       what="both replicas at offset 3")
    cluster.stop_broker(first)
    [second] = list(cluster.brokers)
    cluster.pump_until(lambda: cluster.leader_of("moved", 0) == second, what="the other broker leading")
    client = cluster.client(second)
    assert produce(client, "moved", records([b"d", b"e"]))["error_code"] == 0
    diverged = fetch_v12(client, "moved", 5, 0)
    assert diverged["error_code"] == 0 and len(diverged["records"]) == 0
    assert diverged["diverging_epoch"] == {"epoch": 0, "end_offset": 3}
    current = fetch_v12(client, "moved", 3, 1)
    assert len(current["records"]) > 0 and current.get("diverging_epoch", {"epoch": -1})["epoch"] == -1


def coordinator_client(cluster: InProcessCluster, group: str) -> InProcessClient:
    client = cluster.client(0)
    cluster.pump_until(lambda: client.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})["error_code"] == 0,
                       what="the group coordinator", step_s=0.1)
    return client


def list_groups(client: InProcessClient, states: list[str]) -> dict[str, str]:
    resp = client.request(LIST_GROUPS, 4, {"states_filter": states})
    assert resp["error_code"] == 0
    return {g["group_id"]: g["group_state"] for g in resp["groups"]}


def test_group_lifecycle_at_the_flexible_versions(one: InProcessCluster) -> None:
    """JoinGroup v7 (member id required, then protocol type in the answer), SyncGroup v5 (its
    protocol type/name checked), Heartbeat v4, ListGroups v4's state filter (KIP-518),
    DescribeGroups v5, OffsetCommit v8 / OffsetFetch v7, LeaveGroup v4, DeleteGroups v2."""
    group = "flexgroup"
    client = coordinator_client(one, group)
    join: dict[str, Any] = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b"\x00\x01"}], "reason": None}
    first = client.request(JOIN_GROUP, 7, join)
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    joined = client.request(JOIN_GROUP, 7, {**join, "member_id": first["member_id"]})
    assert joined["error_code"] == 0 and joined["protocol_type"] == "consumer" and joined["protocol_name"] == "range"
    member, generation = joined["member_id"], joined["generation_id"]
    sync = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"plan"}]}
    wrong = client.request(SYNC_GROUP, 5, {**sync, "protocol_name": "roundrobin"})
    assert wrong["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    synced = client.request(SYNC_GROUP, 5, sync)
    assert (synced["error_code"], synced["assignment"], synced["protocol_name"]) == (0, b"plan", "range")
    beat = client.request(HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member,
                                         "group_instance_id": None})
    assert beat["error_code"] == 0
    assert list_groups(client, ["Stable"]) == {group: "Stable"}
    assert list_groups(client, ["Empty", "PreparingRebalance"]) == {}
    assert list_groups(client, [])[group] == "Stable"
    [described] = client.request(DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False})["groups"]
    assert described["group_state"] == "Stable" and [m["member_id"] for m in described["members"]] == [member]

    one.create_topic("positions", 2, 1)
    commit = client.request(OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": None,
        "topics": [{"name": "positions", "partitions": [
            {"partition_index": p, "committed_offset": 10 + p, "committed_leader_epoch": -1, "committed_metadata": "m"}
            for p in (0, 1)]}]})
    assert [p["error_code"] for t in commit["topics"] for p in t["partitions"]] == [0, 0]
    # a transactional commit of partition 1 still waits for its marker: require_stable sees it
    coordinator = one.brokers[0].groups.coordinator
    pending = coordinator.groups[group].pending_txn_offsets
    pending[4711] = {("positions", 1): coordinator.groups[group].offsets[("positions", 0)]}
    fetch = {"group_id": group, "topics": [{"name": "positions", "partition_indexes": [0, 1]}]}
    stable = client.request(OFFSET_FETCH, 7, {**fetch, "require_stable": True})
    got = {p["partition_index"]: (p["committed_offset"], p["error_code"]) for t in stable["topics"] for p in t["partitions"]}
    assert got == {0: (10, 0), 1: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    loose = client.request(OFFSET_FETCH, 7, {**fetch, "require_stable": False})
    assert {p["partition_index"]: p["committed_offset"] for t in loose["topics"] for p in t["partitions"]} == {0: 10, 1: 11}
    pending.clear()

    left = client.request(LEAVE_GROUP, 4, {"group_id": group, "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    assert left["error_code"] == 0 and [m["error_code"] for m in left["members"]] == [0]
    one.pump_until(lambda: list_groups(client, ["Empty"]) == {group: "Empty"}, what="the group empty")
    deleted = client.request(DELETE_GROUPS, 2, {"groups_names": [group, "no-such-group"]})
    assert {r["group_id"]: r["error_code"] for r in deleted["results"]} == {
        group: 0, "no-such-group": ErrorCode.GROUP_ID_NOT_FOUND}


def describe(client: InProcessClient, topic: str, key: str) -> str | None:
    resp = client.request(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic,
                                                              "configuration_keys": [key]}],
                                                "include_synonyms": True, "include_documentation": True})
    [entry] = resp["results"][0]["configs"]
    assert entry["documentation"], "v3+ with include_documentation: the property's documentation"
    return entry["value"]


def test_incremental_append_starts_from_the_effective_value_and_alter_configs_last_key_wins(
        one: InProcessCluster) -> None:
    """IncrementalAlterConfigs v1: APPEND ``compact`` to a topic on the default ``delete`` gives
    ``delete,compact``; SUBTRACT of everything leaves an empty list, not the default. AlterConfigs
    v2 with a key named twice keeps the last value (Kafka 2.x)."""
    one.create_topic("policy", 1, 1)
    client = one.client(0)

    def incremental(op: int, value: str) -> int:
        resp = client.request(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
            {"resource_type": TOPIC_RESOURCE, "resource_name": "policy",
             "configs": [{"name": "cleanup.policy", "config_operation": op, "value": value}]}]})
        return resp["responses"][0]["error_code"]

    assert incremental(2, "compact") == 0
    assert incremental(2, "compact") == 0            # already there: not listed twice
    one.pump_until(lambda: describe(client, "policy", "cleanup.policy") == "delete,compact", what="the appended policy")
    assert incremental(3, "delete,compact") == 0
    one.pump_until(lambda: describe(client, "policy", "cleanup.policy") == "", what="the emptied policy")
    resp = client.request(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": "policy",
         "configs": [{"name": "retention.ms", "config_operation": 2, "value": "5"}]}]})
    assert resp["responses"][0]["error_code"] == ErrorCode.INVALID_REQUEST     # not a list: Kafka's refusal
    resp = client.request(ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": "policy",
         "configs": [{"name": "retention.ms", "value": "1000"}, {"name": "retention.ms", "value": "2000"}]}]})
    assert resp["responses"][0]["error_code"] == 0
    one.pump_until(lambda: describe(client, "policy", "retention.ms") == "2000", what="the last retention.ms")


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (what a consumer sends as its protocol metadata)."""
    from kafkalite.protocol import codec
    return b"\x00\x00" + codec.encode_data("ConsumerProtocolSubscription", 0, {"topics": list(topics), "user_data": None})


def join_and_sync(client: InProcessClient, group: str, protocol_type: str, metadata: bytes) -> tuple[str, int]:
    join: dict[str, Any] = {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                            "member_id": "", "group_instance_id": None, "protocol_type": protocol_type,
                            "protocols": [{"name": "range", "metadata": metadata}], "reason": None}
    first = client.request(JOIN_GROUP, 7, join)
    joined = client.request(JOIN_GROUP, 7, {**join, "member_id": first["member_id"]})
    assert joined["error_code"] == 0, joined
    member, generation = joined["member_id"], joined["generation_id"]
    synced = client.request(SYNC_GROUP, 5, {"group_id": group, "generation_id": generation, "member_id": member,
                                            "group_instance_id": None, "protocol_type": protocol_type,
                                            "protocol_name": "range", "assignments": [{"member_id": member, "assignment": b""}]})
    assert synced["error_code"] == 0
    return member, generation


def offset_delete(client: InProcessClient, group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
    return client.request(OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()]})


def deleted(resp: dict[str, Any]) -> dict[tuple[str, int], int]:
    assert resp["error_code"] == 0, resp
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def test_offset_delete_follows_kafka_2_8_rules(one: InProcessCluster) -> None:
    """OffsetDelete (KIP-496): in a Stable consumer group the offsets of a subscribed topic stay
    (GROUP_SUBSCRIBED_TO_TOPIC) and the others go; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION;
    a non-consumer group with members is NON_EMPTY_GROUP; once the group is Empty the rest go and
    the group, left with nothing, is gone (Dead: GROUP_ID_NOT_FOUND)."""
    group = "deleter"
    client = coordinator_client(one, group)
    one.create_topic("subscribed", 1, 1)
    one.create_topic("abandoned", 1, 1)
    member, generation = join_and_sync(client, group, "consumer", subscription("subscribed"))
    commit = client.request(OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member, "group_instance_id": None,
        "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                                               "committed_metadata": ""}]} for t in ("subscribed", "abandoned")]})
    assert [p["error_code"] for t in commit["topics"] for p in t["partitions"]] == [0, 0]

    resp = offset_delete(client, group, {"subscribed": [0], "abandoned": [0], "nowhere": [0]})
    assert deleted(resp) == {("subscribed", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("abandoned", 0): 0,
                             ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    fetched = client.request(OFFSET_FETCH, 7, {"group_id": group, "require_stable": False, "topics": None})
    assert {(t["name"], p["partition_index"]) for t in fetched["topics"] for p in t["partitions"]} == {("subscribed", 0)}

    assert offset_delete(client, "no-such-group", {"subscribed": [0]}) == {
        "error_code": ErrorCode.GROUP_ID_NOT_FOUND, "throttle_time_ms": 0, "topics": []}
    connect = coordinator_client(one, "workers")
    join_and_sync(connect, "workers", "connect", b"\x00")
    assert offset_delete(connect, "workers", {"abandoned": [0]})["error_code"] == ErrorCode.NON_EMPTY_GROUP

    client.request(LEAVE_GROUP, 4, {"group_id": group, "members": [{"member_id": member, "group_instance_id": None,
                                                                    "reason": None}]})
    one.pump_until(lambda: list_groups(client, ["Empty"]).get(group) == "Empty", what="the group empty")
    assert deleted(offset_delete(client, group, {"subscribed": [0]})) == {("subscribed", 0): 0}
    assert group not in list_groups(client, [])
    assert offset_delete(client, group, {"subscribed": [0]})["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_describe_cluster_names_the_cluster_controller_and_brokers(inprocess_cluster_factory) -> None:
    """DescribeCluster v0 (KIP-700) answers what Metadata says of the cluster: the same cluster id,
    controller and broker addresses (those of the listener asked)."""
    cluster = inprocess_cluster_factory(2)
    client = cluster.client(0)
    resp = client.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    meta = metadata(client, [])
    assert resp["error_code"] == 0 and resp["error_message"] is None
    assert resp["cluster_id"] == meta["cluster_id"] and resp["cluster_id"]
    assert resp["controller_id"] == meta["controller_id"] == cluster.controller().broker_id
    assert sorted((b["broker_id"], b["host"], b["port"]) for b in resp["brokers"]) == \
        sorted((b["node_id"], b["host"], b["port"]) for b in meta["brokers"])
    assert {b["broker_id"] for b in resp["brokers"]} == set(cluster.brokers)
