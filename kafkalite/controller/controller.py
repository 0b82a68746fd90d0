"""The active controller: elected through ``/controller``, it keeps partition state right.

A short composition, as Kafka's ``KafkaController`` around its ``ControllerEventManager`` and
``ControllerContext``:

- election and resignation (here): ``/controller`` with the ``/controller_epoch`` bump; a
  resignation ends every part's work of that term;
- :class:`ControllerEventManager` (``event_manager.py``): one round at a time; every input asks
  for a round, which runs :meth:`Controller._round`: :func:`decisions.plan` over its view of the
  cluster, the writes, then the rounds' jobs below;
- :class:`ControllerContext` (``context.py``): the states it wrote itself, kept until the
  watches show them, so the next round does not plan them again;
- :class:`Reassignments` (``reassignments.py``), :class:`RequestedElections`
  (``elections.py``), :class:`OfflineReplicas` (``log_dirs.py``): the sub-machines, each with its
  own state and its job;
- controlled shutdown and the auto leader rebalance timer (here), inside the same rounds.

Every write goes through ``KafkaZkClient``'s one fenced write path: each is conditional on the
znode version it was computed from and on ``/controller_epoch`` still being at the version our
election produced, so a deposed controller cannot overwrite its successor (zookeeper-layout.md
§2). A fenced write raises ControllerMovedError out of whatever job made it, and
:meth:`Controller.job_failed` is the one place that reacts (the controller resigns, and every
request not yet answered gets NOT_CONTROLLER); a write that loses on the znode version
(ZkVersionConflictError) is recomputed when the watch delivers the newer state.

The view is the broker's metadata cache (what the watches say), read only.

Controlled shutdown (ControlledShutdown API 7, or a local call when the stopping broker is the
controller itself) adds the broker to ``shutting_down`` and answers once a reconciliation round
that started afterwards has written the new leaders, with the replicated partitions it still
leads. Auto leader rebalance runs every ``leader.imbalance.check.interval.seconds`` inside the
same serialised rounds, so all controller writes go through one fenced path.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from twisted.internet import defer, task
from twisted.python.failure import Failure

from kafkalite.controller import decisions
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.elections import RequestedElections
from kafkalite.controller.event_manager import ControllerEventManager
from kafkalite.controller.log_dirs import (DESCRIBE_LOG_DIRS_ATTEMPTS, DESCRIBE_LOG_DIRS_BACKOFF_S, BrokerOfflineReplicas,
                                         OfflineReplicas)
from kafkalite.controller.reassignments import Reassignments, only
from kafkalite.coordination.election import ControllerFence
from kafkalite.coordination.errors import (ClientClosedError, ControllerMovedError, NoNodeError,
                                           NodeExistsError, ZkVersionConflictError)
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.errors import ErrorCode
from kafkalite.metadata import MetadataCache
from kafkalite.metadata.admin_znode import AdminZNode
from zk_schema.admin import PreferredReplicaElection, ReassignPartitions

log = logging.getLogger(__name__)

__all__ = ["Controller", "DESCRIBE_LOG_DIRS_ATTEMPTS", "DESCRIBE_LOG_DIRS_BACKOFF_S", "ELECTION_RETRY_S"]

#: Seconds before a broker whose election attempt failed (not lost) tries again.
ELECTION_RETRY_S = 1.0

#: Partition-state writes the controller has in flight at once (one ZooKeeper session).
MAX_PIPELINED_WRITES = 500


def _pipelined(actions: list[decisions.Action]) -> Iterable[list[decisions.Action]]:
    """``actions`` in order, grouped: runs of partition-state writes (create or update) for
    distinct partitions form one group, up to :data:`MAX_PIPELINED_WRITES`; any other action is a
    group of its own."""
    batch: list[decisions.Action] = []
    keys: set[tuple[str, int]] = set()
    for action in actions:
        if isinstance(action, (decisions.CreateState, decisions.UpdateState)):
            key = (action.topic, action.partition)
            if key in keys or len(batch) >= MAX_PIPELINED_WRITES:
                yield batch
                batch, keys = [], set()
            batch.append(action)
            keys.add(key)
            continue
        if batch:
            yield batch
            batch, keys = [], set()
        yield [action]
    if batch:
        yield batch


class Controller:
    def __init__(self, broker_id: int, kafka_zk: KafkaZkClient, cache: MetadataCache,
                 deleting: Callable[[], set[str]], unclean: Callable[[str], bool], *,
                 config: Any = None, reactor: Any = None,
                 broker_epochs: Callable[[], dict[int, int]] = dict,
                 describe_log_dirs: Callable[[int], defer.Deferred] | None = None,
                 preferred_election: Callable[[], AdminZNode[PreferredReplicaElection] | None] = lambda: None,
                 reassign_request: Callable[[], AdminZNode[ReassignPartitions] | None] = lambda: None) -> None:
        self.broker_id = broker_id
        self.kafka_zk = kafka_zk      # election and the fenced write path
        self.cache = cache            # the watches' view: read, never written
        self.context = ControllerContext()
        self.deleting = deleting
        self.unclean = unclean
        self.active = False
        self.fence = ControllerFence(-1, -1)
        self.electing = False
        self.config = config
        self.reactor = reactor
        self.broker_epochs = broker_epochs     # broker id -> czxid of its registration (its epoch)
        #: Brokers in controlled shutdown -> their broker epoch when they asked (-1 unknown); an
        #: entry goes when that registration does (the broker stopped, or came back as a new epoch).
        self.shutting_down: dict[int, int] = {}
        self.rebalance_due = False
        self.rebalance_loop: task.LoopingCall | None = None
        self.events = ControllerEventManager(self._round, lambda: self.active, lambda: self.rebalance_due,
                                             self.job_failed)
        self.log_dirs = OfflineReplicas(self, describe_log_dirs)
        #: ``preferred_election()``: ``/admin/preferred_replica_election`` as the watch has it
        self.elections = RequestedElections(self, preferred_election)
        #: ``reassign_request()``: ``/admin/reassign_partitions`` as the watch has it
        self.reassignments = Reassignments(self, reassign_request)

    # -- the one reaction to being fenced --------------------------------------------------------
    def job_failed(self, failure: Failure, what: str) -> None:
        """Every controller job (a round, a batch of log-dir events) ends here when it fails: a
        fenced write (another controller was elected) makes this one resign; anything else is
        logged (the next change starts a new round)."""
        if failure.check(ControllerMovedError):
            if self.active:
                self.resign("the controller epoch moved on (another controller was elected)")
            return
        log.error("%s failed: %s", what, failure.getTraceback())

    # -- election --------------------------------------------------------------------------------
    @defer.inlineCallbacks
    def maybe_elect(self) -> Any:
        """Called when /controller is empty: try to become controller."""
        if self.electing or self.active:
            return
        self.electing = True
        try:
            result = yield self.kafka_zk.elect_controller(self.broker_id)
        except ClientClosedError:
            return                      # this broker is stopping
        except Exception as exc:
            # Nothing else would try again: the /controller watch fires only on a change, and
            # with every broker's attempt failed alike there is none.
            log.warning("controller election failed, trying again in %.1f s: %s", ELECTION_RETRY_S, exc)
            if self.reactor is not None:
                self.reactor.callLater(ELECTION_RETRY_S, self._elect_if_vacant)
            return
        finally:
            self.electing = False
        if result.won:
            self.active, self.fence = True, result.fence
            self.context.clear()
            log.info("broker %d is the controller (epoch %d)", self.broker_id, result.epoch)
            self._start_rebalance_loop()
            self.log_dirs.start()
            self.reconcile()

    def _elect_if_vacant(self) -> None:
        if self.cache.controller_id == -1 and not self.active:
            self.maybe_elect()

    def on_controller_changed(self) -> None:
        if self.cache.controller_id == -1:
            if self.active:
                self.resign("the /controller znode vanished")
            self.maybe_elect()
        elif self.cache.controller_id != self.broker_id and self.active:
            self.resign(f"broker {self.cache.controller_id} is now the controller")

    def resign(self, why: str) -> None:
        if self.active:
            log.info("broker %d resigns as controller: %s", self.broker_id, why)
        self.active = False
        self.context.clear()
        self.shutting_down.clear()
        self.log_dirs.stop()
        if self.rebalance_loop is not None and self.rebalance_loop.running:
            self.rebalance_loop.stop()
        self.rebalance_loop = None
        self.events.reset()
        self.elections.fail_all("this broker is no longer the controller")
        self.reassignments.fail_all("this broker is no longer the controller")

    @property
    def running(self) -> bool:
        """A round is under way."""
        return self.events.running

    # -- controlled shutdown ---------------------------------------------------------------------
    @defer.inlineCallbacks
    def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> Any:
        """Move ``broker_id``'s leaderships away and take it out of every ISR (Kafka's
        ``doControlledShutdown``); fires (error code, [(topic, partition)] it still leads)."""
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        if broker_id not in self.cache.brokers and broker_id != self.broker_id:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        known = self.broker_epochs().get(broker_id, -1)
        if broker_epoch >= 0 and known >= 0 and broker_epoch < known:
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down[broker_id] = broker_epoch if broker_epoch >= 0 else known
        log.info("controlled shutdown of broker %d requested", broker_id)
        yield self.next_round()
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        remaining = sorted(k for k, s in self.context.states(self.cache).items()
                           if s.leader == broker_id and k[0] in self.cache.topics
                           and len(self.cache.topics[k[0]].assignment.get(k[1], ())) > 1)
        log.info("controlled shutdown of broker %d: %d replicated partition(s) still led by it",
                 broker_id, len(remaining))
        return ErrorCode.NONE, remaining

    def next_round(self) -> defer.Deferred:
        """Fires when a reconciliation round that starts after this call has finished."""
        return self.events.next_round()

    def _forget_stopped(self) -> None:
        """Drop shutting-down brokers whose registration is gone or is a newer epoch."""
        epochs = self.broker_epochs()
        for b, epoch in list(self.shutting_down.items()):
            if b == self.broker_id:
                continue
            if b not in self.cache.brokers or (epoch >= 0 and epochs.get(b, epoch) != epoch):
                del self.shutting_down[b]

    # -- the parts' entry points ---------------------------------------------------------------------
    @property
    def offline_replicas(self) -> dict[int, BrokerOfflineReplicas]:
        """Broker -> what its DescribeLogDirs said, for its current epoch."""
        return self.log_dirs.by_broker

    def all_offline_replicas(self) -> set[decisions.OfflineReplica]:
        return self.log_dirs.all()

    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]]) -> defer.Deferred:
        """Fires {(topic, partition): ElectionResult} once every partition is decided and its
        write done (Kafka's ``electLeaders``); NOT_CONTROLLER when not active."""
        return self.elections.request(election_type, partitions)

    def reassign(self, targets: dict[tuple[str, int], tuple[int, ...] | None]) -> defer.Deferred:
        """Start (target replicas) or cancel (None) reassignments; fires {(topic, partition):
        (error code, message)} once each partition's topic znode is written (Kafka's
        ``alterPartitionReassignments``); NOT_CONTROLLER when not active."""
        return self.reassignments.request(targets)

    def ongoing_reassignments(self) -> dict[tuple[str, int], decisions.PartitionAssignment]:
        """ListPartitionReassignments: every partition whose topic znode shows a reassignment."""
        return self.reassignments.ongoing()

    def assignment_entries(self, topic: str) -> dict[int, decisions.PartitionAssignment]:
        """The topic znode's partitions with their reassignment fields (see ``reassignments.py``)."""
        return self.reassignments.assignment_entries(topic)

    # -- auto leader rebalance -------------------------------------------------------------------
    def _start_rebalance_loop(self) -> None:
        if self.config is None or self.reactor is None or not self.config["auto.leader.rebalance.enable"]:
            return
        loop = task.LoopingCall(self._rebalance_tick)
        loop.clock = self.reactor
        loop.start(self.config["leader.imbalance.check.interval.seconds"], now=False).addErrback(
            lambda f: log.error("leader rebalance check failed: %s", f.value))
        self.rebalance_loop = loop

    def _rebalance_tick(self) -> None:
        self.rebalance_due = True
        self.reconcile()

    # -- reconciliation --------------------------------------------------------------------------
    def on_states_changed(self, keys: Iterable[tuple[str, int]]) -> None:
        """Partitions' state znodes changed: plan those again, except the changes that are this
        controller's own writes coming back through the watches (the round after a write plans
        from it already). A topic of 1,000 partitions otherwise set off a round over every
        partition for each."""
        states = self.cache.states
        own = self.context.is_own_write if self.active else None
        changed = {key for key in keys
                   if own is None or (state := states.get(key)) is None or not own(key, state)}
        if changed:
            self.reconcile(changed)

    def reconcile(self, keys: set[tuple[str, int]] | None = None) -> None:
        """Ask for a round over every partition, or over ``keys`` only (see ``event_manager.py``)."""
        self.events.reconcile(keys)

    @defer.inlineCallbacks
    def _round(self, keys: set[tuple[str, int]] | None) -> Any:
        """One round over every partition (``keys`` None) or over ``keys`` only: plan and write,
        then the reassignments' and the requested elections' jobs."""
        states = self.context.states(self.cache)
        # An active controller is alive by definition, even while its own re-registration after
        # a new ZooKeeper session has not reached the watch yet.
        live = set(self.cache.brokers) | {self.broker_id}
        self._forget_stopped()
        self.log_dirs.forget_stale()
        offline = self.all_offline_replicas()
        assignments = {t: i.assignment for t, i in self.cache.topics.items()}
        if keys is not None:
            assignments = only(assignments, keys)
        actions: list[decisions.Action] = decisions.plan(live, assignments, states, self.deleting(),
                                                         self.fence.epoch, self.unclean, set(self.shutting_down),
                                                         offline_replicas=offline)
        if self.rebalance_due:
            self.rebalance_due = False
            touched = {(a.topic, a.partition) for a in actions if not isinstance(a, decisions.DeleteTopic)}
            # partitions being reassigned are left alone (Kafka skips them too)
            touched |= {(t, p) for t, info in self.cache.topics.items()
                        for p in set(info.adding_replicas) | set(info.removing_replicas)}
            actions += decisions.preferred_leader_actions(
                live, assignments, states, self.deleting(), self.fence.epoch, set(self.shutting_down),
                self.config["leader.imbalance.per.broker.percentage"], touched, offline_replicas=offline)
        for batch in _pipelined(actions):
            if not self.active:
                return
            # Partition-state writes of distinct partitions go out together, as Kafka's
            # controller pipelines its ZooKeeper requests: one round trip each in a row made a
            # 1,000-partition topic wait ~30 s for its leaders.
            outcomes = yield defer.DeferredList([self.execute(action) for action in batch], consumeErrors=True)
            self.events.replan(batch)      # plan once more from what was written (its echo does not trigger a round)
            for action, (ok, result) in zip(batch, outcomes):
                if not ok:
                    self._settle_failed_write(action, result.value)
        if self.active:
            yield self.reassignments.run(actions, keys)
        if self.active and self.elections.due():
            yield self.elections.run()

    def _settle_failed_write(self, action: decisions.Action, exc: BaseException) -> None:
        """Log a failed write; a fenced one ends the round (raised to :meth:`job_failed`)."""
        if isinstance(exc, ControllerMovedError):
            raise exc
        if isinstance(exc, ZkVersionConflictError):
            log.info("controller write %s lost a race: %s", action, exc)
        elif isinstance(exc, (NodeExistsError, NoNodeError)):
            log.info("controller write %s skipped: %s", action, exc)
        else:
            log.warning("controller write %s failed: %s", action, exc)
            self.events.replan_everything()

    @defer.inlineCallbacks
    def execute(self, action: decisions.Action) -> Any:
        """One planned write, through the fenced path."""
        if isinstance(action, decisions.CreateState):
            written = yield self.kafka_zk.create_leader_and_isr(action.topic, action.partition, action.state,
                                                                self.fence)
            self.context.wrote(action.topic, action.partition, written)
            log.info("%s-%d: created with leader %d, ISR %s", action.topic, action.partition,
                     written.leader, list(written.isr))
        elif isinstance(action, decisions.UpdateState):
            written = yield self.kafka_zk.update_leader_and_isr(
                action.topic, action.partition, action.state.with_version(action.expected_version), self.fence)
            self.context.wrote(action.topic, action.partition, written)
            log.info("%s-%d: leader %d, ISR %s, epoch %d (%s)", action.topic, action.partition, written.leader,
                     list(written.isr), written.leader_epoch, action.reason)
        elif isinstance(action, decisions.CompleteReassignment):
            entries = self.assignment_entries(action.topic)
            entries[action.partition] = decisions.PartitionAssignment(action.replicas)
            yield self.reassignments.write_topic(action.topic, entries)
            log.info("%s-%d: reassignment completed, replicas %s", action.topic, action.partition,
                     list(action.replicas))
        elif isinstance(action, decisions.DeleteTopic):
            yield self.kafka_zk.delete_topic(action.topic, self.fence)
            self.context.forget_topic(action.topic)
            self.reassignments.forget_topic(action.topic)
            log.info("deleted topic %s", action.topic)
