"""``KafkaZkClient``: the Kafka-domain ZooKeeper operations a kafkalite broker needs.

Mirrors Kafka's ``KafkaZkClient``/``AdminZkClient`` on top of any :class:`~.interfaces.ZooKeeper`
session (kazoo's :class:`~.client.ZooKeeperClient`, or the in-process tier's
:class:`~.memory.MemoryZooKeeperClient` passed as ``zk=``): every method runs in the reactor thread, returns a Deferred firing in the reactor thread, and
reads/writes payloads only through :mod:`zk_schema`, so the tree stays readable by Kafka's
own tools. Partition state has one write path for every writer (``update_leader_and_isr``):
the controller's writes carry its :class:`ControllerFence` and fail with ControllerMovedError
once another controller was elected; every write is conditional on the znode version it was
computed from and a lost race is a :class:`ZkVersionConflictError`.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

from twisted.internet import defer

from kafkalite.coordination import election, producer_ids
from kafkalite.coordination.election import ControllerFence
from kafkalite.coordination.errors import (BadVersionError, InvalidTopicError, NodeExistsError, NoNodeError,
                                           NotEmptyError, TopicAlreadyExistsError, TransactionFailedError,
                                           ZkVersionConflictError)
from kafkalite.coordination.interfaces import SessionState, Watch, ZooKeeper
from kafkalite.coordination.ops import (CheckOp, ConditionalSetResult, CreateOp, DeleteOp, Op,
                                        SetDataOp, Versioned)
from kafkalite.coordination.registration import EphemeralRegistry, broker_id_in_use
from kafkalite.metadata.state import LeaderAndIsr
from zk_schema import (PERSISTENT_PATHS, BrokerRegistration, ClusterIdZNode,
                       ConfigEntityChangeNotification, ConfigEntityZNode, DeleteTopicsZNode, LogDirEventNotification,
                       PRODUCER_ID_BLOCK_SIZE, TopicConfigZNode, TopicPartitionsZNode,
                       TopicPartitionStateZNode, TopicPartitionZNode, TopicZNode, ZkDataError,
                       collides_with, new_topic_id, paths, sanitize, sequence_number, validate_topic_name)

log = logging.getLogger(__name__)


def state_znode(state: LeaderAndIsr) -> TopicPartitionStateZNode:
    """The state znode's payload for ``state`` (its zkVersion is not part of the data)."""
    return TopicPartitionStateZNode(state.leader, state.leader_epoch, state.isr, state.controller_epoch)


