"""Forced ZooKeeper session expiry of a running broker (SIGSTOP longer than its 6 s session
timeout, local-infrastructure.md §2.4): ZooKeeper drops its registration; on SIGCONT the broker
must see LOST, open a new session, re-register, take the controller role back and keep serving."""
from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.protocol.api_keys import ApiKey
from tests.support.topics import create_topic, wait_controller
from tests.support.wire import metadata_body, request
from tests.support.waiting import wait_for


def owner(cluster: Any, path: str) -> int | None:
    stat = cluster.zk.exists(cluster.chroot + path)
    return None if stat is None else stat.ephemeralOwner


def controller_id(b: Any) -> int:
    return request(b.bootstrap, ApiKey.METADATA, 8, metadata_body([]))["controller_id"]


def consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "session-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    got.append(m.value())
    finally:
        c.close()
    return got


def test_session_expiry_by_sigstop_reregisters_and_keeps_serving(cluster_factory) -> None:
    """SIGSTOP the broker: within the session timeout (+ tick buckets) ZooKeeper deletes its
    /brokers/ids/1 and /controller ephemerals. After SIGCONT the broker re-registers under a NEW
    session (different ephemeralOwner, registration with the same port), wins /controller again,
    and serves: a producer created before the pause delivers new records, CreateTopics works
    (controller duties), and a fresh consumer reads the old and new records in order. The broker
    log shows the session-lost transition and no traceback."""
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    wait_controller(b)
    topic = f"session-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic)
    producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for i in range(100):
        producer.produce(topic, b"before-%d" % i)
    assert producer.flush(30) == 0

    reg_path = f"/brokers/ids/{b.broker_id}"
    old_owner = owner(cluster, reg_path)
    assert old_owner is not None and owner(cluster, "/controller") == old_owner
    old_port = b.port

    os.kill(b.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        wait_for(lambda: owner(cluster, reg_path) is None, 30, "the paused broker's registration to expire")
        expired_s = time.monotonic() - t0
        assert owner(cluster, "/controller") != old_owner   # the controller znode went with the session
    finally:
        os.kill(b.pid, signal.SIGCONT)
    t1 = time.monotonic()
    new_owner = wait_for(lambda: owner(cluster, reg_path), 30, "re-registration after resume")
    reregistered_s = time.monotonic() - t1
    assert new_owner != old_owner, "re-registered under the expired session id?"
    import json
    assert json.loads(cluster.zk_get(reg_path))["port"] == old_port
    wait_for(lambda: controller_id(b) == b.broker_id and owner(cluster, "/controller") == new_owner, 30,
             "controller re-elected under the new session")
    print(f"\nregistration gone {expired_s:.2f} s after SIGSTOP; re-registered {reregistered_s:.2f} s after SIGCONT")

    for i in range(100):
        producer.produce(topic, b"after-%d" % i)
    assert producer.flush(30) == 0, "the pre-pause producer could not deliver after the resume"
    del producer
    other = f"session-new-{uuid.uuid4().hex[:6]}"
    create_topic(b, other, 2)
    assert consume(b.bootstrap, topic, 200) == [b"before-%d" % i for i in range(100)] + [b"after-%d" % i for i in range(100)]
    assert b.alive
    log = b.log_path.read_text(errors="replace")
    assert "session lost" in log.lower()
    assert "Traceback" not in log
