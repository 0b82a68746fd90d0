"""Connect's group protocol bytes (Kafka's ``ConnectProtocol`` and
``IncrementalCooperativeConnectProtocol``), so Kafka's own workers could read ours, and the
leader's assignors (``EagerAssignor``, ``IncrementalCooperativeAssignor``). Pure: no I/O.

Every blob starts with an int16 version. Strings are int16-length UTF-8, arrays int32-counted
(-1: null), bytes int32-length (-1: null).

Worker metadata (JoinGroup), v0 (protocol ``default``, eager)::

    version int16 | url string | config_offset int64

v1 (``compatible``) and v2 (``sessioned``) add what the worker runs now::

    ... | allocation nullable bytes (an assignment blob, below)

Assignment (SyncGroup), v0::

    version int16 | error int16 | leader string | leader_url string | config_offset int64 |
    assignment [connector string, tasks [int32]]       (task -1 stands for the connector itself)

v1/v2 add ``revoked [connector string, tasks [int32]]`` (nullable) and ``delay int32`` (ms until
the members should rejoin, while departed workers' work is held back:
``scheduled.rebalance.max.delay.ms``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable

CONNECTOR_TASK = -1
NO_ERROR, CONFIG_MISMATCH = 0, 1
EAGER, COMPATIBLE, SESSIONED = "default", "compatible", "sessioned"
#: connect.protocol -> the protocols offered in JoinGroup, preferred first, with their version
OFFERED: dict[str, list[tuple[str, int]]] = {
    "eager": [(EAGER, 0)],
    "compatible": [(COMPATIBLE, 1), (EAGER, 0)],
    "sessioned": [(SESSIONED, 2), (COMPATIBLE, 1), (EAGER, 0)],
}
VERSION_OF = {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class ProtocolError(ValueError):
    """Bytes that are not Connect's protocol."""


# -- primitives --------------------------------------------------------------------------------
def _str(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise ProtocolError("truncated Connect protocol blob")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(v)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str:
        n = self.i16()
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("bad string in Connect protocol blob")
        out = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return out

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise ProtocolError("bad bytes in Connect protocol blob")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


# -- values --------------------------------------------------------------------------------------
Work = dict[str, list[int]]       # connector -> task ids (CONNECTOR_TASK for the connector)


@dataclass
class WorkerMetadata:
    url: str
    config_offset: int
    version: int = 0
    allocation: "Assignment | None" = None


@dataclass
class Assignment:
    error: int = NO_ERROR
    leader: str = ""
    leader_url: str = ""
    config_offset: int = -1
    assigned: Work = field(default_factory=dict)
    revoked: Work = field(default_factory=dict)
    delay: int = 0
    version: int = 0

    def connectors(self) -> list[str]:
        return sorted(c for c, ts in self.assigned.items() if CONNECTOR_TASK in ts)

    def tasks(self) -> list[tuple[str, int]]:
        return sorted((c, t) for c, ts in self.assigned.items() for t in ts if t != CONNECTOR_TASK)

    def revoked_connectors(self) -> list[str]:
        return sorted(c for c, ts in self.revoked.items() if CONNECTOR_TASK in ts)

    def revoked_tasks(self) -> list[tuple[str, int]]:
        return sorted((c, t) for c, ts in self.revoked.items() for t in ts if t != CONNECTOR_TASK)


def work_of(connectors: Iterable[str], tasks: Iterable[tuple[str, int]]) -> Work:
    out: Work = {}
    for c in connectors:
        out.setdefault(c, []).append(CONNECTOR_TASK)
    for c, t in tasks:
        out.setdefault(c, []).append(t)
    return {c: sorted(ts) for c, ts in sorted(out.items())}


# -- codec ---------------------------------------------------------------------------------------
def encode_metadata(m: WorkerMetadata) -> bytes:
    out = _I16.pack(m.version) + _str(m.url) + _I64.pack(m.config_offset)
    if m.version >= 1:
        alloc = encode_assignment(m.allocation) if m.allocation is not None else None
        out += _I32.pack(-1) if alloc is None else _I32.pack(len(alloc)) + alloc
    return out


def decode_metadata(data: bytes) -> WorkerMetadata:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"bad Connect protocol version {version}")
    m = WorkerMetadata(r.string(), r.i64(), version)
    if version >= 1 and r.remaining:
        alloc = r.nullable_bytes()
        m.allocation = decode_assignment(alloc) if alloc else None
    return m


def _encode_work(work: Work | None) -> bytes:
    if work is None:
        return _I32.pack(-1)
    out = _I32.pack(len(work))
    for connector, tasks in sorted(work.items()):
        out += _str(connector) + _I32.pack(len(tasks)) + b"".join(_I32.pack(t) for t in tasks)
    return out


def _decode_work(r: _Reader) -> Work:
    n = r.i32()
    out: Work = {}
    for _ in range(max(n, 0)):
        connector = r.string()
        count = r.i32()
        out[connector] = [r.i32() for _ in range(max(count, 0))]
    return out


