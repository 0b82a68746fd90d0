"""Produce with transactional batches (Kafka 2.8's KafkaApis rule): without a transactional id
the whole request answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is appended; with
one, or for a CRC-bad batch that only looks transactional, the batches go to the log path."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.handlers.produce import handle_produce
from kafkalite.errors import ErrorCode
from kafkalite.records.batch import validate_batches
from kafkalite.records.builder import build_batch

NO_QUOTAS = dict(quotas=BrokerQuotas(), quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                 authorize=lambda *action: True)  # no authorizer: everything allowed

pytestmark = pytest.mark.unit


class Replicas:
    def __init__(self) -> None:
        self.appended: list[tuple[str, int]] = []

    def batched_wakeups(self) -> Any:
        return contextlib.nullcontext()          # no purgatory here: nothing waits

    def append(self, topic: str, index: int, records: Any, acks: int, version: int) -> Any:
        validate_batches(records, max_batch_bytes=1 << 20)      # the replica manager's first step
        self.appended.append((topic, index))
        return SimpleNamespace(log_start_offset=0), SimpleNamespace(
            first_offset=0, log_append_time=-1, duplicate=False, last_offset=0, bytes=len(records))


def produce(txn_id: str | None, *records: Any) -> tuple[list[int], Replicas]:
    replicas = Replicas()
    req = {"transactional_id": txn_id, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": r} for i, r in enumerate(records)]}]}
    body = handle_produce(SimpleNamespace(replicas=replicas, api_version=8, metrics=BrokerMetrics(), request_size=0,
                                          now_ms=0, **NO_QUOTAS), req)
    return [p["error_code"] for p in body["responses"][0]["partition_responses"]], replicas


def test_transactional_batches_need_a_transactional_id():
    txn = build_batch([(1, None, b"x", ())], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    plain = build_batch([(1, None, b"y", ())])
    codes, replicas = produce(None, plain, txn)
    assert codes == [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2 and replicas.appended == []
    codes, replicas = produce("tx", plain, txn)
    assert codes == [0, 0] and replicas.appended == [("t", 0), ("t", 1)]
    bad = bytearray(txn)
    bad[-1] ^= 0xFF                                # CRC no longer matches: corrupt, not "transactional"
    codes, _ = produce(None, plain, bad)
    assert codes == [0, ErrorCode.CORRUPT_MESSAGE]
