"""Thousands of clients (issue 18): many producers and many consumers in groups at once.

``producers`` clients each send ``rate`` keyed records per second and ``consumers`` clients in
``groups`` consumer groups long-poll one topic, on a 3-broker cluster. The clients are aiokafka
(one asyncio loop holds hundreds of them cheaply; a librdkafka instance per client would cost
threads and memory per client on the load side), spread over worker processes, each owning whole
groups. Measured: how long until every group is stable (each member holds partitions and a
group's members hold them all), produce-to-ack and end-to-end latency (send time inside the
value, CLOCK_MONOTONIC shared by every process), broker CPU and RSS over the steady phase, and
the broker's responsiveness: an ApiVersions request to each broker every 0.5 s from a separate
thread, its worst round trip.

Run as ``python -m bench.many_clients worker <json args>`` by :func:`run`.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cpu import cpu_seconds
from bench.procs import kill_all, wait_all

ROOT = Path(__file__).resolve().parent.parent
STEADY = "steady"
VALUE_SIZE = 100


@dataclass
class ManyClientsResult:
    stable_seconds: float                     # start of the workers -> every group stable
    ack_ms: list[float]
    end_to_end_ms: list[float]
    errors: int
    worst_api_versions_ms: float
    broker_cpu_percent: dict[int, float] = field(default_factory=dict)
    broker_rss_mib: dict[int, float] = field(default_factory=dict)
    steady_worst_probe_ms: float = 0.0       # the worst probe round trip once every group was stable
    steady_probes_over_100ms: int = 0
    steady_probes: int = 0
    cpu_pressure_percent: float | None = None  # share of the steady phase some task waited for a CPU
    #: the brokers' own "reactor ran a timer N ms late" lines of the steady phase (reactor_delay.py)
    reactor_delays: list[str] = field(default_factory=list)


async def _worker(args: dict[str, Any]) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap, topic, partitions = args["bootstrap"], args["topic"], args["partitions"]
    groups: list[str] = args["groups"]
    ack: list[float] = []
    e2e: list[float] = []
    errors = [0]
    stop = asyncio.Event()
    clock = time.monotonic_ns
    start = time.monotonic()

    consumers = [AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=groups[i % len(groups)],
                                  auto_offset_reset="latest", enable_auto_commit=True,
                                  fetch_max_wait_ms=500, session_timeout_ms=30000,
                                  heartbeat_interval_ms=3000, max_poll_interval_ms=300000)
                 for i in range(args["consumers"])]
    producers = [AIOKafkaProducer(bootstrap_servers=bootstrap, acks=args["acks"], linger_ms=0)
                 for _ in range(args["producers"])]
    await asyncio.gather(*(c.start() for c in consumers))
    await asyncio.gather(*(p.start() for p in producers))

    async def consume(c: Any) -> None:
        while not stop.is_set():
            try:
                batches = await c.getmany(timeout_ms=500)
            except Exception:  # noqa: BLE001 - counted; the run reports it
                errors[0] += 1
                await asyncio.sleep(0.5)
                continue
            now = clock()
            for records in batches.values():
                for r in records:
                    e2e.append((now - struct.unpack_from(">q", r.value)[0]) / 1e6)

    readers = [asyncio.ensure_future(consume(c)) for c in consumers]

    def stable() -> bool:
        held: dict[str, int] = {}
        for i, c in enumerate(consumers):
            n = len(c.assignment())
            if n == 0:
                return False
            g = groups[i % len(groups)]
            held[g] = held.get(g, 0) + n
        return all(v == partitions for v in held.values())

    while not stable():
        if time.monotonic() - start > args["stable_timeout"]:
            raise RuntimeError("groups did not become stable in time")
        await asyncio.sleep(0.1)
    stable_seconds = time.monotonic() - start
    print(STEADY, flush=True)

    pad = os.urandom(VALUE_SIZE - 8)

    def acked(sent: int) -> Any:
        def done(fut: asyncio.Future) -> None:
            if fut.cancelled() or fut.exception() is not None:
                errors[0] += 1
            else:
                ack.append((clock() - sent) / 1e6)
        return done

    async def produce(index: int, p: Any) -> None:
        interval = 1.0 / args["rate"]
        key = b"key-%d" % index
        await asyncio.sleep(interval * (index % 97) / 97)        # spread the producers' ticks
        next_at = time.monotonic()
        while not stop.is_set():
            t = clock()
            fut = await p.send(topic, struct.pack(">q", t) + pad, key=key)
            fut.add_done_callback(acked(t))
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    writers = [asyncio.ensure_future(produce(args["first_index"] + i, p)) for i, p in enumerate(producers)]
    await asyncio.sleep(args["seconds"])
    stop.set()
    await asyncio.gather(*writers, return_exceptions=True)
    await asyncio.gather(*(p.stop() for p in producers), return_exceptions=True)
    await asyncio.sleep(1.0)          # the last records reach the consumers
    await asyncio.gather(*readers, return_exceptions=True)
    await asyncio.gather(*(c.stop() for c in consumers), return_exceptions=True)
    return {"stable_seconds": stable_seconds, "ack": ack, "e2e": e2e, "errors": errors[0]}


def worker_main(raw: str) -> int:
    args = json.loads(raw)
    result = asyncio.run(_worker(args))
    Path(args["out"]).write_text(json.dumps(result))
    return 0


def probe_frame(topic: str | None) -> bytes:
    """ApiVersions v0; or, with ``topic`` (Kafka 0.9 predates ApiVersions and closes the
    connection on it), Metadata v0 for that one topic."""
    from kafkalite.protocol.codec import encode_request

    parts = (encode_request(18, 0, 1, "bench-probe", {}) if topic is None
             else encode_request(3, 0, 1, "bench-probe", {"topics": [{"name": topic}]}))
    return b"".join(bytes(b) for b in parts)


def _round_trip(host: str, port: int, frame: bytes) -> float:
    """One request/response round trip on a fresh connection, in ms."""
    t = time.perf_counter()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(frame)
        head = s.recv(4, socket.MSG_WAITALL)
        if len(head) != 4:
            raise ConnectionError("closed without an answer")
        s.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    return (time.perf_counter() - t) * 1000


class ResponsivenessProbe:
    """A probe request (:func:`probe_frame`) to every broker every 0.5 s from a thread; keeps
    the worst round trip."""

    def __init__(self, addresses: list[tuple[str, int]], frame: bytes) -> None:
        self.addresses = addresses
        self.frame = frame
        self.worst = 0.0
        self.failures = 0
        self.samples: list[tuple[float, float]] = []     # (time.monotonic() when sent, round trip ms)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for host, port in self.addresses:
                sent = time.monotonic()
                try:
                    ms = _round_trip(host, port, self.frame)
                except OSError:
                    self.failures += 1
                    continue
                self.worst = max(self.worst, ms)
                self.samples.append((sent, ms))

    def since(self, t0: float) -> list[float]:
        """Round trips of the probes sent at or after ``t0`` (monotonic)."""
        return [ms for sent, ms in list(self.samples) if sent >= t0]

    def __enter__(self) -> "ResponsivenessProbe":
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join(10)


def cpu_pressure_us() -> int | None:
    """Microseconds some task waited for a CPU since boot (PSI, /proc/pressure/cpu), if the
    kernel tells."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()
    except OSError:
        return None
    return int(some[-1].split("=", 1)[1]) if some and some[0] == "some" else None


