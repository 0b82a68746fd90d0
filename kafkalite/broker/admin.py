"""Topic administration as Kafka's AdminManager does it: validate, choose an assignment, write
ZooKeeper, then wait (bounded by the request's timeout) until the metadata shows the outcome.

The writes follow zookeeper-layout.md §3: ``/config/topics/<t>`` then ``/brokers/topics/<t>``;
the controller's watch then creates each partition's state znode with a leader. Deletion only
queues ``/admin/delete_topics/<t>``; the controller does the rest.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer

from kafkalite.broker.metadata_cache import METADATA_CHANGED
from kafkalite.config import ConfigError, validate_topic_overrides
from kafkalite.controller.assignment import assign_replicas
from kafkalite.errors import ErrorCode, KafkaError
from zk_schema.errors import InvalidTopicNameError
from zk_schema.topic_names import collides_with, validate_topic_name
from zk_schema.uuids import new_topic_id

if TYPE_CHECKING:
    from kafkalite.broker.server import KafkaBroker

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, broker: "KafkaBroker") -> None:
        self.broker = broker

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.broker.metadata.brokers)

    # -- create ----------------------------------------------------------------------------------
    def plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                   assignments: Sequence[Mapping[str, Any]], configs: dict[str, str | None]) -> tuple[dict[int, list[int]], dict[str, str]]:
        """Validate a new topic and return (assignment, config overrides); raises KafkaError."""
        cache = self.broker.metadata
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
            num_partitions = self.broker.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.broker.config["default.replication.factor"]
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
        live = set(self.broker.metadata.brokers)
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
            yield self.broker.kafka_zk.create_topic(name, assignment, overrides, new_topic_id())
        except InvalidTopicNameError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_TOPIC_EXCEPTION) from None
        log.info("created topic %s with %d partition(s): %s %s", name, len(assignment), assignment, overrides)

    # -- partitions ------------------------------------------------------------------------------
    def plan_partitions(self, name: str, count: int, assignments: Sequence[Mapping[str, Any]] | None) -> dict[int, list[int]]:
        info = self.broker.metadata.topics.get(name)
        if info is None or info.deleting:
            raise KafkaError(f"The topic '{name}' does not exist.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
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
        goes on in the background), and confluent-kafka's admin client sends 0 by default.
        """
        if timeout_ms <= 0 or condition():
            return defer.succeed(True)
        return self.broker.purgatory.watch([METADATA_CHANGED], timeout_ms, condition, lambda timed_out: not timed_out)
