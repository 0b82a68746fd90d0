"""zookeeper.set.acl=true: the broker logs in to ZooKeeper with the JAAS Client section named in
KAFKA_OPTS (as a Kafka broker does) and creates every znode with Kafka's secure ACLs. Then an
unauthenticated ZooKeeper client can read the cluster's znodes but cannot change or delete them,
while one logged in as the broker can; the cluster works as usual."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

JAAS = """Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="zk-secret";
};
"""


def zk_client(cluster: Any, auth: bool) -> KazooClient:
    zk = KazooClient(hosts=f"127.0.0.1:{cluster.zookeeper.port}{cluster.chroot}",
                     auth_data=[("digest", "kafka:zk-secret")] if auth else None)
    zk.start(timeout=15)
    return zk


def test_secure_znodes_refuse_unauthenticated_writes(cluster_factory: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(JAAS)
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    cluster = cluster_factory(1, {"zookeeper.set.acl": "true"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("acl-t", 1, 1)], operation_timeout=30)["acl-t"].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    p.produce("acl-t", b"still works", partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "acl-g", "enable.auto.commit": False})
    c.assign([TopicPartition("acl-t", 0, 0)])
    got = [m.value() for m in c.consume(1, 20) if m.error() is None]
    c.close()
    assert got == [b"still works"]

    broker = f"/brokers/ids/{cluster.brokers[0].broker_id}"
    anonymous = zk_client(cluster, auth=False)
    try:
        assert anonymous.get(broker)[0]                       # world-readable
        assert anonymous.get("/brokers/topics/acl-t")[0]
        acls, _ = anonymous.get_acls("/brokers/topics/acl-t")
        assert {(a.id.scheme, a.perms) for a in acls} == {("digest", Permissions.ALL), ("world", Permissions.READ)}
        for attempt in (lambda: anonymous.set(broker, b"{}"),
                        lambda: anonymous.delete("/brokers/topics/acl-t", recursive=True),
                        lambda: anonymous.create("/brokers/topics/acl-t/partitions/9", b""),
                        lambda: anonymous.set("/controller", b"{}")):
            with pytest.raises(NoAuthError):
                attempt()
        assert anonymous.exists("/brokers/topics/acl-t") is not None
    finally:
        anonymous.stop()
        anonymous.close()
    as_broker = zk_client(cluster, auth=True)
    try:
        as_broker.create("/config/changes/kafkalite-test-probe", b"")   # the broker's identity may write
        as_broker.delete("/config/changes/kafkalite-test-probe")
    finally:
        as_broker.stop()
        as_broker.close()
