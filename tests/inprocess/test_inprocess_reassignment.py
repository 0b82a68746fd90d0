"""Partition reassignment on in-process brokers (memory reactor, in-memory ZooKeeper).

An RF=3 topic on brokers 0-2 moves onto a 4th broker: the new replica is created by broker 3
from the topic znode's RS, catches up as a follower and joins the ISR; leadership leaves the
removed replica; the assignment becomes the target and the removed replica's log is deleted.
A cancellation restores the original replicas; the ZooKeeper-era znode does the same as the API.
"""
from __future__ import annotations

import json
from typing import Any

from tests.support.inprocess import InProcessCluster, produce_body, records
from zk_schema.admin import ReassignPartitions

TOPIC = "mv"


def topic_znode(cluster: InProcessCluster) -> dict[str, Any]:
    path = f"{cluster.chroot}/brokers/topics/{TOPIC}"
    return json.loads(cluster.zk_server.dump(path)[path])


def grown(inprocess_cluster_factory: Any) -> InProcessCluster:
    cluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, assignment={0: [0, 1, 2]})
    cluster.start_broker(3)
    cluster.pump_until(lambda: all(3 in b.metadata.brokers for b in cluster.brokers.values()),
                       what="every broker sees broker 3")
    leader = cluster.leader_of(TOPIC, 0)
    for i in range(5):
        resp = cluster.client(leader).request(0, 8, produce_body(TOPIC, {0: records([b"v%d-%d" % (i, j)
                                                                                     for j in range(20)])}, -1))
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0
    return cluster


def test_rf3_topic_moves_onto_a_fourth_broker(inprocess_cluster_factory: Any) -> None:
    """[0,1,2] -> [1,2,3] with leader 0: while moving the znode holds RS [1,2,3,0], adding [3],
    removing [0]; at the end the assignment is [1,2,3] with no reassignment fields, the leader is
    a target replica with a higher leader epoch, broker 0 holds no replica and its log directory
    is gone, and broker 3's log equals the leader's (same end offset, same bytes)."""
    cluster = grown(inprocess_cluster_factory)
    before = cluster.brokers[0].metadata.states[(TOPIC, 0)]
    assert before.leader == 0
    controller = cluster.controller().controller
    seen: list[dict[str, Any]] = []
    result = controller.reassign({(TOPIC, 0): (1, 2, 3)})
    result.addCallback(lambda r: seen.append(topic_znode(cluster)) or r)
    answer = cluster.wait(result, what="the reassignment to start")
    assert {k: v[0] for k, v in answer.items()} == {(TOPIC, 0): 0}
    assert seen[0]["partitions"]["0"] == [1, 2, 3, 0] and seen[0]["adding_replicas"] == {"0": [3]} \
        and seen[0]["removing_replicas"] == {"0": [0]}

    cluster.pump_until(lambda: topic_znode(cluster)["partitions"]["0"] == [1, 2, 3]
                       and all(cluster.brokers[b].replica_manager.get(TOPIC, 0) is None for b in [0]),
                       what="the reassignment to complete")
    znode = topic_znode(cluster)
    assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0), what="the new replica set in sync")
    state = cluster.brokers[3].metadata.states[(TOPIC, 0)]
    assert state.leader in (1, 2, 3) and state.leader_epoch > before.leader_epoch
    assert set(state.isr) == {1, 2, 3}
    assert not (cluster.log_dirs(0)[0] / f"{TOPIC}-0").exists(), "the removed replica's log is still there"
    assert cluster.brokers[0].log_manager.get(TOPIC, 0) is None
    leader = cluster.partition(state.leader, TOPIC, 0)
    moved = cluster.partition(3, TOPIC, 0)
    assert moved.log_end_offset == leader.log_end_offset == 100
    assert bytes(moved.log.read(0, 1 << 20).records) == bytes(leader.log.read(0, 1 << 20).records)
    assert controller.ongoing_reassignments() == {}


