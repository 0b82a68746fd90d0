"""A topic used as the log of a service's state, seen from the client side.

Kafka Connect's config, offset and status topics (Kafka's ``KafkaBasedLog``) and the schema
registry's ``_schemas`` (Confluent's ``KafkaStore``) are both kept this way: the service creates
the topic if it is missing, waits until every partition has a leader, refuses a topic that is not
compacted, and rebuilds its state by reading the topic from the beginning. The parts they share
live here; each service keeps its own rules (the registry's single partition, Connect's message
naming the worker property) and its own error type, wrapping :class:`TopicLogError`.
"""
from __future__ import annotations

import logging
import time

from kafkalite.errors import ErrorCode

from .admin import TOPIC, Admin, NewTopic
from .core import KafkaClient
from .errors import ClientError
from .cluster import TopicPartition

log = logging.getLogger(__name__)

#: Kafka's default replication factor for a service's internal topics
DEFAULT_REPLICATION_FACTOR = 3


class TopicLogError(Exception):
    """The topic cannot be used; ``str()`` is a one-line reason."""


def ensure_topic(client: KafkaClient, topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, str], deadline: float) -> int:
    """Create ``topic`` unless it exists and wait until each of its partitions has a leader;
    returns its partition count.

    The replication factor (``-1``: Kafka's default of 3) is capped by the live brokers with a
    warning, so a one-broker development cluster works with the defaults. Brokers that cannot be
    reached and retriable errors are retried until ``deadline`` (a ``time.monotonic()`` value),
    then :class:`TopicLogError`; an error waiting cannot mend (not authorized, a creation policy)
    is a :class:`TopicLogError` at once.
    """
    admin = Admin(client=client)
    while True:
        try:
            md = client.metadata([topic])
            t = md.topics.get(topic)
            if t is None or t.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                rf = replication_factor if replication_factor > 0 else DEFAULT_REPLICATION_FACTOR
                if rf > len(md.brokers):
                    log.warning("%s: replication factor %d is more than the %d live brokers; using %d",
                                topic, rf, len(md.brokers), max(1, len(md.brokers)))
                    rf = max(1, len(md.brokers))
                err = admin.create_topics([NewTopic(topic, partitions, rf, configs=configs)]).get(topic)
                if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    if not err.retriable:          # e.g. not authorized, a policy: waiting cannot help
                        raise TopicLogError(f"cannot create topic {topic}: {err}")
                    raise err
                log.info("created topic %s (%d partitions, replication factor %d, %s)", topic, partitions, rf,
                         configs)
                continue
            if t.error and t.error != ErrorCode.LEADER_NOT_AVAILABLE:
                raise ClientError.from_code(t.error, f"topic {topic}")
            if t.partitions and all(client.leader_for(TopicPartition(topic, p)) >= 0 for p in t.partitions):
                return len(t.partitions)
        except ClientError as exc:
            if time.monotonic() > deadline:
                raise TopicLogError(f"cannot reach the topic {topic}: {exc}") from None
            log.info("waiting for %s: %s", topic, exc)
        if time.monotonic() > deadline:
            raise TopicLogError(f"topic {topic} has no leader")
        time.sleep(0.2)


def cleanup_policy(client: KafkaClient, topic: str) -> str | None:
    """The topic's ``cleanup.policy`` as the brokers describe it (None if they do not say)."""
    entry = Admin(client=client).describe_configs(TOPIC, topic, ["cleanup.policy"]).get("cleanup.policy")
    return entry.value if entry is not None else None


def is_compacted(policy: str | None) -> bool:
    """Whether a ``cleanup.policy`` value keeps the latest record of every key (``compact`` or
    ``compact,delete``)."""
    return "compact" in (policy or "").split(",")
