"""Load generators on confluent-kafka (librdkafka): the same code and settings for both systems.

Only ``System.client_conf`` differs between kafkalite and Kafka 0.9 (the version fallback).
Per-record Python work here is kept to one ``produce()`` call, so the client can push about a
million records per second and the broker is what is measured.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.systems import System

VALUE_SIZE = 100
# Every producer: at most 5 requests in flight per connection (the Java producer's default).
# librdkafka's default (1,000,000) lets it send a tiny request per linger tick however slowly the
# broker answers; brokers handle one request per connection at a time (Kafka's rule), so under
# acks=all those requests queue in the socket and latency grows without bound on both systems
# (measured: 27 s on Kafka 0.9, 74 s on kafkalite at 10,000 records/s). With a bounded window the
# client batches what accumulates meanwhile, as the Java producer does.
COMMON_PRODUCER = {"max.in.flight.requests.per.connection": 5, "compression.type": "none"}
# throughput producer: batches up to 1 MB, a short linger, no compression (the broker is measured)
THROUGHPUT_PRODUCER = {**COMMON_PRODUCER, "linger.ms": 5, "batch.size": 1000000,
                       "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576}
# latency / failover producer: no linger, a record leaves as soon as it is produced
LATENCY_PRODUCER = {**COMMON_PRODUCER, "linger.ms": 0}
# Every consumer: librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms (default
# 1000 ms) whenever its local queue is above queued.min.messages; a broker that answers faster than
# Python drains the queue was then idle for a whole second per refill (measured: 500,000 records
# from kafkalite in 1.82 s with the default, 0.88 s with 10 ms). Same value for both systems.
COMMON_CONSUMER = {"enable.auto.commit": False, "enable.auto.offset.store": False,
                   "fetch.queue.backoff.ms": 10}


def produce(system: System, topic: str, count: int, acks: int | str = 1, value_size: int = VALUE_SIZE) -> float:
    """Produce ``count`` records as fast as the client allows; seconds from first produce() to the
    end of flush(). Delivery is verified by the caller (high watermarks), not per record."""
    errors: list[str] = []
    p = Producer(system.client_conf(**THROUGHPUT_PRODUCER, acks=acks, error_cb=lambda e: errors.append(str(e))))
    value = os.urandom(value_size)
    send, poll = p.produce, p.poll
    start = time.perf_counter()
    for i in range(count):
        try:
            send(topic, value)
        except BufferError:
            while True:
                poll(0.001)
                try:
                    send(topic, value)
                    break
                except BufferError:
                    pass
        if not i & 0x3FFF:
            poll(0)
    left = p.flush(600)
    secs = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{system.name}: {left} records not delivered; client errors: {errors[:5]}")
    return secs


def produce_transactional(system: System, topic: str, count: int, txn_records: int = 1000,
                          value_size: int = VALUE_SIZE) -> float:
    """Produce ``count`` records in transactions of ``txn_records`` (one transactional producer,
    acks=all as transactions require, the throughput settings of :func:`produce`); seconds from
    init_transactions' end to the last commit_transaction (which flushes)."""
    errors: list[str] = []
    p = Producer(system.client_conf(**THROUGHPUT_PRODUCER, acks="all", error_cb=lambda e: errors.append(str(e)),
                                    **{"transactional.id": f"bench-{topic}", "transaction.timeout.ms": 60000}))
    p.init_transactions(60)
    value = os.urandom(value_size)
    send, poll = p.produce, p.poll
    start = time.perf_counter()
    done = 0
    while done < count:
        n = min(txn_records, count - done)
        p.begin_transaction()
        for _ in range(n):
            try:
                send(topic, value)
            except BufferError:
                poll(0.001)
                send(topic, value)
        p.commit_transaction(120)
        done += n
    secs = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{system.name}: transactional producer errors: {errors[:5]}")
    return secs


def last_stable_offsets(system: System, topic: str, partitions: int) -> tuple[int, int]:
    """(sum of high watermarks, sum of read_committed end offsets) of ``topic``."""
    out = []
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer(system.client_conf(**{"group.id": "bench-lso", "enable.auto.commit": False,
                                           "isolation.level": isolation}))
        try:
            out.append(sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                           for p in range(partitions)))
        finally:
            c.close()
    return out[0], out[1]


def high_watermark_sum(system: System, topic: str, partitions: int) -> int:
    c = Consumer(system.client_conf(**{"group.id": "bench-watermarks", "enable.auto.commit": False}))
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        c.close()


