"""confluent-kafka group members in threads, with the bookkeeping the group tests assert on.

Each member processes records (remembers (partition, offset) and who saw it), commits every
``commit_every`` records and, on revocation, what it processed (unless told to vanish without a
commit). An ownership table shared by all members checks, at each assignment, that no partition is
owned by two members at once: with the eager protocols (range, roundrobin) every partition is
revoked everywhere before the next generation hands it out.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, defaultdict, deque
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.reports import merge_report


def produce_numbered(bootstrap: str, topic: str, partitions: int, count: int, size: int = 100) -> dict[int, int]:
    """``count`` records of ``size`` bytes, round-robin over partitions; returns records per partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "enable.idempotence": True,
                         "batch.num.messages": 10000, "compression.type": "lz4"})
    pad = b"x" * (size - 12)
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
    for n in range(count):
        while True:
            try:
                producer.produce(topic, b"%012d" % n + pad, partition=n % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not failures, failures[:3]
    expected = {p: count // partitions + (1 if p < count % partitions else 0) for p in range(partitions)}
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    ends = {p: check.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
    check.close()
    assert ends == expected, (ends, expected)       # idempotent: each record stored exactly once
    return ends


class Ownership:
    """partition -> member currently owning it; assignment of an owned partition is a violation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.changed = threading.Condition(self.lock)

    def assign(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if p in self.owner and self.owner[p] != member:
                    self.violations.append(f"partition {p} assigned to {member} while owned by {self.owner[p]}")
                self.owner[p] = member
            self.changed.notify_all()

    def revoke(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]
            self.changed.notify_all()

    def snapshot(self) -> dict[int, str]:
        with self.lock:
            return dict(self.owner)


class _Recent(logging.Handler):
    """Keeps a member's last librdkafka ``debug=cgrp`` lines, printed when a test fails."""

    def __init__(self, lines: deque[str]) -> None:
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{time.time():.3f} {record.getMessage()}")


class Member(threading.Thread):
    def __init__(self, name: str, bootstrap: str, group: str, topic: str, ownership: Ownership,
                 commit_every: int = 2000, extra: dict[str, Any] | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.member = name
        self.topic = topic
        self.ownership = ownership
        self.commit_every = commit_every
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                       "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
                       "client.id": name, "debug": "cgrp", "logger": self._client_logger(name),
                       **(extra or {})}
        self.processed: list[tuple[int, int]] = []
        self.position: dict[int, int] = {}          # next offset to commit per partition
        self.committed: dict[int, int] = {}         # last acknowledged commit per partition
        self.stop_flag = threading.Event()
        self.vanish = False                         # leave without committing on revoke
        self.errors: list[str] = []
        self.late_commit_errors: list[str] = []     # commits refused after our own LeaveGroup
        self.assigned_at: list[tuple[float, list[int]]] = []
        self.owned: set[int] = set()                # partitions assigned to this member now
        self.stale = 0                              # records returned for a partition revoked meanwhile
        self.since_commit = 0
        self.pace = 0.0

    def _client_logger(self, name: str) -> logging.Logger:
        """librdkafka's group log of this member, kept in memory (last 400 lines), not printed."""
        self.client_log: deque[str] = deque(maxlen=400)
        logger = logging.getLogger(f"rdkafka.{name}.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_Recent(self.client_log))
        return logger

    def _commit(self, consumer: Consumer, partitions: list[int] | None = None) -> None:
        todo = {p: o for p, o in self.position.items() if (partitions is None or p in partitions)
                and self.committed.get(p) != o}
        if not todo:
            return
        try:
            result = consumer.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in todo.items()],
                                     asynchronous=False)
        except KafkaException as exc:
            if self.stop_flag.is_set() and exc.args[0].code() == KafkaError.UNKNOWN_MEMBER_ID:
                # close() during a rebalance: librdkafka sends its LeaveGroup before the revoke
                # callback's commit, which the coordinator then refuses (Kafka 2.8 does the same)
                self.late_commit_errors.append(str(exc))
                return
            self.errors.append(f"commit: {exc}")
            return
        for tp in result or []:
            if tp.error is None:
                self.committed[tp.partition] = tp.offset
        self.since_commit = 0

    def run(self) -> None:
        consumer = Consumer(self.config)

        def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
            ps = [tp.partition for tp in parts]
            self.assigned_at.append((time.monotonic(), ps))
            self.owned.update(ps)
            self.ownership.assign(self.member, ps)

        def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
            ps = [tp.partition for tp in parts]
            if not self.vanish:
                self._commit(c, ps)
            for p in ps:
                self.position.pop(p, None)
            self.owned.difference_update(ps)
            self.ownership.revoke(self.member, ps)

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self.stop_flag.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error():
                        if not msg.error().retriable() and msg.error().code() != -191:   # -191: partition EOF
                            self.errors.append(str(msg.error()))
                        continue
                    p = msg.partition()
                    if p not in self.owned:
                        # consume() collected this record before it served the revocation (the
                        # callback ran inside the same call), so the commit in on_revoke did not
                        # cover it: the partition's next owner reads it from that commit. Kafka's
                        # clients behave alike; an application that processes it would process it
                        # twice (CI saw (3, 48500, ['m2', 'm3']): a 500-record batch boundary).
                        self.stale += 1
                        continue
                    self.processed.append((p, msg.offset()))
                    self.position[p] = msg.offset() + 1
                    self.since_commit += 1
                if self.since_commit >= self.commit_every:
                    self._commit(consumer)
                if self.pace:
                    time.sleep(self.pace)           # "work" per batch: keeps the phases apart
        finally:
            consumer.close()

    def leave(self, commit: bool = True) -> None:
        if self.stop_flag.is_set():
            return
        self.vanish = not commit
        self.stop_flag.set()
        if self.is_alive():
            self.join(60)


def failure_report(members: list[Member], cluster: Any, group: str) -> str:
    """What a failed group test prints: each member's errors and, for a member with errors, its
    last librdkafka group log lines; then every broker's coordinator lines for ``group``."""
    out = []
    for m in members:
        out.append(f"--- {m.member}: errors {m.errors}")
        if m.errors:
            out.extend(m.client_log)
    for b in cluster.brokers:
        try:
            lines = b.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            lines = [f"(no log: {exc})"]
        out.append(f"--- broker {b.broker_id}, lines naming {group}")
        out.extend(line for line in lines if group in line)
    return "\n".join(out)


def processed_total(members: list[Member]) -> int:
    return len({rec for m in members for rec in m.processed})


def wait_settled(ownership: Ownership, members: list[Member], partitions: int, timeout: float) -> float:
    """Seconds until the live members own every partition (and no member is without partitions
    when there are enough of them)."""
    started = time.monotonic()
    deadline = started + timeout
    names = {m.member for m in members}
    with ownership.lock:
        while True:
            owners = ownership.owner
            if len(owners) == partitions and set(owners.values()) == names:
                return time.monotonic() - started
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"group did not settle: owners {owners}, members {sorted(names)}")
            ownership.changed.wait(min(left, 0.5))


def duplicates(members: list[Member]) -> dict[tuple[int, int], list[str]]:
    seen: dict[tuple[int, int], list[str]] = defaultdict(list)
    for m in members:
        for rec in m.processed:
            seen[rec].append(m.member)
    return {rec: who for rec, who in seen.items() if len(who) > 1}


def report(name: str, figures: dict[str, Any]) -> Path:
    """Merge ``figures`` under ``name`` into var/test-reports/groups.json and print them."""
    path = merge_report("groups", name, figures)
    print(f"\n{name}: {json.dumps(figures)}")
    return path


def counts(members: list[Member]) -> Counter:
    return Counter(m.member for m in members for _ in m.processed)
