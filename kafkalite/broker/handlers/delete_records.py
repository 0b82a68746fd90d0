"""DeleteRecords (key 21, v0-2 as in Kafka 2.8): move partitions' log start offsets forward.

Sent to each partition's leader. The leader moves its log start (offset -1 means its high
watermark; above the high watermark is OFFSET_OUT_OF_RANGE), followers adopt it from the
``log_start_offset`` of their Fetch answers, and the answer waits (Kafka's DelayedDeleteRecords,
up to TimeoutMs) until the low watermark, the smallest log start among the replicas on live
brokers, has reached the offset; it carries that low watermark. Internal topics are refused
(INVALID_TOPIC_EXCEPTION), as are topics whose cleanup.policy lacks delete (POLICY_VIOLATION).
"""
from __future__ import annotations

import logging
from twisted.internet import defer

from kafkalite.broker.partition import Partition
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (DeleteRecordsRequest, DeleteRecordsResponse,
                                               DeleteRecordsResponseDeleteRecordsPartitionResult,
                                               DeleteRecordsResponseDeleteRecordsTopicResult)

log = logging.getLogger(__name__)


@api(ApiKey.DELETE_RECORDS, 0, 2)
def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest,
                          ) -> DeleteRecordsResponse | defer.Deferred[DeleteRecordsResponse]:
    topics: list[DeleteRecordsResponseDeleteRecordsTopicResult] = []
    waiting: list[tuple[DeleteRecordsResponseDeleteRecordsPartitionResult, tuple[Partition, int]]] = []
    for t in req["topics"]:
        entries: list[DeleteRecordsResponseDeleteRecordsPartitionResult] = []
        may_delete = ctx.authorize(Operation.DELETE, ResourceType.TOPIC, t["name"])     # as Kafka
        for p in t["partitions"]:
            entry: DeleteRecordsResponseDeleteRecordsPartitionResult = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": 0}
            entries.append(entry)
            if not may_delete:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            try:
                waiting.append((entry, ctx.replicas.delete_records(t["name"], p["partition_index"], p["offset"])))
            except KafkaError as exc:
                log.debug("DeleteRecords %s-%d refused: %s", t["name"], p["partition_index"], exc)
                entry["error_code"] = int(exc.code)
        topics.append({"name": t["name"], "partitions": entries})

    def response(outcomes: list[tuple[ErrorCode, int]]) -> DeleteRecordsResponse:
        for (entry, _), (code, low) in zip(waiting, outcomes):
            entry["error_code"] = int(code)
            entry["low_watermark"] = low if code == ErrorCode.NONE else -1
        return {"throttle_time_ms": 0, "topics": topics}

    if not waiting:
        return response([])
    return ctx.replicas.await_low_watermarks([w for _, w in waiting], max(req["timeout_ms"], 0)).addCallback(response)
