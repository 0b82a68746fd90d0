"""The controller's one loop (Kafka's ``ControllerEventManager``): rounds run one at a time.

Every input (a state, broker, assignment or /admin change, a controlled shutdown, a requested
election or reassignment, the rebalance timer, offline replicas learned) asks for a round with
:meth:`reconcile`; a request arriving while a round runs is noted (which partitions, or all) and
makes exactly one more round afterwards. A round is the controller's job function; its failure
goes to the controller's one failure reaction (``Controller.job_failed``: resign when fenced),
before anyone waiting for the round is answered, so a waiter sees the resignation.

``keys``: only these partitions' states changed, so only they are planned again (each
partition's decision depends on its own state and on inputs whose changes come without ``keys``).
A failover changes thousands of states one watch at a time; planning every partition for each
made the controller's work grow with the square of the count.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from twisted.internet import defer
from twisted.python.failure import Failure

from kafkalite.controller import decisions
from kafkalite.topic_partition import TopicPartition


class ControllerEventManager:
    def __init__(self, run_round: Callable[[set[TopicPartition] | None], defer.Deferred],
                 is_active: Callable[[], bool], full_round_due: Callable[[], bool],
                 on_failure: Callable[[Failure, str], None]) -> None:
        """``run_round(keys)``: one round over every partition (None) or ``keys``;
        ``full_round_due()``: a round must plan everything (the rebalance timer fired)."""
        self.run_round = run_round
        self.is_active = is_active
        self.full_round_due = full_round_due
        self.on_failure = on_failure
        self.running = False
        self.dirty = False
        #: what the next round plans: every partition, or only these (their state changed)
        self._plan_all = True
        self._plan_keys: set[TopicPartition] = set()
        self._next_round: list[defer.Deferred] = []     # waiting for a round not yet started
        self._this_round: list[defer.Deferred] = []     # waiting for the running round

    def reconcile(self, keys: set[TopicPartition] | None = None) -> None:
        """Run a round now, or one more after the running one."""
        if not self.is_active():
            return                             # winning the election starts with a full round
        if keys is None:
            self._plan_all = True
        else:
            self._plan_keys |= keys
        if self.running:
            self.dirty = True
            return
        self.running = True
        self.dirty = False
        self._this_round, self._next_round = self._next_round, []
        plan_all, keys = self._plan_all, self._plan_keys
        self._plan_all, self._plan_keys = False, set()
        d = self.run_round(None if plan_all or self.full_round_due() else keys)
        d.addBoth(self._round_done)

    def _round_done(self, result: Any) -> None:
        self.running = False
        if isinstance(result, Failure):
            self.on_failure(result, "controller round")
        waiting, self._this_round = self._this_round, []
        for w in waiting:
            w.callback(None)
        if (self.dirty or self._next_round) and self.is_active():
            self.reconcile(set())    # what is left to plan was noted: all, or some keys

    def next_round(self) -> defer.Deferred:
        """Fires when a round that starts after this call has finished."""
        d: defer.Deferred = defer.Deferred()
        self._next_round.append(d)
        self.reconcile()
        return d

    def replan(self, actions: Iterable[decisions.Action]) -> None:
        """The next round plans again the partitions these actions wrote (everything for other writes)."""
        self.dirty = True
        for action in actions:
            if isinstance(action, (decisions.CreateState, decisions.UpdateState, decisions.CompleteReassignment)):
                self._plan_keys.add((action.topic, action.partition))
            else:
                self._plan_all = True

    def replan_everything(self) -> None:
        """A write failed in a way the watches may not report: plan every partition next round."""
        self.dirty = self._plan_all = True

    def reset(self) -> None:
        """Resigned: forget what was to be planned; those waiting for a next round are answered."""
        self._plan_keys.clear()
        waiting, self._next_round = self._next_round, []
        for d in waiting:
            d.callback(None)
