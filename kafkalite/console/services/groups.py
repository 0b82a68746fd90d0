"""Consumer groups: state, members and assignments, lag per partition and in total, a lag history
for the lag-over-time chart, offset resets (with a dry-run preview) and deletion.

Lag is the partition's end offset (high watermark) minus the group's committed offset, as
kafka-consumer-groups.sh computes it. Resets, like that tool's ``--reset-offsets``, are refused
while the group has members: a live member would overwrite them with its next commit.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from kafkalite.client.admin import GroupDescription
from kafkalite.client.cluster import TopicPartition
from kafkalite.client.errors import ClientError

from ..context import ConsoleContext

EARLIEST, LATEST = -2, -1
STRATEGIES = ("earliest", "latest", "timestamp", "exact")
INACTIVE_STATES = ("Empty", "Dead")
HISTORY_POINTS = 360


class GroupError(ValueError):
    """A request the group's state refuses (shown as is)."""


class GroupNotFound(GroupError):
    pass


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    protocol_type: str
    state: str
    members: int


@dataclass(frozen=True)
class PartitionLag:
    partition: TopicPartition
    committed: int | None
    end: int
    owner: str              # member id (client id) holding it, "" when none

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.end - self.committed)


@dataclass(frozen=True)
class GroupDetail:
    description: GroupDescription
    lags: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.lags)


@dataclass(frozen=True)
class ResetRow:
    partition: TopicPartition
    current: int | None
    target: int


class LagHistory:
    """(time, total lag) samples per group, the newest ``HISTORY_POINTS`` kept in memory."""

    def __init__(self, points: int = HISTORY_POINTS) -> None:
        self._points = points
        self._lock = threading.Lock()
        self._series: dict[str, deque[tuple[float, int]]] = {}

    def add(self, group_id: str, total: int, at: float | None = None) -> None:
        with self._lock:
            self._series.setdefault(group_id, deque(maxlen=self._points)).append(
                (time.time() if at is None else at, total))

    def series(self, group_id: str) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._series.get(group_id, ()))

    def forget(self, group_id: str) -> None:
        with self._lock:
            self._series.pop(group_id, None)


class GroupsService:
    def __init__(self, context: ConsoleContext, history: LagHistory | None = None) -> None:
        self.context = context
        self.history = history or LagHistory()

    def groups(self) -> list[GroupRow]:
        def work(admin: object) -> list[GroupRow]:
            rows = []
            for gid, ptype in self.context.admin.list_groups():
                try:
                    d = self.context.admin.describe_group(gid)
                    rows.append(GroupRow(gid, ptype, d.state, len(d.members)))
                except ClientError as exc:
                    rows.append(GroupRow(gid, ptype, f"unknown ({exc})", 0))
            return rows
        return self.context.call(work)

    def detail(self, group_id: str) -> GroupDetail:
        detail = self.context.call(lambda admin: self._detail(group_id))
        self.history.add(group_id, detail.total_lag)
        return detail

    def _detail(self, group_id: str) -> GroupDetail:
        admin = self.context.admin
        desc = admin.describe_group(group_id)
        if desc.state == "Dead":
            raise GroupNotFound(f"group {group_id!r} does not exist")
        committed = admin.list_group_offsets(group_id)
        owners = {tp: f"{m.member_id} ({m.client_id})" for m in desc.members for tp in m.assignment}
        tps = sorted(set(committed) | set(owners))
        ends = {tp: o for tp, (o, _) in self.context.client.list_offsets({tp: LATEST for tp in tps}).items()} \
            if tps else {}
        lags = [PartitionLag(tp, committed.get(tp), ends.get(tp, 0), owners.get(tp, "")) for tp in tps]
        return GroupDetail(desc, lags)

    def sample_all(self) -> None:
        """One lag sample of every consumer group (the console's background sampler calls this)."""
        for row in self.groups():
            if row.protocol_type in ("consumer", ""):
                try:
                    self.detail(row.group_id)
                except (ClientError, GroupError):
                    continue

    def plan_reset(self, group_id: str, strategy: str, topic: str | None = None, value: int | None = None
                   ) -> list[ResetRow]:
        """The offsets a reset would commit (the dry run), refused for a group with members."""
        if strategy not in STRATEGIES:
            raise GroupError(f"reset strategy must be one of {', '.join(STRATEGIES)}")
        if strategy in ("timestamp", "exact") and value is None:
            raise GroupError(f"a {strategy} reset needs a value")

        def work(admin: object) -> list[ResetRow]:
            desc = self.context.admin.describe_group(group_id)
            if desc.state not in INACTIVE_STATES:
                raise GroupError(f"group {group_id!r} is {desc.state} with {len(desc.members)} member(s): "
                                 "offsets can only be reset when it is inactive (stop its consumers first)")
            committed = self.context.admin.list_group_offsets(group_id)
            tps = sorted(tp for tp in committed if topic is None or tp.topic == topic)
            if topic is not None and not tps:
                tps = [TopicPartition(topic, p) for p in self.context.client.partitions_for(topic)]
            if not tps:
                raise GroupError(f"group {group_id!r} has no committed offsets to reset")
            client = self.context.client
            lows = {tp: o for tp, (o, _) in client.list_offsets({tp: EARLIEST for tp in tps}).items()}
            highs = {tp: o for tp, (o, _) in client.list_offsets({tp: LATEST for tp in tps}).items()}
            if strategy == "earliest":
                targets = lows
            elif strategy == "latest":
                targets = highs
            elif strategy == "timestamp":
                assert value is not None
                found = client.list_offsets({tp: value for tp in tps})
                targets = {tp: highs[tp] if found[tp][0] < 0 else found[tp][0] for tp in tps}
            else:
                assert value is not None      # Kafka's tool clamps an exact offset into the log's range
                targets = {tp: min(max(value, lows[tp]), highs[tp]) for tp in tps}
            return [ResetRow(tp, committed.get(tp), targets[tp]) for tp in tps]

        return self.context.call(work)

    def reset(self, group_id: str, strategy: str, topic: str | None = None, value: int | None = None
              ) -> list[ResetRow]:
        plan = self.plan_reset(group_id, strategy, topic, value)
        self.context.call(lambda admin: admin.alter_group_offsets(group_id, {r.partition: r.target for r in plan}))
        return plan

    def delete(self, group_id: str) -> None:
        result = self.context.call(lambda admin: admin.delete_groups([group_id]))
        err = result.get(group_id)
        if err is not None:
            raise err
        self.history.forget(group_id)
