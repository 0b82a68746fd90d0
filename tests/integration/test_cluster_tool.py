"""The ``kafkalite-cluster`` tool as a user runs it (``python -m kafkalite.cluster``): up, status,
kill, start, down, with one ZooKeeper or an ensemble of three, with and without the schema
registry, and that nothing is left running or listening afterwards, also after a failed up."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cluster.processes import free_port, port_in_use, proc_start_ticks
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
    """Every port in the state file: each ZooKeeper server's client, quorum and election port, each
    broker's, the schema registry's."""
    state = json.loads((data_dir / "cluster.json").read_text())
    zk = [p for s in state["zookeeper"]["servers"] for p in (s["port"], s["peer_port"], s["election_port"]) if p]
    registry = [state["schema_registry"]["port"]] if state.get("schema_registry") else []
    return zk + [b["port"] for b in state["brokers"]] + registry


def status_modes(data_dir: Path) -> dict[int, str]:
    """ZooKeeper server id -> the mode `status` prints for it."""
    out = tool(data_dir, "status").stdout
    return {int(i): m for i, m in re.findall(r"^  zookeeper (\d+)\s+(leader|follower|standalone|not serving|down)\s",
                                             out, re.M)}


@pytest.fixture
def data_dir(tmp_path: Path):
    d = tmp_path / "cluster"
    yield d
    if (d / "cluster.json").exists():      # whatever the test did, leave nothing behind
        tool(d, "down", "--timeout", "10")


def test_up_status_kill_start_down(data_dir: Path) -> None:
    """up starts ZooKeeper, brokers 101-103 and a schema registry and prints the bootstrap servers
    and the registry's URL (which registers a schema, kept in _schemas with RF 3); status follows a
    kill -9 (process dead, then partitions under-replicated) and a restart; down leaves no process
    and no listening port, and a second down is a no-op."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    up = tool(data_dir, "up")
    assert up.returncode == 0, up.stderr
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", up.stdout).group(1)
    assert len(bootstrap.split(",")) == 3
    assert re.search(r"controller\s+10[123]\b", up.stdout)
    url = re.search(r"schema\.registry\.url (http://127\.0\.0\.1:\d+)$", up.stdout, re.M).group(1)
    sr = SchemaRegistryClient({"url": url})
    schema_id = sr.register_schema("tool-value", Schema('{"type": "record", "name": "T", "fields": '
                                                        '[{"name": "a", "type": "int"}]}', "AVRO"))
    assert sr.get_latest_version("tool-value").schema_id == schema_id
    console = re.search(r"console URL\s+(http://127\.0\.0\.1:\d+)$", up.stdout, re.M).group(1)
    with urllib.request.urlopen(console + "/", timeout=30) as page:      # the overview, over the brokers
        assert 'id="health">healthy<' in page.read().decode()

    status = tool(data_dir, "status")
    assert status.returncode == 0, status.stderr
    for broker_id in (101, 102, 103):
        assert re.search(rf"broker {broker_id}\s+alive\s+pid \d+\s+port \d+\s+registered", status.stdout)
    assert re.search(r"controller: 10[123]", status.stdout)
    assert re.search(rf"schema registry alive\s+pid \d+\s+{re.escape(url)}$", status.stdout, re.M)
    assert re.search(rf"console\s+up\s+pid \d+\s+{re.escape(console)}$", status.stdout, re.M)
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("_schemas", timeout=10)
    assert len(md.topics["_schemas"].partitions[0].replicas) == 3

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
    assert "zookeeper" in down.stdout and "schema registry" in down.stdout and "console" in down.stdout
    assert processes_using(data_dir) == []
    assert [p for p in ports if port_in_use(p)] == []
    again = tool(data_dir, "down")
    assert again.returncode == 0 and "nothing running" in again.stdout


