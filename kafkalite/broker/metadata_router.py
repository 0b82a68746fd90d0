"""The broker's reactions to metadata changes, one per change type (Kafka's broker-side
``LeaderAndIsr`` / ``UpdateMetadata`` / ``StopReplica`` handling, fed here by the watches of
``metadata_sync.py`` instead of by controller RPCs).

:class:`MetadataSync` updates the cache and emits a typed change; :meth:`MetadataRouter.on_change`
looks the change's type up in one table and runs its reaction (a partition's new state reaches its
replica; a topic's assignment reaches all its replicas and stops those no longer assigned here; a
removed topic's replicas and logs go; a topic config reaches its logs and replication throttles),
then wakes the requests waiting on metadata and lets the controller see the change.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from kafkalite.broker.metadata_sync import (MetadataChange, MetadataSync, PartitionStatesChanged, TopicChanged,
                                            TopicConfigChanged, TopicRemoved, ControllerChanged)
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.replica_manager import ReplicaManager, StateToApply
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.controller.controller import Controller
from kafkalite.metadata import METADATA_CHANGED, MetadataCache

log = logging.getLogger(__name__)


class MetadataRouter:
    """Routes each metadata change to the parts it concerns.

    ``broker_id`` and ``first_broker_epoch`` are read when a change arrives: the id may be
    generated at start-up, and the epoch is known once this process first registered.
    """

    def __init__(self, broker_id: Callable[[], int], first_broker_epoch: Callable[[], int], metadata: MetadataCache,
                 sync: Callable[[], MetadataSync], replicas: ReplicaManager, topic_configs: TopicConfigs,
                 quotas: BrokerQuotas, controller: Controller, purgatory: Purgatory) -> None:
        self.broker_id = broker_id
        self.first_broker_epoch = first_broker_epoch
        self.metadata = metadata
        self.sync = sync
        self.replicas = replicas
        self.topic_configs = topic_configs
        self.quotas = quotas
        self.controller = controller
        self.purgatory = purgatory
        #: change type -> this broker's reaction (types without one only wake waiters and the controller)
        self.reactions: dict[type[MetadataChange], Callable[[MetadataChange], None]] = {
            PartitionStatesChanged: self._states_changed,   # type: ignore[dict-item]  # each takes its own type
            TopicChanged: self._topic_changed,              # type: ignore[dict-item]
            TopicRemoved: self._topic_removed,              # type: ignore[dict-item]
            TopicConfigChanged: self._config_changed,       # type: ignore[dict-item]
            ControllerChanged: lambda _: self.controller.on_controller_changed(),
        }

    def on_change(self, change: MetadataChange) -> None:
        reaction = self.reactions.get(type(change))
        if reaction is not None:
            reaction(change)
        self.purgatory.check(METADATA_CHANGED)
        if isinstance(change, PartitionStatesChanged):
            self.controller.on_states_changed(change.keys)
        else:
            self.controller.reconcile()

    def _states_changed(self, change: PartitionStatesChanged) -> None:
        self.apply_states(change.keys)

    def _topic_changed(self, change: TopicChanged) -> None:
        assignment = self.metadata.topics[change.topic].assignment
        self.apply_states([(change.topic, p) for p in assignment])
        # a reassignment that completed (or was cancelled) without this broker: stop the
        # replica and delete its log (Kafka's StopReplica with deletePartition)
        broker_id = self.broker_id()
        for key in self.replicas.hosted(change.topic):
            if broker_id not in assignment.get(key[1], ()):
                self.replicas.remove_replica(key[0], key[1])
        self._update_throttled_replicas(change.topic)

    def _topic_removed(self, change: TopicRemoved) -> None:
        self.topic_configs.forget(change.topic)
        self.quotas.replication.remove_topic(change.topic)
        self.replicas.remove_topic(change.topic, delete=True)

    def _config_changed(self, change: TopicConfigChanged) -> None:
        self.replicas.update_config(change.topic)
        self._update_throttled_replicas(change.topic)

    def _update_throttled_replicas(self, topic: str) -> None:
        """A topic's ``*.replication.throttled.replicas`` as this broker's throttled partitions."""
        if topic not in self.metadata.topics:
            return
        effective = self.topic_configs.effective(topic)
        self.quotas.replication.update_topic(topic, effective["leader.replication.throttled.replicas"],
                                             effective["follower.replication.throttled.replicas"], self.broker_id())

    def apply_states(self, keys: Sequence[tuple[str, int]]) -> None:
        """Give each partition's replica here the role its state says, all in one pass (Kafka's
        ``becomeLeaderOrFollower`` over one LeaderAndIsr request): the replica manager batches
        what is per round rather than per partition (fetcher changes, wake-ups)."""
        first_epoch = self.first_broker_epoch()
        czxids = self.sync().state_czxids
        batch: list[StateToApply] = []
        for topic, partition in keys:
            info = self.metadata.topics.get(topic)
            state = self.metadata.states.get((topic, partition))
            if info is None or state is None or partition not in info.assignment:
                continue
            # A state znode created after this process first registered belongs to a partition
            # that cannot have data on a dir that was offline at start: its replica is new
            # (Kafka's isNew).
            is_new = first_epoch >= 0 and czxids.get((topic, partition), -1) > first_epoch
            batch.append(StateToApply(topic, partition, info.assignment[partition], state, is_new))
        if batch:
            self.replicas.apply_states(batch)
