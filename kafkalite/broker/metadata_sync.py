"""Keeps the :class:`MetadataCache` equal to ZooKeeper, through watches.

Design choice (ARCHITECTURE.md): brokers learn leadership and metadata by watching the same
znodes the controller writes (``/brokers/ids``, ``/brokers/topics/<t>``, each partition's
``state``, ``/config/topics/<t>``, ``/controller``, ``/admin/delete_topics``,
``/admin/preferred_replica_election``) instead of through
LeaderAndIsr/UpdateMetadata RPCs. Every watch callback arrives on the reactor thread (the
coordination layer marshals it) and only updates the cache and emits a typed :class:`MetadataChange`; the
broker reacts to each type in one place (``broker/metadata_router.py``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from twisted.internet import defer
from twisted.python.failure import Failure

from kafkalite.coordination.interfaces import Watch, ZooKeeper
from kafkalite.coordination.kafka_zk_client import leader_and_isr
from kafkalite.metadata import BrokerInfo, MetadataCache, TopicInfo
from kafkalite.metadata.admin_znode import AdminZNode
from zk_schema import paths
from zk_schema.admin import PreferredReplicaElection, ReassignPartitions
from zk_schema.brokers import BrokerRegistration
from zk_schema.cluster import ClusterIdZNode
from zk_schema.config import TopicConfigZNode
from zk_schema.controller import ControllerZNode
from zk_schema.errors import ZkDataError
from zk_schema.topics import TopicPartitionStateZNode, TopicZNode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetadataChange:
    """What a watch saw change; the broker reacts by the change's type (``broker/metadata_router.py``)."""


@dataclass(frozen=True)
class ControllerChanged(MetadataChange):
    """``/controller`` changed (a new controller, or none)."""


@dataclass(frozen=True)
class BrokersChanged(MetadataChange):
    """A broker registered, re-registered or went away (``/brokers/ids``)."""


@dataclass(frozen=True)
class TopicChanged(MetadataChange):
    """A topic appeared or its assignment changed (``/brokers/topics/<topic>``)."""
    topic: str


@dataclass(frozen=True)
class TopicRemoved(MetadataChange):
    """A topic's znode is gone (its deletion is complete)."""
    topic: str


@dataclass(frozen=True)
class TopicConfigChanged(MetadataChange):
    """``/config/topics/<topic>`` changed."""
    topic: str


@dataclass(frozen=True)
class PartitionStatesChanged(MetadataChange):
    """``state`` znodes (leader, ISR, epochs) changed: every one whose watch delivered within one
    reactor turn, in delivery order (a controller round's thousands of writes come back as a few
    such batches, which the broker applies in one pass, as Kafka's one LeaderAndIsr request)."""
    keys: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DeletingChanged(MetadataChange):
    """The topics marked for deletion (``/admin/delete_topics``) changed."""


@dataclass(frozen=True)
class PreferredElectionRequested(MetadataChange):
    """``/admin/preferred_replica_election`` was written or removed."""


@dataclass(frozen=True)
class ReassignmentRequested(MetadataChange):
    """``/admin/reassign_partitions`` was written or removed."""