def leader_and_isr(znode: TopicPartitionStateZNode, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(znode.leader, znode.leader_epoch, znode.isr, znode.controller_epoch, zk_version)


class KafkaZkClient:
    """One broker's ZooKeeper session plus Kafka's znode operations."""

    def __init__(self, connect: str | None = None, session_timeout_ms: int = 18000,
                 connect_timeout_ms: int | None = None, reactor: Any = None,
                 registration_grace_ms: int = 3000, *, zk: ZooKeeper | None = None,
                 secure: bool = False, digest_auth: tuple[str, str] | None = None) -> None:
        """Either ``connect`` (a kazoo session is made from it and the other arguments) or
        ``zk``, an existing session not yet started (its own timeout and reactor apply).
        ``secure``/``digest_auth``: ``zookeeper.set.acl`` and the ZooKeeper login (ZooKeeperClient)."""
        if zk is None:
            if connect is None:
                raise TypeError("KafkaZkClient needs zookeeper.connect or an existing session (zk=)")
            # imported here so a KafkaZkClient over the in-memory ZooKeeper never loads kazoo
            from kafkalite.coordination.client import ZooKeeperClient
            zk = ZooKeeperClient(connect, session_timeout_ms, connect_timeout_ms, reactor,
                                 secure=secure, digest_auth=digest_auth)
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

    def update_broker_info(self, registration: BrokerRegistration) -> defer.Deferred:
        """Re-write our ``/brokers/ids/<id>`` (Kafka's updateBrokerInfo, after a dynamic listener
        change): the other brokers' watches see the new endpoints; the broker epoch (czxid) stays."""
        return self.ephemerals.update(BrokerRegistration.path(registration.broker_id), registration.encode())

    def add_reregistration_listener(self, callback: Callable[[str, int], None]) -> None:
        """``callback(path, czxid)`` after an owned ephemeral was re-created in a new session."""
        self.ephemerals.add_recreated_listener(callback)

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

    # ---- controller ------------------------------------------------------------------------

    def elect_controller(self, broker_id: int) -> defer.Deferred:
        """Fires :class:`election.ElectionResult` (won, controller_id, epoch, epoch_zk_version)."""
        return election.elect_controller(self.zk, broker_id)

    # ---- topics ----------------------------------------------------------------------------

    def get_all_topics(self) -> defer.Deferred:
        """Fires the sorted topic names under ``/brokers/topics``."""
        return self.zk.get_children(paths.BROKER_TOPICS).addCallback(sorted)

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

    # ---- partition state: the one fenced write path ---------------------------------------

    @defer.inlineCallbacks
    def get_partition_state(self, topic: str, partition: int) -> Any:
        """Fires the partition's :class:`LeaderAndIsr` (with its zkVersion), or None."""
        data, stat = yield self.zk.get_or_none(TopicPartitionStateZNode.path(topic, partition))
        if stat is None:
            return None
        return leader_and_isr(TopicPartitionStateZNode.decode(data), int(stat.version))

    @defer.inlineCallbacks
    def create_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr,
                              fence: ControllerFence) -> Any:
        """The controller creates a new partition's state znode (and its parents), fenced on the
        controller epoch; fires the state at zkVersion 0. ControllerMovedError when fenced;
        NodeExistsError when the state is already there."""
        for path in (TopicPartitionsZNode.path(topic), TopicPartitionZNode.path(topic, partition)):
            try:
                yield self._fenced(fence, [CreateOp(path)])
            except NodeExistsError:
                pass
        yield self._fenced(fence, [CreateOp(TopicPartitionStateZNode.path(topic, partition),
                                            state_znode(state).encode())])
        return state.with_version(0)

    @defer.inlineCallbacks
    def update_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr,
                              fence: ControllerFence | None = None) -> Any:
        """Write ``state`` over the state znode at ``state.zk_version``; fires it at its new
        zkVersion. Every writer uses this: the controller passes its ``fence`` (the write fails
        with ControllerMovedError once another controller was elected); a leader changing its
        ISR passes none (Kafka before 2.7): the znode version is its fence.

        A lost race raises :class:`ZkVersionConflictError`, except when the znode already holds
        exactly ``state`` (our own write, applied before a connection loss hid its reply: Kafka's
        ``checkLeaderAndIsrZkData``), which counts as success.
        """
        path = TopicPartitionStateZNode.path(topic, partition)
        op = SetDataOp(path, state_znode(state).encode(), state.zk_version)
        try:
            if fence is None:
                stat = yield self.zk.set(path, op.data, op.version)
            else:
                stat = (yield self._fenced(fence, [op]))[0]
        except BadVersionError:
            current = yield self.get_partition_state(topic, partition)
            if current is not None and current.same_state(state):
                return current
            raise ZkVersionConflictError(path, state.zk_version,
                                         None if current is None else current.zk_version) from None
        return state.with_version(int(stat.version))

    @defer.inlineCallbacks
    def delete_topic(self, topic: str, fence: ControllerFence) -> Any:
        """The controller's last step of a topic deletion: ``/brokers/topics/<t>`` with its whole
        subtree, ``/config/topics/<t>`` and the ``/admin/delete_topics/<t>`` marker in one fenced
        multi-op (Kafka wraps its recursive deletion in the controller-epoch check too). Re-lists
        and retries when a node appeared or vanished meanwhile."""
        marker = DeleteTopicsZNode.path(topic)
        for attempt in range(3):
            ops: list[Op] = [CheckOp(marker, -1)]
            for root in (TopicZNode.path(topic), TopicConfigZNode.path(topic)):
                ops += [DeleteOp(p, -1) for p in (yield self._subtree_bottom_up(root))]
            ops.append(DeleteOp(marker, -1))
            try:
                yield self._fenced(fence, ops)
                return
            except (NoNodeError, NotEmptyError, NodeExistsError):
                if attempt == 2:
                    raise

    @defer.inlineCallbacks
    def _subtree_bottom_up(self, root: str) -> Any:
        """``root`` and every descendant that exists, children before parents."""
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

    def _fenced(self, fence: ControllerFence, ops: Sequence[Op]) -> defer.Deferred:
        """``ops`` behind the controller-epoch check; fires their results. Fails with
        ControllerMovedError when fenced, else with the failing op's own error (NoNodeError,
        NodeExistsError, BadVersionError, ...)."""
        def unwrap(f: Any) -> Any:
            f.trap(TransactionFailedError)
            raise f.value.error
        return election.fenced_multi(self.zk, fence.epoch_zk_version, ops).addErrback(unwrap)

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
    def get_entity_config(self, entity_path: str) -> Any:
        """Fires ``/config/<entity_path>``'s config ({} if none), e.g. ``clients/c`` or ``users/u/clients/c``."""
        data, _ = yield self.zk.get_or_none(f"{paths.CONFIG}/{entity_path}")
        return {} if data is None else dict(ConfigEntityZNode.decode(data).config)

    @defer.inlineCallbacks
    def set_entity_config(self, entity_path: str, config: Mapping[str, str]) -> Any:
        """Replace ``/config/<entity_path>`` and notify every broker (``/config/changes``), as
        Kafka's ``AdminZkClient.changeConfigs`` does for clients and users."""
        yield self._set_or_create(f"{paths.CONFIG}/{entity_path}", ConfigEntityZNode(dict(config)).encode())
        created = yield self.zk.create(ConfigEntityChangeNotification.path_prefix(),
                                       ConfigEntityChangeNotification(entity_path).encode(),
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

    # ---- log dir events --------------------------------------------------------------------
    # A broker whose log dir failed writes a notification; the controller watches the parent,
    # reads the broker ids, acts, and deletes what it consumed (Kafka's KafkaZkClient methods of
    # the same names; a new controller deletes the leftovers when it takes over).

    def propagate_log_dir_event(self, broker_id: int) -> defer.Deferred:
        """Create ``/log_dir_event_notification/log_dir_event_<seq>`` (persistent, sequential)
        saying ``broker_id`` lost a log dir; fires the created path."""
        return self.zk.create(LogDirEventNotification.path_prefix(),
                              LogDirEventNotification(broker_id).encode(), sequence=True, makepath=True)

    @staticmethod
    def log_dir_event_path(sequence: int) -> str:
        return f"{LogDirEventNotification.path_prefix()}{sequence:010d}"

    def _log_dir_event_sequences(self, names: list[str]) -> list[int]:
        out = []
        for name in names:
            try:
                out.append(sequence_number(name, LogDirEventNotification.PREFIX))
            except ValueError:
                log.warning("ignoring %s/%s: not a log dir event notification", paths.LOG_DIR_EVENT_NOTIFICATION, name)
        return sorted(out)

    def get_log_dir_event_notifications(self) -> defer.Deferred:
        """Fires the sequence numbers of the pending notifications, oldest first ([] if the
        parent is missing)."""
        def missing(f: Any) -> list[str]:
            f.trap(NoNodeError)
            return []
        d = self.zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION).addErrback(missing)
        return d.addCallback(self._log_dir_event_sequences)

    def watch_log_dir_events(self, callback: Callable[[list[int]], None]) -> defer.Deferred:
        """``callback(sequence numbers, oldest first)`` now and whenever the notifications change;
        fires a Watch. The parent is one of Kafka's persistent paths (create_persistent_paths)."""
        return self.zk.watch_children(paths.LOG_DIR_EVENT_NOTIFICATION,
                                      lambda names: callback(self._log_dir_event_sequences(names)))

    @defer.inlineCallbacks
    def get_broker_ids_from_log_dir_events(self, sequences: Sequence[int]) -> Any:
        """Fires the broker id of each notification in ``sequences``, in order; notifications
        deleted meanwhile or not decodable are skipped (Kafka's ``getBrokerIdsFromLogDirEvents``)."""
        ids: list[int] = []
        for seq in sequences:
            data, _ = yield self.zk.get_or_none(self.log_dir_event_path(seq))
            if data is None:
                continue
            try:
                ids.append(LogDirEventNotification.decode(data).broker_id)
            except ZkDataError as e:
                log.warning("ignoring log dir event %d: %s", seq, e)
        return ids

    @defer.inlineCallbacks
    def delete_log_dir_event_notifications(self, sequences: Sequence[int] | None = None,
                                           fence: ControllerFence | None = None) -> Any:
        """Delete the notifications ``sequences`` (all pending ones when None), each fenced on the
        controller epoch when a ``fence`` is given (ControllerMovedError: another controller took
        over and consumes them). Notifications already gone are fine. Fires how many went."""
        if sequences is None:
            sequences = yield self.get_log_dir_event_notifications()
        deleted = 0
        for seq in sequences:
            path = self.log_dir_event_path(seq)
            try:
                if fence is None:
                    yield self.zk.delete(path)
                else:
                    yield self._fenced(fence, [DeleteOp(path)])
                deleted += 1
            except NoNodeError:
                pass
        return deleted

    # ---- preferred replica election ----------------------------------------------------------

    @defer.inlineCallbacks
    def delete_preferred_replica_election(self, fence: ControllerFence, version: int = -1) -> Any:
        """Remove ``/admin/preferred_replica_election`` once the controller has run it (Kafka's
        ``deletePreferredReplicaElection``), behind the controller-epoch check; ``version``: only
        the request that was read (a newer one written meanwhile stays for the next round).
        Fires True if deleted, False if it was gone or had changed."""
        try:
            yield self._fenced(fence, [DeleteOp(paths.PREFERRED_REPLICA_ELECTION, version)])
        except (NoNodeError, BadVersionError):
            return False
        return True

    # ---- partition reassignment ---------------------------------------------------------------

    @defer.inlineCallbacks
    def write_topic_assignment(self, topic: str, node: TopicZNode, expected_version: int,
                               fence: ControllerFence) -> Any:
        """The controller's write of a topic's assignment during a reassignment (RS with
        adding/removing, then TRS): conditional on the znode version it was computed from and
        behind the controller-epoch check; fires the new znode version. ControllerMovedError
        when fenced, ZkVersionConflictError when the znode changed meanwhile (or is gone)."""
        path = TopicZNode.path(topic)
        try:
            stat = (yield self._fenced(fence, [SetDataOp(path, node.encode(), expected_version)]))[0]
        except (BadVersionError, NoNodeError):
            raise ZkVersionConflictError(path, expected_version, None) from None
        return int(stat.version)

    @defer.inlineCallbacks
    def delete_reassign_partitions(self, fence: ControllerFence, version: int = -1) -> Any:
        """Remove ``/admin/reassign_partitions`` once every reassignment it asked for is done (as
        Kafka's controller does), fenced; ``version``: only the request that was read. Fires True
        if deleted, False if it was gone or had changed."""
        try:
            yield self._fenced(fence, [DeleteOp(paths.REASSIGN_PARTITIONS, version)])
        except (NoNodeError, BadVersionError):
            return False
        return True

    # ---- producer ids ----------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int,
                                   size: int = PRODUCER_ID_BLOCK_SIZE) -> defer.Deferred:
        """Fires (start, end) of a block no other broker will ever get."""
        return producer_ids.allocate_producer_id_block(self.zk, broker_id, size)


__all__ = ["KafkaZkClient", "ControllerFence", "Watch", "ConditionalSetResult", "leader_and_isr", "state_znode"]
