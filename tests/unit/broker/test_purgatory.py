"""Delayed operations complete on a check that makes them ready, or at their deadline."""
from __future__ import annotations

from twisted.internet import task

from kafkalite.broker.purgatory import DelayedOperation, Purgatory


def test_completes_when_checked_key_becomes_ready() -> None:
    """The operation answers (not timed out) on the first check after its condition holds, and
    leaves no watcher behind."""
    clock = task.Clock()
    purgatory = Purgatory(clock)
    state = {"ready": False}
    results = []
    purgatory.watch([("t", 0)], 500, lambda: state["ready"], lambda timed_out: timed_out).addCallback(results.append)
    purgatory.check(("t", 0))
    assert results == []
    state["ready"] = True
    purgatory.check(("t", 1))
    assert results == []
    purgatory.check(("t", 0))
    assert results == [False]
    assert len(purgatory) == 0
    clock.advance(1)
    assert results == [False]


def test_times_out_at_deadline() -> None:
    """Without a ready check the operation answers with timed_out=True exactly at its deadline."""
    clock = task.Clock()
    purgatory = Purgatory(clock)
    results = []
    purgatory.watch(["a", "b"], 250, lambda: False, lambda timed_out: timed_out).addCallback(results.append)
    clock.advance(0.249)
    assert results == []
    clock.advance(0.002)
    assert results == [True]
    assert len(purgatory) == 0


def test_complete_all_answers_everything() -> None:
    clock = task.Clock()
    purgatory = Purgatory(clock)
    results = []
    for key in range(3):
        purgatory.watch([key], 10_000, lambda: False, lambda t: "done").addCallback(results.append)
    purgatory.complete_all()
    assert results == ["done"] * 3 and not clock.getDelayedCalls()


def test_ready_between_callers_check_and_watch_completes_at_once() -> None:
    """The condition became true after the caller's own check but before the watch existed
    (another request completed synchronously in between, and its check found no watcher): the
    operation completes at once instead of sleeping until its deadline (a lost wake-up)."""
    clock = task.Clock()
    purgatory = Purgatory(clock)
    state = {"ready": False}
    assert not state["ready"]            # the caller's check: not ready, so it will watch
    state["ready"] = True                 # ...meanwhile the data arrived
    purgatory.check(("t", 0))            # and its wake-up found nobody watching
    results = []
    purgatory.watch([("t", 0)], 500, lambda: state["ready"], lambda timed_out: timed_out).addCallback(results.append)
    assert results == [False]
    assert len(purgatory) == 0 and not clock.getDelayedCalls()


def test_check_asks_only_about_the_key_that_changed() -> None:
    """With ``try_ready_key``, a check evaluates the changed key alone (a follower's fetch watches
    every partition of its session); the full condition runs once, when the watch is placed."""
    clock = task.Clock()
    purgatory = Purgatory(clock)
    asked: list[object] = []
    full_checks = []
    results = []

    def full() -> bool:
        full_checks.append(1)
        return False

    def one(key: object) -> bool:
        asked.append(key)
        return key == "b"
    purgatory.watch(["a", "b", "c"], 500, full, lambda timed_out: timed_out, one).addCallback(results.append)
    purgatory.check("a")
    purgatory.check("c")
    assert results == [] and asked == ["a", "c"] and len(full_checks) == 1
    purgatory.check("b")
    assert results == [False] and asked == ["a", "c", "b"] and len(full_checks) == 1


def test_checks_are_counted_per_key_and_a_retired_key_leaves_no_set() -> None:
    """Every check counts, watched or not (the fetch sessions' change counts); a completed
    operation leaves its keys' sets in place for the next watcher, until the key is retired
    (checked once more, and its set dropped once empty)."""
    clock = task.Clock()
    purgatory = Purgatory(clock)
    purgatory.check(("t", 0))
    purgatory.watch([("t", 0), ("t", 1)], 500, lambda: False, lambda timed_out: timed_out, lambda key: True)
    purgatory.check(("t", 1))
    purgatory.check(("t", 1))
    assert purgatory.events == {("t", 0): 1, ("t", 1): 2} and purgatory.total_events == 3
    assert len(purgatory) == 0 and set(purgatory.watchers) == {("t", 0), ("t", 1)}
    purgatory.watch([("t", 0)], 500, lambda: False, lambda timed_out: timed_out)
    purgatory.retire(("t", 0))               # still watched (and not ready): kept
    purgatory.retire(("t", 1))
    assert set(purgatory.watchers) == {("t", 0)} and len(purgatory) == 1
    assert purgatory.events == {("t", 0): 2, ("t", 1): 3}


class Recorder(DelayedOperation):
    """Ready once any key changed; records which keys it was told about before answering."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[object] = []
        self.answers = 0

    def try_complete(self) -> bool:
        return False

    def try_complete_key(self, key: object) -> bool:
        self.seen.append(key)
        return True

    def on_complete(self, timed_out: bool) -> list[object]:
        self.answers += 1
        return list(self.seen)


def test_deferred_checks_wake_each_waiter_once_with_every_changed_key() -> None:
    """Inside checks_deferred (one request's appends) a check counts its key's event at once but
    wakes nobody; at the end each waiter tries once with all of its changed keys, in order, so a
    follower Fetch's answer covers every partition the request appended to."""
    purgatory = Purgatory(task.Clock())
    op = Recorder()
    other = Recorder()
    results: list[object] = []
    purgatory.try_complete_else_watch(op, ["a", "b", "c"], 500).addCallback(results.append)
    purgatory.try_complete_else_watch(other, ["z"], 500)
    with purgatory.checks_deferred():
        purgatory.check("a")
        with purgatory.checks_deferred():          # nested: joins the outer block
            purgatory.check("b")
        purgatory.check("a")
        assert results == [] and op.seen == []
        assert purgatory.events == {"a": 2, "b": 1}
    assert results == [["a", "b"]] and op.answers == 1
    assert other.seen == [] and not other.done
    purgatory.check("z")                            # outside a block: at once, as before
    assert other.done
