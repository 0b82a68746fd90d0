"""kafkalite-reassign-partitions with ``log_dirs`` in the plan (AlterReplicaLogDirs, KIP-113) on
real brokers with two log dirs each: one plan moves broker 1's replica to its other dir (an
intra-broker move through a future replica) and adds a replica on broker 2 in the dir the plan
names (REPLICA_NOT_AVAILABLE until the reassignment creates it, then created there). ``--verify``
reports both the reassignment and each log dir move; afterwards DescribeLogDirs and the file
system agree: each replica is in its planned dir only, with every record."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from kafkalite.client import Admin, NewTopic, TopicPartition
from tests.support.waiting import wait_for

TOPIC = "dirs"
RECORDS = 2000


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.reassign_partitions", *args], text=True,
                          capture_output=True, timeout=120)


def test_plan_log_dirs_move_replicas_between_and_into_log_dirs(cluster_factory, tmp_path: Path) -> None:
    dirs = {b: [str(tmp_path / f"b{b}-d{i}") for i in (0, 1)] for b in (1, 2)}
    cluster = cluster_factory(2, broker_overrides={b: {"log.dirs": ",".join(ds)} for b, ds in dirs.items()})
    with Admin(cluster.bootstrap) as admin:
        assert admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [1]})])[TOPIC] is None
        wait_for(lambda: TOPIC in admin.list_topics(), 30, "topic created")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(TOPIC, b"r%d" % i + b"x" * 300, partition=0)
        assert producer.flush(30) == 0
        source = next(d for d in dirs[1] if (Path(d) / f"{TOPIC}-0").is_dir())
        target1 = next(d for d in dirs[1] if d != source)
        target2 = dirs[2][1]
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [1, 2], "log_dirs": [target1, target2]}]}))

        out = tool("--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan))
        assert out.returncode == 0, out.stderr + out.stdout
        assert "Successfully started log directory move" in out.stdout
        assert f"{TOPIC}-0-1" in out.stdout and f"{TOPIC}-0-2" in out.stdout

        def complete() -> bool:
            res = tool("--bootstrap-server", cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
            assert res.returncode == 0, res.stderr
            return (f"Reassignment of replica {TOPIC}-0-1 completed successfully." in res.stdout
                    and f"Reassignment of replica {TOPIC}-0-2 completed successfully." in res.stdout
                    and f"Reassignment of partition {TOPIC}-0 is complete." in res.stdout)
        wait_for(complete, 60, "the reassignment and both log dir moves", interval=0.5)

        described = admin.describe_log_dirs([1, 2], [TOPIC])
        placed = {(b, d.path): [r.partition for r in d.replicas] for b, ds in described.items() for d in ds}
        assert placed[(1, target1)] == [TopicPartition(TOPIC, 0)] and placed[(1, source)] == []
        assert placed[(2, target2)] == [TopicPartition(TOPIC, 0)] and placed[(2, dirs[2][0])] == []
        wait_for(lambda: not (Path(source) / f"{TOPIC}-0").exists()
                 and not list(Path(target1).glob("*-future")), 30, "the old directory removed")
        sizes = {b: next(r.size for d in ds for r in d.replicas) for b, ds in described.items()}
        assert sizes[1] == sizes[2] > RECORDS * 300
