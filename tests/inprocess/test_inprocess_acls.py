"""The ACL authorizer in real brokers on the in-memory ZooKeeper: ACLs written to ZooKeeper (as
kafka-acls --authorizer-properties does) reach every broker through the change notifications,
each API answers Kafka's *_AUTHORIZATION_FAILED codes, Metadata hides what a principal may not
describe, inter-broker requests need ClusterAction, and DescribeAcls/CreateAcls/DeleteAcls read
and write the same znodes. Clients here are PLAINTEXT, so their principal is User:ANONYMOUS."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from kafkalite.coordination.acls import AclZkStore
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.security.acl import (AccessControlEntry as Ace, Operation as Op, PatternType as PT, Permission as Perm,
                                    ResourcePattern as RP, ResourceType as RT)
from tests.support.inprocess import InProcessClient, InProcessCluster, produce_body, records

ME = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "auto.create.topics.enable": "true"}
CLUSTER = RP(RT.CLUSTER, "kafka-cluster", PT.LITERAL)


def allow(op: Op, principal: str = ME) -> Ace:
    return Ace(principal, "*", op, Perm.ALLOW)


def deny(op: Op, principal: str = ME) -> Ace:
    return Ace(principal, "*", op, Perm.DENY)


class Acls:
    """Writes ACLs straight into ZooKeeper (another session), then waits until every broker applied them."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster
        session = cluster.zk_server.client(f"memory{cluster.chroot}")
        cluster.wait(session.start())
        self.store = AclZkStore(session)
        self.session = session

    def set(self, pattern: RP, *entries: Ace) -> None:
        _, version = self.cluster.wait(self.store.read(pattern))
        self.cluster.wait(self.store.write(pattern, frozenset(entries), version))
        want = frozenset(entries)
        self.cluster.pump_until(lambda: all(b.authorizer is not None and b.authorizer.cache.get(pattern, (frozenset(), -1))[0] == want
                                            for b in self.cluster.brokers.values()),
                                what=f"every broker applied the ACLs of {pattern}")


def metadata(client: InProcessClient, topics: list[str] | None, auto_create: bool = False, ops: bool = False) -> Any:
    return client.request(ApiKey.METADATA, 8, {
        "topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": auto_create,
        "include_cluster_authorized_operations": ops, "include_topic_authorized_operations": ops})


def fetch_body(topic: str, replica_id: int = -1) -> dict[str, Any]:
    return {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""}


@pytest.fixture
def secured(inprocess_cluster_factory: Callable[..., InProcessCluster]) -> tuple[InProcessCluster, Acls]:
    """One broker with the authorizer; topics A, B, etl-1 created while ANONYMOUS had All on the cluster."""
    cluster = inprocess_cluster_factory(size=1, overrides=AUTHORIZER)
    acls = Acls(cluster)
    acls.set(CLUSTER, allow(Op.ALL))
    for name in ("A", "B", "etl-1"):
        cluster.create_topic(name, replication_factor=1)
    acls.set(CLUSTER)                       # no more cluster rights
    return cluster, acls


