"""Writers waiting for the replay (the store's OffsetWaiters), on a task.Clock."""
from __future__ import annotations

import pytest
from twisted.internet import task

from kafkalite.registry.errors import RegistryError
from kafkalite.registry.kafkastore import OffsetWaiters


def test_waiters_fire_once_their_offset_is_applied_and_time_out_with_50002() -> None:
    clock = task.Clock()
    w = OffsetWaiters(clock, timeout=1.0, topic="_schemas")
    done: list[object] = []
    w.wait_for(3).addBoth(done.append)
    late = w.wait_for(9)
    failures: list[RegistryError] = []
    late.addErrback(lambda f: failures.append(f.value))
    w.advance(3)                      # offsets 0..2 applied: offset 3 is not yet
    assert done == []
    w.advance(4)
    assert done == [None]
    clock.advance(1.5)                # offset 9 never comes
    assert failures and failures[0].error_code == 50002 and failures[0].status == 500
    w.advance(20)                     # a late apply does not fire the timed-out waiter again
    assert len(w) == 0
    assert w.wait_for(5).called       # already applied: at once


def test_position_never_goes_back() -> None:
    w = OffsetWaiters(task.Clock(), 1.0, "_schemas")
    w.advance(10)
    w.advance(4)
    assert w.position == 10
