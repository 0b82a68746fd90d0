"""The launcher's ZooKeeper ensemble without starting a process: the files each server gets, the
ports it is given, what counts as a quorum, the state file round trip (also a version-1 file from
before ensembles, and with a schema registry), the connect string brokers get, that broker id 0 is
a controller, the registry's readiness signal, and the SQL server's listener and client properties
on a secured cluster."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cluster import cli
from kafkalite.cluster.local import LocalCluster
from kafkalite.cluster.processes import ClusterError, QuorumPeer, ZooKeeperEnsemble, ZooKeeperProcess


def test_ensemble_servers_get_their_own_dir_ports_myid_and_server_lines(tmp_path: Path) -> None:
    """Three servers: zookeeper-1..3 with myid 1..3; nine distinct launcher-chosen ports, none of
    ZooKeeper's fixed 2181/2888/3888; every zoo.cfg lists the same three server lines."""
    ens = ZooKeeperEnsemble(tmp_path, 3)
    ports = ens.ports
    assert len(ports) == 9 and len(set(ports)) == 9 and not {2181, 2888, 3888} & set(ports)
    lines = [f"server.{p.server_id}=127.0.0.1:{p.peer_port}:{p.election_port}" for p in ens.peers]
    for n, server in enumerate(ens.servers, start=1):
        assert server.dir == tmp_path.resolve() / f"zookeeper-{n}"
        cfg = server.write_config().read_text().splitlines()
        assert (server.data_dir / "myid").read_text() == f"{n}\n"
        assert f"clientPort={server.port}" in cfg and f"dataDir={server.data_dir}" in cfg
        assert "initLimit=10" in cfg and "syncLimit=5" in cfg and "admin.enableServer=false" in cfg
        assert [line for line in cfg if line.startswith("server.")] == lines
    assert ens.hosts == ",".join(f"127.0.0.1:{p.client_port}" for p in ens.peers)
    assert ens.quorum_size == 2


def test_standalone_server_keeps_the_old_layout(tmp_path: Path) -> None:
    """One server: zookeeper/ as before ensembles, no myid and no server lines (standalone mode)."""
    ens = ZooKeeperEnsemble(tmp_path, 1)
    [server] = ens.servers
    assert server.dir == tmp_path.resolve() / "zookeeper"
    cfg = server.write_config().read_text()
    assert "server." not in cfg and not (server.data_dir / "myid").exists()
    assert server.ports == [server.port]


def test_client_ports_from_a_base_port(tmp_path: Path) -> None:
    """--zookeeper-port P: server N listens for clients on P+N-1."""
    ens = ZooKeeperEnsemble(tmp_path, 3, client_port=41000)
    assert [s.port for s in ens.servers] == [41000, 41001, 41002]


@pytest.mark.parametrize("size", [0, 2, 4, 7])
def test_ensemble_sizes_are_1_3_or_5(tmp_path: Path, size: int) -> None:
    """An even (or empty, or oversized) ensemble is refused with a one-line reason."""
    with pytest.raises(ClusterError, match="1, 3 or 5"):
        ZooKeeperEnsemble(tmp_path, size)


def test_a_server_outside_its_quorum_is_refused(tmp_path: Path) -> None:
    peers = [QuorumPeer(1, 40001, 40002, 40003), QuorumPeer(2, 40004, 40005, 40006)]
    with pytest.raises(ValueError):
        ZooKeeperProcess(tmp_path, 40007, server_id=3, quorum=peers)


@pytest.mark.parametrize("modes,quorum", [
    ({1: "leader", 2: "follower", 3: "follower"}, True),
    ({1: "down", 2: "leader", 3: "follower"}, True),
    ({1: "down", 2: "follower", 3: "follower"}, False),       # re-electing: no leader yet
    ({1: "down", 2: "down", 3: "not serving"}, False),        # below quorum
    ({1: "leader", 2: "leader", 3: "down"}, False),           # two leaders is no quorum we trust
])
def test_quorum_is_a_majority_serving_with_one_leader(tmp_path: Path, modes: dict[int, str], quorum: bool) -> None:
    assert ZooKeeperEnsemble(tmp_path, 3).has_quorum(modes) is quorum


def test_standalone_quorum(tmp_path: Path) -> None:
    ens = ZooKeeperEnsemble(tmp_path, 1)
    assert ens.has_quorum({1: "standalone"}) and not ens.has_quorum({1: "down"})


def test_state_file_round_trip_keeps_the_ensemble(tmp_path: Path) -> None:
    """save_state/load: the same servers, ports and tick; brokers get every server plus the chroot."""
    cluster = LocalCluster(tmp_path, size=2, first_id=0, zookeepers=3, zookeeper_tick_ms=500, chroot="/kl")
    cluster.save_state()
    state = json.loads((tmp_path / "cluster.json").read_text())
    assert state["version"] == 2 and [s["id"] for s in state["zookeeper"]["servers"]] == [1, 2, 3]
    again = LocalCluster.load(tmp_path)
    assert again.ensemble is not None and cluster.ensemble is not None
    assert again.ensemble.peers == cluster.ensemble.peers and again.ensemble.tick_ms == 500
    assert again.zk_connect == f"{cluster.ensemble.hosts}/kl"
    assert again.brokers[0].properties()["zookeeper.connect"] == f"{cluster.ensemble.hosts}/kl"
    assert [b.broker_id for b in again.brokers] == [0, 1]


