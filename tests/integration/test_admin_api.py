"""Topic administration and cluster APIs over raw protocol requests (our codec) against a real
broker: validation error codes, what each admin call leaves in metadata, ZooKeeper and on disk,
DescribeConfigs sources, Metadata auto-creation, InitProducerId and the ApiVersions table."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.support.wire import Wire, request
from tests.support.waiting import wait_for
from tests.support.topics import wait_controller

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SOURCE_TOPIC_OVERRIDE, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, *topics: dict, validate_only: bool = False, timeout_ms: int = 15000) -> dict:
    body = {"topics": [{"name": t["name"], "num_partitions": t.get("partitions", 1),
                        "replication_factor": t.get("rf", 1), "assignments": t.get("assignments", []),
                        "configs": [{"name": k, "value": v} for k, v in t.get("configs", {}).items()]}
                       for t in topics],
            "timeout_ms": timeout_ms, "validate_only": validate_only}
    resp = request(bootstrap, ApiKey.CREATE_TOPICS, 4, body)
    return {t["name"]: t for t in resp["topics"]}


def metadata(bootstrap: str, topics: list[str] | None, allow_auto: bool = False, version: int = 8) -> dict:
    body = {"topics": None if topics is None else [{"name": n} for n in topics],
            "allow_auto_topic_creation": allow_auto, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    return request(bootstrap, ApiKey.METADATA, version, body)


def topic_meta(bootstrap: str, name: str) -> dict:
    return metadata(bootstrap, [name])["topics"][0]


def describe_configs(bootstrap: str, kind: int, name: str, keys: list[str] | None = None) -> dict:
    resp = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 3,
                   {"resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
                    "include_synonyms": True, "include_documentation": False})
    return resp["results"][0]


def partition_dirs(broker, topic: str) -> list[str]:
    data = Path(broker.dir) / "data"
    return sorted(p.name for p in data.iterdir() if p.is_dir() and p.name.rsplit("-", 1)[0] == topic)


@pytest.fixture(scope="module")
def broker(broker):  # noqa: F811 - the harness fixture, plus controller readiness
    wait_controller(broker)
    return broker


# -- CreateTopics ---------------------------------------------------------------------------------

def test_create_topics_validation_errors(broker) -> None:
    """One CreateTopics request with six bad topics and one good one: each bad topic gets its
    own Kafka code (17 bad name, 37 zero partitions, 38 RF above the broker count, 40 bad config
    value, 40 unknown config name, 36 already exists) while the good topic in the same request is
    created; none of the refused topics appears in ZooKeeper."""
    existing = unique("adm-exists")
    assert create_topics(broker.bootstrap, {"name": existing})[existing]["error_code"] == 0
    good = unique("adm-good")
    bad = {"bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
           unique("adm-zero"): ErrorCode.INVALID_PARTITIONS,
           unique("adm-rf"): ErrorCode.INVALID_REPLICATION_FACTOR,
           unique("adm-cfgval"): ErrorCode.INVALID_CONFIG,
           unique("adm-cfgname"): ErrorCode.INVALID_CONFIG,
           existing: ErrorCode.TOPIC_ALREADY_EXISTS}
    specs = [{"name": n} for n in bad]
    specs[1]["partitions"] = 0
    specs[2]["rf"] = 2
    specs[3]["configs"] = {"retention.ms": "not-a-number"}
    specs[4]["configs"] = {"no.such.config": "1"}
    result = create_topics(broker.bootstrap, *specs, {"name": good, "partitions": 2})
    got = {n: result[n]["error_code"] for n in bad}
    assert got == {n: int(c) for n, c in bad.items()}, {n: result[n] for n in bad}
    for n in bad:
        assert result[n]["error_message"], f"{n}: an error without a message"
    assert result[good]["error_code"] == 0
    for n in list(bad)[1:5]:
        assert broker.cluster.zk_get(f"/brokers/topics/{n}") is None
        assert broker.cluster.zk_get(f"/config/topics/{n}") is None
    meta = topic_meta(broker.bootstrap, good)
    assert meta["error_code"] == 0 and len(meta["partitions"]) == 2
    assert all(p["leader_id"] == broker.broker_id for p in meta["partitions"]), meta["partitions"]


def test_create_topics_duplicate_name_in_one_request_is_invalid_request(broker) -> None:
    """The same name twice in one request: both entries get INVALID_REQUEST (42) and the topic
    is not created (Kafka's duplicate-in-request rule)."""
    name = unique("adm-dup")
    result = request(broker.bootstrap, ApiKey.CREATE_TOPICS, 4, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}] * 2,
        "timeout_ms": 5000, "validate_only": False})
    assert [t["error_code"] for t in result["topics"]] == [int(ErrorCode.INVALID_REQUEST)] * 2
    assert broker.cluster.zk_get(f"/brokers/topics/{name}") is None


