"""AlterReplicaLogDirs on in-process brokers with two log dirs each (memory reactor, in-memory
ZooKeeper): a replica moves to the other dir through a future replica
(``<topic>-<p>.<uuid>-future``) that DescribeLogDirs lists with is_future_key, copies the log
while produces continue, and takes over when caught up: afterwards the partition lives in the new
dir with the same records (equal bytes to another replica's log), the old directory is gone and
produce and replication go on. An unknown dir is LOG_DIR_NOT_FOUND; a replica that is not on the
broker yet is REPLICA_NOT_AVAILABLE and gets created in the requested dir when it comes."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.inprocess import InProcessCluster, produce_body, records

TOPIC = "mv-dir"


def alter(cluster: InProcessCluster, broker: int, moves: dict[str, list[tuple[str, int]]], version: int = 1) -> dict:
    body = {"dirs": [{"path": d, "topics": [{"name": t, "partitions": [p]} for t, p in tps]}
                     for d, tps in moves.items()]}
    resp = cluster.client(broker).request(34, version, body)
    return {(t["topic_name"], p["partition_index"]): p["error_code"] for t in resp["results"] for p in t["partitions"]}


def log_bytes(path: str) -> bytes:
    return b"".join(Path(path, f).read_bytes() for f in sorted(os.listdir(path)) if f.endswith(".log"))


def produce(cluster: InProcessCluster, n: int, tag: str) -> None:
    leader = cluster.leader_of(TOPIC, 0)
    for i in range(n):
        resp = cluster.client(leader).request(0, 8, produce_body(
            TOPIC, {0: records([b"%s-%d-%d" % (tag.encode(), i, j) + b"x" * 500 for j in range(50)])}, -1))
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0


def test_a_replica_moves_between_log_dirs_while_produces_go_on(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(3, log_dirs_per_broker=2)
    cluster.create_topic(TOPIC, assignment={0: [0, 1, 2]})
    produce(cluster, 20, "a")
    broker = cluster.brokers[1]
    logs = broker.log_manager
    source = logs.dir_of(TOPIC, 0)
    target = next(d for d in logs.log_dirs if d != source)
    broker.log_dir_mover.stop()                 # hold the copy to see the future replica first
    assert alter(cluster, 1, {target: [(TOPIC, 0)]}) == {(TOPIC, 0): ErrorCode.NONE}
    future = logs.future(TOPIC, 0)
    assert future is not None and os.path.basename(future.directory).startswith(f"{TOPIC}-0.")
    assert future.directory.endswith("-future") and future.log_dir == target
    described = broker.replica_manager.describe_log_dirs(None)
    in_target = next(r for r in described if r["log_dir"] == target)["topics"]
    assert in_target[0]["partitions"][0]["is_future_key"] is True

    broker.log_dir_mover.start()
    produce(cluster, 5, "b")                    # appends while the copy runs
    cluster.pump_until(lambda: logs.dir_of(TOPIC, 0) == target, what="the move to complete")
    produce(cluster, 5, "c")
    cluster.pump_until(lambda: cluster.replicated(TOPIC, 0)
                       and len({cluster.partition(b, TOPIC, 0).log.log_end_offset for b in range(3)}) == 1,
                       what="every replica at the same end")
    moved = cluster.partition(1, TOPIC, 0).log
    assert moved.directory == os.path.join(target, f"{TOPIC}-0") and logs.future(TOPIC, 0) is None
    assert not os.path.exists(os.path.join(source, f"{TOPIC}-0"))
    assert not [n for n in os.listdir(target) if n.endswith("-future")]
    other = cluster.partition(2, TOPIC, 0).log
    moved.flush()
    other.flush()
    assert moved.log_end_offset == other.log_end_offset == 30 * 50
    assert log_bytes(moved.directory) == log_bytes(other.directory)
    assert broker.log_dir_mover.moved == [(TOPIC, 0, target)]
    described = broker.replica_manager.describe_log_dirs({TOPIC: {0}})
    assert [r["log_dir"] for r in described if r["topics"]] == [target]


def test_unknown_dirs_and_replicas_not_here_yet(inprocess_cluster_factory: Any) -> None:
    cluster = inprocess_cluster_factory(3, log_dirs_per_broker=2)
    cluster.create_topic(TOPIC, assignment={0: [0, 1]})
    logs = cluster.brokers[2].log_manager
    wanted = logs.log_dirs[1]
    assert alter(cluster, 2, {"/nowhere": [(TOPIC, 0)]}, version=2) == {(TOPIC, 0): ErrorCode.LOG_DIR_NOT_FOUND}
    assert alter(cluster, 2, {wanted: [(TOPIC, 0)]}) == {(TOPIC, 0): ErrorCode.REPLICA_NOT_AVAILABLE}
    # the replica comes with a reassignment: it is created in the requested dir
    controller = cluster.controller().controller
    cluster.wait(controller.reassign({(TOPIC, 0): (0, 1, 2)}), what="the reassignment to start")
    cluster.pump_until(lambda: logs.dir_of(TOPIC, 0) is not None and cluster.replicated(TOPIC, 0),
                       what="broker 2's new replica")
    assert logs.dir_of(TOPIC, 0) == wanted


def test_the_copy_obeys_replica_alter_log_dirs_io_max_bytes_per_second(inprocess_cluster_factory: Any) -> None:
    """With the dynamic broker config at 10000 B/s and 64 KiB per step, the copy of ~0.8 MB takes
    at least the time Kafka's windowed rate allows (at most 11 x rate + one step per 10 s of
    simulated time), where it completes within one step unthrottled."""
    cluster = inprocess_cluster_factory(3, log_dirs_per_broker=2, overrides={"replica.fetch.max.bytes": "65536"})
    cluster.create_topic(TOPIC, assignment={0: [0, 1, 2]})
    produce(cluster, 30, "a")
    broker = cluster.brokers[1]
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
        {"name": "replica.alter.log.dirs.io.max.bytes.per.second", "config_operation": 0, "value": "10000"}]}],
            "validate_only": False}
    assert cluster.client(1).request(44, 0, body)["responses"][0]["error_code"] == 0
    cluster.pump_until(lambda: broker.quotas.replication.alter_log_dirs.bound == 10000, what="the rate applied")
    logs = broker.log_manager
    size = logs.get(TOPIC, 0).size
    target = next(d for d in logs.log_dirs if d != logs.dir_of(TOPIC, 0))
    assert alter(cluster, 1, {target: [(TOPIC, 0)]}) == {(TOPIC, 0): ErrorCode.NONE}
    took = cluster.pump_until(lambda: logs.dir_of(TOPIC, 0) == target, budget_s=600, what="the throttled move")
    windows = -(-size // (11 * 10000 + 65536)) - 1
    assert size > 700_000 and took >= 10 * windows >= 30, f"{size} bytes moved in {took:.1f} simulated s"
