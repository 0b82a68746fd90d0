"""Kafka's Connect quickstart with the kafkalite commands: the repository's
config/connect-standalone.properties (its broker and REST port set for the test, as a user sets
them for their host), config/connect-file-source.properties and connect-file-sink.properties as
shipped, run as ``kafkalite-connect-standalone`` in a directory holding test.txt."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from kafkalite.client import Consumer, TopicPartition
from kafkalite.cluster.processes import free_port
from kafkalite.config import parse_properties_text
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def test_quickstart_file_source_to_topic_to_file_sink(broker: Any, tmp_path: Path) -> None:
    """Lines of test.txt reach test.sink.txt through the topic connect-test, as JSON with the
    schema envelope; a line appended later follows; the REST API lists both connectors."""
    config = tmp_path / "config"
    config.mkdir()
    for name in ("connect-standalone.properties", "connect-file-source.properties", "connect-file-sink.properties"):
        shutil.copy(ROOT / "config" / name, config / name)
    port = free_port()
    worker = parse_properties_text((config / "connect-standalone.properties").read_text())
    assert worker["bootstrap.servers"] == "localhost:9092"
    with open(config / "connect-standalone.properties", "a") as f:
        f.write(f"\nbootstrap.servers={broker.bootstrap}\nlisteners=http://127.0.0.1:{port}\n"
                f"offset.storage.file.filename={tmp_path / 'connect.offsets'}\noffset.flush.interval.ms=500\n")
    (tmp_path / "test.txt").write_text("foo\nbar\n")
    log = open(tmp_path / "connect.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kafkalite.connect.runtime.connect_standalone",
                             "config/connect-standalone.properties", "config/connect-file-source.properties",
                             "config/connect-file-sink.properties"], cwd=tmp_path, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        sink = tmp_path / "test.sink.txt"
        wait_for(lambda: sink.exists() and sink.read_text() == "foo\nbar\n", timeout=60,
                 what=f"test.sink.txt (log: {tmp_path / 'connect.log'})")
        with open(tmp_path / "test.txt", "a") as f:
            f.write("Another line\n")
        wait_for(lambda: sink.read_text() == "foo\nbar\nAnother line\n", timeout=30, what="the appended line")
        assert sorted(_get(f"http://127.0.0.1:{port}/connectors")) == ["local-file-sink", "local-file-source"]
        status = _get(f"http://127.0.0.1:{port}/connectors/local-file-source/status")
        assert status["connector"]["state"] == "RUNNING" and status["tasks"][0]["state"] == "RUNNING"
        assert status["type"] == "source"
        with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
            tp = TopicPartition("connect-test", 0)
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            values: list[Any] = []
            wait_for(lambda: values.extend(json.loads(r.value) for r in consumer.poll(500)) or len(values) >= 3,
                     what="the topic's records")
        assert values[0] == {"schema": {"type": "string", "optional": False}, "payload": "foo"}
        assert [v["payload"] for v in values] == ["foo", "bar", "Another line"]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "connect.log").read_text()[-3000:]
