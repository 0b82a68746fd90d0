"""``KafkaZkClient``: the Kafka-domain ZooKeeper operations a kafkalite broker needs.

Mirrors Kafka's ``KafkaZkClient``/``AdminZkClient`` on top of any :class:`~.interfaces.ZooKeeper`
session (kazoo's :class:`~.client.ZooKeeperClient`, or the in-process tier's
:class:`~.memory.MemoryZooKeeperClient` passed as ``zk=``): every method runs in the reactor thread, returns a Deferred firing in the reactor thread, and
reads/writes payloads only through :mod:`zk_schema`, so the tree stays readable by Kafka's
own tools. Controller-only writes take an optional ``controller_epoch_zk_version`` and are
then fenced on ``/controller_epoch``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

from twisted.internet import defer

from kafkalite.coordination import election, producer_ids
from kafkalite.coordination.errors import (BadVersionError, InvalidTopicError, NodeExistsError, NoNodeError,
                                           TopicAlreadyExistsError, TransactionFailedError)
from kafkalite.coordination.interfaces import SessionState, Watch, ZooKeeper
from kafkalite.coordination.ops import (BadVersion, ConditionalSetResult, CreateOp, Op,
                                        SetDataOp, Updated, Versioned)
from kafkalite.coordination.registration import EphemeralRegistry, broker_id_in_use
from zk_schema import (PERSISTENT_PATHS, BrokerRegistration, ClusterIdZNode,
                       ConfigEntityChangeNotification, DeleteTopicsZNode, PartitionState,
                       PRODUCER_ID_BLOCK_SIZE, TopicConfigZNode, TopicPartitionsZNode,
                       TopicPartitionZNode, TopicZNode, collides_with, new_topic_id,
                       paths, validate_topic_name)

log = logging.getLogger(__name__)


class KafkaZkClient:
    """One broker's ZooKeeper session plus Kafka's znode operations."""

    def __init__(self, connect: str | None = None, session_timeout_ms: int = 18000,
                 connect_timeout_ms: int | None = None, reactor: Any = None,
                 registration_grace_ms: int = 3000, *, zk: ZooKeeper | None = None) -> None:
        """Either ``connect`` (a kazoo session is made from it and the other arguments) or
        ``zk``, an existing session not yet started (its own timeout and reactor apply)."""
        if zk is None:
            if connect is None:
                raise TypeError("KafkaZkClient needs zookeeper.connect or an existing session (zk=)")
            # imported here so a KafkaZkClient over the in-memory ZooKeeper never loads kazoo
            from kafkalite.coordination.client import ZooKeeperClient
            zk = ZooKeeperClient(connect, session_timeout_ms, connect_timeout_ms, reactor)
        elif connect is not None:
            raise TypeError("KafkaZkClient takes zookeeper.connect or zk=, not both")
        self.zk: ZooKeeper = zk
        self.ephemerals = EphemeralRegistry(self.zk, grace_ms=registration_grace_ms)

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> defer.Deferred:
        """Connect (creating the chroot if needed)."""
        return self.zk.start()

    def stop(self, limit: float = 2.0) -> defer.Deferred:
        """Close the session; fires False if kazoo was still stopping after ``limit`` s."""
        return self.zk.stop(limit)

    def add_state_listener(self, callback: Callable[[SessionState], None]) -> None:
        self.zk.add_state_listener(callback)

    @defer.inlineCallbacks
    def create_persistent_paths(self) -> Any:
        """Create Kafka's startup paths (``ZkData.PersistentZkPaths``) if missing."""
        for path in PERSISTENT_PATHS:
            yield self.zk.ensure_path(path)

    @defer.inlineCallbacks
    def ensure_cluster_id(self, proposed: str | None = None) -> Any:
        """Fires the cluster id: ours if we created ``/cluster/id``, else the stored one."""
        node = ClusterIdZNode(proposed) if proposed else ClusterIdZNode.generate()
        try:
            yield self.zk.create(ClusterIdZNode.PATH, node.encode(), makepath=True)
            log.info("created cluster id %s", node.id)
            return node.id
        except NodeExistsError:
            data, _ = yield self.zk.get(ClusterIdZNode.PATH)
            return ClusterIdZNode.decode(data).id

    # ---- brokers ---------------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration) -> defer.Deferred:
        """Create ``/brokers/ids/<id>``; fires the broker epoch (czxid).

        Re-created automatically after a session expiry (see :mod:`registration`); fails
        with :class:`BrokerIdInUseError` if another live session keeps the node.
        """
        path = BrokerRegistration.path(registration.broker_id)
        d = self.zk.ensure_path(paths.BROKER_IDS)
        d.addCallback(lambda _: self.ephemerals.register(path, registration.encode()))
        return d.addErrback(broker_id_in_use(registration.broker_id))

    def add_reregistration_listener(self, callback: Callable[[str, int], None]) -> None:
        """``callback(path, czxid)`` after an owned ephemeral was re-created in a new session."""
        self.ephemerals.add_recreated_listener(callback)

    def add_reregistration_failure_listener(
            self, callback: Callable[[str, BaseException], None]) -> None:
        self.ephemerals.add_failure_listener(callback)

    @defer.inlineCallbacks
    def get_live_brokers(self) -> Any:
        """Fires {broker id: BrokerRegistration} of the registered brokers."""
        ids = yield self.zk.get_children(paths.BROKER_IDS)
        result: dict[int, BrokerRegistration] = {}
        for name in ids:
            data, _ = yield self.zk.get_or_none(BrokerRegistration.path(int(name)))
            if data is not None:
                result[int(name)] = BrokerRegistration.decode(data, int(name))
        return dict(sorted(result.items()))

    def watch_brokers(self, callback: Callable[[list[int]], None]) -> defer.Deferred:
        """``callback(sorted live broker ids)`` now and on every join/leave; fires a Watch."""
        return self.zk.watch_children(
            paths.BROKER_IDS, lambda names: callback(sorted(int(n) for n in names)))

    # ---- controller ------------------------------------------------------------------------

    def elect_controller(self, broker_id: int) -> defer.Deferred:
        """Fires :class:`election.ElectionResult` (won, controller_id, epoch, epoch_zk_version)."""
        return election.elect_controller(self.zk, broker_id)

    def watch_controller(self, callback: Callable[[int | None], None]) -> defer.Deferred:
        return election.watch_controller(self.zk, callback)

    def get_controller_id(self) -> defer.Deferred:
        return election.get_controller_id(self.zk)

    def fenced_transaction(self, epoch_zk_version: int, ops: Sequence[Op]) -> defer.Deferred:
        """Multi-op guarded by ``check(/controller_epoch, epoch_zk_version)``."""
        return election.fenced_multi(self.zk, epoch_zk_version, ops)

    def _write(self, ops: Sequence[Op], epoch_zk_version: int | None) -> defer.Deferred:
        if epoch_zk_version is None:
            return self.zk.multi(ops)
        return self.fenced_transaction(epoch_zk_version, ops)

    # ---- topics ----------------------------------------------------------------------------

    def get_all_topics(self) -> defer.Deferred:
        """Fires the sorted topic names under ``/brokers/topics``."""
        return self.zk.get_children(paths.BROKER_TOPICS).addCallback(sorted)

    def watch_topics(self, callback: Callable[[list[str]], None]) -> defer.Deferred:
        return self.zk.watch_children(paths.BROKER_TOPICS, callback)

    @defer.inlineCallbacks
    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]],
                     config: Mapping[str, str] | None = None,
                     topic_id: str | None = None) -> Any:
        """Write ``/config/topics/<t>`` then ``/brokers/topics/<t>``; fires the TopicZNode.

        Raises InvalidTopicNameError (bad name), InvalidTopicError ('.'/'_' collision),
        TopicAlreadyExistsError (also when a concurrent creator wins the final create).
        """
        validate_topic_name(topic)
        existing = yield self.get_all_topics()
        if topic in existing:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        clash = collides_with(topic, existing)
        if clash:
            raise InvalidTopicError(
                f"Topic '{topic}' collides with existing topics: {', '.join(clash)}")
        node = TopicZNode({p: tuple(r) for p, r in assignment.items()},
                          topic_id=topic_id or new_topic_id())
        yield self._set_or_create(TopicConfigZNode.path(topic),
                                  TopicConfigZNode(dict(config or {})).encode())
        try:
            yield self.zk.create(TopicZNode.path(topic), node.encode(), makepath=True)
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None
        log.info("created topic %s with %d partitions", topic, len(node.partitions))
        return node

    @defer.inlineCallbacks
    def get_topic_assignment(self, topic: str) -> Any:
        """Fires Versioned[TopicZNode] or None if the topic does not exist."""
        data, stat = yield self.zk.get_or_none(TopicZNode.path(topic))
        if stat is None:
            return None
        return Versioned(TopicZNode.decode(data, topic), int(stat.version))

    def set_topic_assignment(self, topic: str, node: TopicZNode,
                             expected_version: int = -1) -> defer.Deferred:
        """Replace the assignment (CreatePartitions, reassignment); fires Updated/BadVersion."""
        return self.zk.conditional_set(TopicZNode.path(topic), node.encode(), expected_version)

    @defer.inlineCallbacks
    def create_partition_states(self, topic: str, states: Mapping[int, PartitionState],
                                controller_epoch_zk_version: int | None = None) -> Any:
        """Create ``partitions``, ``partitions/<p>`` and ``partitions/<p>/state``.

        Fires {partition: state zkVersion}. Writes are fenced when a token is given. A
        partition whose state node already exists raises NodeExistsError.
        """
        yield self._create_if_missing(TopicPartitionsZNode.path(topic), controller_epoch_zk_version)
        versions: dict[int, int] = {}
        for p, state in sorted(states.items()):
            yield self._create_if_missing(TopicPartitionZNode.path(topic, p),
                                          controller_epoch_zk_version)
            try:
                yield self._write([CreateOp(PartitionState.path(topic, p), state.encode())],
                                  controller_epoch_zk_version)
            except TransactionFailedError as exc:
                raise exc.error from None
            versions[p] = 0
        return versions

    @defer.inlineCallbacks
    def _create_if_missing(self, path: str, epoch_zk_version: int | None) -> Any:
        try:
            yield self._write([CreateOp(path)], epoch_zk_version)
        except TransactionFailedError as exc:
            if not isinstance(exc.error, NodeExistsError):
                raise exc.error from None

    @defer.inlineCallbacks
    def get_partition_state(self, topic: str, partition: int) -> Any:
        """Fires Versioned[PartitionState] or None if there is no state znode."""
        data, stat = yield self.zk.get_or_none(PartitionState.path(topic, partition))
        if stat is None:
            return None
        return Versioned(PartitionState.decode(data), int(stat.version))

    @defer.inlineCallbacks
    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               expected_version: int,
                               controller_epoch_zk_version: int | None = None) -> Any:
        """Conditional setData of the state znode; fires Updated or BadVersion.

        Fenced (ControllerMovedError) when ``controller_epoch_zk_version`` is given.
        """
        path = PartitionState.path(topic, partition)
        if controller_epoch_zk_version is None:
            result = yield self.zk.conditional_set(path, state.encode(), expected_version)
            return result
        try:
            results = yield self.fenced_transaction(
                controller_epoch_zk_version, [SetDataOp(path, state.encode(), expected_version)])
        except TransactionFailedError as exc:
            if isinstance(exc.error, BadVersionError):
                return BadVersion(path, expected_version)
            raise exc.error from None
        return Updated(results[0])

    def mark_topic_for_deletion(self, topic: str) -> defer.Deferred:
        """Create ``/admin/delete_topics/<t>``; fires False if it was already queued."""
        d = self.zk.create(DeleteTopicsZNode.path(topic), DeleteTopicsZNode.encode(),
                           makepath=True)

        def queued(f: Any) -> bool:
            f.trap(NodeExistsError)
            return False
        return d.addCallbacks(lambda _: True, queued)

    def get_topics_marked_for_deletion(self) -> defer.Deferred:
        return self.zk.get_children(DeleteTopicsZNode.PATH).addCallback(sorted)

    @defer.inlineCallbacks
    def delete_topic_znodes(self, topic: str) -> Any:
        """Delete the assignment subtree, the config and the deletion marker (not fenced)."""
        yield self.zk.delete_recursive(TopicZNode.path(topic))
        yield self.zk.delete_recursive(TopicConfigZNode.path(topic))
        yield self.zk.delete_recursive(DeleteTopicsZNode.path(topic))

    # ---- configs ---------------------------------------------------------------------------

    @defer.inlineCallbacks
    def get_topic_config(self, topic: str) -> Any:
        """Fires the topic's overrides ({} if none or missing)."""
        data, _ = yield self.zk.get_or_none(TopicConfigZNode.path(topic))
        return {} if data is None else dict(TopicConfigZNode.decode(data).config)

    @defer.inlineCallbacks
    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> Any:
        """Replace the overrides and notify every broker; fires the notification path."""
        yield self._set_or_create(TopicConfigZNode.path(topic),
                                  TopicConfigZNode(dict(config)).encode())
        created = yield self.zk.create(ConfigEntityChangeNotification.path_prefix(),
                                       ConfigEntityChangeNotification.for_topic(topic).encode(),
                                       sequence=True, makepath=True)
        return created

    @defer.inlineCallbacks
    def _set_or_create(self, path: str, data: bytes) -> Any:
        try:
            yield self.zk.set(path, data)
        except NoNodeError:
            try:
                yield self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                yield self.zk.set(path, data)

    # ---- producer ids ----------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int,
                                   size: int = PRODUCER_ID_BLOCK_SIZE) -> defer.Deferred:
        """Fires (start, end) of a block no other broker will ever get."""
        return producer_ids.allocate_producer_id_block(self.zk, broker_id, size)


__all__ = ["KafkaZkClient", "Watch", "ConditionalSetResult"]
