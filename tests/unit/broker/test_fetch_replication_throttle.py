"""The leader's replication throttle in Fetch: a follower outside the ISR gets no records for a
throttled partition while leader.replication.throttled.rate is exceeded (and its fetch waits
instead of being answered empty at once); bytes sent for throttled partitions are recorded;
replicas in the ISR and consumers are never held back."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer, task

from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock
from tests.support.deferreds import answer

NEW_REPLICA, IN_SYNC = 3, 2


class Part:
    key = ("t", 0)
    index = 0
    log_start_offset = 0
    isr = (1, IN_SYNC)

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.high_watermark = len(data)
        self.last_stable_offset = len(data)

    @property
    def log_end_offset(self) -> int:
        return len(self.data)

    def fetch_upper_bound(self, replica_id: int, isolation_level: int) -> int:
        return self.log_end_offset


class Replicas:
    fetch_messages = ReplicaManager.fetch_messages       # the real read-and-wait over this fake's part

    def __init__(self, part: Part, clock: task.Clock) -> None:
        self.part = part
        self.purgatory = Purgatory(clock)
        self.clock = Clock(clock)

    def leader(self, topic: str, index: int, epoch: int = -1) -> Part:
        return self.part

    def read_from(self, part: Part, offset: int, max_bytes: int, replica_id: int, isolation: int,
                  min_one_batch: bool) -> Any:
        end = offset + max(max_bytes, 1 if min_one_batch else 0)
        return SimpleNamespace(records=part.data[offset:min(end, len(part.data))], old_formats=False)

    def record_follower_fetch(self, *args: Any) -> None:
        pass

    def awaits_first_fetch(self, replica_id: int) -> bool:
        return False


def fetch(replica_id: int, offset: int = 0) -> dict[str, Any]:
    return {"replica_id": replica_id, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 0,
                                                      "fetch_offset": offset, "log_start_offset": 0,
                                                      "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def setup(rate: int) -> tuple[Replicas, BrokerQuotas, Any]:
    replicas = Replicas(Part(b"x" * 5000), task.Clock())
    quotas = BrokerQuotas()
    quotas.replication.leader.update_bound(rate)
    quotas.replication.update_topic("t", "0:1", "", broker_id=1)      # this leader is broker 1
    ctx = SimpleNamespace(replicas=replicas, config={"fetch.max.bytes": 57671680}, now_ms=0, api_version=11,
                          metrics=BrokerMetrics(), quotas=quotas, quota_user="ANONYMOUS", client_id=None,
                          throttle=lambda ms: None, authorize=lambda *action: True, fetch_sessions=None)
    return replicas, quotas, ctx


def records(body: dict[str, Any]) -> bytes:
    return bytes(body["responses"][0]["partitions"][0]["records"])


def test_leader_sends_until_the_rate_is_exceeded_then_holds_back_the_new_replica() -> None:
    replicas, quotas, ctx = setup(rate=100)          # 100 B/s: 1000 bytes over the 10 s minimum window
    first = answer(handle_fetch(ctx, fetch(NEW_REPLICA)))
    assert len(records(first)) == 5000               # not exceeded yet: the whole log goes out
    assert quotas.replication.leader.rate.measure(0) == 500.0   # 5000 bytes recorded / 10 s
    parked = handle_fetch(ctx, fetch(NEW_REPLICA))
    assert isinstance(parked, defer.Deferred)
    later: list[Any] = []
    parked.addCallback(later.append)
    assert not later, "a held-back partition must not count as available (the follower would spin)"
    assert len(records(answer(handle_fetch(ctx, fetch(IN_SYNC))))) == 5000     # the ISR is not throttled
    assert len(records(answer(handle_fetch(ctx, fetch(-1))))) == 5000          # nor are consumers
    replicas.purgatory.clock.advance(0.5)            # the parked fetch times out: answered empty
    body = later[0]
    assert records(body) == b"" and body["responses"][0]["partitions"][0]["high_watermark"] == 5000


def test_unthrottled_rate_never_holds_back() -> None:
    _, quotas, ctx = setup(rate=2**63 - 1)
    for _ in range(3):
        assert len(records(answer(handle_fetch(ctx, fetch(NEW_REPLICA))))) == 5000
