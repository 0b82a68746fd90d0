"""Reading Deferreds in tests without a running reactor: one set of helpers for the whole suite.

A unit test calls code that answers with a Deferred (a handler, a coordinator, the in-memory
ZooKeeper) and wants its result now, or after the test's clock has run what is due. Twisted's
``SynchronousTestCase.successResultOf`` does this for trial tests; these are the pytest
equivalents, so no test module writes its own box-and-addBoth helper:

- :func:`outcome` -- the list the Deferred's outcome lands in (empty while it has not fired);
- :func:`fired` -- the result of a Deferred that has fired (a Failure is raised, or returned
  with ``failure="return"``); an unfired Deferred fails the test;
- :func:`answer` -- a handler's answer, which may be a plain value or a Deferred: the value, or
  None while the Deferred waits;
- :func:`drive` -- run a ``task.Clock``/``MemoryReactorClock``'s due calls (``advance(0)``, at most
  ``turns`` times) until the Deferred fires, then :func:`fired`;
- :func:`settle` -- let a clock-driven world finish every cascade of due calls (and read a
  Deferred's outcome, a Failure as a value);
- :func:`iterate_until` -- iterate a real, hand-driven reactor (epoll, real sockets) until the
  Deferred fires, and return its outcome (a Failure as a value).

The in-process tier pumps simulated time instead (``InProcessCluster.wait``/``pump_until``), and
tests of processes poll with :func:`tests.support.waiting.wait_for`.
"""
from __future__ import annotations

from typing import Any, Literal

from twisted.internet import defer
from twisted.python.failure import Failure

__all__ = ["outcome", "fired", "answer", "drive", "settle", "iterate_until"]


def outcome(d: Any) -> list[Any]:
    """A list that holds the Deferred's result or Failure once it fires (empty until then); for a
    plain value (a handler that answered at once), a list holding it."""
    if not isinstance(d, defer.Deferred):
        return [d]
    box: list[Any] = []
    d.addBoth(box.append)
    return box


def fired(d: Any, failure: Literal["raise", "return"] = "raise", what: str = "the Deferred") -> Any:
    """The result of ``d``, which must have fired (a plain value is its own result). A Failure is
    raised (``failure="raise"``) or returned as the value (``failure="return"``)."""
    if not isinstance(d, defer.Deferred):
        return d
    box = outcome(d)
    assert box, f"{what} has not fired"
    if isinstance(box[0], Failure) and failure == "raise":
        box[0].raiseException()
    return box[0]


def answer(result: Any) -> Any:
    """A handler's answer: ``result`` itself, or the value its Deferred has fired with (which
    stays in its callback chain, so later callbacks see it too), or None while the Deferred still
    waits (a parked request). A Failure is raised."""
    if not isinstance(result, defer.Deferred):
        return result
    box: list[Any] = []

    def keep(value: Any) -> Any:
        box.append(value)
        return None if isinstance(value, Failure) else value   # a value stays in the chain
    result.addBoth(keep)
    if not box:
        return None
    if isinstance(box[0], Failure):
        box[0].raiseException()
    return box[0]


def drive(clock: Any, d: Any, turns: int = 50, failure: Literal["raise", "return"] = "raise",
          what: str = "the Deferred") -> Any:
    """Run ``clock.advance(0)`` (at least once, at most ``turns`` times; no simulated time passes)
    until ``d`` fires, then its result as :func:`fired` gives it. ``turns=1``: it must have fired
    once the reactor has run what is due now."""
    if not isinstance(d, defer.Deferred):
        return d
    box = outcome(d)
    for _ in range(turns):
        clock.advance(0)
        if box:
            break
    assert box, f"{what} did not fire within {turns} reactor turns"
    if isinstance(box[0], Failure) and failure == "raise":
        box[0].raiseException()
    return box[0]


def settle(clock: Any, d: Any = None, turns: int = 500) -> Any:
    """Let a clock-driven world settle: with no Deferred, run ``clock.advance(0)`` ``turns`` times
    (every cascade of due calls finishes); with one, :func:`drive` it, a Failure returned as its
    value (the caller asserts on it)."""
    if d is None:
        for _ in range(turns):
            clock.advance(0)
        return None
    return drive(clock, d, turns, failure="return", what="the operation")


def iterate_until(reactor: Any, d: Any, turns: int = 2000, wait: float = 0.005) -> Any:
    """Iterate a hand-driven real reactor (``reactor.iterate(wait)``, at most ``turns`` times) until
    ``d`` fires; its outcome, a Failure as a value."""
    box = outcome(d)
    for _ in range(turns):
        if box:
            return box[0]
        reactor.iterate(wait)
    raise AssertionError("the reactor never settled it")
