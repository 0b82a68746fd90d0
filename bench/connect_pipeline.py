"""Scenario 16 (issue 29): Kafka Connect workers side by side on one kafkalite cluster.

File pipeline: one source file of fixed-length lines is generated once; each worker in turn runs
``FileStreamSource`` -> topic -> ``FileStreamSink`` in standalone mode with the same worker
settings (``StringConverter`` for keys and values, file offsets, the same flush interval, a REST
port of its own): kafkalite's worker (``python -m kafkalite.connect.runtime.connect_standalone``)
and Kafka 0.9.0.1's Java worker (``bin/connect-standalone.sh`` of the distribution
:mod:`bench.kafka09` provides, with that script's own heap and JVM options). Each worker gets a
fresh topic and sink file. A sampler polls, every ``interval`` s, the topic's end offset, the sink
file's size and the worker's ``/proc`` (CPU seconds = utime + stime, peak RSS = VmHWM) until the
sink file holds every byte of the source. Figures:

- pipeline records/s: the lines over the time from the first record seen in the topic (the
  connectors have started) to the sink file holding every line;
- source records/s: the lines over the time from the first record in the topic to the last;
- the worker's CPU seconds and peak RSS over the whole run, start-up included.

JDBC sink (kafkalite's worker only: Kafka 0.9.0.1 ships no JDBC connector): ``rows`` JSON records
with the schema envelope are produced first, then the worker's ``JdbcSinkConnector`` (insert,
``auto.create``) writes them into a throwaway PostgreSQL (tests/support/postgres.py's server);
rows/s from the first row in the table to the last.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import kafka09, procs
from bench.cpu import parse_stat
from kafkalite.cluster.processes import free_port

LINE_BYTES = 100                 # each line, its newline included
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
JDBC_SINK_CLASS = "io.confluent.connect.jdbc.JdbcSinkConnector"


def generate_lines(path: Path, megabytes: float) -> int:
    """Write ``megabytes`` MB (10^6 bytes) of ``LINE_BYTES``-byte lines to ``path``; the line count.
    Each line starts with its number, so a lost or repeated line changes the sink file."""
    count = max(1, int(megabytes * 1_000_000) // LINE_BYTES)
    filler = "x" * (LINE_BYTES - 14)
    with open(path, "w") as f:
        for start in range(0, count, 10_000):
            f.write("".join(f"{i:012d} {filler}\n" for i in range(start, min(count, start + 10_000))))
    return count


def worker_properties(bootstrap: str, workdir: Path, rest_port: int, converter: str = STRING,
                      schemas: bool = False) -> dict[str, str]:
    """The standalone worker settings both workers get (Kafka 0.9's names; 2.8 reads them too)."""
    enable = "true" if schemas else "false"
    return {"bootstrap.servers": bootstrap,
            "key.converter": converter, "value.converter": converter,
            "key.converter.schemas.enable": enable, "value.converter.schemas.enable": enable,
            "internal.key.converter": JSON, "internal.value.converter": JSON,
            "internal.key.converter.schemas.enable": "false", "internal.value.converter.schemas.enable": "false",
            "offset.storage.file.filename": str(workdir / "connect.offsets"),
            "offset.flush.interval.ms": "10000",
            "rest.host.name": "127.0.0.1", "rest.port": str(rest_port)}


def file_connectors(source: Path, sink: Path, topic: str) -> list[dict[str, str]]:
    return [{"name": "bench-file-source", "connector.class": SOURCE_CLASS, "tasks.max": "1",
             "file": str(source), "topic": topic},
            {"name": "bench-file-sink", "connector.class": SINK_CLASS, "tasks.max": "1",
             "file": str(sink), "topics": topic}]


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


# ------------------------------------------------------------------------------ /proc


def peak_rss_kib(status: str) -> int:
    """VmHWM (peak resident set) of a ``/proc/<pid>/status`` text, in KiB."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise ValueError("no VmHWM line")


def read_proc(pid: int) -> tuple[float, int] | None:
    """(CPU seconds, peak RSS KiB) of a live process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        return parse_stat(stat)[1].total, peak_rss_kib(status)
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------ summary


#: the line each worker logs as it starts a connector (kafkalite: "starting connector <name>";
#: Kafka 0.9.0.1's Worker: "Creating connector <name> of type ..."), both in log4j's layout
CONNECTOR_START = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO .*"
                             r"(?:starting|Creating) connector (\S+)")


def connector_started(log: str, name: str) -> float | None:
    """The wall-clock time (epoch s, the log's local time) the worker's log says it started connector
    ``name``, None if it does not say."""
    for line in log.splitlines():
        m = CONNECTOR_START.match(line)
        if m and m.group(2) == name:
            return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return None


@dataclass
class Sample:
    t: float                 # monotonic seconds
    offset: int              # the topic's end offset (records in it)
    done: int                # bytes in the sink file, or rows in the table


