"""Scenario 2's consumer taken apart: what limits it, the broker or the client.

``python -m bench.consume_trace [--records 300000] [--runs 3] [--partitions 1] [--kafka]
[--batch-size N] [--consumer-conf JSON] [--no-gc]``

One fresh 1-broker cluster (kafkalite, or Kafka 0.9.0.1 with ``--kafka``), one topic of
``--partitions`` partitions, ``--records`` 100-byte records produced by scenario 1's producer
(:func:`bench.load.produce`; ``--batch-size`` overrides its ``batch.size``, e.g. 560000 for the
~550 KB batches a fast producer leaves at its linger time), then ``--runs`` consumers in this
process, one after the other, each reading every record from the beginning exactly as scenario 2
does (:data:`bench.load.COMMON_CONSUMER`, ``assign()``, ``consume(10000)`` counted in Python).

Per run it prints the rate as scenario 2 measures it, then where the time went:

- ``first``: seconds from ``assign()`` until the first records reached the application. librdkafka
  assigns the partitions before it knows their leader and retries the offset lookup 500 ms later,
  so on both systems most runs start with about 0.5 s of nothing (a client constant);
- ``then``: records/s from the first records to the last;
- the application thread (the one running ``consume()`` and the Python loop) and librdkafka's
  fetcher thread (``rdk:broker<id>``): seconds on a CPU, seconds runnable but waiting for one
  (``schedstat``), seconds asleep; ``app asleep after first``: how long the application thread
  slept once records flowed, i.e. waited for the fetcher (and so for the broker);
- librdkafka's own counters: Fetch requests, MB per Fetch, the broker round trip (avg/p99);
- the broker's CPU seconds per GB consumed (``bench/cpu.py``).

``--no-gc`` runs the consumers with CPython's cyclic garbage collector off (see
:func:`consume_traced`): what the application thread costs per record without it.

``limit`` sums it up: ``client`` when the application thread slept less than a tenth of the time
after its first records (it was computing or waiting for a core: a faster broker cannot help),
``fetch`` otherwise (it waited for data). docs/benchmarks.md ("what limits the consumer") has what
it showed.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench import load, tool_support
from bench.cpu import SchedTimes, cpu_seconds, thread_sched_times

TOPIC = "consume-trace"
#: librdkafka's statistics interval (its round-trip figures are per interval)
STATS_MS = 100
#: the application thread slept less than this share of the time after its first records: the
#: consumer was limited by its own CPU (or by waiting for a core), not by the data's arrival
CLIENT_BOUND_SLEEP = 0.1
#: librdkafka names a broker connection's thread rdk:broker<node id>
FETCHER_THREAD = re.compile(r"rdk:broker\d+")


@dataclass(frozen=True)
class ThreadUse:
    """One thread over one consumer run: on a CPU, waiting for one, asleep (seconds)."""
    ran: float
    waited: float
    slept: float


def thread_use(before: SchedTimes, after: SchedTimes, wall: float) -> ThreadUse:
    d = after - before
    return ThreadUse(d.run, d.wait, max(0.0, wall - d.run - d.wait))


@dataclass(frozen=True)
class FetchStats:
    """librdkafka's counters for the partition leaders' connections (bootstrap ones left out)."""
    fetches: int
    rx_bytes: int
    rtt_avg_ms: float
    rtt_p99_ms: float

    @property
    def mb_per_fetch(self) -> float:
        return self.rx_bytes / self.fetches / 1e6 if self.fetches else 0.0


def fetch_stats(reports: list[dict[str, Any]]) -> FetchStats:
    """librdkafka's ``stats_cb`` reports of one run, in order, summed over the brokers with a node
    id (the bootstrap connections, nodeid -1, carry no Fetch). Request and byte counters are
    cumulative (the last report); round trips are kept per interval, so the average is weighted
    by each interval's count and the p99 is the worst interval's."""
    fetches = rx = 0
    weighted = p99 = 0.0
    count = 0
    for i, stats in enumerate(reports):
        for b in stats.get("brokers", {}).values():
            if b.get("nodeid", -1) < 0:
                continue
            if i == len(reports) - 1:
                fetches += b.get("req", {}).get("Fetch", 0)
                rx += b.get("rxbytes", 0)
            rtt = b.get("rtt", {})
            n = rtt.get("cnt", 0)
            if n:
                weighted += rtt.get("avg", 0) / 1000.0 * n
                count += n
                p99 = max(p99, rtt.get("p99", 0) / 1000.0)
    return FetchStats(fetches, rx, weighted / count if count else 0.0, p99)


@dataclass(frozen=True)
class ConsumeRun:
    """One consumer reading every record from the beginning."""
    records: int
    seconds: float                  #: assign() to the last record, as scenario 2 times it
    first_at: float                 #: assign() until the first records reached the application
    first_records: int
    app: ThreadUse                  #: the thread calling consume()
    fetcher: ThreadUse | None       #: librdkafka's thread for the leader (rdk:broker<id>); None: several
    fetch: FetchStats
    broker_cpu: float               #: seconds

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def rate_after_first(self) -> float:
        after = self.seconds - self.first_at
        return (self.records - self.first_records) / after if after > 0 else 0.0

    @property
    def app_asleep_after_first(self) -> float:
        """The application thread's sleep once records flowed (it sleeps through the start)."""
        return max(0.0, self.app.slept - self.first_at)

    @property
    def limit(self) -> str:
        """``client`` or ``fetch``: see the module doc."""
        after = self.seconds - self.first_at
        return "client" if after <= 0 or self.app_asleep_after_first < CLIENT_BOUND_SLEEP * after else "fetch"