def test_cancel_restores_the_original_replicas(inprocess_cluster_factory: Any) -> None:
    """Broker 3 never catches up (its fetchers stopped): the reassignment stays in progress
    (ListPartitionReassignments shows it); cancelling writes the original replicas back ([1,2,0]) without reassignment
    fields, broker 3 drops its replica and log, and the leader stays 0. A second cancel answers
    NO_REASSIGNMENT_IN_PROGRESS; a target with an unknown broker INVALID_REPLICA_ASSIGNMENT.
    CreatePartitions meanwhile answers REASSIGNMENT_IN_PROGRESS and leaves the znode alone."""
    cluster = grown(inprocess_cluster_factory)
    cluster.stop_fetching(3)
    controller = cluster.controller().controller
    cluster.wait(controller.reassign({(TOPIC, 0): (1, 2, 3)}))
    cluster.pump_until(lambda: cluster.brokers[3].replica_manager.get(TOPIC, 0) is not None,
                       what="broker 3 to create its replica")
    cluster.advance(2.0)
    assert topic_znode(cluster)["adding_replicas"] == {"0": [3]}
    assert list(controller.ongoing_reassignments()) == [(TOPIC, 0)]
    grow = cluster.client(cluster.controller().broker_id).request(37, 1, {"topics": [{"name": TOPIC, "count": 2, "assignments": None}],
                                             "timeout_ms": 5000, "validate_only": False})
    assert grow["results"][0]["error_code"] == 60, "CreatePartitions must refuse during a reassignment"
    assert topic_znode(cluster)["adding_replicas"] == {"0": [3]}

    answer = cluster.wait(controller.reassign({(TOPIC, 0): None}))
    assert answer[(TOPIC, 0)][0] == 0
    # ORS is RS without the adding replicas, in RS's order (as Kafka's ``originReplicas``)
    cluster.pump_until(lambda: topic_znode(cluster)["partitions"]["0"] == [1, 2, 0]
                       and cluster.brokers[3].replica_manager.get(TOPIC, 0) is None,
                       what="the cancellation to take effect")
    assert topic_znode(cluster)["adding_replicas"] == {} and topic_znode(cluster)["removing_replicas"] == {}
    assert not (cluster.log_dirs(3)[0] / f"{TOPIC}-0").exists()
    assert cluster.leader_of(TOPIC, 0) == 0
    again = cluster.wait(controller.reassign({(TOPIC, 0): None, (TOPIC, 7): (1, 2, 3), ("nope", 0): (1,)}))
    assert again[(TOPIC, 0)][0] == 85 and again[(TOPIC, 7)][0] == 3 and again[("nope", 0)][0] == 3
    bad = cluster.wait(controller.reassign({(TOPIC, 0): (1, 2, 9)}))
    assert bad[(TOPIC, 0)][0] == 39


def test_zookeeper_era_znode_is_executed_and_deleted(inprocess_cluster_factory: Any) -> None:
    """Writing /admin/reassign_partitions as Kafka 2.x's tool does moves the partition (here
    RF 3 -> 2 and onto broker 3: [3,1]), and the controller deletes the znode when it is done."""
    cluster = grown(inprocess_cluster_factory)
    request = ReassignPartitions({(TOPIC, 0): (3, 1)})
    zk = cluster.brokers[0].kafka_zk.zk
    cluster.wait(zk.create(request.path(), request.encode()))
    path = f"{cluster.chroot}{request.path()}"
    cluster.pump_until(lambda: topic_znode(cluster)["partitions"]["0"] == [3, 1]
                       and cluster.zk_server.stat(path) is None,
                       what="the znode's reassignment done and the znode deleted")
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0), what="the new replica set in sync")
    for b in (0, 2):
        assert cluster.brokers[b].replica_manager.get(TOPIC, 0) is None
        assert not (cluster.log_dirs(b)[0] / f"{TOPIC}-0").exists()