def test_up_without_schema_registry_with_a_connect_worker_and_a_sql_server(data_dir: Path) -> None:
    """--no-schema-registry starts ZooKeeper and the brokers only: up prints no registry URL,
    status shows none; --connect 1 --connect-port P adds a distributed Connect worker on P whose
    REST URL up prints and which answers; --sql adds a SQL server that answers ksqlDB's /info;
    down stops what ran."""
    port = free_port()
    up = tool(data_dir, "up", "--brokers", "1", "--no-schema-registry", "--connect", "1", "--connect-port", str(port),
              "--sql")
    assert up.returncode == 0, up.stderr
    assert "schema registry" not in up.stdout and "schema.registry.url" not in up.stdout
    assert json.loads((data_dir / "cluster.json").read_text())["schema_registry"] is None
    connect_url = re.search(r"^connect REST URL\s+(http://127\.0\.0\.1:\d+)$", up.stdout, re.M).group(1)
    assert connect_url == f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(connect_url + "/connectors", timeout=10) as resp:
        assert json.loads(resp.read()) == []
    sql_url = re.search(r"^sql server URL\s+(http://127\.0\.0\.1:\d+)$", up.stdout, re.M).group(1)
    with urllib.request.urlopen(sql_url + "/info", timeout=10) as resp:
        assert json.loads(resp.read())["KsqlServerInfo"]["ksqlServiceId"] == "default_"
    status = tool(data_dir, "status")
    assert status.returncode == 0 and "schema registry" not in status.stdout, status.stdout
    assert re.search(rf"connect worker\s+alive\s+pid \d+\s+{re.escape(connect_url)}$", status.stdout, re.M)
    assert re.search(rf"sql server\s+alive\s+pid \d+\s+{re.escape(sql_url)}$", status.stdout, re.M)
    down = tool(data_dir, "down")
    assert down.returncode == 0 and "broker 101" in down.stdout and "schema registry" not in down.stdout
    assert f"connect worker {connect_url}" in down.stdout and "SQL server" in down.stdout
    assert processes_using(data_dir) == []


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


