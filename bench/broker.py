"""End-to-end broker benchmark: one ZooKeeper, one kafkalite broker process, real clients.

Run: ``scripts/bench broker`` (or ``.venv/bin/python -m bench.broker``). Measures

* produce records/s with confluent-kafka (acks=1, 100-byte values, linger.ms=5, batch.size=1MB)
  into a 1-partition and a 10-partition topic, with the broker's CPU time and peak RSS;
* consume records/s of the same records with kcat (``-C -e -o beginning -q``) and with a
  confluent-kafka Consumer (assign, no group);
* broker RSS idle (after start) and under load (peak VmRSS sampled every 50 ms);
* restart recovery: ~1 GB written into a topic, then kill -9 + restart, then SIGTERM + restart,
  timed until the broker registers in ZooKeeper.

Prints one table and appends JSON lines to ``bench/results/<timestamp>.jsonl``.

``--profile PATH`` runs the broker under cProfile instead (``python -m cProfile -o PATH``), does
only the 1-partition produce (``--profile-phase consume`` adds the consumes), stops the broker with
SIGINT so the profile is written, and prints the top entries by cumulative and by own time.

Everything started here (ZooKeeper JVM, brokers, kcat) is stopped and the temp dir under /tmp
removed on exit, also on failure or Ctrl-C.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.cpu import cpu_seconds
from kafkalite.cluster import BrokerProcess, LocalCluster

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


# ------------------------------------------------------------------------------------ processes


class BenchBroker(BrokerProcess):
    """A BrokerProcess that can run under cProfile and stop with SIGINT; same readiness rule
    (``/brokers/ids/<id>`` written by this incarnation)."""

    profile_out: str | None = None

    def command(self, props_path: Path) -> list[str]:
        cmd = super().command(props_path)
        if self.profile_out:
            cmd[1:1] = ["-m", "cProfile", "-o", self.profile_out]
        return cmd

    def start(self, timeout: float = 120.0) -> "BenchBroker":
        super().start(timeout)     # large logs take longer to load than the tests' default allows
        return self

    def interrupt(self, timeout: float = 60.0) -> int | None:
        """SIGINT (Twisted stops the reactor; cProfile then writes its file)."""
        if not self.alive:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def last_load_seconds(self) -> float | None:
        """The 'loaded N partition log(s) in X s' figure of the latest start, from server.log."""
        try:
            found = re.findall(r"loaded \d+ partition log\(s\) in ([0-9.]+) s", self.log_path.read_text(errors="replace"))
        except OSError:
            return None
        return float(found[-1]) if found else None


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Sampler:
    """Peak VmRSS and CPU seconds of one process over a ``with`` block."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval = pid, interval
        self.peak_kib = 0
        self.cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            r = rss_kib(self.pid)
            if r is not None and r > self.peak_kib:
                self.peak_kib = r
            self._stop.wait(self.interval)

    def __enter__(self) -> "Sampler":
        self._cpu0 = cpu_seconds(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu = cpu_seconds(self.pid) - self._cpu0


# ------------------------------------------------------------------------------------ clients


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic]
    fut.result(60)
    # wait until the broker leads every partition (metadata shows leaders)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 and p.error is None for p in md.partitions.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after 30 s")


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "enable.auto.commit": False})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def wait_high_watermark(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> int:
    """Sum of high watermarks, retried until the broker leads the partitions again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return high_watermarks(bootstrap, topic, partitions)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def produce(bootstrap: str, topic: str, count: int, value_size: int, extra: dict | None = None) -> float:
    """Produce ``count`` values; returns seconds from first produce() to flush() done."""
    errors: list[str] = []
    conf = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1000000,
            "compression.type": "none", "queue.buffering.max.messages": 500000,
            "error_cb": lambda e: errors.append(str(e))}
    conf.update(extra or {})
    p = Producer(conf)
    value = os.urandom(value_size)
    send, poll = p.produce, p.poll
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                send(topic, value)
                break
            except BufferError:
                poll(0.002)
        if i % 20000 == 0:
            poll(0)
    left = p.flush(300)
    secs = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} messages not delivered; client errors: {errors[:5]}")
    return secs


def consume_kcat(bootstrap: str, topic: str, expected: int, timeout: float = 600.0) -> tuple[float, int]:
    """kcat -C -e -o beginning -q, one byte of output per message; (seconds, messages)."""
    cmd = ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "x"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    n = 0
    try:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(1 << 20):
            n += len(chunk)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    secs = time.perf_counter() - start
    if proc.returncode != 0 or n != expected:
        err = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
        raise RuntimeError(f"kcat rc={proc.returncode} read {n}/{expected} messages: {err}")
    return secs, n


def consume_confluent(bootstrap: str, topic: str, partitions: int, expected: int,
                      timeout: float = 600.0) -> tuple[float, int]:
    """confluent-kafka Consumer with assign() from the beginning; (seconds, messages)."""
    from bench.load import consume_from_beginning
    secs, n = consume_from_beginning({"bootstrap.servers": bootstrap, "group.id": "bench-unused",
                                      "enable.auto.commit": False, "enable.auto.offset.store": False},
                                     topic, partitions, expected, timeout)
    if n != expected:
        raise RuntimeError(f"confluent consumer read {n}/{expected} messages")
    return secs, n


# ------------------------------------------------------------------------------------ bench


class Report:
    def __init__(self, path: Path | None) -> None:
        self.rows: list[tuple[str, str, str]] = []
        self.path = path
        self.stamp = time.strftime("%Y-%m-%dT%H:%M:%S")

    def add(self, what: str, value: float | None, unit: str, note: str = "", **extra: Any) -> None:
        shown = "n/a" if value is None else (f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}")
        self.rows.append((what, f"{shown} {unit}", note))
        print(f"  {what:<52} {shown:>12} {unit:<10} {note}", flush=True)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps({"bench": "broker", "time": self.stamp, "what": what, "value": value,
                                    "unit": unit, "note": note, **extra}) + "\n")

    def table(self) -> str:
        w = max(len(r[0]) for r in self.rows)
        v = max(len(r[1]) for r in self.rows)
        return "\n".join(f"{a:<{w}}  {b:>{v}}  {c}" for a, b, c in self.rows)


def throughput_phase(report: Report, broker: BenchBroker, partitions: int, count: int, consume: bool,
                     repeat_consume: int, repeat_produce: int = 3) -> None:
    """Produce ``count`` records ``repeat_produce`` times, each into a fresh topic (median rate);
    then consume the first topic ``repeat_consume`` times per client."""
    bootstrap = broker.bootstrap
    rates, cpus, peak, topics = [], [], 0, []
    for i in range(repeat_produce):
        topic = f"bench-{partitions}p-{int(time.time())}-{i}"
        create_topic(bootstrap, topic, partitions)
        with Sampler(broker.pid) as s:
            secs = produce(bootstrap, topic, count, 100)
        got = high_watermarks(bootstrap, topic, partitions)
        if got != count:
            raise RuntimeError(f"{topic}: high watermarks sum to {got}, produced {count}")
        rates.append(count / secs)
        cpus.append(100 * s.cpu / secs)
        peak = max(peak, s.peak_kib)
        topics.append(topic)
    rate = statistics.median(rates)
    report.add(f"produce {partitions:>2} partition(s), confluent-kafka", rate, "rec/s",
               f"median of {repeat_produce}: {', '.join(f'{r:,.0f}' for r in rates)}; "
               f"{rate * 100 / 1e6:.1f} MB/s payload; broker CPU {statistics.median(cpus):.0f}% of one core",
               partitions=partitions, records=count, rates=rates, broker_cpu_pct=cpus)
    report.add(f"broker RSS peak while producing ({partitions}p)", peak / 1024, "MiB", partitions=partitions)
    topic = topics[0]
    if not consume:
        return
    for name, fn in (("kcat", lambda: consume_kcat(bootstrap, topic, count)),
                     ("confluent-kafka", lambda: consume_confluent(bootstrap, topic, partitions, count))):
        rates, cpus = [], []
        for _ in range(repeat_consume):
            with Sampler(broker.pid) as s:
                csecs, _n = fn()
            rates.append(count / csecs)
            cpus.append(100 * s.cpu / csecs)
        report.add(f"consume {partitions:>2} partition(s), {name}", statistics.median(rates), "rec/s",
                   f"median of {repeat_consume}: {', '.join(f'{r:,.0f}' for r in rates)}; "
                   f"broker CPU {statistics.median(cpus):.0f}% of one core",
                   partitions=partitions, records=count, rates=rates)


def recovery_phase(report: Report, broker: BenchBroker, megabytes: int, repeats: int = 3) -> None:
    bootstrap = broker.bootstrap
    topic = f"bench-recovery-{int(time.time())}"
    create_topic(bootstrap, topic, 1)
    value_size = 10000
    count = megabytes * 1_000_000 // value_size
    secs = produce(bootstrap, topic, count, value_size)
    report.add("write for recovery test (10 kB values)", count * value_size / secs / 1e6, "MB/s",
               f"{count * value_size / 1e9:.2f} GB, {count:,} records in {secs:.1f} s",
               records=count, seconds=secs)

    for kind in ("kill -9", "SIGTERM"):
        regs, servings, loads, stops = [], [], [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            if kind == "kill -9":
                broker.kill()                  # SIGKILL: no clean-shutdown marker, logs recovered
                rc = None
            else:
                rc = broker.stop(120)
            stops.append(time.perf_counter() - t0)
            start = time.perf_counter()
            broker.start()
            regs.append(time.perf_counter() - start)
            loads.append(broker.last_load_seconds())
            got = wait_high_watermark(broker.bootstrap, topic, 1)
            servings.append(time.perf_counter() - start)
            if got != count:
                raise RuntimeError(f"after {kind} restart the high watermark is {got}, expected {count}")
        note = (f"median of {repeats}: {', '.join(f'{x:.2f}' for x in regs)}; broker's log loading "
                f"{', '.join(str(x) for x in loads)} s; partition readable after "
                f"{statistics.median(servings):.2f} s")
        if kind == "SIGTERM":
            note += f"; SIGTERM->exit {statistics.median(stops):.2f} s (last rc {rc})"
        report.add(f"restart after {kind} until registered in ZK", statistics.median(regs), "s", note,
                   register_seconds=regs, load_seconds=loads, serving_seconds=servings, stop_seconds=stops)


def print_profile(path: str, top: int) -> None:
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        stats = pstats.Stats(path, stream=out)
        stats.strip_dirs().sort_stats(key).print_stats(top)
        text = out.getvalue()
        # keep the header lines and the table only
        print(f"\n===== broker profile: top {top} by {key} =====")
        print(text[text.find("   ncalls"):] if "   ncalls" in text else text)


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench broker", description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", default="1,10", help="comma-separated partition counts")
    ap.add_argument("--repeat-consume", type=int, default=3, help="consume runs per client (median)")
    ap.add_argument("--repeat-produce", type=int, default=3, help="produce runs, fresh topic each (median)")
    ap.add_argument("--recovery-mb", type=int, default=1000, help="MB written before the restart tests (0: skip)")
    ap.add_argument("--repeat-restart", type=int, default=3, help="restarts of each kind (median)")
    ap.add_argument("--profile", metavar="PATH", help="run the broker under cProfile, writing PATH")
    ap.add_argument("--profile-phase", choices=("produce", "consume"), default="produce")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) for inspection")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-bench-broker-", dir="/tmp"))
    results = None if args.profile else RESULTS / f"{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    report = Report(results)
    cluster: LocalCluster | None = None
    # SIGTERM to this script cleans up too (SIGINT raises KeyboardInterrupt already)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        cluster = LocalCluster(tmp / "cluster", size=0)        # its own ZooKeeper, no broker yet
        broker = cluster.add_broker(1, cls=BenchBroker)           # port 0: read from the registration
        broker.profile_out = args.profile
        cluster.zookeeper.start()
        print(f"kafkalite broker bench: tmp={tmp}, python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs (shared; figures are noisy)"
              + (f", PROFILING into {args.profile}" if args.profile else ""), flush=True)
        start = time.perf_counter()
        broker.start()
        report.add("broker start until registered in ZK (empty)", time.perf_counter() - start, "s")
        time.sleep(2.0)
        report.add("broker RSS idle (2 s after start)", (rss_kib(broker.pid) or 0) / 1024, "MiB")

        if args.profile:
            throughput_phase(report, broker, 1, args.records, args.profile_phase == "consume", 1,
                             args.repeat_produce)
            rc = broker.interrupt()
            print(f"broker stopped by SIGINT, rc={rc}")
            if os.path.exists(args.profile):
                print_profile(args.profile, args.profile_top)
            else:
                print(f"no profile written at {args.profile}; broker log tail:\n{broker.tail()}")
            return 0

        for n in (int(x) for x in args.partitions.split(",") if x):
            throughput_phase(report, broker, n, args.records, True, args.repeat_consume, args.repeat_produce)
        if args.recovery_mb > 0:
            recovery_phase(report, broker, args.recovery_mb, args.repeat_restart)
        print("\n===== summary =====")
        print(report.table())
        print(f"\nJSON lines: {results}")
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        print(f"bench failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        for b in (cluster.brokers if cluster else []):
            print(f"--- broker {b.broker_id} log tail ---\n{b.tail()}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cluster is not None:
            for b in cluster.brokers:
                if b.alive:
                    b.stop(60) if not args.profile else b.interrupt(60)
            cluster.down()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