@dataclass
class Figures:
    records: int
    startup_s: float          # worker spawn to the source connector's start
    pipeline_rate: float      # records/s, the source connector's start to the last line delivered
    source_rate: float        # records/s, the source connector's start to the last record in the topic
    cpu_s: float
    peak_rss_mib: float
    notes: list[str] = field(default_factory=list)


def first_time(samples: list[Sample], pred: Callable[[Sample], bool]) -> float | None:
    return next((s.t for s in samples if pred(s)), None)


def summarize(samples: list[Sample], spawned: float, started: float | None, records: int, done_at: int,
              cpu_s: float, peak_kib: int) -> Figures:
    """The figures of one worker run from its samples (monotonic times): ``started`` is when the
    source connector started (None if the log did not say: the first record in the topic then
    stands for it, noted); ``done_at`` is the ``done`` value that means every record delivered."""
    t_first = first_time(samples, lambda s: s.offset > 0)
    t_all_in = first_time(samples, lambda s: s.offset >= records)
    t_done = first_time(samples, lambda s: s.done >= done_at)
    if t_first is None or t_all_in is None or t_done is None:
        raise ValueError("the samples never saw every record in the topic and in the sink")
    notes = []
    if started is None:
        started = t_first
        notes.append("no connector start in the worker's log: timed from the first record in the topic")
    # a run shorter than the sampling interval has no measurable time: count one interval
    step = min((b.t - a.t for a, b in zip(samples, samples[1:]) if b.t > a.t), default=1.0)
    return Figures(records, started - spawned, records / max(t_done - started, step),
                   records / max(t_all_in - started, step), cpu_s, peak_kib / 1024, notes)


def row_rate(samples: list[Sample], rows: int) -> float:
    """Rows/s from the first row seen to the sample that saw all ``rows``."""
    t_first = first_time(samples, lambda s: s.done > 0)
    t_all = first_time(samples, lambda s: s.done >= rows)
    if t_first is None or t_all is None:
        raise ValueError("the samples never saw every row")
    step = min((b.t - a.t for a, b in zip(samples, samples[1:]) if b.t > a.t), default=1.0)
    return rows / max(t_all - t_first, step)


# ------------------------------------------------------------------------------ workers


class Worker:
    """A standalone Connect worker process: kafkalite's or Kafka 0.9.0.1's."""

    def __init__(self, kind: str, workdir: Path, props: dict[str, str], connectors: list[dict[str, str]]) -> None:
        self.kind = kind
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.props = props
        self.connectors = connectors
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "worker.log"
        self.last_proc: tuple[float, int] | None = None
        self.spawned_wall = 0.0

    def command(self) -> tuple[list[str], dict[str, str]]:
        files = [str(write_properties(self.dir / "worker.properties", self.props))]
        files += [str(write_properties(self.dir / f"connector-{i}.properties", c))
                  for i, c in enumerate(self.connectors)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if self.kind == "kafka":
            home = kafka09.kafka_home()
            env["LOG_DIR"] = str(self.dir)           # kafka-run-class.sh's logs, not the distribution's
            return [str(home / "bin" / "connect-standalone.sh"), *files], env
        return [sys.executable, "-m", "kafkalite.connect.runtime.connect_standalone", *files], env

    def start(self) -> float:
        """Spawn the worker; the monotonic time of the spawn (``spawned_wall`` keeps the clock's)."""
        cmd, env = self.command()
        self.spawned_wall = time.time()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir,
                                         start_new_session=True)
        return time.monotonic()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sample_proc(self) -> None:
        if self.proc is not None:
            got = read_proc(self.proc.pid)
            if got is not None:
                self.last_proc = got

    def stop(self) -> None:
        """SIGTERM (both workers shut their connectors down on it), SIGKILL after 30 s."""
        if self.proc is not None:
            procs.stop(self.proc)

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def end_offset(consumer: Consumer, topic: str) -> int:
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
    except Exception:      # noqa: BLE001 - the broker is busy: count it as no progress
        return -1


def stalled_for(samples: list[Sample]) -> float:
    """Seconds since the samples last saw progress (a new end offset or more delivered)."""
    if not samples:
        return 0.0
    last = samples[-1]
    moved = next((s.t for s in reversed(samples) if (s.offset, s.done) != (last.offset, last.done)), None)
    since = samples[0].t if moved is None else next(s.t for s in samples if s.t > moved)
    return last.t - since


