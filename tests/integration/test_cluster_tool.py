"""The ``kafkalite-cluster`` tool as a user runs it (``python -m kafkalite.cluster``): up, status,
kill, start, down, and that nothing is left running or listening afterwards, also after a failed up."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster.processes import port_in_use, proc_start_ticks
from tests.support.waiting import wait_for


def tool(data_dir: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite.cluster", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=timeout)


def processes_using(data_dir: Path) -> list[int]:
    """Live (non-zombie) processes whose command line names the data directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(data_dir) in cmdline and proc_start_ticks(int(entry.name)) is not None:
            found.append(int(entry.name))
    return found


def recorded_ports(data_dir: Path) -> list[int]:
    state = json.loads((data_dir / "cluster.json").read_text())
    return [state["zookeeper"]["port"]] + [b["port"] for b in state["brokers"]]


@pytest.fixture
def data_dir(tmp_path: Path):
    d = tmp_path / "cluster"
    yield d
    if (d / "cluster.json").exists():      # whatever the test did, leave nothing behind
        tool(d, "down", "--timeout", "10")


def test_up_status_kill_start_down(data_dir: Path) -> None:
    """up starts ZooKeeper and brokers 101-103 and prints their bootstrap servers; status follows a
    kill -9 (process dead, then partitions under-replicated) and a restart; down leaves no process
    and no listening port, and a second down is a no-op."""
    up = tool(data_dir, "up")
    assert up.returncode == 0, up.stderr
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", up.stdout).group(1)
    assert len(bootstrap.split(",")) == 3
    assert re.search(r"controller\s+10[123]\b", up.stdout)

    status = tool(data_dir, "status")
    assert status.returncode == 0, status.stderr
    for broker_id in (101, 102, 103):
        assert re.search(rf"broker {broker_id}\s+alive\s+pid \d+\s+port \d+\s+registered", status.stdout)
    assert re.search(r"controller: 10[123]", status.stdout)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("tool-topic", 3, 3)])["tool-topic"].result(30)
    wait_for(lambda: "partitions: " in (s := tool(data_dir, "status").stdout)
             and re.search(r"partitions: (\d+)", s).group(1) != "0", 30, "the topic's partition states", interval=0.3)

    killed = tool(data_dir, "kill", "102")
    assert killed.returncode == 0, killed.stderr
    status = tool(data_dir, "status").stdout
    assert re.search(r"broker 102\s+dead", status)
    # once 102's session expires its replicas leave the ISR: the tool reports them
    wait_for(lambda: "under-replicated tool-topic-" in tool(data_dir, "status").stdout, 60,
             "under-replicated partitions after kill -9", interval=0.5)

    started = tool(data_dir, "start", "102")
    assert started.returncode == 0, started.stderr
    assert re.search(r"broker 102\s+alive\s+pid \d+", tool(data_dir, "status").stdout)
    # the restarted broker serves on its old address (clients keep their bootstrap list)
    assert started.stdout.split(" on ")[1].split()[0] in bootstrap.split(",")

    ports = recorded_ports(data_dir)
    down = tool(data_dir, "down")
    assert down.returncode == 0, down.stderr
    assert "zookeeper" in down.stdout
    assert processes_using(data_dir) == []
    assert [p for p in ports if port_in_use(p)] == []
    again = tool(data_dir, "down")
    assert again.returncode == 0 and "nothing running" in again.stdout


def test_failed_up_leaves_nothing_running(data_dir: Path) -> None:
    """A broker that cannot start (invalid property) fails `up` with a one-line reason, and the
    ZooKeeper and brokers already started are stopped again."""
    up = tool(data_dir, "up", "--brokers", "2", "--override", "log.retention.ms=soon")
    assert up.returncode == 1
    assert up.stderr.startswith("kafkalite-cluster: broker 10")
    assert "log.retention.ms" in up.stderr
    assert processes_using(data_dir) == []
    assert [p for p in recorded_ports(data_dir) if port_in_use(p)] == []
    assert "nothing running" in tool(data_dir, "down").stdout


def test_zookeeper_port_in_use_is_one_line(data_dir: Path) -> None:
    """A taken ZooKeeper port is reported before anything starts; nothing is left running."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        up = tool(data_dir, "up", "--zookeeper-port", str(s.getsockname()[1]))
    assert up.returncode == 1
    assert "already in use" in up.stderr and len(up.stderr.strip().splitlines()) == 1
    assert processes_using(data_dir) == []


def test_commands_without_a_cluster_fail_cleanly(tmp_path: Path) -> None:
    """status/kill/start on a directory without a cluster: exit 1 and one line; down: no-op."""
    for args in (["status"], ["kill", "101"], ["start", "101"]):
        r = tool(tmp_path / "none", *args)
        assert r.returncode == 1 and r.stderr.startswith("kafkalite-cluster: no cluster in"), (args, r.stderr)
    r = tool(tmp_path / "none", "down")
    assert r.returncode == 0 and "nothing running" in r.stdout


def test_produce_consume_failover_on_local_processes(tmp_path: Path) -> None:
    """The docker-compose scenario (tests/docker/scenario.py) on a LocalCluster of three brokers:
    acks=all keeps working after kill -9 of a leader, and every record is read back once, in order."""
    from kafkalite.cluster import LocalCluster
    from tests.docker.scenario import produce_consume_failover

    cluster = LocalCluster(tmp_path / "local", size=3).up()
    try:
        produce_consume_failover(cluster.bootstrap, cluster.kill_broker)
    finally:
        cluster.down()
    assert processes_using(tmp_path / "local") == []
