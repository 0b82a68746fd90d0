"""A coordinator that stays leader of its partition across a leader-epoch bump keeps serving
(issue 28; three in-process brokers).

When a follower of a ``__consumer_offsets`` / ``__transaction_state`` partition dies, the
controller removes it from the ISR and bumps the leader epoch; the broker that stays leader must
not unload and replay the partition (Kafka: ``Partition.makeLeader`` is not ``isNewLeader``, so
``onLeadershipChange`` calls no ``onElection``). Here the group has a rebalance in progress (a
second member's JoinGroup is parked) and a transaction is open when the follower stops; loads are
held back, so a reload would also be seen as COORDINATOR_LOAD_IN_PROGRESS and the parked join
answered NOT_COORDINATOR.
"""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.support.inprocess import InProcessCluster

GROUP, TXN_ID, TOPIC = "billing", "billing-tx", "orders"
OFFSETS, TXNS = "__consumer_offsets", "__transaction_state"


def coordinator_of(cluster: InProcessCluster, key: str, key_type: int) -> int:
    """FindCoordinator until it names a node (the first call creates the internal topic)."""
    found: list[int] = []

    def ask() -> bool:
        resp = cluster.client(min(cluster.brokers)).request(ApiKey.FIND_COORDINATOR, 2,
                                                            {"key": key, "key_type": key_type})
        if resp["error_code"] == 0:
            found.append(resp["node_id"])
        return bool(found)

    cluster.pump_until(ask, what=f"a coordinator for {key}", step_s=0.1)
    return found[0]


def join_body(member_id: str) -> dict[str, Any]:
    return {"group_id": GROUP, "session_timeout_ms": 120000, "rebalance_timeout_ms": 120000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}