class MetadataSync:
    """``call_soon(fn)`` runs ``fn`` later in this reactor turn (after the deliveries already
    queued: ``reactor.callLater(0, fn)``); partition-state deliveries are gathered until then and
    emitted as one :class:`PartitionStatesChanged`. Without it each is emitted at once."""

    def __init__(self, zk: ZooKeeper, cache: MetadataCache, on_change: Callable[[MetadataChange], None],
                 call_soon: Callable[[Callable[[], None]], Any] | None = None) -> None:
        self.zk = zk
        self.cache = cache
        self.on_change = on_change
        self.call_soon = call_soon
        #: partition states delivered since the last PartitionStatesChanged (insertion-ordered)
        self._changed_states: dict[tuple[str, int], None] = {}
        self.broker_watches: dict[int, Watch | None] = {}      # None: being installed
        self.topic_watches: dict[str, list[Watch]] = {}
        self.state_watches: dict[tuple[str, int], Watch | None] = {}
        self.deleting: set[str] = set()
        #: broker id -> czxid of its live registration znode: Kafka's broker epoch.
        self.broker_epochs: dict[int, int] = {}
        #: (topic, partition) -> czxid of its state znode: when the partition came to exist, which
        #: tells a broker whether a replica can predate its own start (ReplicaManager's is_new).
        self.state_czxids: dict[tuple[str, int], int] = {}
        #: the pending ``/admin/preferred_replica_election`` request, its znode version and mzxid
        #: (the mzxid tells a re-created znode from the one already handled: versions restart at 0)
        self.preferred_election: AdminZNode[PreferredReplicaElection] | None = None
        #: ``/admin/reassign_partitions`` (the ZooKeeper-era tool's request) or None
        self.reassign_request: AdminZNode[ReassignPartitions] | None = None
        self.loaded = False
        #: watches installed but not yet delivered once, and who waits for none to be left
        self._installing = 0
        self._view_waiters: list[defer.Deferred] = []

    @defer.inlineCallbacks
    def start(self) -> Any:
        data, _ = yield self.zk.get(paths.CLUSTER_ID)
        self.cache.cluster_id = ClusterIdZNode.decode(data).id
        yield self.zk.watch_data(paths.CONTROLLER, self._controller_changed)
        yield self.zk.watch_children(paths.BROKER_IDS, self._brokers_changed)
        yield self.zk.watch_children(paths.BROKER_TOPICS, self._topics_changed)
        yield self.zk.watch_children(paths.DELETE_TOPICS, self._deleting_changed)
        yield self.zk.watch_data(paths.PREFERRED_REPLICA_ELECTION, self._preferred_election_changed)
        yield self.zk.watch_data(paths.REASSIGN_PARTITIONS, self._reassign_request_changed)
        self.loaded = True

    def _emit(self, change: MetadataChange) -> None:
        try:
            self.on_change(change)
        except Exception:
            log.exception("metadata change handler failed for %s", change)

    # -- controller --------------------------------------------------------------------------------
    def _controller_changed(self, data: bytes | None, stat: Any) -> None:
        controller = -1
        if data:
            try:
                controller = ControllerZNode.decode(data).broker_id
            except ZkDataError as exc:
                log.warning("unreadable /controller: %s", exc)
        self.cache.controller_id = controller
        self._emit(ControllerChanged())

    # -- brokers -----------------------------------------------------------------------------------
    def _brokers_changed(self, children: list[str]) -> None:
        ids = {int(c) for c in children if c.isdigit()}
        for gone in set(self.broker_watches) - ids:
            watch = self.broker_watches.pop(gone)
            if watch is not None:
                watch.cancel()
            self.broker_epochs.pop(gone, None)
            if self.cache.brokers.pop(gone, None) is not None:
                log.info("broker %d left the cluster", gone)
                self._emit(BrokersChanged())
        for new in ids - set(self.broker_watches):
            self.broker_watches[new] = None
            self._watch(BrokerRegistration.path(new), partial(self._broker_data, new),
                        partial(self._keep_watch, self.broker_watches, new), f"broker {new}")

    def _watch(self, path: str, deliver: Callable[[bytes | None, Any], None],
               keep: Callable[[Watch], None], what: str) -> None:
        self._installing += 1
        d = self.zk.watch_data(path, deliver)    # fires after the first delivery has run
        d.addCallback(keep)
        d.addErrback(self._watch_failed, what)
        d.addBoth(self._installed)

    def _installed(self, _: Any) -> None:
        self._installing -= 1
        if self._installing == 0 and self.loaded:
            waiters, self._view_waiters = self._view_waiters, []
            for w in waiters:
                w.callback(None)

    def initial_view(self) -> defer.Deferred:
        """Fires once the cache holds what ZooKeeper held when :meth:`start` ran: every broker's
        registration, every topic's assignment and config and every partition's state (each watch
        installed so far has delivered once; a watch set by a delivery counts before that delivery
        ends). The broker serves clients only then."""
        if self.loaded and self._installing == 0:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._view_waiters.append(d)
        return d

    @staticmethod
    def _watch_failed(f: Failure, what: str) -> None:
        log.warning("cannot watch %s: %s", what, f.value)

    @staticmethod
    def _keep_watch(table: dict[Any, Watch | None], key: Any, watch: Watch) -> None:
        if key in table:
            table[key] = watch
        else:          # removed meanwhile
            watch.cancel()

    def _broker_data(self, broker_id: int, data: bytes | None, stat: Any = None) -> None:
        if data is None:
            self.broker_epochs.pop(broker_id, None)
            if self.cache.brokers.pop(broker_id, None) is not None:
                self._emit(BrokersChanged())
            return
        try:
            reg = BrokerRegistration.decode(data, broker_id)
        except ZkDataError as exc:
            log.warning("unreadable registration of broker %d: %s", broker_id, exc)
            return
        known = broker_id in self.cache.brokers
        if stat is not None:
            self.broker_epochs[broker_id] = int(stat.czxid)
        self.cache.brokers[broker_id] = BrokerInfo(
            broker_id, {ep.listener_name: (ep.host, ep.port) for ep in reg.endpoints}, reg.rack)
        if not known:
            log.info("broker %d joined the cluster", broker_id)
        self._emit(BrokersChanged())

    # -- topics ------------------------------------------------------------------------------------
    def _topics_changed(self, children: list[str]) -> None:
        names = set(children)
        for gone in set(self.topic_watches) - names:
            for w in self.topic_watches.pop(gone):
                if w is not None:
                    w.cancel()
            for key in [k for k in self.state_watches if k[0] == gone]:
                state_watch = self.state_watches.pop(key)
                if state_watch is not None:
                    state_watch.cancel()
                self.cache.states.pop(key, None)
                self.state_czxids.pop(key, None)
            if self.cache.topics.pop(gone, None) is not None:
                self._emit(TopicRemoved(gone))
        for new in names - set(self.topic_watches):
            self.topic_watches[new] = []
            self._watch(TopicZNode.path(new), partial(self._assignment_changed, new),
                        partial(self._keep_topic_watch, new), f"topic {new}")
            self._watch(TopicConfigZNode.path(new), partial(self._config_changed, new),
                        partial(self._keep_topic_watch, new), f"the config of topic {new}")

    def _keep_topic_watch(self, topic: str, watch: Watch) -> None:
        if topic in self.topic_watches:
            self.topic_watches[topic].append(watch)
        else:          # removed meanwhile
            watch.cancel()

    def _assignment_changed(self, topic: str, data: bytes | None, stat: Any = None) -> None:
        if data is None or topic not in self.topic_watches:
            return
        try:
            znode = TopicZNode.decode(data, topic)
        except ZkDataError as exc:
            log.warning("unreadable assignment of topic %s: %s", topic, exc)
            return
        info = self.cache.topics.get(topic)
        if info is None:
            info = self.cache.topics[topic] = TopicInfo(topic, {}, znode.topic_id, deleting=topic in self.deleting)
        info.assignment = znode.assignment()
        info.adding_replicas = {p: list(r) for p, r in znode.adding_replicas.items()}
        info.removing_replicas = {p: list(r) for p, r in znode.removing_replicas.items()}
        info.zk_version = -1 if stat is None else int(stat.version)
        info.topic_id = znode.topic_id
        for p in info.assignment:
            if (topic, p) not in self.state_watches:
                self.state_watches[(topic, p)] = None
                self._watch(TopicPartitionStateZNode.path(topic, p), partial(self._state_changed, topic, p),
                            partial(self._keep_watch, self.state_watches, (topic, p)), f"{topic}-{p}")
        self._emit(TopicChanged(topic))

    def _config_changed(self, topic: str, data: bytes | None, stat: Any = None) -> None:
        overrides: dict[str, str] = {}
        if data is not None:
            try:
                overrides = dict(TopicConfigZNode.decode(data).config)
            except ZkDataError as exc:
                log.warning("unreadable config of topic %s: %s", topic, exc)
                return
        info = self.cache.topics.get(topic)
        if info is None:
            info = self.cache.topics[topic] = TopicInfo(topic, {}, None, overrides, topic in self.deleting)
        elif info.config == overrides:
            return
        info.config = overrides
        self._emit(TopicConfigChanged(topic))

    def _state_changed(self, topic: str, partition: int, data: bytes | None, stat: Any) -> None:
        key = (topic, partition)
        if key not in self.state_watches:
            return
        if data is None:
            self.cache.states.pop(key, None)
            self.state_czxids.pop(key, None)
        else:
            try:
                z = TopicPartitionStateZNode.decode(data)
            except ZkDataError as exc:
                log.warning("unreadable state of %s-%d: %s", topic, partition, exc)
                return
            self.cache.states[key] = leader_and_isr(z, int(stat.version))
            self.state_czxids[key] = int(stat.czxid)
        if self.call_soon is None:
            self._emit(PartitionStatesChanged((key,)))
            return
        if not self._changed_states:
            self.call_soon(self._emit_states)
        self._changed_states[key] = None

    def _emit_states(self) -> None:
        """The states delivered this turn, as one change (the cache already holds them all)."""
        keys, self._changed_states = tuple(self._changed_states), {}
        if keys:
            self._emit(PartitionStatesChanged(keys))

    # -- deletion ----------------------------------------------------------------------------------
    def _deleting_changed(self, children: list[str]) -> None:
        self.deleting = set(children)
        for name, info in self.cache.topics.items():
            info.deleting = name in self.deleting
        self._emit(DeletingChanged())

    # -- preferred replica election (the ZooKeeper-era tool's request) --------------------------
    def _preferred_election_changed(self, data: bytes | None, stat: Any) -> None:
        request: AdminZNode[PreferredReplicaElection] | None = None
        if data is not None:
            try:
                request = AdminZNode(PreferredReplicaElection.decode(data), int(stat.version), int(stat.mzxid))
            except ZkDataError as exc:
                log.warning("ignoring unreadable %s: %s", paths.PREFERRED_REPLICA_ELECTION, exc)
        self.preferred_election = request
        self._emit(PreferredElectionRequested())

    # -- partition reassignment (the ZooKeeper-era tool's request) -----------------------------------
    def _reassign_request_changed(self, data: bytes | None, stat: Any) -> None:
        request: AdminZNode[ReassignPartitions] | None = None
        if data is not None:
            try:
                request = AdminZNode(ReassignPartitions.decode(data), int(stat.version))
            except ZkDataError as exc:
                log.warning("ignoring unreadable %s: %s", paths.REASSIGN_PARTITIONS, exc)
        self.reassign_request = request
        self._emit(ReassignmentRequested())
