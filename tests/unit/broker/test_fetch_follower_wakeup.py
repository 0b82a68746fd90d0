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
from kafkalite.broker.purgatory import Purgatory

FOLLOWER = 2
RECORDS = b"one-batch"


class Leader:
    """The leader's side of one partition: a log of opaque bytes (one offset per byte)."""

    def __init__(self, clock: task.Clock) -> None:
        self.purgatory = Purgatory(clock)
        self.part = SimpleNamespace(key=("t", 0), high_watermark=0, log_start_offset=0)
        self.log = b""
        self.fetched_at: list[int] = []
        self.replica_manager = self

    # replica_manager
    def leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Any:
        return self.part

    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, replica_id: int,
             isolation: int, epoch: int, min_one_batch: bool) -> Any:
        return self.part, SimpleNamespace(records=self.log[fetch_offset:fetch_offset + max_bytes])

    # broker
    def replicas_fetched(self, part: Any, replica_id: int, fetch_offset: int, now: int) -> None:
        self.fetched_at.append(fetch_offset)
        if fetch_offset == len(self.log) and not self.log:
            # the HW moved: a waiting produce answers and its connection's next produce appends now
            self.log += RECORDS
            self.purgatory.check(self.part.key)


def follower_fetch(fetch_offset: int) -> dict[str, Any]:
    return {"replica_id": FOLLOWER, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
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
    ctx = SimpleNamespace(broker=leader, now_ms=0)
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
    ctx = SimpleNamespace(broker=leader, now_ms=0)
    d = handle_fetch(ctx, follower_fetch(3))
    assert isinstance(d, defer.Deferred)
    answered: list[Any] = []
    d.addCallback(answered.append)
    assert not answered
    leader.log += b"new"
    leader.purgatory.check(("t", 0))
    assert answered and records_of(answered[0]) == b"new"
