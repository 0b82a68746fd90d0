"""kafkalite-configs --entity-type brokers on real broker processes (dynamic broker configs,
KIP-226): ``--entity-default`` and ``--entity-name <id>`` write ``/config/brokers/<default>`` and
``/config/brokers/<id>``, every named broker reports the value with its source, a key Kafka does
not allow to change and a value a reconfigurable refuses (the cleaner threads' step) are refused
in one line before anything is written, and ``--delete-config`` removes it again."""
from __future__ import annotations

import json
import subprocess
import sys

from kafkalite.client import Admin
from kafkalite.client.admin import BROKER
from tests.support.waiting import wait_for


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.configs", *args], text=True,
                          capture_output=True, timeout=60)


def test_broker_configs_through_the_tool(cluster_factory) -> None:
    cluster = cluster_factory(2)
    bs = cluster.bootstrap
    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-default", "--alter",
             "--add-config", "follower.replication.throttled.rate=1000,log.retention.ms=3600000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating default config for brokers in the cluster."
    assert json.loads(cluster.zk_get("/config/brokers/<default>"))["config"] == {
        "follower.replication.throttled.rate": "1000", "log.retention.ms": "3600000"}
    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "1", "--alter",
             "--add-config", "log.cleaner.threads=2,follower.replication.throttled.rate=5000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for broker 1."

    with Admin(bs) as admin:
        def applied() -> bool:
            one, two = admin.describe_configs(BROKER, "1"), admin.describe_configs(BROKER, "2")
            return (one["follower.replication.throttled.rate"].value == "5000"
                    and two["follower.replication.throttled.rate"].value == "1000"
                    and two["follower.replication.throttled.rate"].source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
                    and one["log.cleaner.threads"].value == "2" and two["log.cleaner.threads"].value == "1")
        wait_for(applied, 30, "every broker to apply its dynamic configs")

    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker 1 are:"
    assert "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2, " \
           "DEFAULT_CONFIG:log.cleaner.threads=1}" in lines
    assert any(line.startswith("  follower.replication.throttled.rate=5000 sensitive=false "
                               "synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=5000, "
                               "DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=1000")
               for line in lines)
    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-default", "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert sorted(line.split("=")[0].strip() for line in r.stdout.splitlines()[1:]) == [
        "follower.replication.throttled.rate", "log.retention.ms"]

    # Kafka's LogCleaner.validateReconfiguration, asked before the write: at most double per change
    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "1", "--alter",
             "--add-config", "log.cleaner.threads=5")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert ("Invalid config value for resource ConfigResource(type=BROKER, name='1'): Invalid dynamic configuration: "
            "Log cleaner threads cannot be increased to more than double the current value 2") in r.stderr
    assert json.loads(cluster.zk_get("/config/brokers/1"))["config"]["log.cleaner.threads"] == "2"

    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-name", "2", "--alter",
             "--add-config", "broker.id=7")
    assert r.returncode != 0
    assert "Cannot update these configs dynamically: broker.id" in r.stderr and len(r.stderr.strip().splitlines()) == 1

    r = tool("--bootstrap-server", bs, "--entity-type", "brokers", "--entity-default", "--alter",
             "--delete-config", "follower.replication.throttled.rate,log.retention.ms")
    assert r.returncode == 0, r.stderr
    with Admin(bs) as admin:
        wait_for(lambda: admin.describe_configs(BROKER, "2")["follower.replication.throttled.rate"].source
                 == "DEFAULT_CONFIG", 30, "the default removed")
