"""Scenario 17 (issue 30): stream processing, kafkalite's SQL server against Quix Streams.

Two pipelines, each run by one engine reading a fresh input topic and writing a fresh output topic:

- ``filter``: keep the records with ``speed > 50`` and project them (``id``, ``truck``,
  ``speed * 1.609 AS kmh``, ``pts``);
- ``window``: per truck, a one-minute tumbling window on the record time (the ``pts`` field):
  count, average speed and the newest ``pts``; every update of a window is written (ksqlDB's
  ``EMIT CHANGES``; Quix Streams' ``.current()``).

Engines: kafkalite's SQL server (``python -m kafkalite.sql.server``, Spark ``local[2]``; the
statements are ksqlDB's ``CREATE STREAM ... AS SELECT ... WHERE`` and ``CREATE TABLE ... AS SELECT
... WINDOW TUMBLING ... GROUP BY``) and the same pipelines written with Quix Streams
(bench/streams_quix.py, run by ``.venv-streams/bin/python``).

Input records are JSON ``{"id", "truck", "speed", "pts"}`` keyed by the truck, ``pts`` being the
wall-clock time in ms at which the benchmark handed the record to its producer. Each pipeline run
has three phases, told apart by the first letter of the truck name:

1. warm-up (``w``): a record every 0.5 s until the first output arrives (the engine is running);
2. latency (``l``): ``rate`` records/s for ``seconds`` s; end-to-end latency per output record,
   from the ``pts`` of the newest input record it includes (the record itself for ``filter``; the
   window's newest ``pts`` for ``window``) to the time the benchmark's consumer receives it from the
   output topic (``read_committed``: the SQL server writes exactly once, in transactions);
3. throughput (``b``): ``burst`` records produced flat out; records/s from the first one handed to
   the producer to the arrival of the output that completes them (every passing record for
   ``filter``; window counts that add up to ``burst`` for ``window``), and the engine's CPU
   seconds (its process tree: the SQL server's Spark JVM included) over that phase.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench import procs
from bench.cpu import tree_cpu_seconds
from kafkalite.cluster.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
QUIX_PYTHON = ROOT / ".venv-streams" / "bin" / "python"
TRUCKS = 10
THRESHOLD = 50.0


def speed_of(i: int) -> float:
    """Speeds 20..89 in a fixed pattern: 39 of every 70 records pass ``speed > 50``."""
    return float(20 + (i * 37) % 70)


def passing(count: int) -> int:
    return sum(1 for i in range(count) if speed_of(i) > THRESHOLD)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


@dataclass
class Arrival:
    phase: str
    ident: tuple[bytes, Any]     # the output row's identity (a window's key and start)
    value: dict[str, Any]
    t: float                     # wall-clock s of receipt


@dataclass
class PipelineFigures:
    rate: float                  # records/s of the throughput phase
    p50_ms: float
    p99_ms: float
    cpu_s: float                 # the engine's CPU seconds over the throughput phase
    records: int                 # records of the throughput phase
    outputs: int                 # output records of the latency phase
    notes: list[str] = field(default_factory=list)


class OutputReader:
    """Reads the output topic from the beginning in a thread of its own, stamping each record."""

    def __init__(self, bootstrap: str, topic: str, conf: dict[str, Any]) -> None:
        self.arrivals: list[Arrival] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.error: str | None = None
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"s17-read-{time.time_ns()}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10, **conf})
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self, timeout: float = 120.0) -> "OutputReader":
        deadline = time.monotonic() + timeout
        while True:                      # the engine creates the output topic: wait for it
            md = self.consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if md is not None and md.error is None and md.partitions:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"output topic {self.topic} not created within {timeout:.0f} s")
            time.sleep(0.5)
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in md.partitions])
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(1000, 0.1):
                    now = time.time()
                    if msg.error():
                        continue
                    value = json.loads(msg.value()) if msg.value() else {}
                    key = msg.key() or b""
                    truck = value.get("TRUCK") or key[:2].decode("ascii", "replace")
                    with self.lock:
                        self.arrivals.append(Arrival(str(truck)[:1], (key, value.get("WINDOWSTART")), value, now))
        except Exception as exc:         # noqa: BLE001 - reported by the waits
            self.error = repr(exc)

    def snapshot(self, phase: str) -> list[Arrival]:
        with self.lock:
            return [a for a in self.arrivals if a.phase == phase]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def make_producer(bootstrap: str, conf: dict[str, Any]) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, **conf})


def produce(producer: Producer, topic: str, phase: str, count: int, rate: float | None) -> float:
    """``count`` records of ``phase``, at ``rate`` records/s (flat out if None); the wall-clock time
    the first was handed to the producer."""
    start = time.time()
    for i in range(count):
        if rate:
            delay = start + i / rate - time.time()
            if delay > 0:
                producer.poll(0)
                time.sleep(delay)
        truck = f"{phase}{i % TRUCKS}"
        value = json.dumps({"id": i, "truck": truck, "speed": speed_of(i), "pts": int(time.time() * 1000)}).encode()
        while True:
            try:
                producer.produce(topic, value, truck.encode())
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError(f"producing {topic}: records left unsent")
    return start


def completed(kind: str, arrivals: list[Arrival], count: int) -> float | None:
    """The arrival time of the output that completes ``count`` input records of one phase, None if
    they are not all in yet."""
    if kind == "filter":
        want = passing(count)
        return arrivals[want - 1].t if len(arrivals) >= want else None
    latest: dict[tuple[bytes, Any], int] = {}
    total = 0
    for a in arrivals:
        n = int(a.value.get("N", 0))
        total += n - latest.get(a.ident, 0)
        latest[a.ident] = n
        if total >= count:
            return a.t
    return None


def latencies_ms(kind: str, arrivals: list[Arrival]) -> list[float]:
    column = "PTS" if kind == "filter" else "LAST_PTS"
    return [a.t * 1000 - float(a.value[column]) for a in arrivals if column in a.value]


def wait_until(what: str, check: Callable[[], Any], timeout: float, alive: Callable[[], str | None],
               interval: float = 0.05) -> Any:
    """``check()``'s first result that is not None; RuntimeError as soon as ``alive()`` names a dead
    engine, TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got is not None:
            return got
        dead = alive()
        if dead:
            raise RuntimeError(dead)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {timeout:.0f} s")
        time.sleep(interval)