def test_acl_roots_exist_and_nothing_is_allowed_without_acls(secured: tuple[InProcessCluster, Acls]) -> None:
    """The broker creates Kafka's ACL roots; without ACLs (allow.everyone.if.no.acl.found=false)
    a client sees no topic, may not produce, and the ACL APIs refuse it."""
    cluster, acls = secured
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed", "/kafka-acl-changes", "/kafka-acl-extended-changes"):
        assert cluster.wait(acls.session.exists(root)) is not None, root
    c = cluster.client(0)
    assert metadata(c, None)["topics"] == []
    named = {t["name"]: t["error_code"] for t in metadata(c, ["A", "nope"])["topics"]}
    assert named == {"A": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "nope": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    r = c.request(ApiKey.PRODUCE, 8, produce_body("A", {0: records([b"x"])}, acks=1))
    assert r["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    init = {"transactional_id": None, "transaction_timeout_ms": 60000}
    assert c.request(ApiKey.INIT_PRODUCER_ID, 1, init)["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    tx = c.request(ApiKey.INIT_PRODUCER_ID, 1, {**init, "transactional_id": "tx"})
    assert tx["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    r = c.request(ApiKey.DESCRIBE_ACLS, 2, {"resource_type_filter": 1, "resource_name_filter": None,
                                           "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                           "operation": 1, "permission_type": 1})
    assert r["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_read_on_one_topic_and_group(secured: tuple[InProcessCluster, Acls]) -> None:
    """Read on topic A and group G: the client fetches A and commits to G, but B is hidden from
    Metadata, refused for Fetch and Produce, and creating a topic (CreateTopics or auto-creation)
    is refused; a group other than G is refused; KIP-430 operations are the ACLs' (Read implies
    Describe) when asked for and -2^31 otherwise."""
    cluster, acls = secured
    acls.set(RP(RT.TOPIC, "A", PT.LITERAL), allow(Op.READ))
    acls.set(RP(RT.GROUP, "G", PT.LITERAL), allow(Op.READ))
    c = cluster.client(0)
    all_topics = metadata(c, None, ops=True)
    assert [t["name"] for t in all_topics["topics"]] == ["A"]
    assert all_topics["topics"][0]["topic_authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert all_topics["cluster_authorized_operations"] == 0          # asked, but no Describe on the cluster
    assert metadata(c, None)["topics"][0]["topic_authorized_operations"] == -2147483648   # not asked
    fetched = c.request(ApiKey.FETCH, 11, fetch_body("A"))
    assert fetched["responses"][0]["partitions"][0]["error_code"] == 0
    fetched = c.request(ApiKey.FETCH, 11, fetch_body("B"))
    assert fetched["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    r = c.request(ApiKey.PRODUCE, 8, produce_body("A", {0: records([b"x"])}, acks=1))
    assert r["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    created = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "C", "num_partitions": 1, "replication_factor": 1,
                                                              "assignments": [], "configs": []}],
                                                  "timeout_ms": 5000, "validate_only": False})
    assert created["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    auto = metadata(c, ["D"], auto_create=True)["topics"][0]
    assert auto["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    cluster.advance(1.0)
    assert "C" not in cluster.brokers[0].metadata.topics and "D" not in cluster.brokers[0].metadata.topics
    answers: list[int] = []

    def coordinator_found() -> bool:
        answers.append(c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "G", "key_type": 0})["error_code"])
        return answers[-1] != ErrorCode.COORDINATOR_NOT_AVAILABLE
    cluster.pump_until(coordinator_found, what="the offsets topic (created by the broker itself)", step_s=0.2)
    assert answers[-1] == 0
    found = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "H", "key_type": 0})
    assert found["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    commit = {"group_id": "G", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
              "retention_time_ms": -1, "topics": [{"name": t, "partitions": [
                  {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}
                  for t in ("A", "B")]}
    r = cluster.wait(c.send(ApiKey.OFFSET_COMMIT, 7, commit))
    codes = {t["name"]: t["partitions"][0]["error_code"] for t in r["topics"]}
    assert codes == {"A": 0, "B": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    r = c.request(ApiKey.OFFSET_COMMIT, 7, {**commit, "group_id": "H"})
    assert {t["partitions"][0]["error_code"] for t in r["topics"]} == {ErrorCode.GROUP_AUTHORIZATION_FAILED}
    described = c.request(ApiKey.DESCRIBE_GROUPS, 4, {"groups": ["G", "H"], "include_authorized_operations": True})
    by_id = {g["group_id"]: g for g in described["groups"]}
    assert by_id["G"]["error_code"] == 0 and by_id["G"]["authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert by_id["H"]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    join = {"group_id": "H", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    assert c.request(ApiKey.JOIN_GROUP, 5, join)["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_prefixed_acls_and_deny_beats_allow(secured: tuple[InProcessCluster, Acls]) -> None:
    """Write on the prefix `etl-` lets the client produce to etl-1, not to A; a Deny of Write for
    User:* on etl-1 then wins over the prefixed Allow (and is picked up without a restart)."""
    cluster, acls = secured
    acls.set(RP(RT.TOPIC, "etl-", PT.PREFIXED), allow(Op.WRITE))
    c = cluster.client(0)
    assert [t["name"] for t in metadata(c, None)["topics"]] == ["etl-1"]      # Write implies Describe
    # an idempotent producer with Write on some topic may get a producer id (Kafka 2.8)
    init = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init["error_code"] == 0 and init["producer_id"] >= 0
    ok = c.request(ApiKey.PRODUCE, 8, produce_body("etl-1", {0: records([b"x"])}, acks=1))
    assert ok["responses"][0]["partition_responses"][0]["error_code"] == 0
    acls.set(RP(RT.TOPIC, "etl-1", PT.LITERAL), deny(Op.WRITE, "User:*"))
    refused = c.request(ApiKey.PRODUCE, 8, produce_body("etl-1", {0: records([b"y"])}, acks=1))
    assert refused["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert cluster.brokers[0].replica_manager.get("etl-1", 0).log_end_offset == 1


def test_inter_broker_requests_need_cluster_action(secured: tuple[InProcessCluster, Acls]) -> None:
    """A client (even one allowed All on every topic) sending ControlledShutdown for the broker, or
    a Fetch as replica 0, is refused and nothing changes: the broker stays leader, ISR unchanged."""
    cluster, acls = secured
    acls.set(RP(RT.TOPIC, "*", PT.LITERAL), allow(Op.ALL))
    broker = cluster.brokers[0]
    before = broker.metadata.states[("A", 0)]
    c = cluster.client(0)
    r = c.request(ApiKey.CONTROLLED_SHUTDOWN, 3, {"broker_id": 0, "broker_epoch": broker.broker_epoch})
    assert r["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r["remaining_partitions"] == []
    fetched = c.request(ApiKey.FETCH, 11, fetch_body("A", replica_id=0))
    assert fetched["responses"][0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    cluster.advance(2.0)
    after = broker.metadata.states[("A", 0)]
    assert (after.leader, tuple(after.isr), after.leader_epoch) == (0, (0,), before.leader_epoch)
    assert broker.metadata.brokers.keys() == {0}


def test_acl_apis_round_trip_through_zookeeper(inprocess_cluster_factory: Callable[..., InProcessCluster]) -> None:
    """With Alter and Describe on the cluster, CreateAcls through broker 0 writes Kafka's znodes,
    broker 1 learns them from the change notifications (DescribeAcls there), DeleteAcls through
    broker 1 removes them (and their znode) and reports what it deleted; bad creations get
    INVALID_REQUEST without touching the good ones."""
    cluster = inprocess_cluster_factory(size=2, overrides={**AUTHORIZER, "super.users": "User:nobody"})
    acls = Acls(cluster)
    acls.set(CLUSTER, allow(Op.ALL))       # inter-broker fetches need ClusterAction: ANONYMOUS is the broker here
    c0, c1 = cluster.client(0), cluster.client(1)
    creations = [
        {"resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3, "principal": "User:alice",
         "host": "*", "operation": 3, "permission_type": 3},
        {"resource_type": 3, "resource_name": "etl-", "resource_pattern_type": 4, "principal": "User:alice",
         "host": "10.0.0.1", "operation": 8, "permission_type": 2},
        {"resource_type": 4, "resource_name": "not-the-cluster", "resource_pattern_type": 3, "principal": "User:alice",
         "host": "*", "operation": 7, "permission_type": 3},
    ]
    r = cluster.wait(c0.send(ApiKey.CREATE_ACLS, 2, {"creations": creations}))
    assert [x["error_code"] for x in r["results"]] == [0, 0, ErrorCode.INVALID_REQUEST]
    data, _ = cluster.wait(acls.session.get("/kafka-acl/Topic/orders"))
    assert json.loads(data) == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                        "operation": "Read", "host": "*"}]}
    data, _ = cluster.wait(acls.session.get("/kafka-acl-extended/prefixed/Group/etl-"))
    assert json.loads(data)["acls"][0]["permissionType"] == "Deny"
    describe = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": "User:alice", "host_filter": None, "operation": 1, "permission_type": 1}
    cluster.pump_until(lambda: len(cluster.brokers[1].authorizer.cache) == 3, what="broker 1 applying the changes")
    r = c1.request(ApiKey.DESCRIBE_ACLS, 2, describe)
    assert r["error_code"] == 0
    assert {(x["resource_type"], x["resource_name"], x["pattern_type"]) for x in r["resources"]} == {(2, "orders", 3), (3, "etl-", 4)}
    v0 = c1.request(ApiKey.DESCRIBE_ACLS, 0, {k: v for k, v in describe.items() if k != "pattern_type_filter"})
    assert [x["resource_name"] for x in v0["resources"]] == ["orders"]          # v0: literal patterns only
    deleted = cluster.wait(c1.send(ApiKey.DELETE_ACLS, 2, {"filters": [
        {"resource_type_filter": 2, "resource_name_filter": "orders", "pattern_type_filter": 2,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]}))
    matched = deleted["filter_results"][0]
    assert matched["error_code"] == 0
    assert [(m["resource_name"], m["operation"], m["principal"]) for m in matched["matching_acls"]] == [("orders", 3, "User:alice")]
    assert cluster.wait(acls.session.exists("/kafka-acl/Topic/orders")) is None
    cluster.pump_until(lambda: all(RP(RT.TOPIC, "orders", PT.LITERAL) not in b.authorizer.cache
                                   for b in cluster.brokers.values()), what="both brokers dropping the deleted ACL")


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
        inprocess_cluster_factory: Callable[..., InProcessCluster]) -> None:
    """No authorizer.class.name: every API allowed, the ACL APIs SECURITY_DISABLED (as Kafka)."""
    cluster = inprocess_cluster_factory(size=1)
    c = cluster.client(0)
    r = c.request(ApiKey.DESCRIBE_ACLS, 1, {"resource_type_filter": 1, "resource_name_filter": None,
                                           "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                           "operation": 1, "permission_type": 1})
    assert r["error_code"] == ErrorCode.SECURITY_DISABLED
    r = c.request(ApiKey.CREATE_ACLS, 1, {"creations": [
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
         "operation": 3, "permission_type": 3}]})
    assert r["results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED
    r = c.request(ApiKey.DELETE_ACLS, 0, {"filters": [
        {"resource_type_filter": 1, "resource_name_filter": None, "principal_filter": None, "host_filter": None,
         "operation": 1, "permission_type": 1}]})
    assert r["filter_results"][0]["error_code"] == ErrorCode.SECURITY_DISABLED
    md = metadata(c, None, ops=True)
    assert md["cluster_authorized_operations"] == sum(1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                                                                         Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
                                                                         Op.DESCRIBE))


def test_old_change_notifications_are_purged(secured: tuple[InProcessCluster, Acls]) -> None:
    """Notifications older than 15 minutes are deleted when the next change is processed (Kafka's
    change expiration), so /kafka-acl-changes does not grow without end; newer ones stay."""
    cluster, acls = secured
    children = lambda: cluster.wait(acls.session.get_children("/kafka-acl-changes"))  # noqa: E731
    old = set(children())
    assert old                                              # the fixture's changes
    cluster.advance(16 * 60, step_s=1.0)
    acls.set(RP(RT.TOPIC, "A", PT.LITERAL), allow(Op.READ))
    cluster.pump_until(lambda: not (set(children()) & old), what="the old notifications purged")
    assert len(children()) == 1
