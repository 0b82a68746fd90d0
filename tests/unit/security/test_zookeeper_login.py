"""The broker's ZooKeeper login comes from the JAAS Client section of the file KAFKA_OPTS names;
zookeeper.set.acl=true without one is a one-line configuration error; Kafka's secure ACLs keep the
sensitive roots creator-only."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.broker.server import zookeeper_credentials
from kafkalite.config import ConfigError
from kafkalite.coordination.client import secure_acls
from kafkalite.security import jaas

JAAS = """KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a";
};
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka" password="zk-secret";
};
"""


def test_client_section_of_the_file_kafka_opts_names(tmp_path: Path) -> None:
    f = tmp_path / "jaas.conf"
    f.write_text(JAAS)
    assert jaas.zookeeper_login(f"-Xmx1G -Djava.security.auth.login.config={f} -Dother=1") == ("kafka", "zk-secret")
    assert jaas.zookeeper_login("-Xmx1G") is None
    assert jaas.zookeeper_login(None) is None
    no_client = tmp_path / "server-only.conf"
    no_client.write_text(JAAS.split("Client")[0])
    assert jaas.zookeeper_login(f"-Djava.security.auth.login.config={no_client}") is None
    with pytest.raises(jaas.JaasError, match="cannot read"):
        jaas.zookeeper_login(f"-Djava.security.auth.login.config={tmp_path / 'missing'}")


def test_set_acl_without_a_login_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    assert zookeeper_credentials(False) is None
    with pytest.raises(ConfigError, match="zookeeper.set.acl=true needs a ZooKeeper login"):
        zookeeper_credentials(True)


def test_secure_acls_keep_sensitive_roots_creator_only() -> None:
    assert {a.id.scheme for a in secure_acls("/brokers/ids/1")} == {"auth", "world"}
    for path in ("/config/users/alice", "/config/brokers/<default>", "/config/users"):
        assert {a.id.scheme for a in secure_acls(path)} == {"auth"}
    assert {a.id.scheme for a in secure_acls("/config/usersx")} == {"auth", "world"}
