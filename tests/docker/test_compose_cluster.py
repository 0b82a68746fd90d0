"""The docker-compose cluster (docker/docker-compose.yml) brought up with testcontainers: produce,
consume and failover from the host through the EXTERNAL listeners. Skipped without a Docker
engine (tests/conftest.py); the same scenario runs on local processes in
tests/integration/test_cluster_tool.py."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.docker.scenario import produce_consume_failover

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ["zookeeper1", "zookeeper2", "zookeeper3", "broker1", "broker2", "broker3"]
SERVICE_OF = {101: "broker1", 102: "broker2", 103: "broker3"}
BOOTSTRAP = "localhost:19092,localhost:19093,localhost:19094"


@pytest.fixture(scope="module")
def compose():
    from testcontainers.compose import DockerCompose

    env = DockerCompose(ROOT / "docker", compose_file_name="docker-compose.yml", build=True, wait=True,
                        services=SERVICES)
    env.start()
    try:
        yield env
    finally:
        env.stop(down=True)     # also removes the volumes (keep_volumes=False)


def test_produce_consume_failover_in_compose(compose) -> None:
    """Clients on the host bootstrap from the published EXTERNAL listeners, get host-reachable
    broker addresses back, and keep producing while one broker container is killed."""
    def kill(broker_id: int) -> None:
        subprocess.run([*compose.compose_command_property, "kill", "-s", "SIGKILL", SERVICE_OF[broker_id]],
                       check=True, capture_output=True, timeout=60)

    failover = produce_consume_failover(BOOTSTRAP, kill, topic="compose-scenario")
    assert failover > 0
