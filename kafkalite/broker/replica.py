"""A follower of a partition this broker leads, as the leader sees it (Kafka's ``cluster/Replica.scala``).

The leader keeps one :class:`Replica` per follower for the length of a leader term: what the
follower's Fetch requests said (its log end and log start), when it last fetched and where the
leader's own log ended then, and when it was last caught up. From those :class:`Partition`
decides the ISR (expansion needs the log end, shrinking the caught-up time), the high watermark
(the smallest log end in the ISR) and DeleteRecords' low watermark (the log starts).

One object per follower, created and dropped as a whole, so a term's state cannot outlive the
term in one field and not in another (it was four parallel dicts on ``Partition``, cleared
inconsistently).
"""
from __future__ import annotations


class Replica:
    """One follower's fetch state. Per-fetch code: slots, no properties."""

    __slots__ = ("broker_id", "log_end_offset", "log_start_offset", "last_caught_up_ms",
                 "last_fetch_leader_log_end", "last_fetch_ms")

    def __init__(self, broker_id: int, now_ms: int) -> None:
        self.broker_id = broker_id
        #: the fetch offset of its last Fetch: everything before it is copied (-1: not fetched yet)
        self.log_end_offset = -1
        #: the log start offset its last Fetch reported (-1: not yet), for DeleteRecords
        self.log_start_offset = -1
        #: when it was last caught up (Kafka's lastCaughtUpTimeMs): a new follower counts as caught
        #: up when the term begins, so ``replica.lag.time.max.ms`` runs from there
        self.last_caught_up_ms = now_ms
        #: the leader's log end at its previous fetch (Kafka's lastFetchLeaderLogEndOffset) and
        #: that fetch's time (None: no fetch yet in this term)
        self.last_fetch_leader_log_end = -1
        self.last_fetch_ms: int | None = None

    def update_fetch_state(self, fetch_offset: int, leader_log_end: int, now_ms: int) -> bool:
        """Kafka's ``Replica.updateFetchState``: the follower asked for ``fetch_offset`` while the
        leader's log ended at ``leader_log_end``. It is caught up now if it asked for the log end,
        or caught up as of its previous fetch if it has copied what the leader had then. Returns
        whether its log end moved (an unchanged one cannot move the high watermark)."""
        moved = self.log_end_offset != fetch_offset
        self.log_end_offset = fetch_offset
        if fetch_offset >= leader_log_end:
            self.last_caught_up_ms = now_ms
        elif self.last_fetch_ms is not None and fetch_offset >= self.last_fetch_leader_log_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.last_fetch_leader_log_end = leader_log_end
        self.last_fetch_ms = now_ms
        return moved

    def is_lagging(self, leader_log_end: int, now_ms: int, lag_max_ms: int) -> bool:
        """Out of the ISR by ``replica.lag.time.max.ms``: behind the log end and not caught up
        for longer than that."""
        return self.log_end_offset < leader_log_end and now_ms - self.last_caught_up_ms > lag_max_ms

    def __repr__(self) -> str:
        return (f"Replica({self.broker_id}, log_end={self.log_end_offset}, log_start={self.log_start_offset}, "
                f"caught_up={self.last_caught_up_ms})")
