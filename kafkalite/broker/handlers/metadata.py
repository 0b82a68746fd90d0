"""Metadata (key 3): brokers, controller, cluster id, and topics with leaders and ISRs.

Unknown topics are auto-created when both the request (v4+, implicitly true before) and the
broker (``auto.create.topics.enable``) allow it; the answer for such a topic is
LEADER_NOT_AVAILABLE with no partitions until the controller has elected leaders, and clients
retry. Broker addresses are those of the listener the request arrived on.

Version notes (Kafka 2.8): v9 is flexible; v10 answers each topic's id (KIP-516: the
``topic_id`` of ``/brokers/topics/<t>``, written at creation; the zero Uuid for a topic created
without one); v11 drops the cluster's authorized operations.
"""
from __future__ import annotations

import logging

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.broker.replica_manager import INTERNAL_TOPICS
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (MetadataRequest, MetadataResponse, MetadataResponseMetadataResponseBroker,
                                               MetadataResponseMetadataResponsePartition,
                                               MetadataResponseMetadataResponseTopic)
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.schema import ZERO_UUID
from zk_schema.topic_names import is_valid_topic_name

log = logging.getLogger(__name__)
NOT_PROVIDED = -2147483648


def _partition_entries(ctx: RequestContext, name: str) -> list[MetadataResponseMetadataResponsePartition]:
    cache = ctx.metadata
    info = cache.topics[name]
    out: list[MetadataResponseMetadataResponsePartition] = []
    for index in sorted(info.assignment):
        replicas = info.assignment[index]
        state = cache.states.get((name, index))
        leader = cache.leader_of(name, index)
        offline = [r for r in replicas if r not in cache.brokers]
        if state is None or leader < 0:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        elif offline:
            error = ErrorCode.REPLICA_NOT_AVAILABLE if ctx.api_version == 0 else ErrorCode.NONE
        else:
            error = ErrorCode.NONE
        out.append({"error_code": int(error), "partition_index": index, "leader_id": leader,
                    "leader_epoch": state.leader_epoch if state else -1, "replica_nodes": replicas,
                    "isr_nodes": [r for r in (state.isr if state else []) if r in cache.brokers or ctx.api_version > 0],
                    "offline_replicas": offline})
    return out


@api(ApiKey.METADATA, 0, 11)
def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    cache = ctx.metadata
    requested = req["topics"]
    if requested is None or (ctx.api_version == 0 and not requested):
        names = sorted(n for n, t in cache.topics.items() if not t.deleting and t.assignment)
    else:
        names = [t["name"] for t in requested if t["name"] is not None]  # null only from v12 (topic ids)
    all_topics = requested is None or (ctx.api_version == 0 and not requested)
    # v10-v11 carry a topic id per requested topic, but topics are looked up by name only until
    # v12: a topic named with a non-zero id answers INVALID_REQUEST (Kafka 2.8 refuses those)
    by_id = {t["name"] for t in requested or () if t["topic_id"] != ZERO_UUID}
    allow_create = req["allow_auto_topic_creation"] and ctx.config["auto.create.topics.enable"]
    want_topic_ops = ctx.api_version >= 8 and req["include_topic_authorized_operations"]
    # Kafka's Metadata authorization: a topic the principal may not Describe is left out of an
    # all-topics answer and is TOPIC_AUTHORIZATION_FAILED when named (existing or not); creating a
    # missing one needs Create on the cluster or on the topic
    create_on_cluster = ctx.authorize(Operation.CREATE, ResourceType.CLUSTER)
    topics: list[MetadataResponseMetadataResponseTopic] = []
    for name in names:
        entry: MetadataResponseMetadataResponseTopic = {"error_code": 0, "name": name, "is_internal": name in INTERNAL_TOPICS, "partitions": [],
                 "topic_authorized_operations": NOT_PROVIDED, "topic_id": ZERO_UUID}
        if not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, name):
            if not all_topics:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                entry["is_internal"] = False
                topics.append(entry)
            continue
        info = cache.topics.get(name)
        if want_topic_ops:
            entry["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC, name)
        if info is not None and not info.deleting:
            entry["topic_id"] = info.topic_uuid
        if name in by_id:
            entry["error_code"] = int(ErrorCode.INVALID_REQUEST)
        elif info is not None and not info.deleting and not info.assignment:
            # known only by its config znode so far (written first): being created, retriable
            entry["error_code"] = int(ErrorCode.LEADER_NOT_AVAILABLE)
        elif info is not None and not info.deleting:
            # Kafka 2.8's MetadataCache: an existing topic answers NONE, its leaderless partitions
            # LEADER_NOT_AVAILABLE each (librdkafka ignores a topic with an error, so a
            # topic-level error kept it from learning the partition count: 0002_unkpart)
            entry["partitions"] = _partition_entries(ctx, name)
        else:
            if allow_create and not create_on_cluster and not ctx.authorize(Operation.CREATE, ResourceType.TOPIC, name):
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif not is_valid_topic_name(name):
                entry["error_code"] = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif allow_create and name not in INTERNAL_TOPICS:
                ctx.topics.auto_create(name)
                entry["error_code"] = int(ErrorCode.LEADER_NOT_AVAILABLE)
            elif allow_create and name == "__consumer_offsets":
                ctx.groups.ensure_topic()      # Kafka creates it when named, with its settings
                entry["error_code"] = int(ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topics.append(entry)
    brokers: list[MetadataResponseMetadataResponseBroker] = []
    for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoint(ctx.listener)
        if ep is not None:
            brokers.append({"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack})
    cluster_ops = NOT_PROVIDED        # KIP-430: only when asked for (v8+)
    if ctx.api_version >= 8 and req["include_cluster_authorized_operations"]:
        cluster_ops = (ctx.authorized_operations(ResourceType.CLUSTER)
                       if ctx.authorize(Operation.DESCRIBE, ResourceType.CLUSTER) else 0)
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": cache.cluster_id,
            "controller_id": cache.controller_id, "topics": topics,
            "cluster_authorized_operations": cluster_ops}
