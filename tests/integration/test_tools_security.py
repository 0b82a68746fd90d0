"""The kafkalite tools against a broker's SASL_SSL listener (SCRAM-SHA-512, a test CA), as real
processes with their security properties: ``kafkalite-topics --create``/``--list`` and
``kafkalite-consumer-groups --list`` with ``--command-config`` (JAAS form), the console producer
with ``--producer.config`` and the console consumer with security keys as ``--consumer-property``
items (librdkafka's names) round-trip records through a group, the perf tools run with
``--producer.config``/``--consumer.config``; a wrong password ends a tool with
one ``Error:`` line naming the failed authentication, no traceback and exit code 1."""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkalite.cli import configs as configs_tool
from tests.support.security import Pki, listener_port, make_pki, secure_overrides

USER, PASSWORD = "tooluser", "tool-secret"


@pytest.fixture(scope="module")
def secure(zookeeper: Any, tmp_path_factory: Any) -> Any:
    """One broker with a SASL_SSL listener and the SCRAM user written with kafkalite-configs."""
    from tests.support.brokers import Cluster

    base = tmp_path_factory.mktemp("toolsec")
    pki = make_pki(base / "pki")
    cluster = Cluster(zookeeper, base / "cluster", 1, {**secure_overrides(pki), "num.partitions": "2",
                                                       "offsets.topic.num.partitions": "2"}).start()
    try:
        assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                                  "--entity-name", USER, "--add-config", f"SCRAM-SHA-512=[password={PASSWORD}]"]) == 0
        yield cluster.brokers[0], pki, base
    finally:
        cluster.stop()


def tool(module: str, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"kafkalite.cli.{module}", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def command_config(base: Path, pki: Pki, password: str) -> str:
    path = base / f"admin-{uuid.uuid4().hex[:6]}.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                    f'    username="{USER}" password="{password}";\n')
    return str(path)


def test_tools_over_sasl_ssl_and_a_wrong_password(secure: Any) -> None:
    """Topics, console producer/consumer and consumer groups work over SASL_SSL with the security
    properties; a wrong password is a one-line error with exit code 1."""
    broker, pki, base = secure
    bootstrap = f"127.0.0.1:{listener_port(broker, 'SASL_SSL')}"
    admin_conf = command_config(base, pki, PASSWORD)
    topic, group = f"sec-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"

    r = tool("topics", "--bootstrap-server", bootstrap, "--command-config", admin_conf, "--create",
             "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    assert f"Created topic {topic}." in r.stdout
    r = tool("topics", "--bootstrap-server", bootstrap, "--command-config", admin_conf, "--list")
    assert r.returncode == 0 and topic in r.stdout.split(), r.stderr

    producer_conf = base / "producer.properties"
    producer_conf.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={USER}\n"
                             f"sasl.password={PASSWORD}\nssl.ca.location={pki.ca}\nacks=all\n")
    lines = [f"k{i % 3}\tv{i}" for i in range(50)]
    r = tool("console_producer", "--bootstrap-server", bootstrap, "--topic", topic, "--producer.config",
             str(producer_conf), "--property", "parse.key=true", stdin="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr

    security_items = ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", f"sasl.username={USER}",
                      f"sasl.password={PASSWORD}", f"ssl.ca.location={pki.ca}"]
    r = tool("console_consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
             "--from-beginning", "--max-messages", "50", "--timeout-ms", "20000", "--property", "print.key=true",
             *[a for item in security_items for a in ("--consumer-property", item)])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(lines)

    r = tool("producer_perf", "--topic", topic, "--num-records", "200", "--record-size", "20", "--throughput", "-1",
             "--producer-props", f"bootstrap.servers={bootstrap}", "--producer.config", str(producer_conf))
    assert r.returncode == 0 and "200 records sent" in r.stdout, r.stderr
    consumer_conf = base / "consumer.properties"
    consumer_conf.write_text("\n".join(security_items) + "\n")
    r = tool("consumer_perf", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "250",
             "--consumer.config", str(consumer_conf), "--hide-header")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split(",")[4].strip() == "250", r.stdout       # data.consumed.in.nMsg

    r = tool("consumer_groups", "--bootstrap-server", bootstrap, "--command-config", admin_conf, "--list")
    assert r.returncode == 0 and group in r.stdout.split(), r.stderr

    wrong = command_config(base, pki, "not-the-password")
    r = tool("topics", "--bootstrap-server", bootstrap, "--command-config", wrong, "--list")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"Error: authentication as {USER} to "), r.stderr
    assert topic not in r.stdout
