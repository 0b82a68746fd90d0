"""HeapKeeper: freezes after start-up and every interval, unfreezes for a full collection."""
from __future__ import annotations

import gc
import weakref

import pytest
from twisted.internet.task import Clock

from kafkalite.broker.heap import HeapKeeper

pytestmark = pytest.mark.unit


class FakeCollector:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def collect(self, generation: int = 2) -> int:
        self.calls.append("collect" if generation == 2 else f"collect({generation})")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def unfreeze(self) -> None:
        self.calls.append("unfreeze")

    def get_freeze_count(self) -> int:
        return 0


def test_freezes_every_interval_and_unfreezes_only_for_the_full_collection() -> None:
    clock = Clock()
    fake = FakeCollector()
    keeper = HeapKeeper(clock, fake, freeze_interval_s=10, full_interval_s=60)
    keeper.start()
    assert fake.calls == ["unfreeze", "collect", "freeze"]          # what start-up built is frozen
    fake.calls.clear()
    clock.advance(10)
    assert fake.calls == ["collect(1)", "freeze"]                   # only the young generations are walked
    fake.calls.clear()
    for _ in range(5):
        clock.advance(10)
    assert fake.calls.count("unfreeze") == 1 and fake.calls[-3:] == ["unfreeze", "collect", "freeze"]
    keeper.stop()
    fake.calls.clear()
    clock.advance(100)
    assert fake.calls == []


def test_with_the_real_collector_survivors_are_frozen_and_cycles_still_collected() -> None:
    clock = Clock()
    keeper = HeapKeeper(clock, freeze_interval_s=10, full_interval_s=60)
    try:
        keeper.start()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        kept = [[i] for i in range(1000)]                  # new survivors ...
        clock.advance(10)
        assert gc.get_freeze_count() >= frozen + 1000      # ... frozen at the next tick

        class Node:
            other: object = None
        young_a, young_b = Node(), Node()
        young_a.other, young_b.other = young_b, young_a    # young garbage: collected, not frozen
        young = weakref.ref(young_a)
        del young_a, young_b
        clock.advance(10)                                  # t = 20 s
        assert young() is None

        a, b = Node(), Node()
        a.other, b.other = b, a                            # a cycle, frozen while alive ...
        ref = weakref.ref(a)
        clock.advance(10)                                  # t = 30 s
        del a, b
        clock.advance(10)                                  # t = 40 s: frozen garbage is not walked
        assert ref() is not None
        clock.advance(20)                                  # t = 60 s: the full collection finds it
        assert ref() is None
        assert kept[-1] == [999]
    finally:
        keeper.stop()
        gc.unfreeze()
