"""kafkalite-configs for users: the SCRAM entry syntax Kafka's ConfigCommand takes, hashed in the
tool, written as Kafka's credential string with a change notification; mistakes are one-line
errors."""
from __future__ import annotations

import json
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from kafkalite.cli.common import ToolError
from kafkalite.cli.configs import alter_user_zookeeper, parse_add_config, parse_scram_config
from kafkalite.security import scram


class FakeZk:
    """The four blocking kazoo calls the tool makes, over a dict."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.seq = 0

    def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], None

    def set(self, path: str, data: bytes) -> None:
        if path not in self.nodes:
            raise NoNodeError(path)
        self.nodes[path] = data

    def create(self, path: str, data: bytes, makepath: bool = False, sequence: bool = False, acl: Any = None) -> str:
        if sequence:
            path = f"{path}{self.seq:010d}"
            self.seq += 1
        self.nodes[path] = data
        return path


def test_add_scram_credentials_as_kafka_stores_them() -> None:
    """Two mechanisms in one --add-config; the znode holds salted credentials that verify the password."""
    zk = FakeZk()
    adds = parse_add_config("SCRAM-SHA-512=[password=s3cr=et],SCRAM-SHA-256=[iterations=8192,password=p]")
    alter_user_zookeeper(zk, "alice", adds, [])
    config = json.loads(zk.nodes["/config/users/alice"])
    assert config["version"] == 1
    cred = scram.ScramCredential.from_config(config["config"]["SCRAM-SHA-512"])
    assert cred == scram.make_credential("SCRAM-SHA-512", "s3cr=et", 4096, cred.salt)
    assert scram.ScramCredential.from_config(config["config"]["SCRAM-SHA-256"]).iterations == 8192
    assert "s3cr" not in zk.nodes["/config/users/alice"].decode()
    assert json.loads(zk.nodes["/config/changes/config_change_0000000000"]) == {"version": 2, "entity_path": "users/alice"}
    alter_user_zookeeper(zk, "alice", {}, ["SCRAM-SHA-256"])
    assert list(json.loads(zk.nodes["/config/users/alice"])["config"]) == ["SCRAM-SHA-512"]


@pytest.mark.parametrize("name,value,message", [
    ("SCRAM-SHA-512", "iterations=100,password=x", "must be between"),
    ("SCRAM-SHA-512", "iterations=99999,password=x", "must be between"),
    ("SCRAM-SHA-512", "iterations=many,password=x", "Invalid iterations"),
    ("SCRAM-SHA-512", "iterations=4096", "password must be specified"),
    ("SCRAM-SHA-512", "pass=x", "Invalid credential property"),
])
def test_bad_scram_entries_are_one_line_errors(name: str, value: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        parse_scram_config(name, value)


def test_unknown_user_config_and_missing_deletion_are_refused() -> None:
    zk = FakeZk()
    with pytest.raises(ToolError, match="Invalid config for users"):
        alter_user_zookeeper(zk, "bob", {"consumer_byte_rate": "1024"}, [])
    with pytest.raises(ToolError, match="does not exist"):
        alter_user_zookeeper(zk, "bob", {}, ["SCRAM-SHA-512"])
    assert zk.nodes == {}


def test_user_names_are_sanitized_in_paths() -> None:
    """Kafka's Sanitizer: a principal name with '/' or '=' or ',' fits in one znode name."""
    zk = FakeZk()
    alter_user_zookeeper(zk, "CN=a,O=b/c", {"SCRAM-SHA-512": "password=x"}, [])
    assert "/config/users/CN%3Da%2CO%3Db%2Fc" in zk.nodes
