"""kill -9 of a broker in the middle of a produce stream, restart on the same log directories,
and read everything back: what the broker acknowledged must survive, in order, once."""
from __future__ import annotations

import random
import re
import threading
import time
import uuid
from typing import Any

from kafkalite.protocol.api_keys import ApiKey
from tests.support.wire import request
from tests.support.zookeeper import free_port
from tests.support.topics import create_topic, wait_controller, wait_leaders

VALUE_SIZE = 100


def payload(i: int) -> bytes:
    return (b"%010d|" % i).ljust(VALUE_SIZE, b"x")


def number(value: bytes) -> int:
    return int(value[:10])


def fixed_port_cluster(cluster_factory: Any) -> tuple[Any, Any]:
    """A fixed listener port, so that clients reconnect to the restarted broker."""
    cluster = cluster_factory(1, {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"})
    b = cluster.brokers[0]
    wait_controller(b)
    return cluster, b


def latest_offset(b: Any, topic: str) -> int:
    resp = request(b.bootstrap, ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    part = resp["topics"][0]["partitions"][0]
    assert part["error_code"] == 0, part
    return part["offset"]


def log_end_at_restart(b: Any, topic: str) -> int:
    """The log end offset the restarted broker recovered (from its 'opened' log line)."""
    found = re.findall(rf"opened \S*/{re.escape(topic)}-0: offsets \[\d+, (\d+)\)", b.log_path.read_text(errors="replace"))
    assert len(found) >= 2, found
    return int(found[-1])


def read_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in [0, end), via confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 120
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in c.consume(20000, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


class Stream:
    """Produce numbered payloads from this thread; a killer thread SIGKILLs the broker once a
    random number of records has been acknowledged (and, if asked, restarts it)."""

    def __init__(self, b: Any, topic: str, config: dict[str, Any], total: int, kill_after: int,
                 restart_in_killer: bool) -> None:
        from confluent_kafka import Producer

        self.b, self.topic, self.total, self.kill_after = b, topic, total, kill_after
        self.producer = Producer({"bootstrap.servers": b.bootstrap, **config})
        self.acked: list[tuple[int, int]] = []          # (number, offset), in callback order
        self.failed: list[tuple[int, str]] = []
        self.killed = threading.Event()
        self.restarted = threading.Event()
        self.kill_at = self.restart_s = 0.0
        self.acked_at_kill = 0
        self.restart_error: BaseException | None = None
        self.restart_in_killer = restart_in_killer

    def _done(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((number(msg.value()), msg.offset()))
        else:
            self.failed.append((number(msg.value()), str(err)))

    def _killer(self) -> None:
        while len(self.acked) < self.kill_after and not self.killed.is_set():
            time.sleep(0.001)
        self.kill_at = time.monotonic()
        self.acked_at_kill = len(self.acked)
        self.b.kill()
        self.killed.set()
        if self.restart_in_killer:
            try:
                t0 = time.monotonic()
                self.b.start()
                self.restart_s = time.monotonic() - t0
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                self.restart_error = exc
            finally:
                self.restarted.set()

    def run(self, stop_at_kill: bool, max_rate: float | None = None) -> float:
        """Produce until done (or until the kill if ``stop_at_kill``), at most ``max_rate``
        records/s if given; returns the start time."""
        killer = threading.Thread(target=self._killer, daemon=True)
        p = self.producer
        t0 = time.monotonic()
        killer.start()
        for i in range(self.total):
            if stop_at_kill and self.killed.is_set():
                break
            while True:
                try:
                    p.produce(self.topic, payload(i), on_delivery=self._done)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 1000 == 0:
                p.poll(0)
                while max_rate and (ahead := t0 + i / max_rate - time.monotonic()) > 0:
                    p.poll(ahead)       # returns early when it serves a delivery report
        if not self.killed.is_set():     # everything queued before the kill point was reached
            while not self.killed.is_set():
                p.poll(0.01)
        killer.join(120)
        return t0


def test_acks1_kill9_mid_stream_acknowledged_records_survive(cluster_factory) -> None:
    """1,000,000 numbered 100-byte records with acks=1 (confluent-kafka, not idempotent); the
    broker is SIGKILLed from another thread after a random number (150k-750k) of acknowledgements,
    the producer's remaining records are purged, and the broker restarts on the same directories.
    Reading the partition back: every acknowledged record is at the offset it was acknowledged
    with, the log holds the records 0..m-1 exactly once in order (m >= acknowledged; the
    unacknowledged tail may or may not be there), so no acknowledged record is lost, duplicated or
    reordered. Prints records/s before the kill and the restart-recovery time."""
    cluster, b = fixed_port_cluster(cluster_factory)
    topic = f"crash-acks1-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic)
    rng = random.Random()
    kill_after = rng.randint(150_000, 750_000)
    stream = Stream(b, topic, {"acks": 1, "enable.idempotence": False, "linger.ms": 5,
                               "batch.num.messages": 10000, "queue.buffering.max.messages": 2_000_000,
                               "queue.buffering.max.kbytes": 1_048_576, "message.timeout.ms": 120000},
                    1_000_000, kill_after, restart_in_killer=False)
    t0 = stream.run(stop_at_kill=True)
    rate = stream.acked_at_kill / (stream.kill_at - t0)
    stream.producer.flush(2)
    stream.producer.purge(in_queue=True, in_flight=True)
    stream.producer.flush(10)
    acked = sorted(stream.acked)
    del stream.producer

    r0 = time.monotonic()
    b.start()
    registered = time.monotonic() - r0
    wait_leaders(b, topic)
    recovery = time.monotonic() - r0
    recovered = log_end_at_restart(b, topic)
    assert recovered < 1_000_000, "the kill was not mid-stream"
    print(f"\nacks=1: kill after {kill_after} acks (log end {recovered}); {rate:,.0f} records/s before the kill; "
          f"{len(acked)} acked, {len(stream.failed)} failed/purged; restart: registered {registered:.2f} s, "
          f"leading {recovery:.2f} s")

    end = latest_offset(b, topic)
    records = read_all(b.bootstrap, topic, end)
    assert len(records) == end
    assert [o for o, _ in records] == list(range(end))
    numbers = [number(v) for _, v in records]
    assert numbers == list(range(len(numbers))), "log is not 0..m-1 exactly once in order"
    assert [n for n, _ in acked] == list(range(len(acked))), "acknowledgements were not a prefix"
    assert len(numbers) >= len(acked), f"{len(acked) - len(numbers)} acknowledged records lost"
    by_offset = dict(records)
    wrong = [(n, o) for n, o in acked if number(by_offset[o]) != n]
    assert not wrong, f"acknowledged at the wrong offset: {wrong[:5]}"
    assert len(acked) >= kill_after
    assert "Traceback" not in b.log_path.read_text(errors="replace")


def test_idempotent_producer_across_kill9_and_restart_no_duplicates(cluster_factory) -> None:
    """An idempotent producer (enable.idempotence=true, acks=all) keeps sending 300,000 numbered
    records (paced at 100k/s so that the kill lands mid-stream: checked from the log end the
    restarted broker recovers) while the broker is SIGKILLed after a random number of acknowledgements and restarted
    on the same directories (same port) by another thread; the producer's in-flight batches are
    retried into the restarted broker. The log must hold every number at most once, in increasing
    order, every acknowledged number, and (as the producer reports no failure) all 300,000:
    the restarted broker recognised the retried batches from the producer state it recovered."""
    cluster, b = fixed_port_cluster(cluster_factory)
    topic = f"crash-idem-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic)
    total = 300_000
    kill_after = random.Random().randint(30_000, 200_000)
    stream = Stream(b, topic, {"enable.idempotence": True, "acks": "all", "linger.ms": 5,
                               "batch.num.messages": 5000, "queue.buffering.max.messages": 1_000_000,
                               "message.timeout.ms": 120000}, total, kill_after, restart_in_killer=True)
    t0 = stream.run(stop_at_kill=False, max_rate=100_000)
    assert stream.restarted.wait(120)
    assert stream.restart_error is None, stream.restart_error
    rate = stream.acked_at_kill / (stream.kill_at - t0)
    remaining = stream.producer.flush(120)
    print(f"\nidempotent: kill after {kill_after} acks; {rate:,.0f} records/s before the kill; restart "
          f"{stream.restart_s:.2f} s; {len(stream.acked)} acked, {len(stream.failed)} failed, {remaining} unflushed")
    acked = {n for n, _ in stream.acked}
    failures = list(stream.failed[:5])
    del stream.producer
    recovered = log_end_at_restart(b, topic)
    print(f"log end recovered at restart: {recovered}")
    assert kill_after <= recovered < total, "the kill was not mid-stream"

    end = latest_offset(b, topic)
    records = read_all(b.bootstrap, topic, end)
    assert len(records) == end
    numbers = [number(v) for _, v in records]
    dupes = len(numbers) - len(set(numbers))
    assert dupes == 0, f"{dupes} duplicated records"
    assert all(x < y for x, y in zip(numbers, numbers[1:])), "records out of order"
    assert acked <= set(numbers), f"{len(acked - set(numbers))} acknowledged records missing"
    assert remaining == 0 and not failures, f"producer failures: {failures}"
    assert numbers == list(range(total))
