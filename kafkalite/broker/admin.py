"""Topic administration as Kafka's AdminManager does it: validate, choose an assignment, write
ZooKeeper, then wait (bounded by the request's timeout) until the metadata shows the outcome.

The writes follow zookeeper-layout.md §3: ``/config/topics/<t>`` then ``/brokers/topics/<t>``;
the controller's watch then creates each partition's state znode with a leader. Deletion only
queues ``/admin/delete_topics/<t>``; the controller does the rest.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.broker.purgatory import Purgatory
from kafkalite.config import BrokerConfig, ConfigError, validate_topic_overrides
from kafkalite.controller.assignment import assign_replicas
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.ops import BadVersion
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.metadata import METADATA_CHANGED, MetadataCache
from zk_schema.errors import InvalidTopicNameError
from zk_schema.topic_names import collides_with, validate_topic_name
from zk_schema.topics import TopicZNode
from zk_schema.uuids import new_topic_id

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, config: BrokerConfig, metadata: MetadataCache, zk: KafkaZkClient,
                 purgatory: Purgatory) -> None:
        self.config = config
        self.metadata = metadata
        self.zk = zk
        self.purgatory = purgatory
        self.auto_creating: set[str] = set()

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.metadata.brokers)

    # -- create ----------------------------------------------------------------------------------
    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   assignments: Sequence[Mapping[str, Any]], configs: Mapping[str, str | None]) -> tuple[dict[int, list[int]], dict[str, str]]:
        """Validate a new topic and return (assignment, config overrides); raises KafkaError."""
        cache = self.metadata
        try:
            validate_topic_name(name)
        except InvalidTopicNameError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_TOPIC_EXCEPTION) from None
        if name in cache.topics:
            raise KafkaError(f"Topic '{name}' already exists.", ErrorCode.TOPIC_ALREADY_EXISTS)
        clash = collides_with(name, cache.topics)
        if clash:
            raise KafkaError(f"Topic '{name}' collides with existing topics: {', '.join(clash)}",
                             ErrorCode.INVALID_TOPIC_EXCEPTION)
        try:
            overrides = validate_topic_overrides(configs)
        except ConfigError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.", ErrorCode.INVALID_REQUEST)
            assignment = {a["partition_index"]: list(a["broker_ids"]) for a in assignments}
            self.check_assignment(assignment, start=0)
            return assignment, overrides
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if num_partitions <= 0:
            raise KafkaError("Number of partitions must be larger than 0.", ErrorCode.INVALID_PARTITIONS)
        if replication_factor <= 0:
            raise KafkaError("Replication factor must be larger than 0.", ErrorCode.INVALID_REPLICATION_FACTOR)
        live = self.live_brokers
        if replication_factor > len(live):
            raise KafkaError(f"Replication factor: {replication_factor} larger than available brokers: {len(live)}.",
                             ErrorCode.INVALID_REPLICATION_FACTOR)
        return assign_replicas(live, num_partitions, replication_factor), overrides

    def check_assignment(self, assignment: dict[int, list[int]], start: int) -> None:
        live = set(self.metadata.brokers)
        expected = list(range(start, start + len(assignment)))
        if sorted(assignment) != expected:
            raise KafkaError(f"Partitions should be a consecutive 0-based integer sequence, found {sorted(assignment)}",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise KafkaError("All partitions should have the same number of replicas, and at least one",
                             ErrorCode.INVALID_REPLICA_ASSIGNMENT)
        for p, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                raise KafkaError(f"Duplicate replica assignment for partition {p}: {replicas}",
                                 ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise KafkaError(f"Unknown broker(s) {unknown} in the assignment of partition {p}",
                                 ErrorCode.INVALID_REPLICA_ASSIGNMENT)

    @defer.inlineCallbacks
    def create_topic(self, name: str, assignment: dict[int, list[int]], overrides: dict[str, str]) -> Any:
        try:
            yield self.zk.create_topic(name, assignment, overrides, new_topic_id())
        except InvalidTopicNameError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_TOPIC_EXCEPTION) from None
        log.info("created topic %s with %d partition(s): %s %s", name, len(assignment), assignment, overrides)

    # -- partitions ------------------------------------------------------------------------------
    def plan_partitions(self, name: str, count: int, assignments: Sequence[Mapping[str, Any]] | None) -> dict[int, list[int]]:
        info = self.metadata.topics.get(name)
        if info is None or info.deleting:
            raise KafkaError(f"The topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if info.adding_replicas or info.removing_replicas:
            # the topic znode carries the move's state; Kafka refuses the same way
            raise KafkaError("A partition reassignment is in progress.", ErrorCode.REASSIGNMENT_IN_PROGRESS)
        current = len(info.assignment)
        if count <= current:
            raise KafkaError(f"Topic currently has {current} partitions, which is higher than the requested {count}."
                             if count < current else f"Topic already has {current} partitions.",
                             ErrorCode.INVALID_PARTITIONS)
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            new = {current + i: list(a["broker_ids"]) for i, a in enumerate(assignments)}
            self.check_assignment({**{p: r for p, r in info.assignment.items()}, **new}, start=0)
            return new
        first = info.assignment[0]
        live = self.live_brokers
        rf = len(first)
        if rf > len(live):
            raise KafkaError(f"Replication factor: {rf} larger than available brokers: {len(live)}.",
                             ErrorCode.INVALID_REPLICATION_FACTOR)
        start = next((i for i, b in enumerate(live) if b >= first[0]), 0)
        return assign_replicas(live, count - current, rf, fixed_start_index=start, start_partition_id=current)

    # -- waiting ---------------------------------------------------------------------------------
    def wait_until(self, condition: Callable[[], bool], timeout_ms: int) -> defer.Deferred:
        """Fires True once ``condition()`` holds after a metadata change, False at the timeout.

        A timeout of 0 or less means "do not wait": Kafka then answers success at once (the change
        goes on in the background). librdkafka (confluent-kafka) sends its operation_timeout,
        which defaults to socket.timeout.ms (60 s); kafka-python sends its own timeout_ms.
        """
        if timeout_ms <= 0 or condition():
            return defer.succeed(True)
        return self.purgatory.watch([METADATA_CHANGED], timeout_ms, condition, lambda timed_out: not timed_out)

    def await_metadata(self, timeout_ms: int, ready: Callable[[], bool], finish: Callable[[bool], Any]) -> defer.Deferred:
        """Fires ``finish(timed_out)`` once ``ready()`` holds after a metadata change (or
        :meth:`metadata_changed`), or at ``timeout_ms`` (Kafka's DelayedElectLeader waits so)."""
        return self.purgatory.watch([METADATA_CHANGED], timeout_ms, ready, finish)

    def metadata_changed(self) -> None:
        """Re-check what waits on the metadata (a result arrived that a wait's condition reads)."""
        self.purgatory.check(METADATA_CHANGED)

    # -- topics created on first use -----------------------------------------------------------------
    def auto_create(self, name: str) -> None:
        """Metadata's auto-creation (``auto.create.topics.enable``): fire and forget; clients
        retry until leaders exist."""
        if name in self.auto_creating or name in self.metadata.topics:
            return
        try:
            assignment, overrides = self.plan_topic(name, self.config["num.partitions"],
                                                    self.config["default.replication.factor"], [], {})
        except KafkaError as exc:
            log.warning("cannot auto-create topic %s: %s", name, exc)
            return
        self.auto_creating.add(name)
        d = self.create_topic(name, assignment, overrides)
        d.addErrback(lambda f: log.info("auto-creation of %s: %s", name, f.value))
        d.addBoth(lambda _: self.auto_creating.discard(name))

    # -- changes to existing topics ------------------------------------------------------------------
    def add_partitions(self, name: str, new: Mapping[int, list[int]]) -> defer.Deferred:
        """Write the grown assignment (after :meth:`plan_partitions`); the controller elects the
        new partitions' leaders."""
        info = self.metadata.topics[name]
        grown = {p: tuple(r) for p, r in {**info.assignment, **new}.items()}
        # conditional on the version planned from: a reassignment written meanwhile is not overwritten

        def lost(result: Any) -> Any:
            if isinstance(result, BadVersion):
                raise KafkaError(f"The assignment of topic '{name}' changed meanwhile (a reassignment?); retry.",
                                 ErrorCode.REASSIGNMENT_IN_PROGRESS)
            return result
        return self.zk.set_topic_assignment(name, TopicZNode(grown, topic_id=info.topic_id),
                                            info.zk_version).addCallback(lost)

    def delete_topic(self, name: str) -> defer.Deferred:
        """Queue the topic in ``/admin/delete_topics``; the controller deletes it."""
        return self.zk.mark_topic_for_deletion(name)

    def topic_overrides(self, name: str) -> defer.Deferred:
        """The topic's overrides as ZooKeeper has them now (the cache may lag a change just made)."""
        return self.zk.get_topic_config(name)

    def set_topic_overrides(self, name: str, overrides: Mapping[str, str]) -> defer.Deferred:
        """Replace the overrides and notify every broker (``/config/changes``)."""
        return self.zk.set_topic_config(name, overrides)
