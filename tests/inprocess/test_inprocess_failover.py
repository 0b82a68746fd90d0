"""Leader failover and controller fencing on three in-process brokers.

A stopped leader's partition goes to a replica from the ISR; the old leader, restarted on its
log dirs, truncates the tail only it had (KIP-101, OffsetForLeaderEpoch) and catches up, so
every replica holds the same log and every broker's Metadata agrees. A controller whose
ZooKeeper session expired is replaced by one with a higher epoch, and its writes under the
old fence fail with ControllerMovedError without changing anything.
"""
from __future__ import annotations

import json
from typing import Any

import pytest

from kafkalite.coordination.errors import ControllerMovedError
from kafkalite.metadata import LeaderAndIsr
from kafkalite.records.record import iter_records
from tests.support.inprocess import InProcessCluster, produce_body, records

TOPIC = "failover"
PRODUCE, METADATA = 0, 3


def produce(cluster: InProcessCluster, leader: int, values: list[bytes], acks: int) -> dict[str, Any]:
    resp = cluster.client(leader).request(PRODUCE, 8, produce_body(TOPIC, {0: records(values)}, acks))
    entry = resp["responses"][0]["partition_responses"][0]
    assert entry["error_code"] == 0, entry
    return entry


def log_values(cluster: InProcessCluster, broker_id: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in the broker's replica, read from its log."""
    plog = cluster.partition(broker_id, TOPIC, 0).log
    out: list[tuple[int, bytes]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        res = plog.read(offset, 1 << 20)
        out += [(r.offset, bytes(r.value)) for r in iter_records(res.records, min_offset=offset)]
        offset = res.last_offset + 1
    return out


def metadata_view(cluster: InProcessCluster, broker_id: int) -> Any:
    resp = cluster.client(broker_id).request(METADATA, 8, {"topics": [{"name": TOPIC}],
                                                           "allow_auto_topic_creation": False,
                                                           "include_cluster_authorized_operations": False,
                                                           "include_topic_authorized_operations": False})
    brokers = sorted((b["node_id"], b["port"]) for b in resp["brokers"])
    parts = sorted((p["partition_index"], p["error_code"], p["leader_id"], p["leader_epoch"],
                    tuple(p["replica_nodes"]), tuple(sorted(p["isr_nodes"])))
                   for t in resp["topics"] for p in t["partitions"])
    return resp["controller_id"], brokers, parts


def state_znode(cluster: InProcessCluster) -> tuple[dict[str, Any], int]:
    path = f"{cluster.chroot}/brokers/topics/{TOPIC}/partitions/0/state"
    return json.loads(cluster.zk_server.dump(path)[path]), int(cluster.zk_server.stat(path).version)


def test_a_stopped_leader_is_replaced_from_the_isr_and_rejoins_with_its_divergent_tail_truncated(
        inprocess_cluster_factory) -> None:
    """Five records reach every replica; two more reach only the leader (acks=1, followers
    stopped). The leader stops: the controller elects a follower from the ISR (epoch + 1), which
    takes new records at offsets 5.. . The old leader restarts, truncates its two unreplicated
    records, copies the new ones and is back in the ISR: all three logs are equal, and Metadata
    from every broker agrees with ZooKeeper."""
    cluster = inprocess_cluster_factory(3)
    controller = cluster.controller().broker_id
    old_leader, *others = [b for b in sorted(cluster.brokers) if b != controller] + [controller]
    cluster.create_topic(TOPIC, assignment={0: [old_leader, *others]})
    assert cluster.leader_of(TOPIC, 0) == old_leader
    epoch = cluster.partition(old_leader, TOPIC, 0).leader_epoch

    produce(cluster, old_leader, [b"r0", b"r1", b"r2", b"r3", b"r4"], acks=-1)
    for f in others:
        cluster.stop_fetching(f)
    produce(cluster, old_leader, [b"lost5", b"lost6"], acks=1)
    assert cluster.partition(old_leader, TOPIC, 0).log_end_offset == 7

    cluster.stop_broker(old_leader)
    for f in others:
        cluster.resume_fetching(f)
    cluster.pump_until(lambda: cluster.leader_of(TOPIC, 0) in others
                       and all(cluster.partition(b, TOPIC, 0).leader_epoch > epoch for b in others),
                       what="a new leader from the ISR")
    new_leader = cluster.leader_of(TOPIC, 0)
    new_part = cluster.partition(new_leader, TOPIC, 0)
    assert new_part.is_leader and new_part.log_end_offset == 5
    znode, _ = state_znode(cluster)
    assert znode["leader"] == new_leader and old_leader not in znode["isr"]

    produce(cluster, new_leader, [b"n5", b"n6", b"n7"], acks=-1)
    cluster.start_broker(old_leader)
    cluster.pump_until(lambda: old_leader in new_part.isr, what="the old leader back in the ISR")
    cluster.pump_until(lambda: cluster.partition(old_leader, TOPIC, 0).log_end_offset == 8,
                       what="the old leader caught up")

    expected = [(i, b"r%d" % i) for i in range(5)] + [(5, b"n5"), (6, b"n6"), (7, b"n7")]
    for b in sorted(cluster.brokers):
        assert log_values(cluster, b) == expected, f"broker {b}'s log"
    old_epochs = cluster.partition(old_leader, TOPIC, 0).log.epochs
    assert old_epochs.latest_epoch == new_part.leader_epoch

    cluster.pump_until(lambda: all(set(b.metadata.states[(TOPIC, 0)].isr) == set(cluster.brokers)
                                   for b in cluster.brokers.values()), what="every broker seeing the full ISR")
    views = {b: metadata_view(cluster, b) for b in sorted(cluster.brokers)}
    assert len(set(map(repr, views.values()))) == 1, views
    znode, _ = state_znode(cluster)
    _, brokers, parts = views[new_leader]
    assert [b for b, _ in brokers] == sorted(cluster.brokers)
    assert parts == [(0, 0, znode["leader"], znode["leader_epoch"], (old_leader, *others), tuple(sorted(znode["isr"])))]


def test_a_deposed_controller_is_fenced_by_the_higher_epoch(inprocess_cluster_factory) -> None:
    """The controller's ZooKeeper connection is cut until its session expires: another broker
    becomes controller with a higher epoch. The old controller's partition-state write under its
    old fence fails with ControllerMovedError and the state znode keeps its data and version;
    once reconnected (a new session) the old controller knows it is not controller any more."""
    cluster = inprocess_cluster_factory(3)
    cluster.create_topic(TOPIC, 1, 3)
    old = cluster.controller()
    old_id, old_fence = old.broker_id, old.controller.fence
    session = cluster.sessions[old_id]

    cluster.zk_server.disconnect(session)          # expires after zookeeper.session.timeout.ms
    cluster.pump_until(lambda: any(b.controller.active and b.controller.fence.epoch > old_fence.epoch
                                   for i, b in cluster.brokers.items() if i != old_id),
                       what="another broker elected controller")
    new = next(b for i, b in cluster.brokers.items() if i != old_id and b.controller.active)
    assert new.controller.fence.epoch == old_fence.epoch + 1
    epoch_path = f"{cluster.chroot}/controller_epoch"
    assert int(cluster.zk_server.dump(epoch_path)[epoch_path]) == old_fence.epoch + 1

    # the new controller's round takes the expired broker out of the partition's ISR
    cluster.pump_until(lambda: old_id not in new.metadata.states[(TOPIC, 0)].isr
                       and new.metadata.states[(TOPIC, 0)].leader != old_id, what="the new controller's round")
    before, version = state_znode(cluster)
    current = new.metadata.states[(TOPIC, 0)]
    assert current.zk_version == version
    # the deposed controller, still believing in its fence, makes itself leader at the current version
    grab = LeaderAndIsr(old_id, current.leader_epoch + 1, (old_id, *current.isr), old_fence.epoch, version)
    write = old.kafka_zk.update_leader_and_isr(TOPIC, 0, grab, fence=old_fence)
    at_refusal: list[Any] = []
    write.addErrback(lambda f: (at_refusal.append(state_znode(cluster)), f)[1])   # before anything else runs
    cluster.zk_server.reconnect(session)
    with pytest.raises(ControllerMovedError):
        cluster.wait(write, what="the deposed controller's write")
    assert at_refusal == [(before, version)], "a fenced write must change nothing"
    after, _ = state_znode(cluster)
    assert (after["leader"], after["leader_epoch"], after["controller_epoch"]) == \
        (before["leader"], before["leader_epoch"], new.controller.fence.epoch)

    cluster.pump_until(lambda: not old.controller.active and old.metadata.controller_id == new.broker_id
                       and old_id in new.metadata.brokers, what="the old controller re-registered, not controller")
    assert cluster.controller() is new
