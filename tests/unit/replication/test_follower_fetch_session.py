"""FollowerFetchSession (KIP-227 client side): full first, then only changed partitions; any
session error or failure makes the next request full."""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.replication.fetch_session import FollowerFetchSession


def entry(index: int, offset: int) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": offset, "current_leader_epoch": 0}


def ok(session_id: int, *parts: tuple[str, int]) -> dict[str, Any]:
    return {"error_code": 0, "session_id": session_id,
            "responses": [{"topic": t, "partitions": [{"partition_index": i}]} for t, i in parts]}


def test_full_then_incremental_with_changes_and_forgotten() -> None:
    """After the leader's session id, only changed partitions are sent, dropped ones forgotten."""
    s = FollowerFetchSession()
    sid, epoch, topics, forgotten = s.build({("t", 0): entry(0, 5), ("t", 1): entry(1, 7)})
    assert (sid, epoch, len(topics["t"]), forgotten) == (0, 0, 2, [])
    assert s.handle_response(ok(42, ("t", 0), ("t", 1)))
    sid, epoch, topics, forgotten = s.build({("t", 0): entry(0, 6), ("t", 1): entry(1, 7)})
    assert (sid, epoch, [p["partition"] for p in topics["t"]], forgotten) == (42, 1, [0], [])
    assert s.handle_response(ok(42))
    sid, epoch, topics, forgotten = s.build({("t", 0): entry(0, 6)})
    assert (sid, epoch, topics, forgotten) == (42, 2, {}, [{"topic": "t", "partitions": [1]}])


def test_sessionless_leader_keeps_full_fetches() -> None:
    """A leader without a free slot answers session 0: every request stays full."""
    s = FollowerFetchSession()
    s.build({("t", 0): entry(0, 5)})
    assert s.handle_response(ok(0, ("t", 0)))
    sid, epoch, topics, _ = s.build({("t", 0): entry(0, 5)})
    assert (sid, epoch, len(topics["t"])) == (0, 0, 1)


def test_errors_restart_with_full_fetch() -> None:
    """Session not found: a new session (id 0); wrong epoch, unknown partition or a failed
    request: a full fetch closing the old id (epoch 0 with that id)."""
    s = FollowerFetchSession()
    s.build({("t", 0): entry(0, 5)})
    s.handle_response(ok(9, ("t", 0)))
    s.build({("t", 0): entry(0, 5)})
    assert not s.handle_response({"error_code": int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), "session_id": 0,
                                  "responses": []})
    sid, epoch, topics, _ = s.build({("t", 0): entry(0, 5)})
    assert (sid, epoch, len(topics["t"])) == (9, 0, 1)
    s.handle_response(ok(10, ("t", 0)))
    s.build({("t", 0): entry(0, 5)})
    assert not s.handle_response({"error_code": int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), "session_id": 0,
                                  "responses": []})
    assert s.build({("t", 0): entry(0, 5)})[:2] == (0, 0)
    s.handle_response(ok(11, ("t", 0)))
    s.build({("t", 0): entry(0, 5)})
    assert not s.handle_response(ok(11, ("u", 3)))
    assert s.build({("t", 0): entry(0, 5)})[:2] == (11, 0)
    s.handle_response(ok(12, ("t", 0)))
    s.build({("t", 0): entry(0, 5)})
    s.handle_error()
    assert s.build({("t", 0): entry(0, 5)})[:2] == (12, 0)
