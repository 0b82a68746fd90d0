"""Pure parts of the client: bootstrap parsing and error classification."""
from __future__ import annotations

import pytest

from kafkalite.client import Admin, ClientError, Consumer, Producer
from kafkalite.client.connection import parse_bootstrap
from kafkalite.errors import ErrorCode


def test_parse_bootstrap_forms():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["PLAINTEXT://h:9092"]) == [("h", 9092)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]


@pytest.mark.parametrize("bad", ["", "host", "host:abc", ":9092", None, []])
def test_parse_bootstrap_rejects(bad):
    with pytest.raises(ClientError):
        parse_bootstrap(bad)


@pytest.mark.parametrize("cls", [Producer, Consumer, Admin])
def test_no_bootstrap_servers_nor_client_is_a_client_error(cls):
    """A Producer/Consumer/Admin given neither servers nor a client says so (it was a TypeError)."""
    with pytest.raises(ClientError, match="no bootstrap servers"):
        cls()


def test_client_error_retriable_follows_kafka():
    assert ClientError.from_code(6, "x").retriable
    assert ClientError.from_code(16, "x").retriable
    assert not ClientError.from_code(36, "x").retriable
    e = ClientError.from_code(3, "Fetch t-0", "detail")
    assert e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert str(e) == "Fetch t-0: UNKNOWN_TOPIC_OR_PARTITION (detail)"
