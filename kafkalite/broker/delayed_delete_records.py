"""DeleteRecords' wait (Kafka's ``DelayedDeleteRecords``), through
``ReplicaManager.await_low_watermarks``.

The leader moved its log start; the answer waits until every replica on a live broker has moved
its own there too (the low watermark, ``Partition.low_watermark``, from the log starts followers
report in their Fetches), leadership is lost (NOT_LEADER_OR_FOLLOWER), or the deadline
(REQUEST_TIMED_OUT). It answers [(code, low watermark)] in the request's order.
"""
from __future__ import annotations

from typing import Callable, Sequence

from kafkalite.broker.partition import Partition
from kafkalite.broker.purgatory import DelayedOperation
from kafkalite.errors import ErrorCode


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, pending: Sequence[tuple[Partition, int]], hosts: Callable[[Partition], bool],
                 alive: Callable[[], set[int]]) -> None:
        """``hosts(part)``: is ``part`` still this broker's replica; ``alive()``: the live brokers."""
        super().__init__()
        self.pending = pending
        self.hosts = hosts
        self.alive = alive

    def watch_keys(self) -> set[tuple[str, int]]:
        return {p.key for p, _ in self.pending}

    def status(self, part: Partition, required: int) -> tuple[ErrorCode | None, int]:
        if not part.is_leader or not self.hosts(part):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        low = part.low_watermark(self.alive())
        return (ErrorCode.NONE if low >= required else None), low

    def try_complete(self) -> bool:
        return all(self.status(p, r)[0] is not None for p, r in self.pending)

    def on_complete(self, timed_out: bool) -> list[tuple[ErrorCode, int]]:
        out = []
        for p, r in self.pending:
            code, low = self.status(p, r)
            out.append((ErrorCode.REQUEST_TIMED_OUT if code is None else code, low))
        return out