def test_registry_port_in_use_fails_up_and_stops_everything(data_dir: Path) -> None:
    """A taken --schema-registry-port fails `up` after the brokers started with a one-line reason
    naming the registry, and ZooKeeper and the broker are stopped again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        up = tool(data_dir, "up", "--brokers", "1", "--schema-registry-port", str(s.getsockname()[1]))
    assert up.returncode == 1
    assert up.stderr.startswith("kafkalite-cluster: schema registry: port 127.0.0.1:") and \
        "already in use" in up.stderr, up.stderr
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
    except BaseException:
        for b in cluster.brokers:     # what each broker said about the controller and the topic
            lines = b.log_path.read_text(errors="replace").splitlines()
            said = [ln for ln in lines if "controller" in ln or "scenario" in ln or "WARNING" in ln or "ERROR" in ln]
            print(f"--- broker {b.broker_id}:", *said[-40:], sep="\n")
        raise
    finally:
        cluster.down()
    assert processes_using(tmp_path / "local") == []


def test_ensemble_up_status_kill_start_down(data_dir: Path) -> None:
    """`up --zookeepers 3` runs three ZooKeeper servers, each with its own dataDir and myid, on
    ports the launcher chose (no fixed 2181/2888/3888), and gives the broker every server in
    zookeeper.connect; `status` shows one leader and two followers; `kill --zookeeper` of the
    leader leaves two servers that elect a new one (status: the old one down); `start
    --zookeeper` brings it back as a follower; `down` leaves no process and no port."""
    up = tool(data_dir, "up", "--zookeepers", "3", "--brokers", "1")
    assert up.returncode == 0, up.stderr
    state = json.loads((data_dir / "cluster.json").read_text())
    servers = state["zookeeper"]["servers"]
    assert [s["id"] for s in servers] == [1, 2, 3]
    ports = [p for s in servers for p in (s["port"], s["peer_port"], s["election_port"])]
    assert len(set(ports)) == 9 and not {2181, 2888, 3888} & set(ports)
    for s in servers:
        zdir = data_dir / f"zookeeper-{s['id']}"
        assert (zdir / "data" / "myid").read_text().strip() == str(s["id"])
        cfg = (zdir / "zoo.cfg").read_text().splitlines()
        assert f"clientPort={s['port']}" in cfg
        assert [line for line in cfg if line.startswith("server.")] == [
            f"server.{t['id']}=127.0.0.1:{t['peer_port']}:{t['election_port']}" for t in servers]
    connect = ",".join(f"127.0.0.1:{s['port']}" for s in servers)
    assert f"zookeeper.connect={connect}\n" in (data_dir / "broker-101" / "server.properties").read_text()
    assert f"zookeeper.connect   {connect}" in up.stdout

    modes = status_modes(data_dir)
    assert sorted(modes.values()) == ["follower", "follower", "leader"], modes
    assert "3 of 3 serving, quorum" in tool(data_dir, "status").stdout
    leader = next(i for i, m in modes.items() if m == "leader")

    killed = tool(data_dir, "kill", "--zookeeper", str(leader))
    assert killed.returncode == 0, killed.stderr
    assert "2 of 3 servers run, the quorum holds" in killed.stdout
    wait_for(lambda: sorted((m := status_modes(data_dir)).values()) == ["down", "follower", "leader"]
             and m[leader] == "down", 30, "a new leader among the other two", interval=0.2)
    status = tool(data_dir, "status").stdout
    assert "2 of 3 serving, quorum" in status and re.search(r"broker 101\s+alive.*\bregistered", status), status

    started = tool(data_dir, "start", "--zookeeper", str(leader))
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().endswith("follower")
    assert status_modes(data_dir)[leader] == "follower"

    assert tool(data_dir, "kill", "101", "--zookeeper", "1").stderr.startswith("kafkalite-cluster: kill needs")
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", up.stdout).group(1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
    ports = recorded_ports(data_dir)
    down = tool(data_dir, "down")
    assert down.returncode == 0, down.stderr
    assert "zookeeper 1, 2, 3" in down.stdout
    assert processes_using(data_dir) == []
    assert [p for p in ports if port_in_use(p)] == []

    # the stopped cluster's znodes live in its three servers' dataDirs: `up` starts those again
    refused = tool(data_dir, "up", "--zookeepers", "1")
    assert refused.returncode == 1 and "holds a ZooKeeper ensemble of 3" in refused.stderr
    again = tool(data_dir, "up", "--brokers", "1")
    assert again.returncode == 0, again.stderr
    assert sorted(status_modes(data_dir).values()) == ["follower", "follower", "leader"]
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", again.stdout).group(1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert "kept" in admin.list_topics(timeout=10).topics
    ports = recorded_ports(data_dir)
    assert tool(data_dir, "down").returncode == 0
    assert processes_using(data_dir) == []
    assert [p for p in ports if port_in_use(p)] == []


def test_failed_up_with_an_ensemble_leaves_nothing_running(data_dir: Path) -> None:
    """A broker that cannot start fails `up --zookeepers 3`: the three ZooKeeper servers already
    running are stopped again; no process, no port is left."""
    up = tool(data_dir, "up", "--zookeepers", "3", "--brokers", "1", "--override", "log.retention.ms=soon")
    assert up.returncode == 1
    assert up.stderr.startswith("kafkalite-cluster: broker 101") and "log.retention.ms" in up.stderr
    assert processes_using(data_dir) == []
    assert [p for p in recorded_ports(data_dir) if port_in_use(p)] == []
    assert "nothing running" in tool(data_dir, "down").stdout


def test_ensemble_port_in_use_and_bad_size_are_one_line(data_dir: Path) -> None:
    """A taken client port of the second server is reported before any server starts; an even
    ensemble size is refused; both with one line and nothing left running."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        second = taken.getsockname()[1]
        up = tool(data_dir, "up", "--zookeepers", "3", "--zookeeper-port", str(second - 1))
    assert up.returncode == 1
    assert f"127.0.0.1:{second} is already in use" in up.stderr and len(up.stderr.strip().splitlines()) == 1
    assert processes_using(data_dir) == []
    bad = tool(data_dir, "up", "--zookeepers", "2")
    assert bad.returncode == 1 and bad.stderr.startswith("kafkalite-cluster: --zookeepers must be 1, 3 or 5")
    assert len(bad.stderr.strip().splitlines()) == 1


