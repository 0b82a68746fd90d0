"""Shared pieces of the replicated-cluster fault tests.

* :class:`Streamer`: a confluent-kafka producer (acks=all, idempotent) in a thread that sends
  numbered records round-robin over the partitions and timestamps every enqueue and every ack.
* :func:`verify_exactly_once`: after the run, each partition holds every acknowledged number once,
  in order, with no gap.
* :func:`zk_states` / :func:`metadata_agrees`: what ZooKeeper's state znodes say, and whether the
  Metadata answer of every live broker says the same (leader, replicas, ISR, leader epoch).
* :func:`report`: figures for the lead go to ``var/test-reports/failover.json`` (gitignored).
"""
from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.protocol.api_keys import ApiKey
from tests.support import wire
from tests.support.reports import merge_report



class Streamer:
    """Streams numbered records (number n goes to partition n % partitions) at a steady pace."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 600.0,
                 extra: dict[str, Any] | None = None) -> None:
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.config = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                       "linger.ms": 5, "message.timeout.ms": 120000, **(extra or {})}
        #: partition -> [(number, enqueued at, acknowledged at)] in acknowledgement order
        self.acked: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
        self.failures: list[tuple[int, str, int]] = []      # (number, error text, error code)
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Streamer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(150)
        assert not self.thread.is_alive(), "producer did not finish flushing"

    def count(self, partition: int | None = None) -> int:
        with self.lock:
            if partition is None:
                return sum(len(v) for v in self.acked.values())
            return len(self.acked[partition])

    def first_ack_enqueued_after(self, partition: int, t: float) -> float | None:
        """Ack time of the first record of ``partition`` enqueued after ``t`` (None if none yet)."""
        with self.lock:
            times = [ack for _, enq, ack in self.acked[partition] if enq > t]
        return min(times) if times else None

    def longest_ack_gap(self, partition: int, start: float, end: float) -> float:
        """Longest time without an acknowledgement on ``partition`` within [start, end]."""
        with self.lock:
            acks = sorted(a for _, _, a in self.acked[partition] if start <= a <= end)
        points = [start, *acks, end] if acks else [start, end]
        return max(b - a for a, b in zip(points, points[1:]))

    def _run(self) -> None:
        producer = Producer(self.config)

        def delivered(err: Any, msg: Any, enqueued: float) -> None:
            n = int(msg.value())
            with self.lock:
                if err is None:
                    self.acked[msg.partition()].append((n, enqueued, time.monotonic()))
                else:
                    self.failures.append((n, str(err), err.code()))

        n = 0
        started = time.monotonic()
        while not self.stop_flag.is_set():
            now = time.monotonic()
            try:
                producer.produce(self.topic, str(n).encode(), partition=n % self.partitions,
                                 on_delivery=lambda err, msg, t=now: delivered(err, msg, t))
            except BufferError:
                producer.poll(0.05)
                continue
            n += 1
            producer.poll(0)
            ahead = n / self.rate - (time.monotonic() - started)
            if ahead > 0:
                producer.poll(min(ahead, 0.05))
        producer.flush(120)


def verify_exactly_once(bootstrap: str, topic: str, partitions: int, streamer: Streamer) -> int:
    """Consume everything; each partition must be exactly its acknowledged numbers, in order,
    with no gap (n, n + partitions, ...). Returns the number of acknowledged records checked."""
    assert not streamer.failures, f"{len(streamer.failures)} records failed: {streamer.failures[:5]}"
    expected = {p: sorted(n for n, _, _ in streamer.acked[p]) for p in range(partitions)}
    total = sum(len(v) for v in expected.values())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{topic}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: dict[int, list[int]] = defaultdict(list)
    deadline = time.monotonic() + 90
    try:
        while sum(len(v) for v in seen.values()) < total and time.monotonic() < deadline:
            for msg in consumer.consume(5000, 1.0):
                assert not msg.error(), msg.error()
                seen[msg.partition()].append(int(msg.value()))
        for msg in consumer.consume(5000, 1.0):      # anything beyond the acknowledged records?
            assert not msg.error(), msg.error()
            seen[msg.partition()].append(int(msg.value()))
    finally:
        consumer.close()
    for p in range(partitions):
        got = seen[p]
        assert len(got) == len(set(got)), f"partition {p}: duplicates"
        assert got == expected[p], (f"partition {p}: {len(got)} consumed vs {len(expected[p])} acknowledged; "
                                    f"missing {sorted(set(expected[p]) - set(got))[:10]}, "
                                    f"unacknowledged {sorted(set(got) - set(expected[p]))[:10]}")
        assert got == list(range(p, p + len(got) * partitions, partitions)), f"partition {p}: gap in the numbers"
    return total


def zk_states(cluster: Any, topic: str) -> dict[int, dict[str, Any]]:
    """partition -> its state znode (plus ``mzxid``), straight from ZooKeeper."""
    base = f"{cluster.chroot}/brokers/topics/{topic}/partitions"
    out = {}
    for child in cluster.zk.get_children(base):
        data, stat = cluster.zk.get(f"{base}/{child}/state")
        out[int(child)] = dict(json.loads(data), mzxid=stat.mzxid)
    return out


def zk_assignment(cluster: Any, topic: str) -> dict[int, list[int]]:
    data, _ = cluster.zk.get(f"{cluster.chroot}/brokers/topics/{topic}")
    return {int(p): r for p, r in json.loads(data)["partitions"].items()}


def controller_id(cluster: Any) -> int:
    data = cluster.zk_get("/controller")
    return json.loads(data)["brokerid"] if data else -1


def leaders(cluster: Any, topic: str) -> dict[int, int]:
    return {p: s["leader"] for p, s in zk_states(cluster, topic).items()}


def full_isr(cluster: Any, topic: str, size: int) -> bool:
    return all(len(s["isr"]) == size and s["leader"] >= 0 for s in zk_states(cluster, topic).values())


def metadata_view(bootstrap: str, topic: str) -> dict[int, tuple]:
    """partition -> (leader, leader epoch, replicas, sorted ISR) from one broker's Metadata v8."""
    resp = wire.request(bootstrap, ApiKey.METADATA, 8, wire.metadata_body([topic]), timeout=10)
    [t] = resp["topics"]
    if t["error_code"] != 0:
        return {}
    return {p["partition_index"]: (p["leader_id"], p["leader_epoch"], list(p["replica_nodes"]), sorted(p["isr_nodes"]))
            for p in t["partitions"]}


def metadata_agrees(cluster: Any, topic: str) -> str | None:
    """None when every live broker's Metadata matches ZooKeeper (``kafka-topics --describe``'s
    Leader, Replicas, Isr, plus leader epochs); otherwise what differs (for wait messages)."""
    assignment = zk_assignment(cluster, topic)
    expected = {p: (s["leader"], s["leader_epoch"], assignment[p], sorted(s["isr"]))
                for p, s in zk_states(cluster, topic).items()}
    for b in cluster.brokers:
        if not b.alive:
            continue
        try:
            view = metadata_view(b.bootstrap, topic)
        except Exception as exc:  # noqa: BLE001 - a restarting broker: report, wait
            return f"broker {b.broker_id}: {exc}"
        if view != expected:
            return f"broker {b.broker_id} says {view}, ZooKeeper says {expected}"
    return None


def report(key: str, value: Any) -> None:
    """Merge ``{key: value}`` into var/test-reports/failover.json and print it."""
    merge_report("failover", key, value)
    print(f"{key}: {json.dumps(value)}")
