"""Growing a cluster 3 -> 4 brokers and moving partitions onto the new broker, under load.

Real broker processes and ZooKeeper. An idempotent acks=all confluent-kafka producer streams
into an RF=3 topic while ``kafkalite-reassign-partitions --execute`` moves every partition so
broker 4 holds one of its replicas (for some partitions the leader's replica is the one that
goes), and ``--verify`` is polled until every move is complete. The reassignment time and the
producer's worst ack gap during it go to var/test-reports/failover.json. A second test cancels a
move mid-way (the new broker frozen with SIGSTOP so it cannot catch up).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from kafkalite.client import Admin, NewTopic
from tests.fault.cluster_support import (Streamer, full_isr, metadata_agrees, metadata_view, report,
                                         verify_exactly_once, zk_assignment, zk_states)
from tests.support.waiting import wait_for

TOPIC = "grow"
PARTITIONS = 6


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.reassign_partitions", *args], text=True,
                          capture_output=True, timeout=120)


def log_bytes(partition_dir: Path) -> bytes:
    """The partition's whole log: its segment files in base-offset order, concatenated."""
    return b"".join(p.read_bytes() for p in sorted(partition_dir.glob("*.log")))


def test_grow_three_to_four_brokers_and_move_every_partition_under_load(cluster_factory, tmp_path: Path) -> None:
    """0 acknowledged records lost or duplicated and no failed send; afterwards the replica sets
    equal the plan in ZooKeeper and in every broker's Metadata, no reassignment is left, every
    removed replica's directory is gone, and each new replica's log is byte-for-byte the
    leader's. --generate proposes a plan over the four brokers and --execute prints the rollback
    plan (the current assignment)."""
    cluster = cluster_factory(3)
    with Admin(cluster.bootstrap) as admin:
        wait_for(lambda: admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC] is None
                 or TOPIC in admin.list_topics(), 30, "topic created with RF 3")
    wait_for(lambda: len(zk_states(cluster, TOPIC)) == PARTITIONS and full_isr(cluster, TOPIC, 3), 30, "full ISRs")
    before = zk_assignment(cluster, TOPIC)

    new = cluster.add_broker(4)
    new.start()
    wait_for(lambda: 4 in cluster.registered_ids(), 30, "broker 4 registered")

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    generated = tool("--bootstrap-server", cluster.bootstrap, "--generate",
                     "--topics-to-move-json-file", str(topics_file), "--broker-list", "1,2,3,4")
    assert generated.returncode == 0, generated.stderr
    proposed = json.loads(generated.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert len(proposed["partitions"]) == PARTITIONS
    assert all(len(e["replicas"]) == 3 and set(e["replicas"]) <= {1, 2, 3, 4} for e in proposed["partitions"])

    # every partition gets broker 4, replacing a different old replica in turn (the leader's for some)
    plan = {p: [4] + [r for i, r in enumerate(before[p]) if i != p % 3] for p in range(PARTITIONS)}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in plan.items()]}))

    with Streamer(cluster.bootstrap, TOPIC, PARTITIONS, rate=400) as streamer:
        wait_for(lambda: all(streamer.count(p) >= 200 for p in range(PARTITIONS)), 60, "records on every partition")
        started = time.monotonic()
        executed = tool("--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan_file))
        assert executed.returncode == 0, executed.stderr + executed.stdout
        rollback = json.loads(executed.stdout.split("Current partition replica assignment\n\n")[1].split("\n")[0])
        assert {e["partition"]: e["replicas"] for e in rollback["partitions"]} == before
        assert "Successfully started partition reassignments for " in executed.stdout

        def complete() -> bool:
            out = tool("--bootstrap-server", cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan_file))
            assert out.returncode == 0, out.stderr
            return out.stdout.count("is complete.") == PARTITIONS
        wait_for(complete, 120, "every reassignment complete (--verify)", interval=0.2)
        took = time.monotonic() - started
        ended = time.monotonic()
        wait_for(lambda: all(streamer.count(p) >= 400 for p in range(PARTITIONS)), 60, "records after the move")
    gap = max(streamer.longest_ack_gap(p, started, ended) for p in range(PARTITIONS))
    total = verify_exactly_once(cluster.bootstrap, TOPIC, PARTITIONS, streamer)
    report("reassignment_3_to_4_brokers", {"partitions": PARTITIONS, "seconds": round(took, 3),
                                           "worst_ack_gap_s": round(gap, 3), "acked_records": total})

    assert zk_assignment(cluster, TOPIC) == plan
    data = json.loads(cluster.zk_get(f"/brokers/topics/{TOPIC}"))
    assert data.get("adding_replicas", {}) == {} and data.get("removing_replicas", {}) == {}
    wait_for(lambda: full_isr(cluster, TOPIC, 3) and metadata_agrees(cluster, TOPIC) is None, 60,
             "every broker's Metadata shows the plan with full ISRs")
    assert {p: v[2] for p, v in metadata_view(cluster.bootstrap, TOPIC).items()} == plan
    listed = tool("--bootstrap-server", cluster.bootstrap, "--list")
    assert "No partition reassignments found." in listed.stdout, listed.stdout + listed.stderr

    states = zk_states(cluster, TOPIC)
    by_id = {b.broker_id: b for b in cluster.brokers}
    for p in range(PARTITIONS):
        for gone in set(before[p]) - set(plan[p]):
            wait_for(lambda: not (by_id[gone].dir / "data" / f"{TOPIC}-{p}").exists(), 30,
                     f"broker {gone}'s replica of {TOPIC}-{p} deleted")
        leader_log = log_bytes(by_id[states[p]["leader"]].dir / "data" / f"{TOPIC}-{p}")
        assert leader_log, f"{TOPIC}-{p}: the leader's log is empty"
        wait_for(lambda: log_bytes(by_id[4].dir / "data" / f"{TOPIC}-{p}") == leader_log, 30,
                 f"broker 4's replica of {TOPIC}-{p} equal to the leader's")