def run_pipeline(kind: str, bootstrap: str, in_topic: str, out_topic: str, engine_pid: int,
                 alive: Callable[[], str | None], rate: float, seconds: float, burst: int,
                 client_conf: dict[str, Any], read_committed: bool, warmup_timeout: float = 240.0,
                 phase_timeout: float = 300.0) -> PipelineFigures:
    """The three phases against an engine already running ``kind`` from ``in_topic`` to ``out_topic``."""
    producer = make_producer(bootstrap, client_conf)
    conf = dict(client_conf, **({"isolation.level": "read_committed"} if read_committed else {}))
    readers: list[OutputReader] = []
    sent = 0

    def warmed_up() -> OutputReader | None:
        """Send a pair of records (the window pipeline's ``speed`` of record 0 does not pass), start
        the output reader once the output topic exists; the reader once it has seen output."""
        nonlocal sent
        for _ in range(2):
            produce_one(producer, in_topic, "w", sent)
            sent += 1
        if not readers:
            try:
                md = producer.list_topics(out_topic, timeout=5).topics.get(out_topic)
                if md is not None and md.error is None and md.partitions:
                    readers.append(OutputReader(bootstrap, out_topic, conf).start())
            except KafkaException:
                pass
        return readers[0] if readers and readers[0].snapshot("w") else None

    try:
        reader: OutputReader = wait_until(f"output in {out_topic} after the first input record", warmed_up,
                                          warmup_timeout, alive, interval=0.5)
        count = int(rate * seconds)
        produce(producer, in_topic, "l", count, rate)
        wait_until(f"{kind}: latency phase", lambda: completed(kind, reader.snapshot("l"), count), phase_timeout, alive)
        lat = latencies_ms(kind, reader.snapshot("l"))
        cpu0 = tree_cpu_seconds(engine_pid)
        first = produce(producer, in_topic, "b", burst, None)
        done = wait_until(f"{kind}: throughput phase", lambda: completed(kind, reader.snapshot("b"), burst),
                          phase_timeout, alive)
        cpu = tree_cpu_seconds(engine_pid) - cpu0
        return PipelineFigures(burst / max(done - first, 1e-3), statistics.median(lat), percentile(lat, 0.99),
                               cpu, burst, len(lat))
    finally:
        for r in readers:
            r.close()


def produce_one(producer: Producer, topic: str, phase: str, i: int) -> None:
    truck = f"{phase}{i % TRUCKS}"
    producer.produce(topic, json.dumps({"id": i, "truck": truck, "speed": speed_of(i),
                                        "pts": int(time.time() * 1000)}).encode(), truck.encode())
    producer.flush(10)