def test_alter_and_list_partition_reassignments_apis(inprocess_cluster_factory: Any) -> None:
    """API 45 on a broker that is not the controller answers NOT_CONTROLLER (top level); on the
    controller it starts the move (per-partition NONE, unknown partitions
    UNKNOWN_TOPIC_OR_PARTITION), API 46 lists it with replicas/adding/removing while broker 3 is
    held back, a null-replicas entry cancels it, and the list is empty afterwards."""
    cluster = grown(inprocess_cluster_factory)
    cluster.stop_fetching(3)
    controller_id = cluster.controller().broker_id
    other = next(b for b in cluster.brokers if b != controller_id)
    alter = {"timeout_ms": 10000, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "replicas": [1, 2, 3]}, {"partition_index": 5, "replicas": [1, 2, 3]}]}]}
    refused = cluster.client(other).request(45, 0, alter)
    assert refused["error_code"] == 41 and refused["responses"] == []
    assert cluster.client(other).request(46, 0, {"timeout_ms": 1000, "topics": None})["error_code"] == 41

    client = cluster.client(controller_id)
    resp = client.request(45, 0, alter)
    assert resp["error_code"] == 0
    codes = {p["partition_index"]: p["error_code"] for p in resp["responses"][0]["partitions"]}
    assert codes == {0: 0, 5: 3}
    listed = client.request(46, 0, {"timeout_ms": 1000, "topics": None})
    assert listed["error_code"] == 0
    assert listed["topics"] == [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "replicas": [1, 2, 3, 0], "adding_replicas": [3], "removing_replicas": [0]}]}]
    only = client.request(46, 0, {"timeout_ms": 1000, "topics": [{"name": TOPIC, "partition_indexes": [1]}]})
    assert only["topics"] == []

    cancel = {"timeout_ms": 10000, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": None}]}]}
    assert client.request(45, 0, cancel)["responses"][0]["partitions"][0]["error_code"] == 0
    assert client.request(46, 0, {"timeout_ms": 1000, "topics": None})["topics"] == []
    again = client.request(45, 0, cancel)["responses"][0]["partitions"][0]
    assert again["error_code"] == 85


def test_new_controller_resumes_from_the_topic_znode_and_a_restarted_removed_replica_is_deleted(
        inprocess_cluster_factory: Any) -> None:
    """The controller's own replica is being removed; the controller stops while broker 3 is still
    catching up. The new controller finds the reassignment in the topic znode (adding/removing)
    and completes it once broker 3 has caught up; the old controller, restarted, finds its
    replica no longer assigned and deletes the log it loaded at start-up."""
    cluster = grown(inprocess_cluster_factory)
    cluster.stop_fetching(3)
    old = cluster.controller().broker_id
    target = tuple(b for b in (0, 1, 2, 3) if b != old)
    cluster.wait(cluster.controller().controller.reassign({(TOPIC, 0): target}))
    cluster.pump_until(lambda: cluster.brokers[3].replica_manager.get(TOPIC, 0) is not None,
                       what="broker 3 to create its replica")
    cluster.stop_broker(old)
    cluster.pump_until(lambda: any(b.controller.active for b in cluster.brokers.values()), what="a new controller")
    cluster.advance(1.0)
    assert topic_znode(cluster)["removing_replicas"] == {"0": [old]}, "completed before broker 3 caught up"
    cluster.resume_fetching(3)
    cluster.pump_until(lambda: topic_znode(cluster)["partitions"]["0"] == list(target),
                       what="the new controller to complete the reassignment")
    assert (cluster.log_dirs(old)[0] / f"{TOPIC}-0").exists(), "the stopped broker's log is kept while it is down"
    cluster.start_broker(old)
    cluster.pump_until(lambda: not (cluster.log_dirs(old)[0] / f"{TOPIC}-0").exists(),
                       what="the restarted broker to delete its stray log")
    assert cluster.brokers[old].replica_manager.get(TOPIC, 0) is None
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0), what="the target replicas in sync")


def test_replication_factor_grows_the_same_way(inprocess_cluster_factory: Any) -> None:
    """RF 3 -> 4 ([0,1,2] -> [0,1,2,3]): nothing is removed, the leader stays, broker 3 joins the
    ISR with the leader's data, and the assignment becomes the target."""
    cluster = grown(inprocess_cluster_factory)
    cluster.wait(cluster.controller().controller.reassign({(TOPIC, 0): (0, 1, 2, 3)}))
    cluster.pump_until(lambda: topic_znode(cluster)["partitions"]["0"] == [0, 1, 2, 3]
                       and topic_znode(cluster)["adding_replicas"] == {}, what="RF 4")
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0), what="four replicas in sync")
    assert cluster.leader_of(TOPIC, 0) == 0
    assert cluster.partition(3, TOPIC, 0).log_end_offset == cluster.partition(0, TOPIC, 0).log_end_offset == 100
