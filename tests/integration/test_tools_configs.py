"""kafkalite-configs and the AlterConfigs / IncrementalAlterConfigs handlers on a 3-broker
cluster: changes land in ZooKeeper with a /config/changes notification, every broker reports
them, bad input is one line, and retention.ms takes effect on a running broker."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from kafkalite.client import Admin, ClientError, NewTopic, Producer, TopicPartition
from kafkalite.client.admin import APPEND, BROKER, DELETE, SET, SUBTRACT, TOPIC
from kafkalite.errors import ErrorCode
from tests.support.waiting import wait_for


def tool(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.configs", *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster3(zookeeper, tmp_path_factory):
    from tests.support.brokers import Cluster
    c = Cluster(zookeeper, tmp_path_factory.mktemp("cfg"), 3,
                {"log.retention.check.interval.ms": "300"}).start()
    yield c
    c.stop()


def test_alter_add_and_delete_config_through_the_tool(cluster3):
    topic = f"cfg-{uuid.uuid4().hex[:6]}"
    bs = cluster3.bootstrap
    with Admin(bs) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 3)]) == {topic: None}
    r = tool("--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
             "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"Completed updating config for topic {topic}."
    raw = json.loads(cluster3.zk_get(f"/config/topics/{topic}"))
    assert raw["config"] == {"retention.ms": "86400000", "cleanup.policy": "compact,delete"}
    changes = cluster3.zk.get_children(cluster3.chroot + "/config/changes")
    notes = [json.loads(cluster3.zk.get(f"{cluster3.chroot}/config/changes/{c}")[0]) for c in changes]
    assert {"version": 2, "entity_path": f"topics/{topic}"} in notes
    # every broker serves the new value (each watches the config znode)
    for b in cluster3.brokers:
        with Admin(b.bootstrap) as admin:
            wait_for(lambda: admin.describe_configs(TOPIC, topic)["retention.ms"].value == "86400000",
                     what=f"broker {b.broker_id} sees the change")
    r = tool("--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", topic, "--describe")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000, " \
           "DEFAULT_CONFIG:log.retention.hours=168}" in lines or any(
               l.startswith("  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000")
               for l in lines)
    r = tool("--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
             "--delete-config", "cleanup.policy")
    assert r.returncode == 0, r.stderr
    assert json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"] == {"retention.ms": "86400000"}


def test_incremental_operations_and_validation(cluster3):
    topic = f"inc-{uuid.uuid4().hex[:6]}"
    with Admin(cluster3.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, configs={"cleanup.policy": "delete"})])
        admin.incremental_alter_configs(TOPIC, topic, [("cleanup.policy", APPEND, "compact"),
                                                       ("segment.ms", SET, "600000")])
        assert json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"] == {
            "cleanup.policy": "delete,compact", "segment.ms": "600000"}
        admin.incremental_alter_configs(TOPIC, topic, [("cleanup.policy", SUBTRACT, "delete"),
                                                       ("segment.ms", DELETE, None)])
        assert json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"] == {"cleanup.policy": "compact"}
        for ops, code in [([("retention.ms", SET, "soon")], ErrorCode.INVALID_CONFIG),
                          ([("no.such.key", SET, "1")], ErrorCode.INVALID_CONFIG),
                          ([("retention.ms", APPEND, "1")], ErrorCode.INVALID_REQUEST)]:
            with pytest.raises(ClientError) as info:
                admin.incremental_alter_configs(TOPIC, topic, ops)
            assert info.value.code == code
        admin.incremental_alter_configs(TOPIC, topic, [("retention.ms", SET, "5")], validate_only=True)
        assert "retention.ms" not in json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"]
        # legacy AlterConfigs replaces the whole set
        admin.alter_configs(TOPIC, topic, {"retention.ms": "7000"})
        assert json.loads(cluster3.zk_get(f"/config/topics/{topic}"))["config"] == {"retention.ms": "7000"}
        with pytest.raises(ClientError) as info:
            admin.incremental_alter_configs(TOPIC, "missing-topic-x", [("retention.ms", SET, "1")])
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(ClientError) as info:
            admin.incremental_alter_configs(BROKER, "1", [("log.dirs", SET, "/elsewhere")])   # not dynamic
        assert info.value.code == ErrorCode.INVALID_REQUEST


def test_retention_ms_applies_live(cluster3):
    """Old segments exist; lowering retention.ms through the tool deletes them on the running
    brokers (log start offset moves) without a restart."""
    topic = f"ret-{uuid.uuid4().hex[:6]}"
    bs = cluster3.bootstrap
    with Admin(bs) as admin:
        admin.create_topics([NewTopic(topic, 1, 3, configs={"segment.bytes": "1024", "retention.ms": "-1"})])
    old = 1_600_000_000_000            # far in the past: only retention.ms=-1 keeps them
    with Producer(bs, acks="all", batch_size=400) as p:
        futs = [p.send(topic, b"x" * 100, partition=0, timestamp_ms=old + i) for i in range(60)]
    assert [f.result(30).offset for f in futs] == list(range(60))
    tp = TopicPartition(topic, 0)
    with Admin(bs) as admin:
        wait_for(lambda: admin.client.list_offsets({tp: -1})[tp][0] == 60, what="all records replicated")
        assert admin.client.list_offsets({tp: -2})[tp][0] == 0
    r = tool("--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
             "--add-config", "retention.ms=1000")
    assert r.returncode == 0, r.stderr
    with Admin(bs) as admin:
        wait_for(lambda: admin.client.list_offsets({tp: -2})[tp][0] == 60, timeout=30,
                 what="every old segment deleted on the leader")
        assert admin.client.list_offsets({tp: -1})[tp][0] == 60
    # followers apply the new retention too: no broker keeps the first segment
    for b in cluster3.brokers:
        seg = b.dir / "data" / f"{topic}-0" / "00000000000000000000.log"
        wait_for(lambda: not seg.exists(), timeout=30, what=f"broker {b.broker_id} deletes old segments")


@pytest.mark.parametrize("args,needle", [
    (["--entity-type", "topics", "--entity-name", "nope-x", "--describe"], "does not exist"),
    (["--entity-type", "topics", "--entity-name", "T", "--alter", "--add-config", "retention.ms"], "key=val"),
    (["--entity-type", "brokers", "--entity-name", "abc", "--describe"], "valid integer broker id"),
    (["--entity-type", "widgets", "--describe"], "invalid choice"),
])
def test_bad_input_is_one_line(cluster3, args, needle):
    r = tool("--bootstrap-server", cluster3.bootstrap, *args)
    assert r.returncode != 0
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
