"""Brokers among themselves on a SASL_SSL inter-broker listener (SCRAM-SHA-512, user ``admin``).

Shows: followers authenticate to their leaders (TLS + SCRAM with the broker's own JAAS
credentials) and fill every ISR; a kill -9 of a leader fails over with no acknowledged record
lost; controlled shutdown reaches the controller over the same listener; and a broker whose own
inter-broker password is wrong never joins an ISR (so replication really is authenticated)."""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli import configs as configs_tool
from tests.fault.cluster_support import controller_id, full_isr, leaders, zk_states
from tests.support.security import ADMIN_PASSWORD, ADMIN_USER, listener_port, make_pki, secure_overrides
from tests.support.waiting import wait_for

USER, PASSWORD = "app", "app-secret"


def add_user(cluster: Any, user: str, password: str) -> None:
    assert configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                              "--entity-name", user, "--add-config", f"SCRAM-SHA-512=[password={password}]"]) == 0


def client_conf(cluster: Any, pki: Any) -> dict[str, Any]:
    servers = ",".join(f"127.0.0.1:{listener_port(b, 'SASL_SSL')}" for b in cluster.brokers if b.alive)
    return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(pki.ca)}


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(60) == 0


def consume_all(conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_sasl_ssl_inter_broker_replication_failover_and_controlled_shutdown(cluster_factory: Any, tmp_path: Path) -> None:
    """Replication, kill -9 failover and controlled shutdown, all over the SASL_SSL inter-broker listener."""
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(3, {**secure_overrides(pki, inter_broker="SASL_SSL"), "min.insync.replicas": "2",
                                  "zookeeper.session.timeout.ms": "4000", "offsets.topic.replication.factor": "2"})
    add_user(cluster, ADMIN_USER, ADMIN_PASSWORD)
    add_user(cluster, USER, PASSWORD)
    conf = client_conf(cluster, pki)
    topic = f"secured-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=30)[topic].result(30)
    wait_for(lambda: len(zk_states(cluster, topic)) == 3 and full_isr(cluster, topic, 3), 60,
             "every follower in the ISR over SASL_SSL")
    first = [f"a{i}".encode() for i in range(300)]
    produce(conf, topic, first)

    victim = cluster.broker(leaders(cluster, topic)[0])
    victim.kill()                                         # kill -9
    wait_for(lambda: all(l not in (-1, victim.broker_id) for l in leaders(cluster, topic).values()), 30,
             "leaders moved off the killed broker")
    conf = client_conf(cluster, pki)
    second = [f"b{i}".encode() for i in range(300)]
    produce(conf, topic, second)
    assert sorted(consume_all(conf, topic, 600)) == sorted(first + second)

    victim.start()
    wait_for(lambda: full_isr(cluster, topic, 3), 60, "the restarted broker back in every ISR over SASL_SSL")
    controller = controller_id(cluster)
    leaving = next(b for b in cluster.brokers if b.broker_id != controller)
    leaving._signal(signal.SIGTERM)
    assert leaving.wait(60), "the broker did not stop"
    assert "controlled shutdown succeeded" in leaving.log_path.read_text()
    assert all(leaving.broker_id not in s["isr"] for s in zk_states(cluster, topic).values())
    for b in cluster.brokers:
        if b.alive:
            assert "failed authentication" not in b.log_path.read_text(), b.log_path


def test_a_broker_with_a_wrong_inter_broker_password_does_not_replicate(cluster_factory: Any, tmp_path: Path) -> None:
    """The leader refuses a follower authenticating with a wrong password: it never enters the ISR."""
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, {**secure_overrides(pki, inter_broker="SASL_SSL"), "replica.lag.time.max.ms": "1500"})
    add_user(cluster, ADMIN_USER, ADMIN_PASSWORD)
    add_user(cluster, USER, PASSWORD)
    # broker 2 restarts with a wrong password for its own inter-broker identity
    intruder = cluster.brokers[1]
    intruder.stop()
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{ADMIN_USER}" password="not-the-password";')
    intruder.overrides["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = jaas
    intruder.start()
    conf = client_conf(cluster, pki)
    topic = f"guarded-{uuid.uuid4().hex[:6]}"
    honest = cluster.brokers[0]
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[honest.broker_id, intruder.broker_id]])],
                        operation_timeout=30)[topic].result(30)
    wait_for(lambda: leaders(cluster, topic) == {0: honest.broker_id}, 30, "the honest broker leading")
    # the partition starts with both live replicas in its ISR (as in Kafka); a follower that never
    # gets a fetch through is shrunk out after replica.lag.time.max.ms and never comes back
    wait_for(lambda: zk_states(cluster, topic)[0]["isr"] == [honest.broker_id], 30, "the intruder shrunk out")
    refused = honest.log_path.read_text().count("failed authentication")
    assert refused >= 1
    wait_for(lambda: honest.log_path.read_text().count("failed authentication") >= refused + 3, 30,
             "the leader refusing the follower's credentials again and again")
    assert zk_states(cluster, topic)[0]["isr"] == [honest.broker_id]
    produce(conf, topic, [b"x"])      # acks=all with min.insync.replicas=1: the leader alone suffices


def test_ssl_inter_broker_listener_with_required_client_certificates(cluster_factory: Any, tmp_path: Path) -> None:
    """inter.broker.listener.name=SSL with ssl.client.auth=required: followers present the broker
    certificate from their key store, verify the leader's name (127.0.0.1 SAN) and replicate: the
    acks=all produce completes only once the follower in the ISR has fetched the records."""
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, {**secure_overrides(pki, inter_broker="SSL")})
    add_user(cluster, USER, PASSWORD)
    conf = client_conf(cluster, pki)
    topic = f"ssl-ib-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 2)], operation_timeout=30)[topic].result(30)
    wait_for(lambda: len(zk_states(cluster, topic)) == 2 and full_isr(cluster, topic, 2), 60,
             "followers in the ISR over SSL")
    produce(conf, topic, [f"s{i}".encode() for i in range(100)])
    assert sorted(consume_all(conf, topic, 100)) == sorted(f"s{i}".encode() for i in range(100))