def test_create_topics_validate_only_writes_nothing(broker) -> None:
    """validate_only=true answers 0 for a valid topic (and the real error for an invalid one)
    but writes nothing: no ZooKeeper znodes, no metadata entry, no partition directory."""
    name = unique("adm-dry")
    result = create_topics(broker.bootstrap, {"name": name, "partitions": 3, "configs": {"retention.ms": "1000"}},
                           {"name": unique("adm-dry0"), "partitions": 0}, validate_only=True)
    codes = sorted(t["error_code"] for t in result.values())
    assert codes == [0, int(ErrorCode.INVALID_PARTITIONS)]
    assert broker.cluster.zk_get(f"/brokers/topics/{name}") is None
    assert broker.cluster.zk_get(f"/config/topics/{name}") is None
    assert topic_meta(broker.bootstrap, name)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert partition_dirs(broker, name) == []


def test_create_topics_with_broker_defaults_v4(broker) -> None:
    """CreateTopics v4 with num_partitions=-1 and replication_factor=-1 takes the broker's
    defaults (num.partitions=1, RF 1) rather than refusing the request."""
    name = unique("adm-defaults")
    result = create_topics(broker.bootstrap, {"name": name, "partitions": -1, "rf": -1})
    assert result[name]["error_code"] == 0, result[name]
    meta = topic_meta(broker.bootstrap, name)
    assert len(meta["partitions"]) == 1 and meta["partitions"][0]["replica_nodes"] == [broker.broker_id]


# -- DeleteTopics ---------------------------------------------------------------------------------

def test_delete_topics_removes_metadata_znodes_and_directories(broker) -> None:
    """DeleteTopics of a topic with data: answer 0, then the topic is gone from Metadata (3),
    from ZooKeeper (/brokers/topics, /config/topics, /admin/delete_topics drained) and its
    partition directories are gone from disk; deleting an unknown topic answers 3."""
    from confluent_kafka import Producer

    name = unique("adm-del")
    assert create_topics(broker.bootstrap, {"name": name, "partitions": 2})[name]["error_code"] == 0
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(name, f"v{i}".encode(), partition=i % 2)
    assert p.flush(15) == 0
    assert partition_dirs(broker, name) == [f"{name}-0", f"{name}-1"]
    resp = request(broker.bootstrap, ApiKey.DELETE_TOPICS, 3, {"topic_names": [name, unique("adm-nosuch")], "timeout_ms": 15000})
    codes = [r["error_code"] for r in resp["responses"]]
    assert codes == [0, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)], resp
    assert topic_meta(broker.bootstrap, name)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wait_for(lambda: broker.cluster.zk_get(f"/brokers/topics/{name}") is None
             and broker.cluster.zk_get(f"/config/topics/{name}") is None
             and broker.cluster.zk_get(f"/admin/delete_topics/{name}") is None, what="znodes removed")
    wait_for(lambda: partition_dirs(broker, name) == [], what="partition directories removed")


# -- CreatePartitions -----------------------------------------------------------------------------