def watch(worker: Worker, topic: str, bootstrap: str, done: Callable[[], int], done_at: int,
          timeout: float, interval: float = 0.25, stall: float = 180.0,
          client_conf: dict[str, Any] | None = None) -> list[Sample]:
    """Samples until ``done()`` reaches ``done_at``; raises if the worker dies, ``timeout`` passes
    or nothing moves for ``stall`` s (a task that died inside a live worker). ``client_conf``: the
    sampling consumer's extra settings (Kafka 0.9.0.1's brokers need :data:`kafka09.CLIENT_CONF`)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-watch-{time.time_ns()}",
                         **(client_conf or {})})
    samples: list[Sample] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            worker.sample_proc()
            s = Sample(time.monotonic(), end_offset(consumer, topic), done())
            samples.append(s)
            if s.done >= done_at:
                worker.sample_proc()
                return samples
            if not worker.alive:
                raise RuntimeError(f"{worker.kind} worker exited ({worker.proc.returncode if worker.proc else '?'}):"
                                   f"\n{worker.tail()}")
            if stalled_for(samples) > stall:
                raise TimeoutError(f"{worker.kind} worker: no progress for {stall:.0f} s at {s.done} of {done_at} "
                                   f"delivered (topic end offset {s.offset}):\n{worker.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{worker.kind} worker: {s.done} of {done_at} delivered after {timeout:.0f} s "
                                   f"(topic end offset {s.offset}):\n{worker.tail()}")
            time.sleep(interval)
    finally:
        consumer.close()


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def run_file_pipeline(kind: str, bootstrap: str, create_topic: Callable[[str], None], source: Path,
                      lines: int, workdir: Path, timeout: float, client_conf: dict[str, Any] | None = None,
                      stall: float = 180.0) -> Figures:
    """One worker (``kind`` "kafkalite" or "kafka") moves ``source`` through a fresh topic into a
    fresh sink file; its figures."""
    topic = f"s16-lines-{kind}-{time.time_ns() % 10**9}"
    create_topic(topic)
    sink = workdir / "sink.txt"
    worker = Worker(kind, workdir, worker_properties(bootstrap, workdir, free_port()),
                    file_connectors(source, sink, topic))
    size = source.stat().st_size
    spawned = worker.start()
    try:
        samples = watch(worker, topic, bootstrap, lambda: file_size(sink), size, timeout, stall=stall,
                        client_conf=client_conf)
    finally:
        cpu = worker.last_proc
        worker.stop()
    assert cpu is not None
    wall = connector_started(worker.tail(10**7), "bench-file-source")
    started = None if wall is None else spawned + (wall - worker.spawned_wall)
    figures = summarize(samples, spawned, started, lines, size, cpu[0], cpu[1])
    if file_size(sink) != size:
        figures.notes.append(f"sink file {file_size(sink)} bytes, source {size}")
    return figures


# ------------------------------------------------------------------------------ JDBC sink

ROW_SCHEMA = {"type": "struct", "name": "bench_row", "optional": False,
              "fields": [{"field": "id", "type": "int64", "optional": False},
                         {"field": "who", "type": "string", "optional": False},
                         {"field": "amount", "type": "double", "optional": False}]}


def produce_rows(bootstrap: str, topic: str, rows: int) -> None:
    """``rows`` JSON records with the schema envelope (JsonConverter, schemas.enable=true)."""
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1,
                  "error_cb": lambda e: errors.append(str(e))})
    for i in range(rows):
        value = json.dumps({"schema": ROW_SCHEMA, "payload": {"id": i, "who": f"user-{i % 997}",
                                                              "amount": i * 0.25}}).encode()
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300) or errors:
        raise RuntimeError(f"producing {topic}: errors {errors[:3]}")


def run_jdbc_sink(bootstrap: str, create_topic: Callable[[str], None], postgres: Any, rows: int,
                  workdir: Path, timeout: float) -> tuple[float, float, int]:
    """kafkalite's worker writes ``rows`` records into PostgreSQL: (rows/s, CPU s, peak RSS KiB)."""
    topic = f"s16_rows_{time.time_ns() % 10**9}"
    create_topic(topic)
    produce_rows(bootstrap, topic, rows)
    props = worker_properties(bootstrap, workdir, free_port(), converter=JSON, schemas=True)
    props["key.converter"] = STRING
    worker = Worker("kafkalite", workdir, props, [{
        "name": "bench-jdbc-sink", "connector.class": JDBC_SINK_CLASS, "tasks.max": "1", "topics": topic,
        "connection.url": postgres.jdbc_url, "auto.create": "true", "insert.mode": "insert", "pk.mode": "none"}])

    def count() -> int:
        try:
            return int(postgres.execute(f'SELECT count(*) FROM "{topic}"')[0][0])
        except Exception:     # noqa: BLE001 - the sink has not created the table yet
            return 0

    worker.start()
    try:
        samples = watch(worker, topic, bootstrap, count, rows, timeout, interval=0.5)
    finally:
        cpu = worker.last_proc
        worker.stop()
    assert cpu is not None
    return row_rate(samples, rows), cpu[0], cpu[1]

