"""Group coordinator end to end on one broker: FindCoordinator creates ``__consumer_offsets``,
commits round-trip through it (and survive a restart), and the classic join/sync protocol works
on the wire, including KIP-394's MEMBER_ID_REQUIRED."""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.group.hashing import partition_for
from kafkalite.protocol.api_keys import ApiKey
from tests.support.waiting import wait_for
from tests.support.wire import Wire, request
from tests.support.topics import create_topic


def coordinator(bootstrap: str, group: str) -> dict[str, Any]:
    def found() -> Any:
        r = request(bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        return r if r["error_code"] == 0 else None
    return wait_for(found, 30, f"a coordinator for {group}")


def commit(w: Wire, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]], generation: int = -1,
           member: str = "", version: int = 7) -> dict[tuple[str, int], int]:
    topics: dict[str, list] = {}
    for (t, p), (o, meta) in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_leader_epoch": 0,
                                         "committed_metadata": meta})
    r = w.request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}


def fetch(w: Wire, group: str, topics: list[tuple[str, list[int]]] | None, version: int = 5) -> dict[str, Any]:
    return w.request(ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": None if topics is None else
                                                    [{"name": t, "partition_indexes": ps} for t, ps in topics]})


def test_offsets_topic_created_internal_compacted_and_commits_round_trip(broker: Any) -> None:
    first = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 0, {"key": "g1"})
    assert first["error_code"] in (0, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    c = coordinator(broker.bootstrap, "g1")
    assert (c["node_id"], f"{c['host']}:{c['port']}") == (broker.broker_id, broker.bootstrap)
    v3 = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})  # flexible version
    assert (v3["error_code"], v3["node_id"], v3["port"]) == (0, c["node_id"], c["port"])
    txn = request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": "tx", "key_type": 1})
    assert txn["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE and txn["node_id"] == -1
    meta = request(broker.bootstrap, ApiKey.METADATA, 8, {"topics": [{"name": "__consumer_offsets"}],
                                                          "allow_auto_topic_creation": False,
                                                          "include_cluster_authorized_operations": False,
                                                          "include_topic_authorized_operations": False})
    topic = meta["topics"][0]
    assert topic["is_internal"] and len(topic["partitions"]) == 5            # the harness sets 5
    config = broker.cluster.zk_get("/config/topics/__consumer_offsets").decode()
    assert '"cleanup.policy":"compact"' in config.replace(" ", "")
    create_topic(broker.bootstrap, "orders", 3)
    with Wire(broker.bootstrap) as w:
        result = commit(w, "g1", {("orders", 0): (42, "checkpoint-α"), ("orders", 2): (7, None), ("nope", 0): (1, "")})
        assert result == {("orders", 0): 0, ("orders", 2): 0, ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a generation for a group that does not exist / a member the group does not know
        assert commit(w, "g-new", {("orders", 1): (5, "")}, generation=3, member="m") == \
            {("orders", 1): ErrorCode.ILLEGAL_GENERATION}
        assert commit(w, "g1", {("orders", 1): (5, "")}, generation=3, member="m") == \
            {("orders", 1): ErrorCode.UNKNOWN_MEMBER_ID}
        got = fetch(w, "g1", [("orders", [0, 1, 2])])
        parts = {p["partition_index"]: (p["committed_offset"], p["metadata"], p["committed_leader_epoch"], p["error_code"])
                 for p in got["topics"][0]["partitions"]}
        assert parts == {0: (42, "checkpoint-α", 0, 0), 1: (-1, "", -1, 0), 2: (7, "", 0, 0)}
        everything = fetch(w, "g1", None)
        assert sorted((t["name"], p["partition_index"]) for t in everything["topics"] for p in t["partitions"]) == \
            [("orders", 0), ("orders", 2)]
        v1 = fetch(w, "g1", [("orders", [0])], version=1)
        assert v1["topics"][0]["partitions"][0]["committed_offset"] == 42
        # clients cannot write to the internal topic
        refused = w.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": b""}]}]})
        assert refused["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
    # a restart replays __consumer_offsets: the commits are back
    broker.stop()
    broker.start()
    coordinator(broker.bootstrap, "g1")

    def reloaded() -> Any:
        with Wire(broker.bootstrap) as w2:
            r = fetch(w2, "g1", [("orders", [0])])
        return r if r["error_code"] == 0 else None
    after = wait_for(reloaded, 30, "offsets reloaded after restart")
    assert after["topics"][0]["partitions"][0]["committed_offset"] == 42
    assert after["topics"][0]["partitions"][0]["metadata"] == "checkpoint-α"


def test_join_sync_heartbeat_leave_on_the_wire(broker: Any) -> None:
    coordinator(broker.bootstrap, "wire-group")
    join_body = {"group_id": "wire-group", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                 "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"}]}
    with Wire(broker.bootstrap, timeout=30) as w:
        first = w.request(ApiKey.JOIN_GROUP, 5, join_body)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED and first["member_id"].startswith("wire-test-")
        joined = w.request(ApiKey.JOIN_GROUP, 5, {**join_body, "member_id": first["member_id"]})
        assert joined["error_code"] == 0 and joined["generation_id"] == 1 and joined["leader"] == first["member_id"]
        assert joined["protocol_name"] == "range" and len(joined["members"]) == 1
        me, gen = joined["member_id"], joined["generation_id"]
        synced = w.request(ApiKey.SYNC_GROUP, 3, {"group_id": "wire-group", "generation_id": gen, "member_id": me,
                                                  "group_instance_id": None, "assignments": [{"member_id": me, "assignment": b"A"}]})
        assert synced == {**synced, "error_code": 0, "assignment": b"A"}
        assert w.request(ApiKey.HEARTBEAT, 3, {"group_id": "wire-group", "generation_id": gen, "member_id": me,
                                               "group_instance_id": None})["error_code"] == 0
        assert w.request(ApiKey.HEARTBEAT, 3, {"group_id": "wire-group", "generation_id": gen + 1, "member_id": me,
                                               "group_instance_id": None})["error_code"] == ErrorCode.ILLEGAL_GENERATION
        desc = w.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["wire-group", "unknown-group"],
                                                     "include_authorized_operations": False})
        g, unknown = desc["groups"]
        assert (g["group_state"], g["protocol_data"], g["members"][0]["member_assignment"]) == ("Stable", "range", b"A")
        assert g["members"][0]["client_host"] == "/127.0.0.1" and unknown["group_state"] == "Dead"
        assert commit(w, "wire-group", {}, generation=gen, member=me) == {}
        listed = {x["group_id"]: x["protocol_type"] for x in w.request(ApiKey.LIST_GROUPS, 2, {})["groups"]}
        assert listed.get("wire-group") == "consumer"
        deleted = w.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": ["wire-group"]})
        assert deleted["results"][0]["error_code"] == ErrorCode.NON_EMPTY_GROUP
        left = w.request(ApiKey.LEAVE_GROUP, 3, {"group_id": "wire-group", "members": [
            {"member_id": me, "group_instance_id": None}, {"member_id": "ghost", "group_instance_id": None}]})
        assert left["error_code"] == 0 and [m["error_code"] for m in left["members"]] == [0, ErrorCode.UNKNOWN_MEMBER_ID]

        def empty() -> bool:
            d = w.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["wire-group"], "include_authorized_operations": False})
            return d["groups"][0]["group_state"] == "Empty"
        wait_for(empty, 20, "the group to become Empty")
        assert w.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": ["wire-group"]})["results"][0]["error_code"] == 0
        again = w.request(ApiKey.DELETE_GROUPS, 1, {"groups_names": ["wire-group"]})
        assert again["results"][0]["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_not_coordinator_on_other_broker(cluster_factory: Any) -> None:
    cluster = cluster_factory(2, {"offsets.topic.num.partitions": "4"})
    b0 = cluster.brokers[0]
    groups = [f"grp-{i}" for i in range(12)]
    for g in groups:
        coordinator(b0.bootstrap, g)
    for g in groups[:6]:
        node = coordinator(b0.bootstrap, g)["node_id"]
        other = next(b for b in cluster.brokers if b.broker_id != node)
        r = request(other.bootstrap, ApiKey.HEARTBEAT, 3, {"group_id": g, "generation_id": 1, "member_id": "m",
                                                           "group_instance_id": None})
        assert r["error_code"] == ErrorCode.NOT_COORDINATOR
        assert partition_for(g, 4) in range(4)


def test_offsets_topic_needs_enough_live_brokers(cluster_factory: Any) -> None:
    """offsets.topic.replication.factor=3 with one live broker: the topic cannot be created, and
    FindCoordinator keeps answering COORDINATOR_NOT_AVAILABLE (retriable) instead of failing."""
    cluster = cluster_factory(1, {"offsets.topic.replication.factor": "3"})
    b = cluster.brokers[0]
    for _ in range(3):
        r = request(b.bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": "lonely", "key_type": 0})
        assert (r["error_code"], r["node_id"], r["host"], r["port"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    assert cluster.zk_get("/brokers/topics/__consumer_offsets") is None
    with Wire(b.bootstrap) as w:
        r = w.request(ApiKey.JOIN_GROUP, 5, {"group_id": "lonely", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                             "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                             "protocols": [{"name": "range", "metadata": b""}]})
        assert r["error_code"] == ErrorCode.NOT_COORDINATOR