def test_state_file_round_trip_keeps_the_registry(tmp_path: Path) -> None:
    """A cluster with a schema registry records its port and bootstrap list; load() re-attaches it
    (down, with no process, has nothing to stop); a state file without the key has no registry."""
    cluster = LocalCluster(tmp_path, size=1, schema_registry=True, schema_registry_port=40555)
    assert cluster.registry is not None and cluster.registry.dir == tmp_path.resolve() / "schema-registry"
    cluster.registry.bootstrap = "127.0.0.1:40556"
    cluster.save_state()
    again = LocalCluster.load(tmp_path)
    assert again.registry is not None and again.registry.url == "http://127.0.0.1:40555"
    assert again.registry.properties()["kafkastore.bootstrap.servers"] == "127.0.0.1:40556"
    assert not again.registry.alive and again.down() == []
    plain = LocalCluster(tmp_path / "plain", size=1)
    plain.save_state()
    assert LocalCluster.load(tmp_path / "plain").registry is None
    assert json.loads((tmp_path / "plain" / "cluster.json").read_text())["schema_registry"] is None


def test_registry_readiness_reads_only_this_incarnations_log(tmp_path: Path) -> None:
    """A restarted registry appends to the same log: a primary logged by the previous incarnation
    does not make the new one ready, one logged after launch does."""
    from kafkalite.cluster.processes import SchemaRegistryProcess

    reg = SchemaRegistryProcess(tmp_path, "127.0.0.1:1", port=40557)
    reg.dir.mkdir(parents=True)
    reg.log_path.write_text("INFO kafkalite.registry.service: primary is now http://127.0.0.1:40557 (this instance)\n")
    reg._log_start = reg.log_path.stat().st_size          # what launch() records before spawning
    assert not reg.knows_primary()
    with open(reg.log_path, "a") as f:
        f.write("INFO kafkalite.registry.service: primary is now unknown\n")
    assert not reg.knows_primary()
    with open(reg.log_path, "a") as f:
        f.write("INFO kafkalite.registry.service: primary is now http://127.0.0.1:40557 (this instance)\n")
    assert reg.knows_primary()


def test_version_1_state_file_loads_as_one_server(tmp_path: Path) -> None:
    """A cluster.json written before ensembles ({"port", "pid", "start"}) is one standalone server."""
    (tmp_path / "cluster.json").write_text(json.dumps({
        "version": 1, "chroot": "", "external_zookeeper": None, "overrides": {},
        "zookeeper": {"port": 40123, "pid": None, "start": None},
        "brokers": [{"id": 101, "port": 40124, "bound_port": 40124, "overrides": {}, "pid": None, "start": None}]}))
    cluster = LocalCluster.load(tmp_path)
    assert cluster.ensemble is not None and cluster.ensemble.size == 1
    assert cluster.zk_hosts == "127.0.0.1:40123"
    assert cluster.ensemble.servers[0].dir == tmp_path.resolve() / "zookeeper"
    assert cluster.ensemble.modes() == {1: "down"}


def test_wait_for_controller_accepts_broker_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/controller naming broker 0 is an elected controller, not "none" (issue 16: `up --first-id 0`
    timed out waiting for a controller)."""
    cluster = LocalCluster(tmp_path, size=1, first_id=0)

    class Alive:
        broker_id = 0
        alive = True
    cluster.brokers = [Alive()]  # type: ignore[list-item]
    monkeypatch.setattr(cluster, "controller_id", lambda: 0)
    assert cluster.wait_for_controller(0.5) == 0


@pytest.mark.parametrize("args,message", [
    (["up", "--zookeepers", "2"], "--zookeepers must be 1, 3 or 5"),
    (["up", "--first-id", "-1"], "--first-id must be 0 or more"),
    (["kill"], "kill needs a broker id or --zookeeper N"),
    (["start", "101", "--zookeeper", "1"], "start needs a broker id or --zookeeper N"),
])
def test_cli_refusals_are_one_line(tmp_path: Path, capsys: Any, args: list[str], message: str) -> None:
    assert cli.main(["--data-dir", str(tmp_path / "c"), *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kafkalite-cluster: {message}") and err.count("\n") == 1


def test_sql_server_of_a_secured_cluster_gets_its_listener_and_client_properties(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``client_listener``/``client_security``: the SQL server's bootstrap list is every broker's
    SASL_SSL address (from its ``listeners``), its properties file holds the client properties
    under Kafka's names and is readable by its owner only; without them it is the PLAINTEXT list."""
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.type": "PEM",
                "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    'username="u" password="p";', "ssl.truststore.location": "/ca.pem"}
    cluster = LocalCluster(tmp_path, size=2, sql=True, client_listener="SASL_SSL", client_security=security)
    for n, b in enumerate(cluster.brokers):
        b.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{b.configured_port},SASL_SSL://:{40700 + n}"
    assert cluster.client_bootstrap == "127.0.0.1:40700,127.0.0.1:40701"
    sql = cluster.sql
    assert sql is not None
    monkeypatch.setattr(sql, "launch", lambda: (sql.dir.mkdir(parents=True), sql.write_files()))
    monkeypatch.setattr(sql, "wait_ready", lambda timeout: None)
    cluster.start_sql()                                  # what `up` does once the brokers run
    written = dict(line.split("=", 1) for line in sql.properties_path.read_text().splitlines())
    assert {k: written[k] for k in security} == security
    assert written["bootstrap.servers"] == "127.0.0.1:40700,127.0.0.1:40701"
    assert sql.properties_path.stat().st_mode & 0o777 == 0o600
    assert sql.command()[1:] == ["-m", "kafkalite.sql.server", str(sql.properties_path)]
    plain = LocalCluster(tmp_path / "plain", size=2)
    assert plain.client_bootstrap == plain.bootstrap
    cluster.client_listener = "SSL"
    with pytest.raises(ClusterError, match=r"broker 101 has no SSL listener"):
        cluster.client_bootstrap
