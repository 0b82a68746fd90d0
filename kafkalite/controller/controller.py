"""The active controller: elected through ``/controller``, it keeps partition state right.

After every metadata change it runs :func:`decisions.plan` over the cache and executes the
resulting writes one by one, each fenced: a multi-op that first checks ``/controller_epoch`` is
still at the version our election produced, so a deposed controller cannot overwrite its
successor (zookeeper-layout.md §2). A state write that loses on the znode version is simply
recomputed when the watch delivers the newer state.

Controlled shutdown (ControlledShutdown API 7, or a local call when the stopping broker is the
controller itself) adds the broker to ``shutting_down`` and answers once a reconciliation round
that started afterwards has written the new leaders, with the replicated partitions it still
leads. Auto leader rebalance runs every ``leader.imbalance.check.interval.seconds`` inside the
same serialised rounds, so all controller writes go through one fenced path.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer, task
from twisted.python.failure import Failure

from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.partition import PartitionState
from kafkalite.controller import decisions
from kafkalite.coordination.errors import BadVersionError, NoNodeError, NodeExistsError, TransactionFailedError
from kafkalite.coordination.ops import CheckOp, CreateOp, DeleteOp, SetDataOp
from kafkalite.errors import ErrorCode
from zk_schema import paths
from zk_schema.admin import DeleteTopicsZNode
from zk_schema.config import TopicConfigZNode
from zk_schema.topics import PartitionState as StateZNode
from zk_schema.topics import TopicPartitionZNode, TopicZNode

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, broker_id: int, zk: Any, kafka_zk: Any, cache: MetadataCache,
                 deleting: Callable[[], set[str]], unclean: Callable[[str], bool], *,
                 config: Any = None, reactor: Any = None,
                 broker_epochs: Callable[[], dict[int, int]] = dict) -> None:
        self.broker_id = broker_id
        self.zk = zk                  # coordination.ZooKeeperClient
        self.kafka_zk = kafka_zk      # Kafka-domain operations (election)
        self.cache = cache
        self.deleting = deleting
        self.unclean = unclean
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.running = False
        self.dirty = False
        self.electing = False
        self.config = config
        self.reactor = reactor
        self.broker_epochs = broker_epochs     # broker id -> czxid of its registration (its epoch)
        #: Brokers in controlled shutdown -> their broker epoch when they asked (-1 unknown); an
        #: entry goes when that registration does (the broker stopped, or came back as a new epoch).
        self.shutting_down: dict[int, int] = {}
        self.rebalance_due = False
        self.rebalance_loop: task.LoopingCall | None = None
        self._next_round: list[defer.Deferred] = []     # waiting for a round not yet started
        self._this_round: list[defer.Deferred] = []     # waiting for the running round

    # -- election --------------------------------------------------------------------------------
    @defer.inlineCallbacks
    def maybe_elect(self) -> Any:
        """Called when /controller is empty: try to become controller."""
        if self.electing or self.active:
            return
        self.electing = True
        try:
            result = yield self.kafka_zk.elect_controller(self.broker_id)
        except Exception as exc:
            log.warning("controller election failed: %s", exc)
            return
        finally:
            self.electing = False
        if result.won:
            self.active, self.epoch, self.epoch_zk_version = True, result.epoch, result.epoch_zk_version
            log.info("broker %d is the controller (epoch %d)", self.broker_id, result.epoch)
            self._start_rebalance_loop()
            self.reconcile()

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
        self.shutting_down.clear()
        if self.rebalance_loop is not None and self.rebalance_loop.running:
            self.rebalance_loop.stop()
        self.rebalance_loop = None
        waiting, self._next_round = self._next_round, []
        for d in waiting:
            d.callback(None)

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
        remaining = sorted(k for k, s in self.cache.states.items()
                           if s.leader == broker_id and k[0] in self.cache.topics
                           and len(self.cache.topics[k[0]].assignment.get(k[1], ())) > 1)
        log.info("controlled shutdown of broker %d: %d replicated partition(s) still led by it",
                 broker_id, len(remaining))
        return ErrorCode.NONE, remaining

    def next_round(self) -> defer.Deferred:
        """Fires when a reconciliation round that starts after this call has finished."""
        d: defer.Deferred = defer.Deferred()
        self._next_round.append(d)
        self.reconcile()
        return d

    def _forget_stopped(self) -> None:
        """Drop shutting-down brokers whose registration is gone or is a newer epoch."""
        epochs = self.broker_epochs()
        for b, epoch in list(self.shutting_down.items()):
            if b == self.broker_id:
                continue
            if b not in self.cache.brokers or (epoch >= 0 and epochs.get(b, epoch) != epoch):
                del self.shutting_down[b]

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
    def reconcile(self) -> None:
        """Run plan() and its writes; changes arriving meanwhile trigger one more round."""
        if not self.active:
            return
        if self.running:
            self.dirty = True
            return
        self.running = True
        self.dirty = False
        self._this_round, self._next_round = self._next_round, []
        d = self._round()

        def done(result: Any) -> None:
            self.running = False
            waiting, self._this_round = self._this_round, []
            for w in waiting:
                w.callback(None)
            if isinstance(result, Failure):
                log.error("controller round failed: %s", result.getTraceback())
            if (self.dirty or self._next_round) and self.active:
                self.reconcile()
        d.addBoth(done)

    @defer.inlineCallbacks
    def _round(self) -> Any:
        states = {k: decisions.State(s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch, s.zk_version)
                  for k, s in self.cache.states.items()}
        # An active controller is alive by definition, even while its own re-registration after
        # a new ZooKeeper session has not reached the watch yet.
        live = set(self.cache.brokers) | {self.broker_id}
        self._forget_stopped()
        assignments = {t: i.assignment for t, i in self.cache.topics.items()}
        actions: list[decisions.Action] = decisions.plan(live, assignments, states, self.deleting(),
                                                         self.epoch, self.unclean, set(self.shutting_down))
        if self.rebalance_due:
            self.rebalance_due = False
            touched = {(a.topic, a.partition) for a in actions if not isinstance(a, decisions.DeleteTopic)}
            actions += decisions.preferred_leader_actions(
                live, assignments, states, self.deleting(), self.epoch, set(self.shutting_down),
                self.config["leader.imbalance.per.broker.percentage"], touched)
        for action in actions:
            if not self.active:
                return
            try:
                yield self._execute(action)
            except TransactionFailedError as exc:
                if self._fenced(exc):
                    self.resign("the controller epoch moved on (another controller was elected)")
                    return
                log.info("controller write %s lost a race: %s", action, exc)
            except (NodeExistsError, NoNodeError, BadVersionError) as exc:
                log.info("controller write %s skipped: %s", action, exc)
            except Exception as exc:
                log.warning("controller write %s failed: %s", action, exc)
                self.dirty = True

    def _fenced(self, exc: TransactionFailedError) -> bool:
        results = getattr(exc, "results", None) or []
        return bool(results) and isinstance(results[0], Exception) and "BadVersion" in type(results[0]).__name__

    def _guard(self) -> CheckOp:
        return CheckOp(paths.CONTROLLER_EPOCH, self.epoch_zk_version)

    def _remember(self, topic: str, partition: int, state: decisions.State, zk_version: int) -> None:
        """Record our own write in the view at once (Kafka's controller context does the same), so
        the next round does not plan it again before the watch reports it."""
        if (topic, partition) in self.cache.states or topic in self.cache.topics:
            self.cache.states[(topic, partition)] = PartitionState(
                state.leader, state.leader_epoch, list(state.isr), state.controller_epoch, zk_version)

    @defer.inlineCallbacks
    def _execute(self, action: decisions.Action) -> Any:
        if isinstance(action, decisions.CreateState):
            yield self.zk.ensure_path(TopicPartitionZNode.path(action.topic, action.partition))
            z = StateZNode(action.state.leader, action.state.leader_epoch, action.state.isr, action.state.controller_epoch)
            yield self.zk.multi([self._guard(), CreateOp(StateZNode.path(action.topic, action.partition), z.encode())])
            self._remember(action.topic, action.partition, action.state, 0)
            log.info("%s-%d: created with leader %d, ISR %s", action.topic, action.partition,
                     action.state.leader, list(action.state.isr))
        elif isinstance(action, decisions.UpdateState):
            z = StateZNode(action.state.leader, action.state.leader_epoch, action.state.isr, action.state.controller_epoch)
            yield self.zk.multi([self._guard(), SetDataOp(StateZNode.path(action.topic, action.partition), z.encode(),
                                                          action.expected_version)])
            self._remember(action.topic, action.partition, action.state, action.expected_version + 1)
            log.info("%s-%d: leader %d, ISR %s, epoch %d (%s)", action.topic, action.partition, action.state.leader,
                     list(action.state.isr), action.state.leader_epoch, action.reason)
        elif isinstance(action, decisions.DeleteTopic):
            for attempt in range(3):
                ops: list[Any] = [self._guard(), CheckOp(DeleteTopicsZNode.path(action.topic), -1)]
                for path in (TopicZNode.path(action.topic), TopicConfigZNode.path(action.topic)):
                    ops += [DeleteOp(p, -1) for p in (yield self._subtree_bottom_up(path))]
                ops.append(DeleteOp(DeleteTopicsZNode.path(action.topic), -1))
                try:
                    yield self.zk.multi(ops)
                    break
                except TransactionFailedError as exc:
                    # A node appeared or vanished under us (NotEmpty/NoNode): re-list and retry;
                    # a failed epoch check is re-raised so the round resigns.
                    if self._fenced(exc) or attempt == 2:
                        raise
            log.info("deleted topic %s", action.topic)

    @defer.inlineCallbacks
    def _subtree_bottom_up(self, root: str) -> Any:
        """``root`` and every descendant, children before parents (one fenced multi deletes them
        all: Kafka wraps its recursive topic deletion in the controller-epoch check too)."""
        found: list[str] = []
        todo = [root]
        while todo:
            path = todo.pop()
            try:
                children = yield self.zk.get_children(path)
            except NoNodeError:
                continue
            found.append(path)
            todo += [f"{path}/{c}" for c in children]
        return list(reversed(found))
