"""A throttled reassignment (Kafka 2.x's ``--throttle``) really copies at about the rate, and
``--verify`` removes the throttle once the move is complete.

Real ZooKeeper and broker processes. 4 MB of incompressible records sit on one partition led by
broker 1; ``kafkalite-reassign-partitions --execute --throttle 200000`` adds a replica on broker 2.
The tool writes the topic's throttled replica lists (1 sends, 2 receives) and both rates on both
brokers (dynamic broker configs, seen in DescribeConfigs as DYNAMIC_BROKER_CONFIG). The lower
bound on the copy time comes from Kafka's windowed rate alone: before every throttled send the
bytes of the last 11 one-second samples are at most 11 x rate, so any 10 s carry at most
11 x rate + one fetch (<= replica.fetch.max.bytes here); 4 MB then needs at least 10 s, where an
unthrottled copy takes well under one. No upper bound is asserted. Once ``--verify`` reports the
move complete it clears the rates from every broker and the lists from the topic.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from kafkalite.client import Admin, NewTopic
from kafkalite.client.admin import BROKER, TOPIC as TOPIC_RESOURCE
from tests.support.waiting import wait_for

TOPIC = "throttled"
RATE = 200_000
FETCH_MAX = 65536
DATA = 4 * 1024 * 1024
RECORD = 1024


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.reassign_partitions", *args], text=True,
                          capture_output=True, timeout=120)


def test_throttled_reassignment_is_rate_bound_and_verify_removes_the_throttle(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory(3, overrides={"replica.fetch.max.bytes": str(FETCH_MAX)})
    with Admin(cluster.bootstrap) as admin:
        assert admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [1]})])[TOPIC] is None
        wait_for(lambda: TOPIC in admin.list_topics(), 30, "topic created")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20,
                             "batch.size": 16384, "compression.type": "none"})
        delivered: list[int] = []
        for _ in range(DATA // RECORD):
            producer.produce(TOPIC, os.urandom(RECORD), partition=0,
                             on_delivery=lambda err, msg: delivered.append(0 if err else 1))
            producer.poll(0)
        assert producer.flush(60) == 0 and sum(delivered) == DATA // RECORD

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2]}]}))
        started = time.monotonic()
        out = tool("--bootstrap-server", cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan),
                   "--throttle", str(RATE))
        assert out.returncode == 0, out.stderr + out.stdout
        assert f"The inter-broker throttle limit was set to {RATE} B/s" in out.stdout

        topic_cfg = admin.describe_configs(TOPIC_RESOURCE, TOPIC)
        assert topic_cfg["leader.replication.throttled.replicas"].value == "0:1"
        assert topic_cfg["follower.replication.throttled.replicas"].value == "0:2"
        for broker in (1, 2):
            rate = admin.describe_configs(BROKER, str(broker))["follower.replication.throttled.rate"]
            assert (rate.value, rate.source) == (str(RATE), "DYNAMIC_BROKER_CONFIG")
        assert admin.describe_configs(BROKER, "3")["leader.replication.throttled.rate"].source == "DEFAULT_CONFIG"

        verified: list[str] = []

        def complete() -> bool:
            res = tool("--bootstrap-server", cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
            assert res.returncode == 0, res.stderr
            verified.append(res.stdout)
            return "Reassignment of partition throttled-0 is complete." in res.stdout
        wait_for(complete, 120, "the throttled reassignment to complete", interval=0.5)
        elapsed = time.monotonic() - started

        windows = math.ceil(DATA / (11 * RATE + FETCH_MAX)) - 1
        assert elapsed >= 10 * windows >= 10, f"4 MB copied in {elapsed:.1f} s at {RATE} B/s"
        assert not any("Clearing" in v for v in verified[:-1])
        assert "Clearing broker-level throttles on brokers 1,2,3" in verified[-1]
        assert "Clearing topic-level throttles on topic throttled" in verified[-1]

        topic_cfg = admin.describe_configs(TOPIC_RESOURCE, TOPIC)
        assert topic_cfg["leader.replication.throttled.replicas"].source == "DEFAULT_CONFIG"
        assert topic_cfg["follower.replication.throttled.replicas"].source == "DEFAULT_CONFIG"
        for broker in (1, 2, 3):
            cfg = admin.describe_configs(BROKER, str(broker))
            assert cfg["leader.replication.throttled.rate"].source == "DEFAULT_CONFIG"
            assert cfg["follower.replication.throttled.rate"].source == "DEFAULT_CONFIG"
        print(f"throttled reassignment: {DATA} bytes at {RATE} B/s in {elapsed:.1f} s")
