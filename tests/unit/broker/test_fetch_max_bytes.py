"""fetch.max.bytes: the broker caps a Fetch response's total bytes, whatever max_bytes the request
asks for (Kafka's KafkaApis: min(request max_bytes, fetch.max.bytes)); the first non-empty
partition still returns its first batch whole when that alone is larger (KIP-74)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import task

from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock

#: what a handler's context needs for client quotas: none are configured, so none apply
NO_QUOTAS = dict(fetch_sessions=None, quotas=BrokerQuotas(), quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                 authorize=lambda *action: True)  # no authorizer: everything allowed


class Part:
    log_start_offset = 0

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.high_watermark = len(data)
        self.last_stable_offset = len(data)


class Broker:
    """Partitions as byte logs (one offset per byte); a 'batch' is 100 bytes, never split."""

    BATCH = 100
    fetch_messages = ReplicaManager.fetch_messages       # the real read-and-wait over this fake's parts

    def __init__(self, fetch_max_bytes: int, sizes: list[int]) -> None:
        self.config = {"fetch.max.bytes": fetch_max_bytes}
        self.clock = Clock(task.Clock())
        self.purgatory = Purgatory(self.clock.reactor)
        self.parts = [Part(b"x" * n) for n in sizes]

    def leader(self, topic: str, index: int, epoch: int = -1) -> Part:
        return self.parts[index]

    def read_from(self, part: Part, fetch_offset: int, max_bytes: int, replica_id: int, isolation: int,
                  min_one_batch: bool) -> Any:
        whole = max_bytes // self.BATCH * self.BATCH
        if whole == 0 and min_one_batch:
            whole = self.BATCH
        return SimpleNamespace(records=part.data[fetch_offset:fetch_offset + whole], old_formats=False)


def fetch(broker: Broker, max_bytes: int) -> list[int]:
    req = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
           "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
           "topics": [{"topic": "t", "partitions": [
               {"partition": i, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": 0,
                "partition_max_bytes": 1000} for i in range(len(broker.parts))]}]}
    body = handle_fetch(SimpleNamespace(replicas=broker, config=broker.config, now_ms=0, metrics=BrokerMetrics(), api_version=11, **NO_QUOTAS), req)
    return [len(p["records"]) for p in body["responses"][0]["partitions"]]


def test_broker_caps_the_response_below_the_requests_max_bytes() -> None:
    assert fetch(Broker(57671680, [500, 500, 500]), 1 << 20) == [500, 500, 500]
    assert fetch(Broker(1024, [500, 500, 500]), 1 << 20) == [500, 500, 0]      # 1000 of a 1024 budget
    assert fetch(Broker(1024, [500, 500, 500]), 600) == [500, 100, 0]          # the request's is smaller


def test_first_batch_still_goes_out_whole() -> None:
    """KIP-74: a first batch above the cap is returned, so a consumer never stalls on it."""
    broker = Broker(1024, [500])
    broker.BATCH = 2000
    broker.parts[0] = Part(b"x" * 2000)
    assert fetch(broker, 1 << 20) == [2000]