# ------------------------------------------------------------------------------ engines


class SqlServer:
    """``python -m kafkalite.sql.server`` on Spark ``local[2]``, driven over ksqlDB's REST API."""

    def __init__(self, bootstrap: str, workdir: Path, commit_ms: int = 1000) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.dir / "server.log"
        props = self.dir / "ksql-server.properties"
        props.write_text(f"listeners={self.url}\nbootstrap.servers={bootstrap}\n"
                         f"ksql.service.id=bench_{time.time_ns() % 10**9}_\nksql.streams.state.dir={self.dir / 'state'}\n"
                         f"ksql.streams.commit.interval.ms={commit_ms}\nspark.master=local[2]\n"
                         "spark.sql.shuffle.partitions=2\nspark.ui.enabled=false\n"
                         "spark.driver.host=127.0.0.1\nspark.driver.bindAddress=127.0.0.1\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT), SPARK_LOCAL_IP="127.0.0.1", TZ="UTC")
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkalite.sql.server", str(props)], cwd=str(ROOT),
                                     env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.queries = 0

    def dead(self) -> str | None:
        if self.proc.poll() is None:
            return None
        return f"SQL server exited ({self.proc.returncode}):\n{self.log.read_text(errors='replace')[-3000:]}"

    def wait_ready(self, timeout: float = 240.0) -> float:
        import httpx
        start = time.monotonic()

        def ready() -> bool | None:
            try:
                return httpx.get(self.url + "/healthcheck", timeout=10).json().get("isHealthy") or None
            except (httpx.HTTPError, ValueError):
                return None
        wait_until("SQL server start", ready, timeout, self.dead)
        return time.monotonic() - start

    def ksql(self, text: str) -> Any:
        import httpx
        resp = httpx.post(self.url + "/ksql", json={"ksql": text, "streamsProperties": {}}, timeout=180)
        if resp.status_code != 200:
            raise RuntimeError(f"{text}: HTTP {resp.status_code} {resp.text[:500]}")
        return resp.json()

    def start_pipeline(self, kind: str, in_topic: str, out_topic: str) -> str:
        """Define the input stream and start the persistent query; its id."""
        self.queries += 1
        src = f"S17_IN_{self.queries}"
        self.ksql(f"CREATE STREAM {src} (id BIGINT, truck VARCHAR, speed DOUBLE, pts BIGINT) "
                  f"WITH (KAFKA_TOPIC='{in_topic}', VALUE_FORMAT='JSON', TIMESTAMP='pts');")
        if kind == "filter":
            body = self.ksql(f"CREATE STREAM S17_OUT_{self.queries} WITH (KAFKA_TOPIC='{out_topic}', PARTITIONS=2) AS "
                             f"SELECT id, truck, speed * 1.609 AS kmh, pts FROM {src} WHERE speed > 50 EMIT CHANGES;")
        else:
            body = self.ksql(f"CREATE TABLE S17_OUT_{self.queries} WITH (KAFKA_TOPIC='{out_topic}', PARTITIONS=2) AS "
                             f"SELECT truck, COUNT(*) AS n, AVG(speed) AS avg_speed, MAX(pts) AS last_pts "
                             f"FROM {src} WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY truck EMIT CHANGES;")
        return str(body[0]["commandStatus"]["queryId"])

    def stop_pipeline(self, query_id: str) -> None:
        self.ksql(f"TERMINATE {query_id};")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)


class QuixApp:
    """bench/streams_quix.py in the stream libraries' environment."""

    def __init__(self, kind: str, bootstrap: str, in_topic: str, out_topic: str, workdir: Path,
                 client_conf: dict[str, Any]) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / f"quix-{kind}.log"
        extra = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in client_conf.items()}
        self.proc = subprocess.Popen([str(QUIX_PYTHON), str(ROOT / "bench" / "streams_quix.py"), bootstrap, kind,
                                      in_topic, out_topic, f"s17-quix-{time.time_ns() % 10**9}", str(self.dir / "state"),
                                      json.dumps(extra)], cwd=str(self.dir), stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def error_line(self) -> str:
        """The last line of the app's log that names an error (its own words), else its tail."""
        text = self.log.read_text(errors="replace")
        lines = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln or "Exception" in ln]
        return (lines[-1] if lines else text[-500:]).strip()[:400]

    def dead(self) -> str | None:
        if self.proc.poll() is None:
            return None
        return f"Quix Streams app exited ({self.proc.returncode}): {self.error_line()}"

    def stop(self) -> None:
        procs.stop(self.proc)