def test_add_broker_then_move_a_partition_onto_it(data_dir: Path, tmp_path: Path) -> None:
    """add-broker starts broker 103 next to 101-102 with the same properties (it registers, status
    lists it alive, the state file records it, a second add-broker picks 104); kafkalite-reassign-
    partitions then moves a partition onto it and --verify reports the move complete; down stops
    every broker, the added ones included."""
    up = tool(data_dir, "up", "--brokers", "2", "--no-schema-registry")
    assert up.returncode == 0, up.stderr
    bootstrap = re.search(r"bootstrap servers\s+(\S+)", up.stdout).group(1)
    added = tool(data_dir, "add-broker")
    assert added.returncode == 0, added.stderr
    assert re.match(r"broker 103 started on 127\.0\.0\.1:\d+ \(pid \d+", added.stdout), added.stdout
    assert re.search(r"broker 103\s+alive\s+pid \d+\s+port \d+\s+registered", tool(data_dir, "status").stdout)
    state = json.loads((data_dir / "cluster.json").read_text())
    assert [b["id"] for b in state["brokers"]] == [101, 102, 103]
    assert state["brokers"][2]["overrides"] == state["brokers"][0]["overrides"]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    # on the two original brokers only (a plain RF=2 topic may already place a replica on 103)
    admin.create_topics([NewTopic("grow-me", 1, replica_assignment=[[101, 102]])])["grow-me"].result(30)
    before = admin.list_topics("grow-me", timeout=10).topics["grow-me"].partitions[0].replicas
    assert 103 not in before
    target = [103, before[0]]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "grow-me", "partition": 0,
                                                              "replicas": target}]}))
    reassign = [sys.executable, "-m", "kafkalite.cli.reassign_partitions", "--bootstrap-server", bootstrap,
                "--reassignment-json-file", str(plan)]
    executed = subprocess.run([*reassign, "--execute"], capture_output=True, text=True, timeout=60)
    assert executed.returncode == 0, executed.stderr
    wait_for(lambda: "is complete." in subprocess.run([*reassign, "--verify"], capture_output=True, text=True,
                                                      timeout=60).stdout, 60, "the move complete", interval=0.3)
    md = admin.list_topics("grow-me", timeout=10)
    assert md.topics["grow-me"].partitions[0].replicas == target

    second = tool(data_dir, "add-broker")
    assert second.returncode == 0 and second.stdout.startswith("broker 104 started"), second.stderr
    down = tool(data_dir, "down")
    assert down.returncode == 0 and "broker 103" in down.stdout and "broker 104" in down.stdout, down.stdout
    assert processes_using(data_dir) == []


def test_launched_processes_get_the_open_files_limit_raised() -> None:
    """Brokers keep a segment's files open per replica: a process the launcher starts has its
    soft RLIMIT_NOFILE lifted (to the hard limit at least), even when ours is Debian's 1024."""
    import resource

    from kafkalite.cluster.processes import raise_open_files_limit

    def low_then_raised() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),
                                                    resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        raise_open_files_limit()
    out = subprocess.run(["bash", "-c", "ulimit -Sn; ulimit -Hn"], preexec_fn=low_then_raised,
                         capture_output=True, text=True, check=True).stdout.split()
    soft, hard = int(out[0]), int(out[1])
    assert soft == hard >= resource.getrlimit(resource.RLIMIT_NOFILE)[1], out
