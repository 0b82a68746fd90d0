"""The controller's own view of partition state: what the watches say, plus its own writes.

The controller reads the broker's metadata cache (filled by the ZooKeeper watches) and never
writes it: handlers serve that cache to clients, and it must only ever show what ZooKeeper holds.
A state the controller has just written reaches the cache only when the watch fires; until then
the controller remembers it here with its new znode version, so the next round plans from it
rather than from the older state (and does not repeat the write). An entry is dropped once the
watch has delivered that version or a newer one.
"""
from __future__ import annotations

from typing import Iterator, Mapping

from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.topic_partition import TopicPartition


class _Overlay(Mapping[TopicPartition, LeaderAndIsr]):
    """``base`` with ``over``'s entries in front, without copying ``base`` (every partition)."""

    def __init__(self, base: Mapping[TopicPartition, LeaderAndIsr], over: dict[TopicPartition, LeaderAndIsr]) -> None:
        self._base, self._over = base, over

    def __getitem__(self, key: TopicPartition) -> LeaderAndIsr:
        found = self._over.get(key)
        return found if found is not None else self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._over or key in self._base

    def __iter__(self) -> Iterator[TopicPartition]:
        yield from self._base
        yield from (k for k in self._over if k not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for k in self._over if k not in self._base)


class ControllerContext:
    def __init__(self) -> None:
        self._written: dict[tuple[str, int], LeaderAndIsr] = {}

    def wrote(self, topic: str, partition: int, state: LeaderAndIsr) -> None:
        self._written[(topic, partition)] = state

    def is_own_write(self, key: tuple[str, int], state: LeaderAndIsr) -> bool:
        """Whether ``state`` (as the watch delivered it) is the one this controller wrote last."""
        mine = self._written.get(key)
        return mine is not None and mine.zk_version == state.zk_version

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._written if k[0] == topic]:
            del self._written[key]

    def clear(self) -> None:
        self._written.clear()

    def states(self, view: MetadataCache) -> Mapping[TopicPartition, LeaderAndIsr]:
        """Every partition's latest known state: the view's, or ours where ours is newer. A view
        over the cache, not a copy: a round may plan a few partitions among tens of thousands."""
        for key, mine in list(self._written.items()):
            seen = view.states.get(key)
            if key[0] not in view.topics:
                del self._written[key]                 # the topic is gone
            elif seen is not None and seen.zk_version >= mine.zk_version:
                del self._written[key]                 # the watch caught up
        if not self._written:
            return view.states
        return _Overlay(view.states, dict(self._written))
