"""``kafkalite-cluster rolling-restart`` as a user runs it (``python -m kafkalite.cluster``): every
broker of a three-broker cluster is restarted in turn under an idempotent acks=all producer, and
nothing is failed or lost; a cluster with a dead broker is refused with one line."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_for

TOPIC = "rolled"
PARTITIONS = 3


def tool(data_dir: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def data_dir(tmp_path: Path):
    d = tmp_path / "cluster"
    yield d
    if (d / "cluster.json").exists():
        tool(d, "down", "--timeout", "10")


class AckLog:
    """What the producer was told: per partition the acknowledged sequence numbers in ack order,
    the failures, and the longest wall-clock gap between two consecutive acknowledgements."""

    def __init__(self) -> None:
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        self.failed: list[str] = []
        #: the producer's own errors (error_cb): a fatal one says why the queue was purged
        self.errors: list[str] = []
        self.last_ack = time.monotonic()
        self.worst_gap = 0.0

    def on_delivery(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        now = time.monotonic()
        if err is not None:
            self.failed.append(str(err))
            return
        self.worst_gap = max(self.worst_gap, now - self.last_ack)
        self.last_ack = now
        self.acked[msg.partition()].append(int(msg.value()))

    def on_error(self, err) -> None:  # type: ignore[no-untyped-def]
        self.errors.append(f"{err.name()}{' (fatal)' if err.fatal() else ''}: {err.str()}")

    def failures(self) -> str:
        """One line for an assertion message: failed deliveries by error, then the producer's errors."""
        counts = {e: self.failed.count(e) for e in sorted(set(self.failed))}
        fatal = [e for e in self.errors if "(fatal)" in e]
        return f"{len(self.failed)} failed deliveries {counts}; producer errors: {fatal + self.errors[-3:]}"


def read_partition(bootstrap: str, partition: int) -> list[int]:
    """Every value of ``TOPIC``-``partition`` from offset 0 up to its high watermark (so a
    duplicate at the end would show too)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rr-check-{partition}",
                  "enable.auto.commit": False})
    tp = TopicPartition(TOPIC, partition, 0)
    values: list[int] = []
    try:
        low, high = c.get_watermark_offsets(tp, timeout=30)
        assert low == 0
        c.assign([tp])
        deadline = time.monotonic() + 60
        offset = 0
        while offset < high and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None or msg.error():
                continue
            offset = msg.offset() + 1
            values.append(int(msg.value()))
    finally:
        c.close()
    return values


def test_rolling_restart_under_idempotent_acks_all_producer(data_dir: Path) -> None:
    """While an idempotent acks=all producer writes numbered records to an RF=3 topic with
    min.insync.replicas=2, `rolling-restart` restarts brokers 101-103 one at a time (controller
    last), each back and every ISR full before the next; the producer sees 0 failed deliveries,
    and every acknowledged number is read back exactly once, in ack order, in its partition. The
    worst gap between two acknowledgements is printed (-s shows it)."""
    up = tool(data_dir, "up", "--brokers", "3", "--no-schema-registry",
              "--override", "controlled.shutdown.retry.backoff.ms=500")
    assert up.returncode == 0, up.stderr
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", up.stdout).group(1)
    controller = int(re.search(r"controller\s+(\d+)", up.stdout).group(1))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    wait_for(lambda: re.search(r"partitions: (\d+), under-replicated: 0", tool(data_dir, "status").stdout)
             and int(re.search(r"partitions: (\d+)", tool(data_dir, "status").stdout).group(1)) >= PARTITIONS,
             60, "the topic's partitions with full ISRs", interval=0.5)

    acks = AckLog()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 120000,
                         "error_cb": acks.on_error})
    stop = threading.Event()
    sent = {"n": 0}

    def produce() -> None:
        seq = 0
        while not stop.is_set():
            producer.produce(TOPIC, str(seq).encode(), partition=seq % PARTITIONS, on_delivery=acks.on_delivery)
            seq += 1
            producer.poll(0.002)
        sent["n"] = seq

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    wait_for(lambda: sum(map(len, acks.acked.values())) > 200, 30, "the producer's first acks")
    acks.worst_gap = 0.0          # the gap that matters is the one during the restarts
    started = time.monotonic()
    try:
        rr = tool(data_dir, "rolling-restart", "--timeout", "90")
    finally:
        stop.set()
        writer.join(30)
    took = time.monotonic() - started
    assert producer.flush(120) == 0, "records still unacknowledged two minutes after the restart"
    assert rr.returncode == 0, rr.stderr
    order = [int(b) for b in re.findall(r"^broker (\d+): done", rr.stdout, re.M)]
    assert sorted(order) == [101, 102, 103] and order[-1] == controller, rr.stdout
    assert "rolling restart complete" in rr.stdout
    assert "under-replicated: 0" in tool(data_dir, "status").stdout

    assert acks.failed == [], acks.failures()
    total = sum(map(len, acks.acked.values()))
    assert total == sent["n"]
    for p in range(PARTITIONS):
        expected = acks.acked[p]
        assert expected == sorted(expected)
        assert read_partition(bootstrap, p) == expected, f"partition {p}"
    print(f"\nrolling restart of 3 brokers: {took:.1f} s, {total} records acknowledged, "
          f"worst ack gap {acks.worst_gap * 1000:.0f} ms")


def test_rolling_restart_refuses_a_cluster_with_a_dead_broker(data_dir: Path) -> None:
    """With a broker killed, `rolling-restart` exits 1 with one line naming it and stops nothing;
    without a cluster it says so in one line."""
    none = tool(data_dir.parent / "none", "rolling-restart")
    assert none.returncode == 1 and none.stderr.startswith("kafkalite-cluster: no cluster in"), none.stderr
    up = tool(data_dir, "up", "--brokers", "2", "--no-schema-registry")
    assert up.returncode == 0, up.stderr
    assert tool(data_dir, "kill", "102").returncode == 0
    pid_101 = re.search(r"broker 101\s+\S+\s+pid (\d+)", up.stdout).group(1)
    rr = tool(data_dir, "rolling-restart", "--timeout", "5")
    assert rr.returncode == 1
    assert rr.stderr.strip() == ("kafkalite-cluster: broker(s) 102 not running: start them before a "
                                 "rolling restart"), rr.stderr
    assert re.search(rf"broker 101\s+alive\s+pid {pid_101}\b", tool(data_dir, "status").stdout)