def consume_traced(conf: dict[str, Any], topic: str, partitions: int, expected: int, broker_pids: list[int],
                   timeout: float = 600.0, collect_garbage: bool = True) -> ConsumeRun:
    """:func:`bench.load.consume_from_beginning`'s loop, timed the same way, with the threads'
    scheduler times, the time to the first records and librdkafka's statistics.
    ``collect_garbage=False`` turns CPython's cyclic collector off while it runs: every
    ``consume(10000)`` allocates 10,000 Message objects, which trigger collections that traverse
    the process's objects; without them the application thread's own cost per record shows."""
    raw_stats: list[str] = []         # parsed after the run: no Python work while it is timed
    c = Consumer({**conf, "statistics.interval.ms": STATS_MS, "stats_cb": raw_stats.append})
    app_tid = threading.get_native_id()
    pid = os.getpid()
    if not collect_garbage:
        gc.collect()
        gc.disable()
    try:
        threads0 = thread_sched_times(pid)
        cpu0 = sum(cpu_seconds(p) for p in broker_pids)
        start = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        n = 0
        first_at, first_records = 0.0, 0
        deadline = time.monotonic() + timeout
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=10000, timeout=1.0):
                if m.error() is None:
                    n += 1
            if n and not first_records:
                first_at, first_records = time.perf_counter() - start, n
        secs = time.perf_counter() - start
        broker_cpu = sum(cpu_seconds(p) for p in broker_pids) - cpu0
        threads1 = thread_sched_times(pid)
        c.poll(STATS_MS * 2 / 1000.0)       # one more report: the counters at the end
    finally:
        c.close()
        if not collect_garbage:
            gc.enable()
    if n != expected:
        raise RuntimeError(f"the consumer read {n:,} of {expected:,} records")
    app = thread_use(threads0[app_tid][1], threads1[app_tid][1], secs)
    # the leaders' threads (rdk:broker<id>; the bootstrap one is rdk:broker-1), new ones too
    busy = [thread_use(threads0.get(tid, (name, SchedTimes()))[1], t, secs) for tid, (name, t) in threads1.items()
            if FETCHER_THREAD.fullmatch(name) and (t - threads0.get(tid, (name, SchedTimes()))[1]).run > 0.001]
    return ConsumeRun(n, secs, first_at, first_records, app, busy[0] if len(busy) == 1 else None,
                      fetch_stats([json.loads(r) for r in raw_stats]),
                      broker_cpu)


def report(run: ConsumeRun, value_bytes: int = load.VALUE_SIZE) -> str:
    f, a = run.fetch, run.app
    fetcher = (f"fetcher ran {run.fetcher.ran:.3f} waited {run.fetcher.waited:.3f} slept {run.fetcher.slept:.3f}"
               if run.fetcher is not None else "fetchers: several")
    return (f"{run.rate:10,.0f} records/s ({run.seconds:.3f} s); first {run.first_at:.3f} s, then "
            f"{run.rate_after_first:,.0f}/s | app ran {a.ran:.3f} waited {a.waited:.3f} slept {a.slept:.3f} "
            f"(asleep after first {run.app_asleep_after_first:.3f}) | {fetcher} | {f.fetches} fetches, "
            f"{f.mb_per_fetch:.2f} MB/fetch, rtt avg {f.rtt_avg_ms:.2f} p99 {f.rtt_p99_ms:.2f} ms | broker "
            f"{run.broker_cpu / (run.records * value_bytes / 1e9):.2f} s/GB | limit: {run.limit}")


def run(system: Any, records: int, runs: int, partitions: int, batch_size: int | None,
        consumer_conf: dict[str, Any], collect_garbage: bool = True) -> list[ConsumeRun]:
    system.start(1)
    system.create_topic(TOPIC, partitions, 1)
    producer = dict(load.THROUGHPUT_PRODUCER)
    try:
        if batch_size:
            load.THROUGHPUT_PRODUCER["batch.size"] = batch_size
        load.produce(system, TOPIC, records, acks=1)
    finally:
        load.THROUGHPUT_PRODUCER.clear()
        load.THROUGHPUT_PRODUCER.update(producer)
    got = load.wait_high_watermark_sum(system, TOPIC, partitions, records)
    if got != records:
        raise RuntimeError(f"{system.name}: {TOPIC} holds {got} records, produced {records}")
    pids = [b.pid for b in system.brokers]
    out = []
    for i in range(runs):
        conf = system.client_conf(**load.COMMON_CONSUMER, **{"group.id": "bench-consume"}, **consumer_conf)
        out.append(consume_traced(conf, TOPIC, partitions, records, pids, collect_garbage=collect_garbage))
        print(f"{system.name} run {i}: {report(out[-1])}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000, help="100-byte records (default 300,000)")
    ap.add_argument("--runs", type=int, default=3, help="consumers, one after the other (default 3)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of the topic (default 1)")
    ap.add_argument("--kafka", action="store_true", help="Kafka 0.9.0.1 instead of kafkalite")
    ap.add_argument("--batch-size", type=int, default=0, help="the producer's batch.size (default: scenario 1's)")
    ap.add_argument("--consumer-conf", default="{}", help="JSON object of extra consumer settings")
    ap.add_argument("--no-gc", action="store_true",
                    help="CPython's cyclic garbage collector off while a consumer runs (the client's own cost)")
    args = ap.parse_args(argv)
    consumer_conf = tool_support.consumer_conf(args.consumer_conf)
    with tool_support.one_system(args.kafka, "kafkalite-consume-trace-") as system:
        run(system, args.records, args.runs, args.partitions, args.batch_size or None, consumer_conf,
            collect_garbage=not args.no_gc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
