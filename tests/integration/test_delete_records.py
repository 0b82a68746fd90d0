"""DeleteRecords on a 3-broker cluster: the log start moves on every replica, also after a leader
change and on a replica that was down meanwhile.

Each replica's log start is read from its own broker's /metrics (``kafka_log_log_logstartoffset``),
so every copy is observed, not just the leader's; a consumer from the beginning starts there.
"""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition as CkTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from kafkalite.client import Admin, NewTopic
from tests.fault.cluster_support import full_isr, leaders
from tests.support.waiting import wait_for

TOPIC = "trimmed"


def log_start(broker) -> int | None:
    """This broker's replica of TOPIC-0: its log start offset, None if it has none."""
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "kafka_log_log_logstartoffset" and s.labels == {"topic": TOPIC, "partition": "0"}:
                return int(s.value)
    return None


def produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        p.produce(TOPIC, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0


def delete_tool(tmp_path, bootstrap: str, offset: int) -> subprocess.CompletedProcess:
    spec = tmp_path / f"offsets-{offset}.json"
    spec.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": 0, "offset": offset}], "version": 1}))
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.delete_records", "--bootstrap-server", bootstrap,
                           "--offset-json-file", str(spec)], text=True, capture_output=True, timeout=120)


def first_offset(bootstrap: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "trim-check", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        low, _high = c.get_watermark_offsets(CkTopicPartition(TOPIC, 0), timeout=10)
        return low
    finally:
        c.close()


def test_log_start_moves_on_every_replica_also_after_a_leader_change(cluster_factory, tmp_path) -> None:
    """Delete before 40 of 100: the tool reports low watermark 40 and all three replicas start at
    40 when it answers. The leader stops (controlled shutdown), 50 more records, delete before 120
    through the new leader: both live replicas start at 120; the old leader, restarted, adopts 120
    from its new leader's Fetch answers; the earliest offset clients see is 120."""
    cluster = cluster_factory(3, {"min.insync.replicas": "2"}, metrics=True)
    with Admin(cluster.bootstrap) as admin:
        wait_for(lambda: admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC] is None or TOPIC in admin.list_topics(),
                 30, "topic created with RF 3")
    wait_for(lambda: full_isr(cluster, TOPIC, 3), 30, "full ISR")
    produce(cluster.bootstrap, 100)

    done = delete_tool(tmp_path, cluster.bootstrap, 40)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"partition: {TOPIC}-0\tlow_watermark: 40" in done.stdout
    assert [log_start(b) for b in cluster.brokers] == [40, 40, 40]

    old_leader = leaders(cluster, TOPIC)[0]
    cluster.stop_broker(old_leader)
    wait_for(lambda: leaders(cluster, TOPIC)[0] not in (-1, old_leader), 30, "a new leader")
    produce(cluster.bootstrap, 50)
    done = delete_tool(tmp_path, cluster.bootstrap, 120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"partition: {TOPIC}-0\tlow_watermark: 120" in done.stdout
    live = [b for b in cluster.brokers if b.broker_id != old_leader]
    assert [log_start(b) for b in live] == [120, 120]

    cluster.start_broker(old_leader)
    wait_for(lambda: log_start(cluster.broker(old_leader)) == 120, 60, "the restarted replica adopts 120")
    assert first_offset(cluster.bootstrap) == 120

    beyond = delete_tool(tmp_path, cluster.bootstrap, 10_000)
    assert beyond.returncode == 1 and "OFFSET_OUT_OF_RANGE" in beyond.stdout