def test_cancel_mid_way_restores_the_original_replicas(cluster_factory, tmp_path: Path) -> None:
    """The new broker 4 is frozen (SIGSTOP: still registered, but it cannot copy anything), so
    the move onto it stays in progress: --list shows it, --cancel ends it, ZooKeeper and every
    broker's Metadata show the original replicas again (original order as Kafka restores it: RS
    without the added replicas), the producer loses nothing, and broker 4, thawed, holds no
    replica of the topic."""
    import os
    import signal

    cluster = cluster_factory(3)
    with Admin(cluster.bootstrap) as admin:
        wait_for(lambda: admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC] is None
                 or TOPIC in admin.list_topics(), 30, "topic created with RF 3")
    wait_for(lambda: len(zk_states(cluster, TOPIC)) == 2 and full_isr(cluster, TOPIC, 3), 30, "full ISRs")
    before = zk_assignment(cluster, TOPIC)
    new = cluster.add_broker(4)
    new.start()
    wait_for(lambda: 4 in cluster.registered_ids(), 30, "broker 4 registered")
    plan = {p: [4] + before[p][1:] for p in before}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": p, "replicas": r} for p, r in plan.items()]}))
    args = ("--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan_file))

    with Streamer(cluster.bootstrap, TOPIC, 2, rate=200) as streamer:
        wait_for(lambda: all(streamer.count(p) >= 100 for p in range(2)), 60, "records on every partition")
        assert new.pid is not None
        os.kill(new.pid, signal.SIGSTOP)
        try:
            executed = tool("--execute", *args)
            assert executed.returncode == 0, executed.stderr + executed.stdout
            listed = tool("--bootstrap-server", cluster.bootstrap, "--list")
            assert f"{TOPIC}-0: replicas: " in listed.stdout and "adding: 4." in listed.stdout, listed.stdout
            cancelled = tool("--cancel", *args)
            assert cancelled.returncode == 0, cancelled.stderr + cancelled.stdout
            assert f"Successfully cancelled partition reassignments for: {TOPIC}-0,{TOPIC}-1" in cancelled.stdout
        finally:
            os.kill(new.pid, signal.SIGCONT)
        restored = {p: [r for r in plan[p] + before[p] if r != 4] for p in before}
        restored = {p: list(dict.fromkeys(r)) for p, r in restored.items()}
        wait_for(lambda: zk_assignment(cluster, TOPIC) == restored, 30, "the original replicas restored")
        assert all(sorted(restored[p]) == sorted(before[p]) for p in before)
        wait_for(lambda: all(streamer.count(p) >= 200 for p in range(2)), 60, "records after the cancel")
    verify_exactly_once(cluster.bootstrap, TOPIC, 2, streamer)
    data = json.loads(cluster.zk_get(f"/brokers/topics/{TOPIC}"))
    assert data.get("adding_replicas", {}) == {} and data.get("removing_replicas", {}) == {}
    wait_for(lambda: full_isr(cluster, TOPIC, 3) and metadata_agrees(cluster, TOPIC) is None, 60,
             "Metadata shows the original replicas with full ISRs")
    assert "No partition reassignments found." in tool("--bootstrap-server", cluster.bootstrap, "--list").stdout
    wait_for(lambda: not any((new.dir / "data" / f"{TOPIC}-{p}").exists() for p in before), 30,
             "broker 4 holds no replica of the topic")
