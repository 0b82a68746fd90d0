"""End-to-end latency measured right (issue 18): producer and consumer in processes of their own,
the receive time taken per record.

The old probe (one process, ``consume(num_messages=1000, timeout=0.1)``) let each record wait in
the client for up to the 100 ms batching window, and shared one GIL between producer and
consumer. Here each side is its own process and the consumer calls ``poll()`` per record, so the
receive time is taken as soon as librdkafka hands the record over.

Each value starts with the send time from ``time.monotonic_ns()`` (CLOCK_MONOTONIC on Linux: one
clock for every process of the machine). The producer sends exactly ``count`` records at ``rate``
per second and also records produce-to-acknowledgement latency; both sides write their samples
as raw little-endian doubles (milliseconds) plus, for the consumer, each record's receive time
(seconds since the first send) for the latency-over-time chart.

Run as ``python -m bench.latency_probe consumer|producer <conf json> <topic> ...`` by
:func:`run`, which is what the benchmark calls.
"""
from __future__ import annotations

import array
import json
import os
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
VALUE_SIZE = 100
READY = "ready"


@dataclass
class LatencySamples:
    """Milliseconds, in receive order; ``at`` is each record's receive time in seconds since start."""
    end_to_end: list[float]
    at: list[float]
    ack: list[float]


def consumer_main(conf: dict[str, Any], topic: str, partitions: int, count: int, out: str,
                  timeout: float) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(conf)
    lat = array.array("d")
    at = array.array("d")
    try:
        # a fresh topic: read from offset 0; asking each leader for its watermarks first opens the
        # connections the fetches will use, so the first records do not wait for connection set-up
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        for p in range(partitions):
            c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        c.poll(0.2)
        print(READY, flush=True)
        now = time.monotonic_ns
        start_ns = 0
        deadline = time.monotonic() + timeout
        while len(lat) < count and time.monotonic() < deadline:
            m = c.poll(0.05)
            if m is None or m.error() is not None:
                continue
            t = now()
            value = m.value()
            if value is None:
                continue
            sent = struct.unpack_from(">q", value)[0]
            if not start_ns:
                start_ns = sent
            lat.append((t - sent) / 1e6)
            at.append((t - start_ns) / 1e9)
    finally:
        c.close()
    with open(out, "wb") as f:
        f.write(struct.pack("<q", len(lat)))
        lat.tofile(f)
        at.tofile(f)
    return 0 if len(lat) >= count else 3


def producer_main(conf: dict[str, Any], topic: str, rate: float, count: int, out: str) -> int:
    from confluent_kafka import Producer

    p = Producer(conf)
    acks = array.array("d")
    failed = [0]
    stalled = [0]          # produce() calls refused with a full queue
    clock = time.monotonic_ns

    def delivered(sent: int) -> Callable[[Any, Any], None]:
        def done(err: Any, _msg: Any) -> None:
            if err is None:
                acks.append((clock() - sent) / 1e6)
            else:
                failed[0] += 1
        return done

    # delivery reports are served by a thread of their own, blocked in poll() until one arrives,
    # so each ack time is taken when librdkafka hands the report over; served from the send loop
    # (poll(0) between sleeps), an ack could not read below the send interval (1 ms at 1,000
    # records/s) on either system, and a send loop polling with timeouts under librdkafka's 1 ms
    # resolution would spin and starve the brokers it measures
    sending = threading.Event()
    sending.set()

    def serve_reports() -> None:
        while sending.is_set():
            p.poll(0.1)
    reports = threading.Thread(target=serve_reports, name="delivery-reports", daemon=True)
    reports.start()
    pad = os.urandom(VALUE_SIZE - 8)
    start = time.perf_counter()
    sent = 0
    while sent < count:
        due = min(count, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            t = clock()
            while True:
                try:
                    p.produce(topic, struct.pack(">q", t) + pad, on_delivery=delivered(t))
                    break
                except BufferError:
                    # the client's queue is full: the system is not keeping up with the rate.
                    # Wait for acks; the record keeps its first send time, so the wait counts.
                    stalled[0] += 1
                    time.sleep(0.01)
            sent += 1
        time.sleep(max(0.0, sent / rate - (time.perf_counter() - start)))
    p.flush(120)
    sending.clear()
    reports.join()
    elapsed = time.perf_counter() - start
    if stalled[0]:
        print(f"producer: the client's queue was full {stalled[0]:,} times; {count:,} records took "
              f"{elapsed:.1f} s ({count / elapsed:,.0f} records/s against {rate:,.0f} asked)", file=sys.stderr)
    with open(out, "wb") as f:
        acks.tofile(f)
    if failed[0]:
        print(f"producer: {failed[0]} records failed", file=sys.stderr)
        return 3
    return 0


def greedy_main(conf: dict[str, Any], topic: str, seconds: float, out: str) -> int:
    """A producer writing as fast as its client allows for ``seconds`` (the noisy neighbour of
    the quota scenario); writes its acknowledged records per second and value bytes."""
    from confluent_kafka import Producer

    acked = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1

    p = Producer({**conf, "on_delivery": delivered})
    value = os.urandom(VALUE_SIZE)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            try:
                p.produce(topic, value)
            except BufferError:
                p.poll(0.001)
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    Path(out).write_text(json.dumps({"records_per_s": acked[0] / elapsed, "value_bytes": VALUE_SIZE}))
    return 0


def start_greedy(conf: dict[str, Any], topic: str, seconds: float, out: Path) -> subprocess.Popen:
    """:func:`greedy_main` in a process of its own (the caller waits for it)."""
    conf = {k: v for k, v in conf.items() if isinstance(v, (str, int, float, bool))}
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "bench.latency_probe", "greedy", json.dumps(conf), topic,
                             str(seconds), str(out)], env=env, cwd=ROOT)