def test_create_partitions_grow_and_refuse_decrease(broker) -> None:
    """CreatePartitions 2 -> 4 answers 0 and Metadata then shows 4 partitions with leaders (and
    ZooKeeper's assignment has 4); asking for 3 afterwards (a decrease) and for 4 again (no
    increase) both answer INVALID_PARTITIONS (37); an unknown topic answers 3."""
    name = unique("adm-grow")
    assert create_topics(broker.bootstrap, {"name": name, "partitions": 2})[name]["error_code"] == 0

    def grow(count: int, topic: str = name) -> dict:
        return request(broker.bootstrap, ApiKey.CREATE_PARTITIONS, 1, {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout_ms": 15000, "validate_only": False})["results"][0]

    assert grow(4)["error_code"] == 0
    meta = topic_meta(broker.bootstrap, name)
    assert sorted(p["partition_index"] for p in meta["partitions"]) == [0, 1, 2, 3]
    assert all(p["leader_id"] == broker.broker_id and p["error_code"] == 0 for p in meta["partitions"])
    import json
    assert sorted(json.loads(broker.cluster.zk_get(f"/brokers/topics/{name}"))["partitions"]) == ["0", "1", "2", "3"]
    shrink = grow(3)
    assert shrink["error_code"] == ErrorCode.INVALID_PARTITIONS and shrink["error_message"]
    assert grow(4)["error_code"] == ErrorCode.INVALID_PARTITIONS
    assert grow(5, unique("adm-nosuch"))["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(topic_meta(broker.bootstrap, name)["partitions"]) == 4


# -- DescribeConfigs ------------------------------------------------------------------------------

def test_describe_configs_topic_sources(broker) -> None:
    """A topic created with retention.ms=123456 shows that value with source 1
    (DYNAMIC_TOPIC_CONFIG); a key it did not override (cleanup.policy) shows Kafka's default
    with source 5 (DEFAULT_CONFIG); an unknown topic answers 3 in its result."""
    name = unique("adm-cfg")
    assert create_topics(broker.bootstrap, {"name": name, "configs": {"retention.ms": "123456"}})[name]["error_code"] == 0
    res = describe_configs(broker.bootstrap, TOPIC_RESOURCE, name)
    assert res["error_code"] == 0
    by_name = {c["name"]: c for c in res["configs"]}
    assert by_name["retention.ms"]["value"] == "123456"
    assert by_name["retention.ms"]["config_source"] == SOURCE_TOPIC_OVERRIDE
    assert by_name["cleanup.policy"]["value"] == "delete"
    assert by_name["cleanup.policy"]["config_source"] == SOURCE_DEFAULT
    only = describe_configs(broker.bootstrap, TOPIC_RESOURCE, name, ["retention.ms"])
    assert [c["name"] for c in only["configs"]] == ["retention.ms"]
    missing = describe_configs(broker.bootstrap, TOPIC_RESOURCE, unique("adm-nosuch"))
    assert missing["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_broker_sources(broker) -> None:
    """Broker resource "<id>": a key the harness set in server.properties
    (zookeeper.session.timeout.ms=6000) has source 4 (STATIC_BROKER_CONFIG) and is read-only;
    a key left alone (log.retention.hours) has source 5 with Kafka's default 168; another
    broker id is refused with INVALID_REQUEST (42)."""
    res = describe_configs(broker.bootstrap, BROKER_RESOURCE, str(broker.broker_id))
    assert res["error_code"] == 0
    by_name = {c["name"]: c for c in res["configs"]}
    zk = by_name["zookeeper.session.timeout.ms"]
    assert (zk["value"], zk["config_source"], zk["read_only"]) == ("6000", SOURCE_STATIC_BROKER, True)
    hours = by_name["log.retention.hours"]
    assert (hours["value"], hours["config_source"]) == ("168", SOURCE_DEFAULT)
    other = describe_configs(broker.bootstrap, BROKER_RESOURCE, str(broker.broker_id + 100))
    assert other["error_code"] == ErrorCode.INVALID_REQUEST


def test_kafka_python_admin_describe_configs_agrees(broker) -> None:
    """kafka-python's KafkaAdminClient (a foreign codec) creates a topic with an override and
    reads it back through DescribeConfigs: same value as our raw request sees."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    name = unique("adm-kp")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(name, 3, 1, topic_configs={"retention.ms": "7777"})])
        out = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
        [by_name] = out.values()
        entry = by_name[name]["retention.ms"]
        value = entry.get("value", entry.get("config_value")) if isinstance(entry, dict) else entry
        assert value == "7777", entry
    finally:
        admin.close()
    assert len(topic_meta(broker.bootstrap, name)["partitions"]) == 3


# -- Metadata auto-creation -----------------------------------------------------------------------

def test_metadata_auto_create_enabled(broker) -> None:
    """With auto.create.topics.enable (default true): Metadata v8 with
    allow_auto_topic_creation=true for an unknown topic answers LEADER_NOT_AVAILABLE (5) and the
    topic then appears with a leader; with allow_auto_topic_creation=false it stays unknown (3)."""
    name = unique("adm-auto")
    first = metadata(broker.bootstrap, [name], allow_auto=True)["topics"][0]
    assert first["error_code"] in (ErrorCode.LEADER_NOT_AVAILABLE, 0)
    wait_for(lambda: (t := metadata(broker.bootstrap, [name])["topics"][0])["error_code"] == 0
             and t["partitions"][0]["leader_id"] == broker.broker_id, what="auto-created topic")
    other = unique("adm-noauto")
    assert metadata(broker.bootstrap, [other], allow_auto=False)["topics"][0]["error_code"] == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.cluster.zk_get(f"/brokers/topics/{other}") is None


def test_metadata_auto_create_disabled(cluster_factory) -> None:
    """auto.create.topics.enable=false: even a request allowing auto-creation (and Metadata v0,
    which implies it) answers UNKNOWN_TOPIC_OR_PARTITION (3), and no topic znode is written."""
    cluster = cluster_factory(1, {"auto.create.topics.enable": "false"})
    b = cluster.brokers[0]
    name = unique("adm-off")
    assert metadata(b.bootstrap, [name], allow_auto=True)["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata(b.bootstrap, [name], version=0)["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.zk_get(f"/brokers/topics/{name}") is None


# -- InitProducerId / ApiVersions ------------------------------------------------------------------

def test_init_producer_id_distinct_across_calls_and_connections(broker) -> None:
    """Idempotent InitProducerId (null transactional id) answers 0, epoch 0 and a fresh id each
    time: 30 calls over 3 connections give 30 distinct ids; a transactional id goes to the
    transaction coordinator (tests/integration/test_txn_topic.py), which is not loaded here unless
    __transaction_state exists."""
    ids = []
    for _ in range(3):
        with Wire(broker.bootstrap) as w:
            for _ in range(10):
                r = w.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
                assert (r["error_code"], r["producer_epoch"]) == (0, 0)
                ids.append(r["producer_id"])
    assert len(set(ids)) == 30 and min(ids) >= 0
    r = request(broker.bootstrap, ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    assert r["error_code"] in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert r["producer_id"] not in ids


EXPECTED_API_TABLE = {
    # Kafka 2.8's client-facing maxima, flexible versions included (issue 15); Produce v0-2, Fetch
    # v0-3 and ListOffsets v0 serve clients of message formats v0/v1
    0: (0, 9), 1: (0, 12), 2: (0, 6), 3: (0, 11), 18: (0, 3), 19: (2, 7), 20: (1, 6),
    7: (1, 3),  # ControlledShutdown: inter-broker, advertised as Kafka 2.x brokers do
    23: (2, 4), 32: (1, 4), 37: (0, 3),
    33: (0, 2), 44: (0, 1),   # AlterConfigs, IncrementalAlterConfigs
    35: (0, 2),   # DescribeLogDirs (issue 13): the controller asks a broker after its log-dir event
    34: (0, 2),   # AlterReplicaLogDirs (issue 16): Kafka 2.8's range, v2 flexible
    21: (0, 2), 43: (0, 2),   # DeleteRecords, ElectLeaders (issue 16): Kafka 2.8's ranges, v2 flexible
    # transactions (issue 14): Kafka 2.8's ranges (KIP-360 InitProducerId v3-4, TxnOffsetCommit v3
    # with generation/member, flexible v2+/v3+/v1+); WriteTxnMarkers is inter-broker
    22: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3),
    45: (0, 0), 46: (0, 0),   # Alter/ListPartitionReassignments (issue 16)
    48: (0, 1), 49: (0, 1),   # Describe/AlterClientQuotas (issue 16)
    # SASL and SCRAM credentials (issue 17): SaslHandshake 0-1, SaslAuthenticate 0-2 (served on any
    # listener; before login only on SASL ones), Describe/AlterUserScramCredentials 0
    17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    29: (0, 2), 30: (0, 2), 31: (0, 2),   # Describe/Create/DeleteAcls (issue 17): Kafka 2.8's, v2 flexible
    60: (0, 0),   # DescribeCluster (issue 15, KIP-700)
}
# Group APIs at Kafka 2.8's ranges (issue 15): OffsetCommit 2-8, OffsetFetch 1-7, FindCoordinator
# 0-3, JoinGroup 0-7, Heartbeat 0-4, LeaveGroup 0-4, SyncGroup 0-5, DescribeGroups 0-5,
# ListGroups 0-4 (KIP-518 states), DeleteGroups 0-2, OffsetDelete 0.
GROUP_API_TABLE = {8: (2, 8), 9: (1, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4),
                   14: (0, 5), 15: (0, 5), 16: (0, 4), 42: (0, 2), 47: (0, 0)}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_table(broker, version: int) -> None:
    """ApiVersions v0-3 answers 0 and advertises exactly the kafka-protocol.md §6 range for each
    API this broker implements (Produce 0-9, Fetch 4-12, ...); any other key it lists must be a
    §6 group API at its §6 range, and nothing else is advertised."""
    body = {"client_software_name": "kafkalite-tests", "client_software_version": "1.0"}
    r = request(broker.bootstrap, ApiKey.API_VERSIONS, version, body)
    assert r["error_code"] == 0
    table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
    for key, rng in EXPECTED_API_TABLE.items():
        assert table.get(key) == rng, f"api {key}: advertised {table.get(key)}, expected {rng}"
    for key, rng in table.items():
        if key not in EXPECTED_API_TABLE:
            assert GROUP_API_TABLE.get(key) == rng, f"unexpected api {key} {rng} advertised"


def test_api_versions_v3_bad_software_name_is_invalid_request(broker) -> None:
    """ApiVersions v3 with a client software name outside Kafka's pattern answers
    INVALID_REQUEST (42), as the Java broker does."""
    r = request(broker.bootstrap, ApiKey.API_VERSIONS, 3, {"client_software_name": "bad name!",
                                                           "client_software_version": "1"})
    assert r["error_code"] == ErrorCode.INVALID_REQUEST


def test_metadata_during_creation_never_shows_a_partitionless_topic(broker) -> None:
    """CreateTopics with timeout_ms=0 returns before the topic exists; Metadata polled right after
    (40 topics, 2 partitions each) answers LEADER_NOT_AVAILABLE/UNKNOWN until then, and never
    error 0 with a partition count other than 2. (The config znode is written before the
    assignment; a broker that saw only the config used to answer 0 with no partitions.)"""
    wrong = []
    with Wire(broker.bootstrap) as w:
        for _ in range(40):
            name = unique("adm-race")
            r = w.request(ApiKey.CREATE_TOPICS, 4, {
                "topics": [{"name": name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
                            "configs": [{"name": "retention.ms", "value": "100000"}]}],
                "timeout_ms": 0, "validate_only": False})
            assert r["topics"][0]["error_code"] in (0, ErrorCode.REQUEST_TIMED_OUT)
            deadline = time.monotonic() + 15
            while True:
                t = w.request(ApiKey.METADATA, 8, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                                   "include_cluster_authorized_operations": False,
                                                   "include_topic_authorized_operations": False})["topics"][0]
                if t["error_code"] == 0:
                    if len(t["partitions"]) != 2:
                        wrong.append((name, t["partitions"]))
                    break
                assert t["error_code"] in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), t
                assert time.monotonic() < deadline, f"{name} never appeared"
    assert not wrong, wrong[:3]


def test_zero_timeout_answers_success_without_waiting(broker) -> None:
    """timeout_ms=0 (confluent-kafka's AdminClient default) means "do not wait": Kafka answers
    NONE at once for a valid topic, never REQUEST_TIMED_OUT, and the topic still gets its
    leaders afterwards. Repeated, because the old behaviour failed only when the answer beat the
    controller's election."""
    names = [unique("adm-zero") for _ in range(20)]
    for name in names:
        result = create_topics(broker.bootstrap, {"name": name, "partitions": 3}, timeout_ms=0)[name]
        assert result["error_code"] == 0, result
    wait_for(lambda: all((t := metadata(broker.bootstrap, [n])["topics"][0])["error_code"] == 0
                         and len(t["partitions"]) == 3 for n in names), what="leaders of every topic")


# -- DescribeLogDirs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_log_dirs_lists_the_dir_and_its_partitions(broker, version: int) -> None:
    """DescribeLogDirs v0-2 (v2 flexible) answers the broker's one log dir (absolute path, error 0)
    with every partition it holds there, a created topic's partitions included; a topic filter
    narrows the answer to the partitions asked for."""
    wait_controller(broker)
    name = unique("ldirs")
    assert create_topics(broker.bootstrap, {"name": name, "partitions": 2})[name]["error_code"] == 0
    wait_for(lambda: len(partition_dirs(broker, name)) == 2, 15, "the topic's logs")
    r = request(broker.bootstrap, ApiKey.DESCRIBE_LOG_DIRS, version, {"topics": None})
    [result] = r["results"]
    assert result["error_code"] == 0 and result["log_dir"] == str((Path(broker.dir) / "data").resolve())
    listed = {t["name"]: sorted(p["partition_index"] for p in t["partitions"]) for t in result["topics"]}
    assert listed[name] == [0, 1]
    assert all(p["partition_size"] == 0 and p["offset_lag"] == 0 and not p["is_future_key"]
               for t in result["topics"] if t["name"] == name for p in t["partitions"])
    r = request(broker.bootstrap, ApiKey.DESCRIBE_LOG_DIRS, version,
                {"topics": [{"topic": name, "partition_index": [1]}, {"topic": unique("none"), "partition_index": [0]}]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in r["results"][0]["topics"]] == [(name, [1])]
