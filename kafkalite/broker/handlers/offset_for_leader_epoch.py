"""OffsetForLeaderEpoch (key 23): where an epoch ended in the leader's log (KIP-101).

Clients (librdkafka >= 2.1, kafka-python) use it to validate their position after a leader
change; followers use it to find the divergence point before truncating.
"""
from __future__ import annotations

from typing import Any

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import KafkaError
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import OffsetForLeaderEpochRequest


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
def handle_offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> dict[str, Any]:
    rm = ctx.replicas
    topics = []
    # Kafka: brokers (ClusterAction) may ask about any topic, clients about topics they may Describe
    cluster_action = ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for t in req["topics"]:
        parts = []
        may = cluster_action or ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t["topic"])
        for p in t["partitions"]:
            entry = {"error_code": 0, "partition": p["partition"], "leader_epoch": -1, "end_offset": -1}
            if not may:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                parts.append(entry)
                continue
            try:
                part = rm.leader(t["topic"], p["partition"], p.get("current_leader_epoch", -1))
                epoch, end = part.log.end_offset_for_epoch(p["leader_epoch"])
                entry["leader_epoch"], entry["end_offset"] = epoch, end
            except KafkaError as exc:
                entry["error_code"] = int(exc.code)
            parts.append(entry)
        topics.append({"topic": t["topic"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
