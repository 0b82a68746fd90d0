"""The console tools as subprocesses (``python -m kafkalite.cli.<tool>``) against a real 3-broker
cluster: kafkalite-topics (bootstrap and --zookeeper), console producer -> console consumer with
keys, consumer-groups lag and --reset-offsets, the perf tools' output lines, and bad input."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import pytest

from kafkalite.client import Admin, Consumer, Producer, TopicPartition
from tests.support.waiting import wait_for


def cli(tool: str, *args: str, stdin: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"kafkalite.cli.{tool}", *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def cluster3(zookeeper, tmp_path_factory):
    from tests.support.brokers import Cluster
    c = Cluster(zookeeper, tmp_path_factory.mktemp("tools"), 3).start()
    yield c
    c.stop()


def test_topics_create_describe_alter_delete(cluster3):
    bs, topic = cluster3.bootstrap, unique("t")
    r = cli("topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "3",
            "--replication-factor", "3", "--config", "retention.ms=3600000")
    assert r.returncode == 0 and r.stdout == f"Created topic {topic}.\n", r.stderr
    node = json.loads(cluster3.zk_get(f"/brokers/topics/{topic}"))
    assert sorted(node["partitions"]) == ["0", "1", "2"] and all(len(v) == 3 for v in node["partitions"].values())
    assert json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"] == {"retention.ms": "3600000"}
    with Admin(bs) as admin:
        wait_for(lambda: all(len(p.isr) == 3 for p in admin.client.metadata([topic]).topics[topic].partitions.values()),
                 what="full ISR")
    r = cli("topics", "--bootstrap-server", bs, "--describe", "--topic", topic)
    lines = r.stdout.splitlines()
    assert lines[0] == f"Topic: {topic}\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: retention.ms=3600000"
    for p, line in enumerate(lines[1:]):
        replicas = ",".join(map(str, node["partitions"][str(p)]))
        m = re.fullmatch(rf"\tTopic: {topic}\tPartition: {p}\tLeader: (\d)\tReplicas: {replicas}\tIsr: ([\d,]+)", line)
        assert m and sorted(m.group(2).split(",")) == ["1", "2", "3"], line
    assert len(lines) == 4
    r = cli("topics", "--bootstrap-server", bs, "--describe", "--topic", topic, "--under-replicated-partitions")
    assert r.returncode == 0 and r.stdout == ""
    r = cli("topics", "--bootstrap-server", bs, "--alter", "--topic", topic, "--partitions", "5")
    assert r.returncode == 0, r.stderr
    assert len(json.loads(cluster3.zk_get(f"/brokers/topics/{topic}"))["partitions"]) == 5
    assert topic in cli("topics", "--bootstrap-server", bs, "--list").stdout.split()
    r = cli("topics", "--bootstrap-server", bs, "--delete", "--topic", topic)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: cluster3.zk_get(f"/brokers/topics/{topic}") is None, what="topic deleted in ZooKeeper")


def test_topics_zookeeper_mode(cluster3):
    zk, topic = cluster3.zk_connect, unique("zk")
    r = cli("topics", "--zookeeper", zk, "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "2")
    assert r.returncode == 0 and r.stdout == f"Created topic {topic}.\n", r.stderr
    with Admin(cluster3.bootstrap) as admin:
        wait_for(lambda: len(admin.client.metadata([topic]).topics.get(topic).partitions or {}) == 2
                 if admin.client.metadata([topic]).topics.get(topic) else False, what="topic served")
        wait_for(lambda: cluster3.zk_get(f"/brokers/topics/{topic}/partitions/1/state"), what="states")
    r = cli("topics", "--zookeeper", zk, "--describe", "--topic", topic)
    lines = r.stdout.splitlines()
    assert re.fullmatch(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ", lines[0])
    assert len(lines) == 3 and lines[1].startswith(f"\tTopic: {topic}\tPartition: 0\tLeader: ")
    assert topic in cli("topics", "--zookeeper", zk, "--list").stdout.split()
    r = cli("topics", "--zookeeper", zk, "--delete", "--topic", topic)
    assert f"Topic {topic} is marked for deletion." in r.stdout
    wait_for(lambda: cluster3.zk_get(f"/brokers/topics/{topic}") is None, what="deleted")


def test_console_producer_to_console_consumer_with_keys(cluster3):
    bs, topic = cluster3.bootstrap, unique("console")
    cli("topics", "--bootstrap-server", bs, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "2")
    lines = [f"key{i}:value {i}" for i in range(30)]
    r = cli("console_producer", "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=true",
            "--property", "key.separator=:", "--producer-property", "acks=all", "--compression-codec", "gzip",
            stdin="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    r = cli("console_consumer", "--bootstrap-server", bs, "--topic", topic, "--from-beginning", "--max-messages",
            "30", "--property", "print.key=true", "--property", "key.separator=:", "--timeout-ms", "20000")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(lines)
    assert "Processed a total of 30 messages" in r.stderr
    # partition/offset mode with print.partition/print.offset
    r = cli("console_consumer", "--bootstrap-server", bs, "--topic", topic, "--partition", "0", "--offset", "0",
            "--timeout-ms", "2000", "--property", "print.partition=true", "--property", "print.offset=true")
    out = r.stdout.splitlines()
    assert out and all(re.fullmatch(r"Partition:0\tOffset:\d+\tvalue \d+", l) for l in out)
    assert [int(l.split("\t")[1][7:]) for l in out] == list(range(len(out)))
    # print.headers as Kafka's DefaultMessageFormatter: key:value pairs joined by ",", NO_HEADERS if none
    with Producer(bs, acks="all") as p:
        p.send(topic, b"with", partition=1, headers=[("h1", b"a"), ("h2", None)]).result(10)
        p.send(topic, b"without", partition=1).result(10)
    r = cli("console_consumer", "--bootstrap-server", bs, "--topic", topic, "--partition", "1", "--offset", "0",
            "--timeout-ms", "2000", "--property", "print.headers=true", "--property", "null.literal=<none>")
    assert r.stdout.splitlines()[-2:] == ["h1:a,h2:<none>\twith", "NO_HEADERS\twithout"], r.stdout
    r = cli("console_producer", "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=true",
            stdin="no separator here\n")
    assert r.returncode == 1 and "No key separator found on line number 1" in r.stderr


def test_consumer_groups_lag_and_reset(cluster3):
    bs, topic, group = cluster3.bootstrap, unique("lag"), unique("grp")
    with Admin(bs) as admin:
        from kafkalite.client import NewTopic
        admin.create_topics([NewTopic(topic, 2, 3)])
    with Producer(bs, acks="all") as p:
        for i in range(20):
            p.send(topic, b"%d" % i, partition=i % 2)
    with Consumer(bs, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        c.commit({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 7})
    r = cli("consumer_groups", "--bootstrap-server", bs, "--describe", "--group", group)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    assert lines[0] == f"Consumer group '{group}' has no active members."
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [l.split() for l in lines[2:]]
    # lag = produced (10 per partition) minus committed
    assert rows == [[group, topic, "0", "4", "10", "6", "-", "-", "-"], [group, topic, "1", "7", "10", "3", "-", "-", "-"]]
    assert group in cli("consumer_groups", "--bootstrap-server", bs, "--list").stdout.split()
    dry = cli("consumer_groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group, "--topic", topic,
              "--to-earliest")
    assert dry.returncode == 0 and [l.split()[-1] for l in dry.stdout.splitlines()[2:]] == ["0", "0"]
    with Admin(bs) as admin:
        assert admin.list_group_offsets(group)[TopicPartition(topic, 0)] == 4      # dry run changed nothing
    r = cli("consumer_groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
            "--shift-by", "-5", "--execute")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].split() == [group, topic, "1", "2"], r.stdout + r.stderr
    r = cli("consumer_groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group, "--topic", f"{topic}:0",
            "--to-offset", "8", "--execute")
    assert r.returncode == 0
    # a consumer of the group resumes at the new offsets
    with Consumer(bs, group_id=group, auto_offset_reset="earliest") as c:
        c.subscribe([topic])
        got = []
        wait_for(lambda: got.extend(c.poll(200)) or len(got) >= 10, timeout=30, what="resumed records")
        assert sorted((r.partition, r.offset) for r in got) == [(0, 8), (0, 9)] + [(1, o) for o in range(2, 10)]
    r = cli("consumer_groups", "--bootstrap-server", bs, "--delete", "--group", group)
    assert r.returncode == 0 and f"('{group}') was successful" in r.stdout


def test_perf_tools_print_kafka_lines(cluster3):
    bs, topic = cluster3.bootstrap, unique("perf")
    r = cli("producer_perf", "--topic", topic, "--num-records", "3000", "--record-size", "100", "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={bs}", "acks=1")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms "
                        r"max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.", r.stdout.strip())
    r = cli("consumer_perf", "--bootstrap-server", bs, "--topic", topic, "--messages", "3000")
    assert r.returncode == 0, r.stderr
    header, line = r.stdout.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg")
    fields = line.split(", ")
    assert len(fields) == 10 and fields[4] == "3000" and float(fields[2]) == pytest.approx(3000 * 100 / 1048576, 1e-3)


@pytest.mark.parametrize("tool,args,needle", [
    ("topics", ["--describe", "--topic", "missing-topic"], "does not exist"),
    ("topics", ["--create", "--topic", "x", "--partitions", "0", "--replication-factor", "1"], "partitions"),
    ("topics", ["--create", "--topic", "x", "--partitions", "1", "--replication-factor", "4"],
     "INVALID_REPLICATION_FACTOR"),
    ("topics", ["--list", "--no-such-option"], "unrecognized arguments"),
    ("console_consumer", ["--topic", "missing-topic", "--timeout-ms", "500"], "does not exist"),
    ("consumer_groups", ["--describe", "--group", "never-seen-group"], "does not exist"),
])
def test_bad_input_one_line_nonzero(cluster3, tool, args, needle):
    r = cli(tool, "--bootstrap-server", cluster3.bootstrap, *args)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert len([l for l in r.stderr.splitlines() if l.startswith("Error")]) == 1


def test_unreachable_bootstrap_and_verbose(tmp_path):
    """An unreachable cluster is one line (a traceback with --verbose), once the command config's
    request.timeout.ms (30 s by default, as Kafka's AdminClient) has passed."""
    config = tmp_path / "admin.properties"
    config.write_text("request.timeout.ms=1500\nretry.backoff.ms=50\n")
    started = time.monotonic()
    r = cli("topics", "--bootstrap-server", "127.0.0.1:9", "--list", "--command-config", str(config))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no broker reachable" in r.stderr
    assert time.monotonic() - started < 25, "request.timeout.ms of --command-config was not applied"
    r = cli("topics", "--bootstrap-server", "127.0.0.1:9", "--list", "--verbose", "--command-config", str(config))
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_command_config_client_setting_must_be_a_number(tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("request.timeout.ms=soon\n")
    r = cli("topics", "--bootstrap-server", "127.0.0.1:9", "--list", "--command-config", str(config))
    assert r.returncode != 0 and r.stderr.count("\n") == 1
    assert "request.timeout.ms must be a non-negative whole number" in r.stderr
