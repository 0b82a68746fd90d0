"""A follower's Fetch must see records appended while the broker records its fetch offsets.

Recording a follower's offsets can move the high watermark; that answers an acks=all produce,
and its connection starts the next produce in the same call stack, appending to the partition the
follower is fetching. The fetch handler must read after that append, or the append's purgatory
check runs before the fetch is watched and the fetch sleeps its whole max_wait_ms with data
waiting (the 500 ms replication stall the side-by-side benchmark found).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer, task

from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.broker.quotas import BrokerQuotas

#: what a handler's context needs for client quotas: none are configured, so none apply
NO_QUOTAS = dict(fetch_sessions=None, quotas=BrokerQuotas(), quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                 authorize=lambda *action: True)  # no authorizer: everything allowed

FOLLOWER = 2
RECORDS = b"one-batch"


class FakePartition:
    """What the fetch handler asks a Partition: offsets of the leader's byte log."""

    key = ("t", 0)
    log_start_offset = 0

    def __init__(self, leader: "Leader") -> None:
        self.leader = leader
        self.high_watermark = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.leader.log)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    def fetch_upper_bound(self, replica_id: int, isolation_level: int) -> int:
        return self.log_end_offset if replica_id >= 0 else self.high_watermark


class Leader:
    """The leader's side of one partition: a log of opaque bytes (one offset per byte)."""

    fetch_messages = ReplicaManager.fetch_messages       # the real read-and-wait over this fake's part

    def __init__(self, clock: task.Clock) -> None:
        self.purgatory = Purgatory(clock)
        self.clock = Clock(clock)
        self.part = FakePartition(self)
        self.log = b""
        self.fetched_at: list[int] = []
        self.reads: list[int] = []
        self.is_leader = True

    # the replica manager's side
    def leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Any:
        if not self.is_leader:
            raise KafkaError("not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.part

    def read_from(self, part: Any, fetch_offset: int, max_bytes: int, replica_id: int, isolation: int,
                  min_one_batch: bool) -> Any:
        self.reads.append(fetch_offset)
        upper = part.fetch_upper_bound(replica_id, isolation)
        return SimpleNamespace(records=self.log[fetch_offset:min(upper, fetch_offset + max_bytes)], old_formats=False)

    def awaits_first_fetch(self, replica_id: int) -> bool:
        return False                             # no leadership was taken meanwhile

    def record_follower_fetch(self, part: Any, replica_id: int, fetch_offset: int, log_start_offset: int = -1) -> None:
        self.fetched_at.append(fetch_offset)
        if fetch_offset == len(self.log) and not self.log:
            # the HW moved: a waiting produce answers and its connection's next produce appends now
            self.log += RECORDS
            self.purgatory.check(self.part.key)


def follower_fetch(fetch_offset: int, replica_id: int = FOLLOWER, min_bytes: int = 1) -> dict[str, Any]:
    return {"replica_id": replica_id, "max_wait_ms": 500, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 0,
                                                      "fetch_offset": fetch_offset, "log_start_offset": 0,
                                                      "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def records_of(body: dict[str, Any]) -> bytes:
    return bytes(body["responses"][0]["partitions"][0]["records"])


def test_follower_fetch_sees_append_caused_by_its_own_offset_update() -> None:
    clock = task.Clock()
    leader = Leader(clock)
    ctx = SimpleNamespace(replicas=leader, config={"fetch.max.bytes": 57671680}, now_ms=0, metrics=BrokerMetrics(), api_version=11, **NO_QUOTAS)
    result = handle_fetch(ctx, follower_fetch(0))
    if isinstance(result, defer.Deferred):
        answered: list[Any] = []
        result.addCallback(answered.append)
        assert answered, "the fetch was parked although the partition already held new records"
        result = answered[0]
    assert records_of(result) == RECORDS
    assert leader.fetched_at[0] == 0            # the offset was recorded before anything was read
    assert len(leader.purgatory) == 0           # nothing left waiting


def test_follower_fetch_at_log_end_still_long_polls_and_wakes_on_append() -> None:
    """Nothing new: the fetch waits (no busy answer) and answers on the next append's check."""
    clock = task.Clock()
    leader = Leader(clock)
    leader.log = b"old"                          # no append triggered by this fetch's bookkeeping
    ctx = SimpleNamespace(replicas=leader, config={"fetch.max.bytes": 57671680}, now_ms=0, metrics=BrokerMetrics(), api_version=11, **NO_QUOTAS)
    d = handle_fetch(ctx, follower_fetch(3))
    assert isinstance(d, defer.Deferred)
    answered: list[Any] = []
    d.addCallback(answered.append)
    assert not answered
    leader.log += b"new"
    leader.purgatory.check(("t", 0))
    assert answered and records_of(answered[0]) == b"new"


def parked(leader: Leader, req: dict[str, Any]) -> list[Any]:
    d = handle_fetch(SimpleNamespace(replicas=leader, config={"fetch.max.bytes": 57671680}, now_ms=0, metrics=BrokerMetrics(), api_version=11, **NO_QUOTAS), req)
    assert isinstance(d, defer.Deferred)
    answered: list[Any] = []
    d.addCallback(answered.append)
    assert not answered
    return answered


def test_parked_fetch_checks_offsets_without_reading_or_recording_again() -> None:
    """Kafka's DelayedFetch.tryComplete compares offsets; it neither reads the log nor records the
    follower's fetch again. Each purgatory check used to read (and build a response for) every
    partition of the request, the leader's main CPU cost under acks=all."""
    leader = Leader(task.Clock())
    leader.log = b"old"
    answered = parked(leader, follower_fetch(3))
    reads, recorded = len(leader.reads), list(leader.fetched_at)
    for _ in range(5):                          # e.g. high-watermark moves: nothing new past 3
        leader.purgatory.check(("t", 0))
    assert not answered
    assert len(leader.reads) == reads           # no read while nothing is there
    assert leader.fetched_at == recorded == [3]  # the follower's offset recorded once, on arrival
    leader.log += b"new"
    leader.purgatory.check(("t", 0))
    assert answered and records_of(answered[0]) == b"new"
    assert len(leader.reads) == reads + 1       # one read, to answer


def test_parked_consumer_fetch_waits_for_the_high_watermark_and_min_bytes() -> None:
    leader = Leader(task.Clock())
    leader.log = b"abc"
    leader.part.high_watermark = 3
    answered = parked(leader, follower_fetch(3, replica_id=-1, min_bytes=4))
    leader.log += b"defgh"                      # appended, not yet replicated: invisible
    leader.purgatory.check(("t", 0))
    assert not answered
    leader.part.high_watermark = 5              # 2 bytes visible, fewer than min_bytes
    leader.purgatory.check(("t", 0))
    assert not answered
    leader.part.high_watermark = 8
    leader.purgatory.check(("t", 0))
    assert answered and records_of(answered[0]) == b"defgh"


def test_parked_fetch_answers_at_once_with_the_error_when_leadership_moves() -> None:
    leader = Leader(task.Clock())
    answered = parked(leader, follower_fetch(0, replica_id=-1))
    leader.is_leader = False
    leader.purgatory.check(("t", 0))
    assert answered
    assert answered[0]["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
