"""The active controller: elected through ``/controller``, it keeps partition state right.

After every metadata change it runs :func:`decisions.plan` over the cache and executes the
resulting writes one by one, each fenced: a multi-op that first checks ``/controller_epoch`` is
still at the version our election produced, so a deposed controller cannot overwrite its
successor (zookeeper-layout.md §2). A state write that loses on the znode version is simply
recomputed when the watch delivers the newer state.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.broker.partition import PartitionState
from kafkalite.controller import decisions
from kafkalite.coordination.errors import BadVersionError, NoNodeError, NodeExistsError, TransactionFailedError
from kafkalite.coordination.ops import CheckOp, CreateOp, SetDataOp
from zk_schema import paths
from zk_schema.admin import DeleteTopicsZNode
from zk_schema.config import TopicConfigZNode
from zk_schema.topics import PartitionState as StateZNode
from zk_schema.topics import TopicPartitionZNode, TopicZNode

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, broker_id: int, zk: Any, kafka_zk: Any, cache: MetadataCache,
                 deleting: Callable[[], set[str]], unclean: Callable[[str], bool]) -> None:
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
        self.shutting_down: set[int] = set()

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
        d = self._round()

        def done(_: Any) -> None:
            self.running = False
            if self.dirty and self.active:
                self.reconcile()
        d.addBoth(done)

    @defer.inlineCallbacks
    def _round(self) -> Any:
        states = {k: decisions.State(s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch, s.zk_version)
                  for k, s in self.cache.states.items()}
        # An active controller is alive by definition, even while its own re-registration after
        # a new ZooKeeper session has not reached the watch yet.
        live = set(self.cache.brokers) | {self.broker_id}
        actions = decisions.plan(live,
                                 {t: i.assignment for t, i in self.cache.topics.items()},
                                 states, self.deleting(),
                                 self.epoch, self.unclean, self.shutting_down)
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
            yield self.zk.multi([self._guard(), CheckOp(DeleteTopicsZNode.path(action.topic), -1)])
            for path in (TopicZNode.path(action.topic), TopicConfigZNode.path(action.topic),
                         DeleteTopicsZNode.path(action.topic)):
                try:
                    yield self.zk.delete_recursive(path)
                except NoNodeError:
                    pass
            log.info("deleted topic %s", action.topic)
