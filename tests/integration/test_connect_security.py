"""A distributed Connect worker on a SASL_SSL-only path to the brokers (SCRAM-SHA-512, a test
CA), configured as Kafka's documentation says: the worker's own security settings, repeated under
``producer.`` and ``consumer.`` for the tasks' clients. Its topics, group and tasks all work."""
from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import configs as configs_tool
from tests.support.security import listener_port, make_pki, secure_overrides
from tests.support.waiting import wait_for

USER, PASSWORD = "connectuser", "connect-secret"


@pytest.fixture
def secure(zookeeper: Any, tmp_path: Path) -> Any:
    from tests.support.brokers import Cluster

    pki = make_pki(tmp_path / "pki")
    cluster = Cluster(zookeeper, tmp_path / "cluster", 1, secure_overrides(pki)).start()
    try:
        assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                                  "--entity-name", USER, "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"]) == 0
        yield cluster.brokers[0], pki
    finally:
        cluster.stop()


def test_worker_over_sasl_ssl(secure: Any, connect_factory: Any, tmp_path: Path) -> None:
    broker, pki = secure
    security = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    f'username="{USER}" password="{PASSWORD}";',
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    props = {**security, **{f"producer.{k}": v for k, v in security.items()},
             **{f"consumer.{k}": v for k, v in security.items()}}
    worker = connect_factory(f"127.0.0.1:{listener_port(broker, 'SASL_SSL')}", **props)
    (tmp_path / "in.txt").write_text("secret-1\nsecret-2\n")
    for name, config in (("src", {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"),
                                  "topic": "secure-lines"}),
                         ("sink", {"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"),
                                   "topics": "secure-lines"})):
        req = urllib.request.Request(f"{worker.url}/connectors", method="POST",
                                     data=json.dumps({"name": name, "config": config}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 201
    out = tmp_path / "out.txt"
    wait_for(lambda: out.exists() and out.read_text() == "secret-1\nsecret-2\n", timeout=60,
             what="lines through the SASL_SSL listener")