def join(cluster: InProcessCluster, client: Any, member_id: str = "") -> dict[str, Any]:
    resp: dict[str, Any] = client.request(ApiKey.JOIN_GROUP, 5, join_body(member_id))
    if resp["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
        resp = client.request(ApiKey.JOIN_GROUP, 5, join_body(resp["member_id"]))
    return resp


def offset_fetch(client: Any) -> dict[str, Any]:
    resp: dict[str, Any] = client.request(ApiKey.OFFSET_FETCH, 5, {
        "group_id": GROUP, "require_stable": False, "topics": [{"name": TOPIC, "partition_indexes": [0]}]})
    return resp


def spy(coordinator: Any, topic: str, partition: int, calls: list[tuple[str, int]]) -> None:
    """Record the coordinator's unload/begin_load calls for ``partition``."""
    for name in ("unload", "begin_load"):
        original = getattr(coordinator, name)

        def wrapped(p: int, *args: Any, _original: Any = original, _name: str = name) -> Any:
            if p == partition:
                calls.append((f"{topic} {_name}", p))
            return _original(p, *args)

        setattr(coordinator, name, wrapped)


def test_coordinators_serve_through_a_leader_epoch_bump_while_staying_leader(inprocess_cluster_factory) -> None:
    cluster = inprocess_cluster_factory(3, {"transaction.state.log.num.partitions": "2",
                                            "transaction.state.log.replication.factor": "3",
                                            "transaction.state.log.min.isr": "1"})
    cluster.create_topic(TOPIC, 1, 3)
    group_coordinator = coordinator_of(cluster, GROUP, 0)
    txn_coordinator = coordinator_of(cluster, TXN_ID, 1)
    op = cluster.brokers[group_coordinator].groups.coordinator.partition_of(GROUP)
    tp = cluster.brokers[txn_coordinator].txns.coordinator.partition_of(TXN_ID)
    cluster.pump_until(lambda: cluster.replicated(OFFSETS, op) and cluster.replicated(TXNS, tp),
                       what="the coordinator partitions fully replicated")
    # a follower of both coordinator partitions (RF 3 on 3 brokers: any broker leading neither)
    follower = next(b for b in sorted(cluster.brokers) if b not in (group_coordinator, txn_coordinator))

    # the group: member A stable in generation 1 with a committed offset
    gc = cluster.client(group_coordinator)
    a = join(cluster, gc)
    assert a["error_code"] == 0 and a["generation_id"] == 1, a
    sync = gc.request(ApiKey.SYNC_GROUP, 3, {"group_id": GROUP, "generation_id": 1, "member_id": a["member_id"],
                                             "group_instance_id": None,
                                             "assignments": [{"member_id": a["member_id"], "assignment": b"a"}]})
    assert sync["error_code"] == 0, sync
    commit = gc.request(ApiKey.OFFSET_COMMIT, 7, {
        "group_id": GROUP, "generation_id_or_member_epoch": 1, "member_id": a["member_id"], "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert commit["topics"][0]["partitions"][0]["error_code"] == 0, commit
    # member B joins: a rebalance starts and B's JoinGroup is parked until A rejoins
    bc = cluster.client(group_coordinator)
    b_first = bc.request(ApiKey.JOIN_GROUP, 5, join_body(""))
    assert b_first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED, b_first
    parked_answers: list[Any] = []
    parked = bc.send(ApiKey.JOIN_GROUP, 5, join_body(b_first["member_id"]), 120)
    parked.addBoth(parked_answers.append)     # (the answer, or the Failure)
    cluster.advance(0.5)
    assert not parked_answers, f"B's join was answered before A rejoined: {parked_answers}"

    # the transaction: open, with a partition added
    tc = cluster.client(txn_coordinator)
    init = tc.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": TXN_ID, "transaction_timeout_ms": 60000})
    assert init["error_code"] == 0, init
    pid, epoch = init["producer_id"], init["producer_epoch"]
    added = tc.request(ApiKey.ADD_PARTITIONS_TO_TXN, 1, {"transactional_id": TXN_ID, "producer_id": pid,
                                                        "producer_epoch": epoch,
                                                        "topics": [{"name": TOPIC, "partitions": [0]}]})
    assert added["results"][0]["results"][0]["error_code"] == 0, added

    # the follower stops; a reload (held back) would show
    epochs = (cluster.partition(group_coordinator, OFFSETS, op).leader_epoch,
              cluster.partition(txn_coordinator, TXNS, tp).leader_epoch)
    cluster.runner.hold(lambda fn: getattr(fn, "__name__", "") == "_read_partition")
    reloads: list[tuple[str, int]] = []
    spy(cluster.brokers[group_coordinator].groups.coordinator, OFFSETS, op, reloads)
    spy(cluster.brokers[txn_coordinator].txns.coordinator, TXNS, tp, reloads)
    cluster.stop_broker(follower)
    cluster.pump_until(lambda: (cluster.partition(group_coordinator, OFFSETS, op).leader_epoch > epochs[0]
                                and cluster.partition(txn_coordinator, TXNS, tp).leader_epoch > epochs[1]),
                       what="the ISR shrink's leader-epoch bump on both coordinator partitions")
    assert follower not in cluster.partition(group_coordinator, OFFSETS, op).isr
    assert cluster.leader_of(OFFSETS, op) == group_coordinator and cluster.leader_of(TXNS, tp) == txn_coordinator
    cluster.advance(0.5)

    assert not reloads, f"coordinator partitions unloaded or reloaded while their broker stayed leader: {reloads}"
    assert not parked_answers, f"the parked JoinGroup was answered by the epoch bump: {parked_answers}"
    fetched = offset_fetch(gc)
    assert fetched["error_code"] == 0, fetched
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 42

    # the rebalance in progress completes: A rejoins, both are in generation 2
    a2 = join(cluster, gc, a["member_id"])
    cluster.pump_until(lambda: bool(parked_answers), what="B's parked JoinGroup answered")
    b2 = parked_answers[0]
    assert (a2["error_code"], b2["error_code"]) == (0, 0), (a2, b2)
    assert a2["generation_id"] == b2["generation_id"] == 2
    # and the open transaction commits
    ended = tc.request(ApiKey.END_TXN, 1, {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch,
                                           "committed": True})
    assert ended["error_code"] == 0, ended
    cluster.runner.release()
