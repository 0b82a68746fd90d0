"""FetchSessionCache (KIP-227) follows Kafka 2.8's FetchSession rules: epochs, eviction, incremental answers."""
from __future__ import annotations

from typing import Any

import pytest

from kafkalite.broker.fetch_session import FetchSessionCache, FetchSessionError, next_epoch
from kafkalite.errors import ErrorCode


def topics(*parts: tuple[str, int, int]) -> list[dict[str, Any]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for topic, index, offset in parts:
        out.setdefault(topic, []).append({"partition": index, "fetch_offset": offset, "partition_max_bytes": 1024})
    return [{"topic": t, "partitions": ps} for t, ps in out.items()]


def entry(index: int, hw: int, records: bytes = b"", error: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": 0, "records": records}


def open_session(cache: FetchSessionCache, parts: list[tuple[str, int, int]], now: int = 0,
                 privileged: bool = False) -> int:
    ctx = cache.new_context(0, 0, topics(*parts), [], privileged, now)
    responses = [{"topic": t, "partitions": [entry(i, 5)]} for t, i, _ in parts]
    return cache.create(ctx, responses, now)


def test_full_fetch_opens_session_and_incremental_epochs_are_checked() -> None:
    """Epoch 0 opens a non-zero session at epoch 1; a wrong epoch or unknown id is refused."""
    cache = FetchSessionCache(max_slots=10)
    sid = open_session(cache, [("t", 0, 0), ("t", 1, 0)])
    assert sid != 0 and len(cache) == 1
    with pytest.raises(FetchSessionError) as err:
        cache.new_context(sid, 2, [], [], False, 1)
    assert err.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(FetchSessionError) as err:
        cache.new_context(sid + 1, 1, [], [], False, 1)
    assert err.value.code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert ctx.session is not None and [p["partition"] for _, p in ctx.wanted] == [0, 1]
    assert cache.new_context(sid, 2, [], [], False, 2).session is not None
    assert next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_final_epoch_closes_session_and_is_sessionless() -> None:
    """Epoch -1 closes the named session and opens none."""
    cache = FetchSessionCache(max_slots=10)
    sid = open_session(cache, [("t", 0, 0)])
    ctx = cache.new_context(sid, -1, topics(("t", 0, 3)), [], False, 1)
    assert not ctx.create and ctx.session is None and len(cache) == 0


def test_incremental_answer_carries_only_news() -> None:
    """Unchanged partitions are left out; records, a moved high watermark or an error are kept."""
    cache = FetchSessionCache(max_slots=10)
    sid = open_session(cache, [("t", 0, 0), ("t", 1, 0), ("t", 2, 0)])
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert ctx.session is not None
    kept = cache.incremental_responses(ctx.session, [{"topic": "t", "partitions": [
        entry(0, 5), entry(1, 6), entry(2, 5, b"x"), ]}])
    assert [e["partition_index"] for e in kept[0]["partitions"]] == [1, 2]
    # the hw 6 is cached now: the same answer again carries only the records
    ctx = cache.new_context(sid, 2, [], [], False, 2)
    assert ctx.session is not None
    assert [p["partition"] for _, p in ctx.wanted] == [0, 1, 2]
    kept = cache.incremental_responses(ctx.session, [{"topic": "t", "partitions": [
        entry(0, 5), entry(1, 6), entry(2, 5, error=6)]}])
    assert [e["partition_index"] for e in kept[0]["partitions"]] == [2]
    assert cache.incremental_responses(ctx.session, [{"topic": "t", "partitions": [entry(0, 5)]}]) == []


def test_records_move_partition_to_end() -> None:
    """A partition that returned records is read last next time (the byte budget rotates)."""
    cache = FetchSessionCache(max_slots=10)
    sid = open_session(cache, [("t", 0, 0), ("t", 1, 0)])
    ctx = cache.new_context(sid, 1, [], [], False, 1)
    assert ctx.session is not None
    cache.incremental_responses(ctx.session, [{"topic": "t", "partitions": [entry(0, 5, b"r"), entry(1, 5)]}])
    assert [p["partition"] for _, p in cache.new_context(sid, 2, [], [], False, 2).wanted] == [1, 0]


def test_incremental_updates_adds_and_forgets() -> None:
    """Changed offsets replace cached ones, new partitions join, forgotten ones leave; empty closes."""
    cache = FetchSessionCache(max_slots=10)
    sid = open_session(cache, [("t", 0, 0), ("t", 1, 0)])
    ctx = cache.new_context(sid, 1, topics(("t", 0, 7), ("u", 0, 0)), [{"topic": "t", "partitions": [1]}], False, 1)
    assert {(t, p["partition"], p["fetch_offset"]) for t, p in ctx.wanted} == {("t", 0, 7), ("u", 0, 0)}
    assert ctx.session is not None
    # the new partition has no cached offsets yet: answered even without news
    kept = cache.incremental_responses(ctx.session, [{"topic": "t", "partitions": [entry(0, 5)]},
                                                     {"topic": "u", "partitions": [entry(0, 5)]}])
    assert [t["topic"] for t in kept] == ["u"]
    ctx = cache.new_context(sid, 2, [], [{"topic": "t", "partitions": [0]}, {"topic": "u", "partitions": [0]}],
                            False, 2)
    assert ctx.session is None and ctx.wanted == [] and cache.get(sid) is None


def test_no_slot_means_sessionless() -> None:
    """With the cache full of young sessions, a consumer's full fetch gets session id 0."""
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    assert open_session(cache, [("t", 0, 0), ("t", 1, 0)], now=0) != 0
    assert open_session(cache, [("t", 0, 0), ("t", 1, 0), ("t", 2, 0)], now=10) == 0
    assert cache.evictions == 0 and len(cache) == 1


def test_eviction_rules() -> None:
    """Stale (LRU, unused past the eviction time) goes first; a follower evicts a young consumer;
    an old session is evicted only by a bigger (or privileged) newcomer."""
    cache = FetchSessionCache(max_slots=1, eviction_ms=1000)
    first = open_session(cache, [("t", 0, 0)], now=0)
    stale_replacer = open_session(cache, [("t", 0, 0)], now=2000)
    assert stale_replacer != 0 and cache.get(first) is None and cache.evictions == 1
    follower = open_session(cache, [("t", 0, 0)], now=2001, privileged=True)
    assert follower != 0 and cache.get(stale_replacer) is None and cache.evictions == 2
    # a consumer cannot evict a young follower, nor an old one that is "bigger" (privileged)
    assert open_session(cache, [("t", i, 0) for i in range(5)], now=2002) == 0
    cache.new_context(follower, 1, [], [], True, 3500)         # touched: not stale, but old
    assert open_session(cache, [("t", i, 0) for i in range(5)], now=3600) == 0
    # an old consumer session with 2 partitions: a 1-partition consumer cannot evict it, a 3-partition one can
    cache2 = FetchSessionCache(max_slots=1, eviction_ms=1000)
    old = open_session(cache2, [("t", 0, 0), ("t", 1, 0)], now=0)
    cache2.new_context(old, 1, [], [], False, 1500)
    assert open_session(cache2, [("t", 0, 0)], now=1600) == 0
    assert open_session(cache2, [("t", i, 0) for i in range(3)], now=1600) != 0
    assert cache2.get(old) is None
