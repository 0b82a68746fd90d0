"""Scenario 5's second part with its consumer taken apart: why it ends after the producer.

``python -m bench.live_lag [--gb 1] [--kafka] [--consumer-boost N] [--consumer-conf JSON]``

One fresh 1-broker cluster (kafkalite, or Kafka 0.9.0.1 with ``--kafka``), one 1-partition
topic, ``--gb`` GB of 1 KB records produced in ``--chunks`` chunks by this process
(:func:`bench.load.produce`, scenario 5's producer) while a consumer in a process of its own
reads them from the start (scenario 5's consumer settings, :data:`bench.load.COMMON_CONSUMER`).
Printed: a timeline every 200 ms from librdkafka's statistics (Fetch requests and MB per
request, the broker round trip, what the client has fetched but the application not yet taken,
the partition's end and the consumer's backlog), then how long after the producer the consumer
is done, the backlog at the producer's end, the broker's CPU seconds per GB, and for the
consumer's, the producer's and the broker's processes their CPU time and their wait for a CPU
(run queue, ``schedstat``) while the producer ran.

The two knobs test the two explanations: ``--consumer-boost N`` runs the consumer N nice levels
above the rest (root only; does it keep up once it gets a core?), ``--consumer-conf`` adds
client settings to the consumer only (e.g. ``'{"max.partition.fetch.bytes": 4194304}'``: does
it keep up with more bytes per round trip?). docs/benchmarks.md ("what sets the consumer's lag")
has what they showed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench import load, tool_support
from bench.cpu import SchedTimes, cpu_seconds, sched_times

TOPIC = "live-lag"
VALUE_SIZE = 1000
#: librdkafka's statistics interval: one timeline line each
STATS_MS = 200
#: the consumer notes (records read, wall time) at least this often
MARK_EVERY = 10_000


@dataclass(frozen=True)
class Tick:
    """One statistics interval of the consumer (see :func:`timeline`)."""
    at: float                   #: seconds since the producer started
    fetches: int                #: Fetch requests answered in the interval
    fetched_mb: float
    rtt_ms: float               #: librdkafka's mean broker round trip over its window
    queued_mb: float            #: fetched by the client, not yet taken by the application
    end_offset: int             #: the partition's high watermark as the client last saw it
    read: int                   #: records the application had taken

    @property
    def mb_per_fetch(self) -> float:
        return self.fetched_mb / self.fetches if self.fetches else 0.0

    @property
    def backlog(self) -> int:
        return max(0, self.end_offset - self.read)


def read_by(marks: list[tuple[int, float]], t: float) -> int:
    """Records the consumer had read at wall time ``t``, from its ``(records, wall time)`` marks."""
    got = 0
    for n, at in marks:
        if at > t:
            break
        got = n
    return got


def timeline(stats: list[tuple[float, dict[str, Any]]], marks: list[tuple[int, float]], t0: float,
             topic: str = TOPIC) -> list[Tick]:
    """librdkafka's statistics (``(wall time, parsed stats_cb JSON)``, in order) as one
    :class:`Tick` per interval: counters become differences, bootstrap connections are left out."""
    ticks: list[Tick] = []
    last: tuple[int, int] | None = None
    for at, s in stats:
        fetches = rx = 0
        rtt = 0.0
        for b in s.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue
            fetches += b.get("req", {}).get("Fetch", 0)
            rx += b.get("rxbytes", 0)
            rtt = max(rtt, b.get("rtt", {}).get("avg", 0) / 1000.0)
        part = s.get("topics", {}).get(topic, {}).get("partitions", {}).get("0", {})
        if last is not None:
            ticks.append(Tick(at - t0, fetches - last[0], (rx - last[1]) / 1e6, rtt,
                              part.get("fetchq_size", 0) / 1e6, max(0, part.get("hi_offset", 0)),
                              read_by(marks, at)))
        last = (fetches, rx)
    return ticks


def _consume(conf: dict[str, Any], expected: int, boost: int, out: Any) -> None:
    """The consumer's process: read partition 0 from the start until ``expected`` records, as
    scenario 5's consumer does; put ``(marks, stats)`` on ``out`` at the end (None on failure)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    if boost:
        os.nice(-boost)
    stats: list[tuple[float, dict[str, Any]]] = []
    c = Consumer({**conf, "statistics.interval.ms": STATS_MS,
                  "stats_cb": lambda raw: stats.append((time.time(), json.loads(raw)))})
    marks: list[tuple[int, float]] = []
    n, next_mark = 0, 0
    try:
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        out.put("started")
        deadline = time.monotonic() + 600
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    n += 1
            if n >= next_mark:
                marks.append((n, time.time()))
                next_mark = n + MARK_EVERY
        marks.append((n, time.time()))
    finally:
        c.close()
    out.put((marks, stats))


