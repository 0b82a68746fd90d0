"""OffsetForLeaderEpoch (key 23): where an epoch ended in the leader's log (KIP-101).

Clients (librdkafka >= 2.1, kafka-python) use it to validate their position after a leader
change; followers use it to find the divergence point before truncating.

Brokers learn a new leader epoch from their own ZooKeeper watches, so a follower often hears of
its new leader a moment before that leader does, and asks at once. Kafka answers such a request
NOT_LEADER_OR_FOLLOWER or UNKNOWN_LEADER_EPOCH and the follower sits out
``replica.fetch.backoff.ms`` (1 s) before asking again, while acks=all produces on the partition
wait for it. Here a partition whose asker names a newer ``current_leader_epoch`` than this broker
knows waits (at most ``replica.fetch.wait.max.ms``, the long poll a follower already accepts) for
this broker's state to catch up, and is answered then, with whatever the answer is by that time.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import KafkaError
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (OffsetForLeaderEpochRequest,
                                               OffsetForLeaderEpochRequestOffsetForLeaderPartition,
                                               OffsetForLeaderEpochResponse, OffsetForLeaderEpochResponseEpochEndOffset,
                                               OffsetForLeaderEpochResponseOffsetForLeaderTopicResult)

#: answers that may only mean "this broker has not heard of the new epoch yet"
_BEHIND = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH})


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
def handle_offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest,
                                   ) -> OffsetForLeaderEpochResponse | defer.Deferred[OffsetForLeaderEpochResponse]:
    rm = ctx.replicas
    topics: list[OffsetForLeaderEpochResponseOffsetForLeaderTopicResult] = []
    # Kafka: brokers (ClusterAction) may ask about any topic, clients about topics they may Describe
    cluster_action = ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    #: (answer entry, topic, requested partition) of the partitions this broker is behind on
    behind: list[tuple[OffsetForLeaderEpochResponseEpochEndOffset, str,
                       OffsetForLeaderEpochRequestOffsetForLeaderPartition]] = []

    def answer(entry: OffsetForLeaderEpochResponseEpochEndOffset, topic: str,
               p: OffsetForLeaderEpochRequestOffsetForLeaderPartition) -> None:
        entry["error_code"], entry["leader_epoch"], entry["end_offset"] = 0, -1, -1
        try:
            part = rm.leader(topic, p["partition"], p["current_leader_epoch"])
            entry["leader_epoch"], entry["end_offset"] = part.log.end_offset_for_epoch(p["leader_epoch"])
        except KafkaError as exc:
            entry["error_code"] = int(exc.code)

    for t in req["topics"]:
        parts: list[OffsetForLeaderEpochResponseEpochEndOffset] = []
        may = cluster_action or ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t["topic"])
        for p in t["partitions"]:
            entry: OffsetForLeaderEpochResponseEpochEndOffset = {
                "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "partition": p["partition"],
                "leader_epoch": -1, "end_offset": -1}
            if not may:
                parts.append(entry)
                continue
            answer(entry, t["topic"], p)
            if entry["error_code"] in _BEHIND and rm.behind_epoch(t["topic"], p["partition"],
                                                                  p["current_leader_epoch"]):
                behind.append((entry, t["topic"], p))
            parts.append(entry)
        topics.append({"topic": t["topic"], "partitions": parts})
    response: OffsetForLeaderEpochResponse = {"throttle_time_ms": 0, "topics": topics}
    if not behind:
        return response

    def finish() -> OffsetForLeaderEpochResponse:
        for entry, topic, p in behind:
            answer(entry, topic, p)
        return response

    return rm.await_leader_epochs([(topic, p) for _, topic, p in behind], ctx.config["replica.fetch.wait.max.ms"],
                                  finish)
