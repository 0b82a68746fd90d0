"""``kafkalite-log-dirs --describe`` (DescribeLogDirs through kafkalite.client) against two broker
processes, one with two log dirs: the JSON is Kafka's, and every replica's size is the size of its
segment files on that broker's disk."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from kafkalite.client import Admin, NewTopic
from tests.fault.cluster_support import full_isr
from tests.support.waiting import wait_for

TOPIC, OTHER = "sized", "other"


def log_dirs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.log_dirs", *args],
                          text=True, capture_output=True, timeout=120)


def on_disk(log_dir: str, partition: str) -> int:
    """Bytes of the partition's segment log files in ``log_dir`` (what Kafka's Log.size counts)."""
    return sum(f.stat().st_size for f in (Path(log_dir) / partition).glob("*.log"))


def test_describe_sizes_match_the_files(cluster_factory, tmp_path: Path) -> None:
    """Broker 1 has two log dirs, broker 2 one; after acks=all writes to an RF-2 topic of 4
    partitions, the tool lists every configured dir of both brokers with error null, each replica
    in exactly one dir of each broker, with a size equal to its *.log files on disk (and > 0),
    offsetLag 0 and isFuture false; --broker-list and --topic-list narrow the answer."""
    dirs = [tmp_path / "b1-a", tmp_path / "b1-b"]
    cluster = cluster_factory(2, broker_overrides={1: {"log.dirs": ",".join(map(str, dirs))}})
    bootstrap = cluster.bootstrap
    with Admin(bootstrap) as admin:
        for name in (TOPIC, OTHER):
            assert admin.create_topics([NewTopic(name, 4, 2)])[name] is None
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(400):
        p.produce(TOPIC, value=b"x" * (50 + i % 7), partition=i % 4)
    p.produce(OTHER, value=b"y", partition=0)
    assert p.flush(30) == 0
    wait_for(lambda: full_isr(cluster, TOPIC, 2), 30, "full ISRs")

    out = log_dirs("--describe", "--bootstrap-server", bootstrap, "--topic-list", TOPIC)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1] == "Received log directory information from brokers 1,2"
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [1, 2]
    b1, b2 = doc["brokers"]
    assert sorted(d["logDir"] for d in b1["logDirs"]) == sorted(str(d) for d in dirs)
    assert [d["logDir"] for d in b2["logDirs"]] == [str(cluster.broker(2).dir / "data")]
    for broker in (b1, b2):
        seen = []
        for d in broker["logDirs"]:
            assert d["error"] is None
            for r in d["partitions"]:
                assert r["partition"].startswith(f"{TOPIC}-"), r      # --topic-list left OTHER out
                assert r["size"] > 0 and r["size"] == on_disk(d["logDir"], r["partition"]), (d["logDir"], r)
                assert r["offsetLag"] == 0 and r["isFuture"] is False
                seen.append(r["partition"])
        assert sorted(seen) == [f"{TOPIC}-{i}" for i in range(4)], broker["broker"]
    assert all(d["partitions"] for d in b1["logDirs"]), "4 partitions spread over both of broker 1's dirs"

    only2 = log_dirs("--describe", "--bootstrap-server", bootstrap, "--broker-list", "2")
    assert only2.returncode == 0, only2.stderr
    doc2 = json.loads(only2.stdout.strip().splitlines()[-1])
    assert [b["broker"] for b in doc2["brokers"]] == [2]
    listed = {r["partition"] for d in doc2["brokers"][0]["logDirs"] for r in d["partitions"]}
    assert f"{OTHER}-0" in listed and f"{TOPIC}-3" in listed       # no --topic-list: every topic


def test_bad_input_is_one_line(broker) -> None:
    """An unknown broker id, a non-numeric --broker-list and a missing --describe each end the tool
    with exit 1 and one line on stderr."""
    for args, expected in ((["--broker-list", "77"], "broker(s) 77 not in the cluster"),
                           (["--broker-list", "one"], "--broker-list must be comma-separated broker ids")):
        r = log_dirs("--describe", "--bootstrap-server", broker.bootstrap, *args)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and expected in r.stderr, r.stderr
    r = log_dirs("--bootstrap-server", broker.bootstrap)
    assert r.returncode == 1 and r.stderr.startswith("Error:") and "--describe" in r.stderr, r.stderr
