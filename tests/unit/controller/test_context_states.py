"""The controller's states: the cache's, with its own newer writes in front, without a copy."""
from __future__ import annotations

from kafkalite.controller.context import ControllerContext
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.metadata.cache import TopicInfo


def _cache() -> MetadataCache:
    cache = MetadataCache()
    cache.topics["t"] = TopicInfo("t", {0: [1, 2], 1: [2, 1]})
    cache.states[("t", 0)] = LeaderAndIsr(1, 0, (1, 2), 1, zk_version=0)
    cache.states[("t", 1)] = LeaderAndIsr(2, 0, (2, 1), 1, zk_version=0)
    return cache


def test_own_newer_writes_win_until_the_watch_catches_up() -> None:
    cache, ctx = _cache(), ControllerContext()
    assert ctx.states(cache) is cache.states                  # nothing written: the cache itself
    mine = LeaderAndIsr(2, 1, (2,), 1, zk_version=1)
    ctx.wrote("t", 0, mine)
    view = ctx.states(cache)
    assert view[("t", 0)] == mine and view.get(("t", 1)) == cache.states[("t", 1)]
    assert set(view) == {("t", 0), ("t", 1)} and len(view) == 2 and ("t", 0) in view
    cache.states[("t", 0)] = mine                             # the watch delivered version 1
    assert ctx.states(cache) is cache.states and not ctx.is_own_write(("t", 1), cache.states[("t", 1)])


def test_a_write_for_a_partition_the_cache_lacks_is_listed_and_a_deleted_topic_forgotten() -> None:
    cache, ctx = _cache(), ControllerContext()
    created = LeaderAndIsr(1, 0, (1,), 1, zk_version=0)
    cache.topics["t"].assignment[2] = [1]
    ctx.wrote("t", 2, created)
    view = ctx.states(cache)
    assert view[("t", 2)] == created and len(view) == 3 and ("t", 2) in set(view)
    del cache.topics["t"]
    assert ctx.states(cache) is cache.states                  # the topic is gone: so is our write