def _sched(pids: dict[str, int]) -> dict[str, SchedTimes | None]:
    return {name: sched_times(pid) for name, pid in pids.items()}


def run(system: Any, gb: float, chunks: int, boost: int, consumer_conf: dict[str, Any]) -> None:
    system.start(1)
    system.create_topic(TOPIC, 1, 1)
    per_chunk = int(gb * 1e9 / chunks / VALUE_SIZE)
    total = per_chunk * chunks
    conf = system.client_conf(**load.COMMON_CONSUMER, **{"group.id": "bench-live-lag"}, **consumer_conf)
    conf.pop("logger", None)         # not picklable; the consumer's process logs to stderr
    ctx = multiprocessing.get_context("spawn")
    out: Any = ctx.Queue()
    reader = ctx.Process(target=_consume, args=(conf, total, boost, out), daemon=True)
    reader.start()
    try:
        if out.get(timeout=120) != "started":
            raise RuntimeError("the consumer did not start")
        broker_pid = system.brokers[0].pid
        pids = {"consumer": reader.pid or 0, "producer": os.getpid(), "broker": broker_pid}
        sched0, cpu0, t0 = _sched(pids), cpu_seconds(broker_pid), time.time()
        rates = [per_chunk * VALUE_SIZE / 1e6 / load.produce(system, TOPIC, per_chunk, acks=1, value_size=VALUE_SIZE)
                 for _ in range(chunks)]
        produced_at = time.time()
        sched1 = _sched(pids)
        marks, stats = out.get(timeout=600)
        broker_cpu = cpu_seconds(broker_pid) - cpu0
    finally:
        reader.join(30)
        if reader.is_alive():
            reader.kill()
    if marks[-1][0] != total:
        raise RuntimeError(f"the consumer read {marks[-1][0]:,} of {total:,} records")
    print(f"{'s':>6} {'fetches':>7} {'MB':>6} {'MB/fetch':>8} {'rtt ms':>6} {'queued MB':>9} {'end offset':>10} "
          f"{'read':>9} {'backlog':>9}")
    for t in timeline(stats, marks, t0):
        print(f"{t.at:6.2f} {t.fetches:7d} {t.fetched_mb:6.1f} {t.mb_per_fetch:8.2f} {t.rtt_ms:6.1f} "
              f"{t.queued_mb:9.1f} {t.end_offset:10,} {t.read:9,} {t.backlog:9,}")
    done = marks[-1][1]
    print(f"produce: {' '.join(f'{r:.0f}' for r in rates)} MB/s per chunk, {total * VALUE_SIZE / 1e6 / (produced_at - t0):.0f} "
          f"MB/s in all; consume {total * VALUE_SIZE / 1e6 / (done - t0):.0f} MB/s")
    print(f"consumer done {done - produced_at:.3f} s after the producer, {total - read_by(marks, produced_at):,} "
          f"records behind at the producer's end; broker CPU {broker_cpu / (total * VALUE_SIZE / 1e9):.2f} s/GB")
    for name in pids:
        before, after = sched0[name], sched1[name]
        if before is not None and after is not None:
            d = after - before
            print(f"  while producing, {name}: ran {d.run:.2f} s, waited for a CPU {d.wait:.2f} s "
                  f"({d.wait_per_run:.2f} s per s run)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GB of 1 KB records (default 1)")
    ap.add_argument("--chunks", type=int, default=5, help="producer runs, one after the other (default 5)")
    ap.add_argument("--kafka", action="store_true", help="Kafka 0.9.0.1 instead of kafkalite")
    ap.add_argument("--consumer-boost", type=int, default=0,
                    help="run the consumer this many nice levels above the rest (needs root)")
    ap.add_argument("--consumer-conf", default="{}", help="JSON object of extra consumer settings")
    args = ap.parse_args(argv)
    consumer_conf = tool_support.consumer_conf(args.consumer_conf)
    if args.consumer_boost and os.geteuid() != 0:
        raise SystemExit("--consumer-boost: raising a process's priority needs root")
    with tool_support.one_system(args.kafka, "kafkalite-live-lag-") as system:
        run(system, args.gb, args.chunks, args.consumer_boost, consumer_conf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
