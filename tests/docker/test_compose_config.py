"""docker/ without a Docker engine: the compose file validates with Debian's ``docker-compose
config``, its three ZooKeeper servers form one ensemble, its brokers' environment renders (through
the entrypoint) into configurations the broker accepts, with listeners that work from the host and
every ZooKeeper server in zookeeper.connect; and the entrypoint's env-to-properties rules."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from kafkalite.config import BrokerConfig

pytestmark = pytest.mark.unit           # no engine needed: not skipped with the docker tier

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "docker-compose.yml"
ZOOKEEPERS = ["zookeeper1", "zookeeper2", "zookeeper3"]


def load_entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafkalite_entrypoint", ROOT / "docker" / "entrypoint.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


entrypoint = load_entrypoint()


def compose(*args: str, file: Path = COMPOSE) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose not installed (apt-get install --no-install-recommends docker-compose)")
    return subprocess.run(["docker-compose", "-f", str(file), *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def config() -> dict:
    result = compose("config")
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_is_valid(config: dict) -> None:
    """`docker-compose config` accepts the file and it has three ZooKeeper servers (the official
    3.8 image), three brokers, the schema registry, the web console and the Spark job."""
    assert set(config["services"]) == {*ZOOKEEPERS, "broker1", "broker2", "broker3", "schema-registry",
                                       "console", "spark-truck-gps"}
    for name in ZOOKEEPERS:
        assert config["services"][name]["image"] == "zookeeper:3.8"


def test_zookeeper_servers_form_one_ensemble(config: dict) -> None:
    """Server N has ZOO_MY_ID N and the same ZOO_SERVERS as the others, which names every server
    by its service name (the compose network's host name) with quorum, election and client port;
    each has volumes of its own and is healthy only while it serves (`zkServer.sh status`)."""
    lists = set()
    for n, name in enumerate(ZOOKEEPERS, start=1):
        service = config["services"][name]
        env = {k: str(v) for k, v in service["environment"].items()}
        assert env["ZOO_MY_ID"] == str(n)
        assert "srvr" in env["ZOO_4LW_COMMANDS_WHITELIST"].split(",")      # zkServer.sh status uses it
        lists.add(env["ZOO_SERVERS"])
        assert service["healthcheck"]["test"] == ["CMD", "zkServer.sh", "status"]
        sources = sorted(v["source"] if isinstance(v, dict) else v.split(":")[0] for v in service["volumes"])
        assert sources == [f"{name}-data", f"{name}-datalog"]
    [servers] = lists
    assert servers.split() == [f"server.{n}={name}:2888:3888;2181" for n, name in enumerate(ZOOKEEPERS, start=1)]


def test_validation_catches_a_broken_file(tmp_path: Path) -> None:
    """The same check rejects a dependency on an undefined service (so the tests above can fail)."""
    broken = tmp_path / "docker-compose.yml"
    text = COMPOSE.read_text()
    assert "  zookeeper1:\n    <<: *zookeeper" in text
    broken.write_text(text.replace("  zookeeper1:\n    <<: *zookeeper", "  zookeepr1:\n    <<: *zookeeper"))
    result = compose("config", "-q", file=broken)
    assert result.returncode != 0
    assert "zookeeper1" in result.stderr


@pytest.mark.parametrize("name,broker_id,host_port,metrics_port", [("broker1", 101, 19092, 19404),
                                                                     ("broker2", 102, 19093, 19405),
                                                                     ("broker3", 103, 19094, 19406)])
def test_broker_environment_renders_a_valid_config(config: dict, name: str, broker_id: int, host_port: int,
                                                   metrics_port: int) -> None:
    """Each broker's KAFKA_CFG_* environment becomes a server.properties the broker accepts: its id,
    an INTERNAL listener advertised under its service name, an EXTERNAL one advertised on the host
    port that is published to the container's EXTERNAL port, its metrics.port published to the
    host too (and probed by the health check), persistent data on a volume."""
    service = config["services"][name]
    env = {k: str(v) for k, v in service["environment"].items()}
    cfg = BrokerConfig.from_properties(entrypoint.properties_from_env(env))
    assert cfg.broker_id == broker_id
    advertised = {ep.listener: ep for ep in cfg.advertised_listeners}
    bound = {ep.listener: ep for ep in cfg.listeners}
    assert set(advertised) == set(bound) == {"INTERNAL", "EXTERNAL"}
    assert (advertised["INTERNAL"].host, advertised["INTERNAL"].port) == (name, bound["INTERNAL"].port)
    assert (advertised["EXTERNAL"].host, advertised["EXTERNAL"].port) == ("localhost", host_port)
    published = {int(p["published"]): int(p["target"]) for p in service["ports"]}
    assert published == {host_port: bound["EXTERNAL"].port, metrics_port: cfg["metrics.port"]}
    assert f"localhost:{cfg['metrics.port']}/health" in " ".join(service["healthcheck"]["test"])
    assert cfg["inter.broker.listener.name"] == "INTERNAL"
    assert cfg["zookeeper.connect"] == ",".join(f"{z}:2181" for z in ZOOKEEPERS)
    assert {z: d["condition"] for z, d in service["depends_on"].items()} == {z: "service_healthy" for z in ZOOKEEPERS}
    volumes = [v["target"] if isinstance(v, dict) else v.split(":")[1] for v in service["volumes"]]
    assert "/var/lib/kafkalite/data" in volumes
    assert f"{name}-data" in config["volumes"]


def test_schema_registry_service_has_a_valid_config(config: dict) -> None:
    """The registry runs kafkalite-schema-registry from the broker image with settings its own
    parser accepts: listening on 0.0.0.0:8081 (published to the host), advertising its service
    name to other instances, storing _schemas on all three brokers' INTERNAL listeners; it starts
    once the brokers are healthy and is healthy itself once it answers GET /."""
    from kafkalite.registry.main import _parse_args

    service = config["services"]["schema-registry"]
    assert service["image"] == config["services"]["broker1"]["image"]
    assert service["build"]["target"] == "broker"
    assert service["entrypoint"] == ["kafkalite-schema-registry"]
    registry, _ = _parse_args(service["command"])
    assert (registry.listen_host, registry.listen_port) == ("0.0.0.0", 8081)
    assert registry.url == "http://schema-registry:8081"
    assert registry.bootstrap_servers.split(",") == ["broker1:9092", "broker2:9092", "broker3:9092"]
    assert {int(p["published"]): int(p["target"]) for p in service["ports"]} == {8081: 8081}
    assert {b: d["condition"] for b, d in service["depends_on"].items()} == \
        {b: "service_healthy" for b in ("broker1", "broker2", "broker3")}
    assert "http://localhost:8081/" in " ".join(service["healthcheck"]["test"])


def test_console_service_has_a_valid_config(config: dict) -> None:
    """The console runs kafkalite-console from the broker image with a command line its own parser
    accepts, pointed at every broker's INTERNAL listener and /metrics, the registry and the
    ensemble; published on the host's loopback only; healthy once it serves its stylesheet."""
    from kafkalite.console.main import build_parser, settings_from

    service = config["services"]["console"]
    assert service["image"] == config["services"]["broker1"]["image"]
    assert service["entrypoint"] == ["kafkalite-console"]
    s = settings_from(build_parser().parse_args(service["command"]))
    assert (s.host, s.port, s.read_only) == ("0.0.0.0", 9021, False)
    assert s.bootstrap_servers.split(",") == ["broker1:9092", "broker2:9092", "broker3:9092"]
    assert s.registry_url == "http://schema-registry:8081"
    assert s.metrics_urls == tuple(f"http://broker{i}:9404/metrics" for i in (1, 2, 3))
    assert s.zookeeper == ",".join(f"{z}:2181" for z in ZOOKEEPERS)
    assert service["ports"] == ["127.0.0.1:9021:9021/tcp"]      # docker-compose 1.29's rendering of a host IP
    assert set(service["depends_on"]) == {"broker1", "broker2", "broker3", "schema-registry"}
    assert "http://localhost:9021/static/console.css" in " ".join(service["healthcheck"]["test"])


def test_env_names_map_to_kafka_properties() -> None:
    """Lower case, _ -> ., __ -> _, ___ -> -; KAFKALITE_CFG_ wins over KAFKA_CFG_; others ignored."""
    assert entrypoint.env_to_property("BROKER_ID") == "broker.id"
    assert entrypoint.env_to_property("LOG_RETENTION_MS") == "log.retention.ms"
    assert entrypoint.env_to_property("A__B___C_D") == "a_b-c.d"
    props = entrypoint.properties_from_env({"KAFKA_CFG_BROKER_ID": "1", "KAFKALITE_CFG_BROKER_ID": "2",
                                            "KAFKA_CFG_NUM_PARTITIONS": "3", "PATH": "/bin", "KAFKA_CFG_": "x"})
    assert props == {"broker.id": "2", "num.partitions": "3"}
    assert entrypoint.render(props).splitlines()[1:] == ["broker.id=2", "num.partitions=3"]


def test_entrypoint_writes_the_file_and_execs_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """main() writes server.properties where KAFKALITE_CONFIG says and execs kafkalite-server on it."""
    calls = []
    monkeypatch.setattr(entrypoint.os, "execvp", lambda f, args: calls.append(args))
    path = tmp_path / "etc" / "server.properties"
    env = {"KAFKALITE_CONFIG": str(path), "KAFKA_CFG_BROKER_ID": "7",
           "KAFKA_CFG_ZOOKEEPER_CONNECT": "zk:2181", "KAFKA_CFG_LOG_DIRS": "/data"}
    entrypoint.main([], env)
    assert calls == [["kafkalite-server", str(path)]]
    text = path.read_text()
    assert "broker.id=7\n" in text and "zookeeper.connect=zk:2181\n" in text and "log.dirs=/data\n" in text
    entrypoint.main(["sh", "-c", "true"], env)
    assert calls[-1] == ["sh", "-c", "true"]


def test_entrypoint_rejects_an_unknown_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt variable stops the container with one line naming the property (exit 1)."""
    env = {"KAFKALITE_CONFIG": str(tmp_path / "p"), "KAFKA_CFG_ZOOKEEPER_CONNECT": "zk:2181",
           "KAFKA_CFG_LOG_RETENSION_MS": "1000"}
    assert entrypoint.main([], env) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "log.retension.ms" in err
    assert not (tmp_path / "p").exists()
