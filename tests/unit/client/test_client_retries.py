"""KafkaClient's retry rule (note_retriable / _with_retries) without a broker.

A failure that says the cluster is changing (a broker unreachable, a leader moved) is retried
against fresh metadata until the deadline, however many attempts that takes; other retriable
errors stop after ``retries``, and so does a partition that fresh metadata does not name; a dead
cluster still ends in one clear error.
"""
from __future__ import annotations

import time

import pytest

from kafkalite.client.core import KafkaClient
from kafkalite.client.errors import ClientError, ConnectionFailed, UnknownPartition
from kafkalite.errors import ErrorCode


def _client(retries: int = 2) -> KafkaClient:
    """A client with its retry settings only (the constructor would bootstrap from a broker)."""
    client = object.__new__(KafkaClient)
    client.request_timeout, client.retry_backoff, client.retries = 30.0, 0.001, retries
    client._stale = False
    return client


def test_connection_failures_do_not_use_up_retries_and_mark_metadata_stale() -> None:
    client = _client(retries=2)
    failures = [ConnectionFailed("cannot connect to broker 127.0.0.1:1: Connection refused")] * 6 + [
        ClientError.from_code(ErrorCode.NOT_LEADER_OR_FOLLOWER, "Fetch t-0")] * 4
    seen_stale: list[bool] = []

    def attempt() -> str:
        seen_stale.append(client._stale)
        if failures:
            raise failures.pop(0)
        return "fetched"

    assert client._with_retries(attempt, "Fetch") == "fetched"
    assert len(seen_stale) == 11 and all(seen_stale[1:])      # every retry routes by fresh metadata


def test_other_retriable_errors_stop_after_retries() -> None:
    client = _client(retries=2)
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ClientError.from_code(ErrorCode.NOT_ENOUGH_REPLICAS, "Produce t-0")

    with pytest.raises(ClientError, match="gave up after 3 attempts") as info:
        client._with_retries(attempt, "Produce")
    assert info.value.code == ErrorCode.NOT_ENOUGH_REPLICAS and len(calls) == 3 and not client._stale


def test_a_partition_fresh_metadata_does_not_name_stops_after_retries() -> None:
    """Partition 7 of a 2-partition topic: reported after ``retries`` back-offs (it waited for the
    30 s deadline while UNKNOWN_TOPIC_OR_PARTITION counted as the cluster changing), each attempt
    on fresh metadata, since a topic being created or widened appears within a few refreshes."""
    client = _client(retries=2)
    seen_stale: list[bool] = []

    def attempt() -> None:
        seen_stale.append(client._stale)
        raise UnknownPartition("t-7 does not exist")

    started = time.monotonic()
    with pytest.raises(ClientError, match=r"^Fetch: t-7 does not exist \(gave up after 3 attempts\)$") as info:
        client._with_retries(attempt, "Fetch")
    assert time.monotonic() - started < 5
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and seen_stale == [False, True, True]
    # the same code from a broker (a replica it no longer hosts, after a reassignment) is the
    # cluster changing: retried until the deadline
    assert client.note_retriable(ClientError.from_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Fetch t-0"))


def test_a_dead_cluster_ends_in_a_clear_error_at_the_deadline() -> None:
    client = _client(retries=0)

    def attempt() -> None:
        raise ConnectionFailed("cannot connect to broker 127.0.0.1:1: Connection refused")

    with pytest.raises(ClientError, match=r"^Fetch: cannot connect .*Connection refused \(gave up after \d+ attempts\)$") as info:
        client._with_retries(attempt, "Fetch", deadline=time.monotonic() + 0.2)
    assert info.value.retriable and info.value.code == ErrorCode.NETWORK_EXCEPTION


def test_non_retriable_errors_raise_at_once() -> None:
    client = _client()
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise ClientError.from_code(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Fetch t-0")

    with pytest.raises(ClientError, match="TOPIC_AUTHORIZATION_FAILED"):
        client._with_retries(attempt, "Fetch")
    assert calls == [1]
