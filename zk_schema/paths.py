"""Fixed znode paths of ZooKeeper-mode Kafka (``ZkData.scala``) and sequential-node helpers.

Payload-carrying znodes live in their own modules with their codecs; this module holds the
parent paths, the list Kafka pre-creates at broker startup, and the parsing of the 10-digit
counter ZooKeeper appends to persistent-sequential nodes.
"""
from __future__ import annotations

import re

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONSUMERS = "/consumers"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
BROKER_TOPICS = "/brokers/topics"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
FEATURE = "/feature"

#: Entity types that have a ``/config/<type>`` parent (``ConfigType`` in Kafka).
CONFIG_ENTITY_TYPES: tuple[str, ...] = ("topics", "clients", "users", "brokers", "ips")

#: ``ZkData.PersistentZkPaths``: created (if missing) by every broker at startup, in this order,
#: so parents precede children.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
) + tuple(f"{CONFIG}/{t}" for t in CONFIG_ENTITY_TYPES)

SEQUENCE_DIGITS = 10
_SEQ_RE = re.compile(r"(.*?)([0-9]{10})$")


def sequence_number(name: str, prefix: str) -> int:
    """The counter of a sequential node name (``isr_change_0000000042`` -> 42).

    Raises ``ValueError`` when ``name`` is not ``prefix`` plus ten digits, so stray children
    of a notification parent are noticed rather than processed out of order.
    """
    base = name.rsplit("/", 1)[-1]
    match = _SEQ_RE.fullmatch(base)
    if match is None or match.group(1) != prefix:
        raise ValueError(f"{name!r} is not a {prefix}<10 digits> sequential node")
    return int(match.group(2))


def parent_paths(path: str) -> list[str]:
    """Every proper ancestor of ``path`` from the root down (``/a/b/c`` -> ``/a``, ``/a/b``)."""
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]
