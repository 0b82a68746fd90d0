"""kafkalite-server's start-up errors: one line, exit code 1, no traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest


def run_server(tmp_path, text: str, *extra: str) -> subprocess.CompletedProcess:
    props = tmp_path / "server.properties"
    props.write_text(text)
    return subprocess.run([sys.executable, "-m", "kafkalite.broker.main", str(props), *extra],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("text, extra, message", [
    ("zookeeper.connect=127.0.0.1:1\nlog.retention.hourz=5\n", (), "Unknown configuration 'log.retention.hourz'"),
    ("zookeeper.connect=127.0.0.1:1\nnum.partitions=-3\n", (), "num.partitions: must be at least 1"),
    ("broker.id=1\n", (), "Missing required configuration 'zookeeper.connect'"),
    ("zookeeper.connect=127.0.0.1:1\n", ("--override", "message.max.bytes=big"), "message.max.bytes"),
])
def test_bad_configuration_is_one_line(tmp_path, text: str, extra: tuple, message: str) -> None:
    """An unknown or invalid property stops the broker before it touches anything."""
    out = run_server(tmp_path, text, *extra)
    assert out.returncode == 1
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_missing_properties_file(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "kafkalite.broker.main", str(tmp_path / "nope.properties")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "No such file" in out.stderr and "Traceback" not in out.stderr


def test_unreachable_zookeeper_fails_cleanly(tmp_path) -> None:
    """With nothing listening at zookeeper.connect the broker gives up after
    zookeeper.connection.timeout.ms with a one-line error and exit code 1."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = run_server(tmp_path, f"zookeeper.connect=127.0.0.1:{port}\nzookeeper.connection.timeout.ms=1500\n"
                               f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path}/data\n")
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if " ERROR " in line]
    assert errors and "Traceback" not in out.stderr, out.stderr[-2000:]