def wait_high_watermark_sum(system: System, topic: str, partitions: int, expected: int,
                            timeout: float = 300.0) -> int:
    """Until the high watermarks add up to ``expected`` (with acks=0/1 the followers may still be
    catching up after the producer's flush) or ``timeout``; returns the last sum."""
    deadline = time.monotonic() + timeout
    while True:
        got = high_watermark_sum(system, topic, partitions)
        if got >= expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def consume(system: System, topic: str, partitions: int, expected: int, timeout: float = 600.0) -> float:
    """Read ``expected`` records from the beginning with assign() (no group); seconds."""
    conf = system.client_conf(**COMMON_CONSUMER, **{"group.id": "bench-consume"})
    secs, n = consume_from_beginning(conf, topic, partitions, expected, timeout)
    if n != expected:
        raise RuntimeError(f"{system.name}: consumer read {n}/{expected} records of {topic}")
    return secs


def consume_from_beginning(conf: dict[str, Any], topic: str, partitions: int, expected: int,
                           timeout: float = 600.0) -> tuple[float, int]:
    """A confluent-kafka Consumer (``conf``) assigned every partition from offset 0 reads until
    ``expected`` records or ``timeout``; (seconds, records read). Shared by both benchmarks."""
    c = Consumer(conf)
    try:
        start = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        n = 0
        deadline = time.monotonic() + timeout
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    n += 1
        secs = time.perf_counter() - start
    finally:
        c.close()
    return secs, n


def consume_marks(conf: dict[str, Any], topic: str, expected: int, mark_every: int, timeout: float,
                  out: Any) -> None:
    """In a process of its own: read partition 0 of ``topic`` from offset 0 until ``expected``
    records; put ``(records, value bytes, wall time)`` on the queue ``out`` every ``mark_every``
    records, then None. Wall time, so the marks line up with the producer's in another process."""
    c = Consumer(conf)
    n = size = 0
    next_mark = mark_every
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out.put((0, 0, time.time()))
        deadline = time.monotonic() + timeout
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    n += 1
                    size += len(m.value() or b"")
                    if n >= next_mark:
                        out.put((n, size, time.time()))
                        next_mark += mark_every
    finally:
        c.close()
        out.put(None)


def paced(rate: float, duration: float, send: Callable[[int], None], poll: Callable[[], Any],
          stop: threading.Event | None = None) -> int:
    """Call ``send(i)`` at ``rate`` per second for ``duration`` s (catching up in small bursts)."""
    start = time.perf_counter()
    sent = 0
    while True:
        elapsed = time.perf_counter() - start
        if elapsed >= duration or (stop is not None and stop.is_set()):
            return sent
        due = int(elapsed * rate) + 1
        while sent < due:
            send(sent)
            sent += 1
        poll()
        time.sleep(max(0.0, (sent / rate) - (time.perf_counter() - start)))


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        raise ValueError("no values")
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


class PacedProducer:
    """A background acks=all producer at a fixed rate that records when each record was sent and
    acknowledged (failover scenario)."""

    def __init__(self, system: System, topic: str, rate: float) -> None:
        self.topic, self.rate = topic, rate
        self.producer = Producer(system.client_conf(**LATENCY_PRODUCER, acks="all",
                                                    **{"message.timeout.ms": 120000}))
        self.acks: list[tuple[float, float]] = []      # (sent, acked), monotonic seconds
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def _delivered(self, sent: float, err: Any, _msg: Any) -> None:
        if err is None:
            with self._lock:
                self.acks.append((sent, time.monotonic()))
        else:
            self.failed += 1

    def _run(self) -> None:
        p = self.producer
        paced(self.rate, 1e9,
              lambda i: p.produce(self.topic, b"%08d" % i + b"x" * (VALUE_SIZE - 8),
                                  on_delivery=functools.partial(self._delivered, time.monotonic())),
              lambda: p.poll(0), self._stop)

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def first_ack_of_record_sent_after(self, t0: float) -> float | None:
        with self._lock:
            later = [acked for sent, acked in self.acks if sent > t0]
        return min(later) if later else None

    def worst_wait(self, start: float, end: float) -> float | None:
        """The longest produce-to-ack time of the records sent between ``start`` and ``end``
        (after :meth:`stop`, every one of them is acknowledged or failed)."""
        with self._lock:
            waits = [acked - sent for sent, acked in self.acks if start <= sent <= end]
        return max(waits) if waits else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(60)
