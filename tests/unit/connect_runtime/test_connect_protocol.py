"""Connect's group protocol bytes and the leader's assignors."""
from __future__ import annotations

import struct

import pytest

from kafkalite.connect.runtime import protocol as proto
from kafkalite.connect.runtime.protocol import CONNECTOR_TASK as C


def test_v0_metadata_and_assignment_bytes_are_kafkas_layout() -> None:
    """Eager (v0) metadata is version, url, config offset; the assignment lists the connector as
    task -1, as Kafka's ConnectProtocol writes them."""
    meta = proto.encode_metadata(proto.WorkerMetadata("http://w1:8083", 7))
    assert meta == b"\x00\x00" + b"\x00\x0ehttp://w1:8083" + struct.pack(">q", 7)
    a = proto.Assignment(0, "leader-1", "http://w1:8083", 7, {"src": [C, 0, 1]})
    raw = proto.encode_assignment(a)
    assert raw == (b"\x00\x00" + b"\x00\x00" + b"\x00\x08leader-1" + b"\x00\x0ehttp://w1:8083" + struct.pack(">q", 7)
                   + struct.pack(">i", 1) + b"\x00\x03src" + struct.pack(">iiii", 3, -1, 0, 1))
    back = proto.decode_assignment(raw)
    assert back.connectors() == ["src"] and back.tasks() == [("src", 0), ("src", 1)]


def test_v1_round_trip_with_allocation_revoked_and_delay() -> None:
    """Incremental cooperative blobs carry the current allocation, revocations and the delay."""
    alloc = proto.Assignment(0, "l", "u", 3, {"a": [C, 0]}, version=1)
    meta = proto.WorkerMetadata("http://w2:8083", 3, 1, alloc)
    back = proto.decode_metadata(proto.encode_metadata(meta))
    assert back.url == "http://w2:8083" and back.allocation is not None and back.allocation.assigned == {"a": [C, 0]}
    a = proto.Assignment(0, "l", "u", 3, {"b": [1]}, {"a": [0]}, 2500, version=2)
    assert proto.decode_assignment(proto.encode_assignment(a)) == a
    with pytest.raises(proto.ProtocolError):
        proto.decode_assignment(b"\x00\x01\x00")


def test_eager_assignor_deals_connectors_then_tasks_round_robin() -> None:
    plan = proto.eager_assign(["m2", "m1"], ["a", "b"], [("a", 0), ("a", 1), ("b", 0)])
    assert plan["m1"] == {"a": [C, 0], "b": [0]}
    assert plan["m2"] == {"a": [1], "b": [C]}


def test_cooperative_assignor_holds_departed_work_then_reassigns_and_balances() -> None:
    """A departed worker's units wait for the delay; after it they go to the survivors; a new
    worker gets work by revocation from the most loaded."""
    configured = {("a", C), ("a", 0), ("a", 1), ("a", 2)}
    state = proto.CooperativeState()
    first = proto.cooperative_assign({"m1": set(), "m2": set()}, configured, state, 1000, now_ms=0)
    assert set().union(*first.assigned.values()) == configured and not first.delay_ms
    m1, m2 = first.assigned["m1"], first.assigned["m2"]
    # m2 is gone: its units are held back for the delay
    held = proto.cooperative_assign({"m1": set(m1)}, configured, state, 1000, now_ms=100)
    assert held.assigned["m1"] == m1 and held.delay_ms == 1000
    # the delay has passed: m1 takes everything
    after = proto.cooperative_assign({"m1": set(m1)}, configured, state, 1000, now_ms=1200)
    assert after.assigned["m1"] == configured and after.delay_ms == 0
    assert m2 <= after.assigned["m1"]
    # a new worker: m1 gives up its excess (revoked now, handed out at the next round)
    grow = proto.cooperative_assign({"m1": set(configured), "m3": set()}, configured, state, 1000, now_ms=1300)
    assert len(grow.revoked["m1"]) == 2 and not grow.assigned["m3"]
    nxt = proto.cooperative_assign({"m1": grow.assigned["m1"], "m3": set()}, configured, state, 1000, now_ms=1400)
    assert len(nxt.assigned["m3"]) == 2 and len(nxt.assigned["m1"]) == 2
    # a unit no longer configured is revoked
    gone = proto.cooperative_assign(nxt.assigned, configured - {("a", 2)}, state, 1000, now_ms=1500)
    assert ("a", 2) in set().union(*gone.revoked.values())