def encode_assignment(a: Assignment) -> bytes:
    out = (_I16.pack(a.version) + _I16.pack(a.error) + _str(a.leader) + _str(a.leader_url) + _I64.pack(a.config_offset)
           + _encode_work(a.assigned))
    if a.version >= 1:
        out += _encode_work(a.revoked) + _I32.pack(a.delay)
    return out


def decode_assignment(data: bytes) -> Assignment:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"bad Connect protocol version {version}")
    a = Assignment(r.i16(), r.string(), r.string(), r.i64(), _decode_work(r), version=version)
    if version >= 1:
        a.revoked = _decode_work(r)
        a.delay = r.i32()
    return a


# -- assignors -------------------------------------------------------------------------------------
Unit = tuple[str, int]      # (connector, task id or CONNECTOR_TASK)


def eager_assign(members: list[str], connectors: list[str], tasks: list[tuple[str, int]]) -> dict[str, Work]:
    """Kafka's EagerAssignor: members in id order, connectors then tasks dealt round-robin by one
    circular iterator."""
    order = sorted(members)
    plan: dict[str, list[Unit]] = {m: [] for m in order}
    i = 0
    for c in sorted(connectors):
        plan[order[i % len(order)]].append((c, CONNECTOR_TASK))
        i += 1
    for c, t in sorted(tasks):
        plan[order[i % len(order)]].append((c, t))
        i += 1
    return {m: work_of([c for c, t in units if t == CONNECTOR_TASK], [(c, t) for c, t in units if t != CONNECTOR_TASK])
            for m, units in plan.items()}


@dataclass
class CooperativeState:
    """What the leader remembers between rebalances (Kafka's IncrementalCooperativeAssignor
    fields): the last assignment it made, and the work of departed workers it is holding back."""
    previous: dict[str, set[Unit]] = field(default_factory=dict)
    lost: set[Unit] = field(default_factory=set)
    delay_deadline_ms: int = 0


@dataclass
class CooperativePlan:
    assigned: dict[str, set[Unit]]            # each member's whole assignment after this round
    revoked: dict[str, set[Unit]]
    delay_ms: int


def cooperative_assign(running: dict[str, set[Unit]], configured: set[Unit], state: CooperativeState,
                       max_delay_ms: int, now_ms: int) -> CooperativePlan:
    """KIP-415's incremental cooperative assignment for ``running`` (member -> what it reports
    it runs).

    * Work no longer configured is revoked; work two members both run stays with one.
    * Work of a member that left (in the last assignment, reported by no one) is held back for
      ``scheduled.rebalance.max.delay.ms`` (the member may come back), then handed out.
    * New and released work goes to the least loaded members; when members joined, the most
      loaded give up their excess (revoked now, reassigned at the follow-up rebalance).
    """
    members = sorted(running)
    current: dict[str, set[Unit]] = {}
    seen: set[Unit] = set()
    revoked: dict[str, set[Unit]] = {m: set() for m in members}
    for m in members:
        keep = set()
        for u in sorted(running[m]):
            if u not in configured or u in seen:
                revoked[m].add(u)
            else:
                keep.add(u)
                seen.add(u)
        current[m] = keep
    previously = set().union(*state.previous.values()) if state.previous else set()
    newly_lost = {u for u in previously if u in configured and u not in seen}
    departed = set(state.previous) - set(members)
    delay = 0
    held: set[Unit] = set()
    if departed and newly_lost and max_delay_ms > 0:
        if not state.lost:
            state.lost = set(newly_lost)
            state.delay_deadline_ms = now_ms + max_delay_ms
        else:
            state.lost |= newly_lost
    if state.lost:
        state.lost = {u for u in state.lost if u in configured and u not in seen}
        if state.lost and now_ms < state.delay_deadline_ms:
            held = set(state.lost)
            delay = state.delay_deadline_ms - now_ms
        else:
            state.lost, state.delay_deadline_ms = set(), 0
    unassigned = sorted(configured - seen - held)
    for u in unassigned:
        target = min(members, key=lambda m: (_load(current[m]), m))
        current[target].add(u)
    # balance: members above the ceiling give their excess up (reassigned next round)
    total = sum(len(v) for v in current.values())
    if members and not unassigned and not any(revoked.values()):
        ceiling = -(-total // len(members))
        floor = total // len(members)
        if any(len(current[m]) < floor for m in members):
            for m in members:
                excess = len(current[m]) - ceiling if any(len(current[o]) < floor for o in members) else 0
                if excess <= 0:
                    continue
                give = sorted(current[m], key=lambda u: (u[1] == CONNECTOR_TASK, u))[:excess]
                for u in give:
                    current[m].discard(u)
                    revoked[m].add(u)
    state.previous = {m: set(v) for m, v in current.items()}
    return CooperativePlan(current, revoked, delay)


def _load(units: set[Unit]) -> tuple[int, int]:
    """Total work first, then connectors (Kafka balances connectors and tasks separately; one
    count keeps the workers even in total)."""
    return (len(units), sum(1 for _, t in units if t == CONNECTOR_TASK))