REACTOR_LATE = "the reactor ran a timer"


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def reactor_delay_lines(path: Path | None, offset: int) -> list[str]:
    """The broker's reactor delay lines (kafkalite/broker/reactor_delay.py) written after ``offset``."""
    if path is None:
        return []
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.strip() for line in text.splitlines() if REACTOR_LATE in line]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run(bootstrap: str, brokers: dict[int, tuple[str, int, int]], topic: str, partitions: int,
        producers: int, consumers: int, groups: int, rate: float, seconds: float, workers: int,
        acks: int | str, workdir: Path, probe_topic: str | None = None,
        broker_logs: dict[int, Path] | None = None) -> ManyClientsResult:
    """``brokers``: id -> (host, port, pid). Starts ``workers`` processes, each with its share of
    the clients and whole groups; measures from their start to the end of the steady phase.
    ``broker_logs``: each broker's log, whose reactor delay lines of the steady phase are kept."""
    logs = broker_logs or {}
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    group_names = [f"bench-many-{topic}-{g}" for g in range(groups)]
    procs, outs = [], []
    with ResponsivenessProbe([(h, p) for h, p, _ in brokers.values()], probe_frame(probe_topic)) as probe:
        for w in range(workers):
            share_p = producers // workers + (1 if w < producers % workers else 0)
            share_c = consumers // workers + (1 if w < consumers % workers else 0)
            mine = group_names[w::workers]
            out = workdir / f"worker-{w}.json"
            out.unlink(missing_ok=True)
            args = {"bootstrap": bootstrap, "topic": topic, "partitions": partitions, "groups": mine,
                    "producers": share_p, "consumers": share_c if mine else 0, "rate": rate,
                    "seconds": seconds, "acks": acks, "out": str(out), "stable_timeout": 600,
                    "first_index": w * (producers // workers + 1)}
            procs.append(subprocess.Popen([sys.executable, "-m", "bench.many_clients", "worker", json.dumps(args)],
                                          stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT))
            outs.append(out)
        try:
            for p in procs:          # every worker's groups are stable: the steady phase starts
                line = p.stdout.readline().strip() if p.stdout else ""
                if line != STEADY:
                    raise RuntimeError(f"a client worker failed before its groups were stable (exit {p.wait(30)})")
            cpu0 = {b: cpu_seconds(pid) for b, (_, _, pid) in brokers.items()}
            log0 = {b: log_size(logs.get(b)) for b in brokers}
            pressure0 = cpu_pressure_us()
            t0 = time.monotonic()
        except BaseException:
            kill_all(procs)
            raise
        wait_all(procs, seconds + 300, "client workers")
        elapsed = time.monotonic() - t0
        pressure1 = cpu_pressure_us()
        cpu = {b: 100 * (cpu_seconds(pid) - cpu0[b]) / elapsed for b, (_, _, pid) in brokers.items()}
        rss = {b: rss_mib(pid) for b, (_, _, pid) in brokers.items()}
        steady = probe.since(t0)
    got = [json.loads(o.read_text()) for o in outs]
    delays = [f"broker {b}: {line}" for b in sorted(brokers) for line in reactor_delay_lines(logs.get(b), log0[b])]
    return ManyClientsResult(
        stable_seconds=max(g["stable_seconds"] for g in got),
        ack_ms=[v for g in got for v in g["ack"]], end_to_end_ms=[v for g in got for v in g["e2e"]],
        errors=sum(g["errors"] for g in got) + probe.failures, worst_api_versions_ms=probe.worst,
        broker_cpu_percent=cpu, broker_rss_mib=rss,
        steady_worst_probe_ms=max(steady, default=0.0), steady_probes_over_100ms=sum(ms > 100 for ms in steady),
        steady_probes=len(steady),
        cpu_pressure_percent=None if pressure0 is None or pressure1 is None
        else 100 * (pressure1 - pressure0) / 1e6 / elapsed,
        reactor_delays=delays)


if __name__ == "__main__":
    if sys.argv[1:2] != ["worker"]:
        raise SystemExit("usage: python -m bench.many_clients worker <json args>")
    sys.exit(worker_main(sys.argv[2]))
