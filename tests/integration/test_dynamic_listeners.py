"""Dynamic listener configs on real broker processes (Kafka's DynamicListenerConfig, per broker):
``kafkalite-configs --entity-type brokers --entity-name <id> --alter --add-config`` of ``listeners``
and ``listener.security.protocol.map`` makes the broker bind a new listener that accepts
connections and serves Metadata, ``advertised.listeners`` changes the endpoint every broker's
Metadata gives for it (its /brokers/ids/<id> is re-written), and removing the listener closes it."""
from __future__ import annotations

import socket
import subprocess
import sys

from kafkalite.client import KafkaClient
from kafkalite.cluster.processes import free_port
from tests.support.waiting import wait_for

PROTOCOLS = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,EXTRA:PLAINTEXT"


def configs(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.configs", *args], text=True,
                          capture_output=True, timeout=60)


def brokers_seen(bootstrap: str) -> dict[int, tuple[str, int]]:
    with KafkaClient(bootstrap, client_id="dyn-listeners", retries=0) as client:
        return {node: (host, port) for node, (host, port, _rack) in client.metadata([]).brokers.items()}


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False


def test_listeners_and_advertised_listeners_change_live(cluster_factory) -> None:
    cluster = cluster_factory(2)
    b2 = cluster.broker(2)
    plain = b2.port
    extra = free_port()
    other = cluster.broker(1).bootstrap
    # kafkalite-configs takes [a,b] for a value holding commas, as kafka-configs.sh does
    r = configs("--bootstrap-server", other, "--entity-type", "brokers", "--entity-name", "2", "--alter",
                "--add-config", f"listeners=[PLAINTEXT://127.0.0.1:{plain},EXTRA://127.0.0.1:{extra}],"
                                f"listener.security.protocol.map=[{PROTOCOLS}]")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: accepts(extra), 30, "broker 2 to listen on its new EXTRA listener")
    # the new listener serves Kafka requests: Metadata over EXTRA names broker 2 by its EXTRA endpoint
    wait_for(lambda: brokers_seen(f"127.0.0.1:{extra}") == {2: ("127.0.0.1", extra)}, 30,
             "Metadata over EXTRA to name broker 2's EXTRA endpoint")

    r = configs("--bootstrap-server", other, "--entity-type", "brokers", "--entity-name", "2", "--alter",
                "--add-config", f"advertised.listeners=[PLAINTEXT://localhost:{plain},EXTRA://127.0.0.1:{extra}]")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: brokers_seen(other).get(2) == ("localhost", plain), 30,
             "broker 1's Metadata to give broker 2's new advertised host")

    r = configs("--bootstrap-server", other, "--entity-type", "brokers", "--entity-name", "2", "--alter",
                "--delete-config", "advertised.listeners", "--add-config", f"listeners=PLAINTEXT://127.0.0.1:{plain}")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: not accepts(extra), 30, "broker 2 to close EXTRA")
    wait_for(lambda: brokers_seen(other).get(2) == ("127.0.0.1", plain), 30, "broker 2's original endpoint back")

    # refused as Kafka refuses it: per-broker listener configs at the cluster default
    r = configs("--bootstrap-server", other, "--entity-type", "brokers", "--entity-default", "--alter",
                "--add-config", f"advertised.listeners=PLAINTEXT://localhost:{plain}")
    assert r.returncode != 0 and "broker id must be specified" in r.stderr