def _read_doubles(path: Path) -> list[float]:
    values = array.array("d")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values.tolist()


def run(producer_conf: dict[str, Any], consumer_conf: dict[str, Any], topic: str, partitions: int,
        rate: float, seconds: float, workdir: Path) -> LatencySamples:
    """One measurement: start the consumer process, wait until it is positioned, run the producer
    process for ``seconds`` at ``rate``, wait for the consumer to have every record."""
    count = max(1, int(rate * seconds))
    # a configuration crosses to the child as JSON: objects (the benchmark's quiet logger) stay here
    producer_conf, consumer_conf = ({k: v for k, v in conf.items() if isinstance(v, (str, int, float, bool))}
                                    for conf in (producer_conf, consumer_conf))
    workdir.mkdir(parents=True, exist_ok=True)
    c_out, p_out = workdir / "consumer.bin", workdir / "producer.bin"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    consumer = subprocess.Popen(
        [sys.executable, "-m", "bench.latency_probe", "consumer", json.dumps(consumer_conf), topic,
         str(partitions), str(count), str(c_out), str(seconds + 120)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        line = consumer.stdout.readline().strip() if consumer.stdout else ""
        if line != READY:
            raise RuntimeError(f"latency consumer did not get ready (exit {consumer.wait(10)})")
        producer = subprocess.run(
            [sys.executable, "-m", "bench.latency_probe", "producer", json.dumps(producer_conf), topic,
             str(rate), str(count), str(p_out)], env=env, cwd=ROOT, timeout=seconds + 180)
        if producer.returncode != 0:
            raise RuntimeError(f"latency producer exited with {producer.returncode}")
        code = consumer.wait(seconds + 180)
        if code != 0:
            raise RuntimeError(f"latency consumer exited with {code} (records missing)")
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    with open(c_out, "rb") as f:
        n = struct.unpack("<q", f.read(8))[0]
        values = array.array("d")
        values.frombytes(f.read())
    return LatencySamples(end_to_end=values[:n].tolist(), at=values[n:].tolist(), ack=_read_doubles(p_out))


def main(argv: list[str]) -> int:
    role, conf, topic = argv[0], json.loads(argv[1]), argv[2]
    if role == "consumer":
        return consumer_main(conf, topic, int(argv[3]), int(argv[4]), argv[5], float(argv[6]))
    if role == "producer":
        return producer_main(conf, topic, float(argv[3]), int(argv[4]), argv[5])
    if role == "greedy":
        return greedy_main(conf, topic, float(argv[3]), argv[4])
    raise SystemExit(f"unknown role {role!r}: consumer, producer or greedy")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
