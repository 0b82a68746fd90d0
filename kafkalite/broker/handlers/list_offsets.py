"""ListOffsets (key 2): earliest (-2), latest (-1) or the first offset at or after a timestamp.

read_committed requests (isolation_level 1, v2+) see the log up to the last stable offset, as
Kafka's ``fetchOffsetForTimestamp`` does: latest is the LSO and a timestamp lookup finds nothing
at or above it; read_uncommitted ones see it up to the high watermark. v0 (clients before Kafka
0.10.1) asks for up to N offsets before a time and gets segment boundaries (legacy_offsets).
A timestamp lookup (v1+) on a topic whose ``message.format.version`` is below 0.10.0 (magic 0, no
timestamps) answers UNSUPPORTED_FOR_MESSAGE_FORMAT, as Kafka's fetchOffsetByTimestamp."""
from __future__ import annotations

import os
from typing import Any

from kafkalite.broker.partition import READ_COMMITTED
from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.config import kafka_version
from kafkalite.errors import ErrorCode, KafkaError, UnsupportedForMessageFormatError
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (ListOffsetsRequest, ListOffsetsResponse,
                                               ListOffsetsResponseListOffsetsPartitionResponse,
                                               ListOffsetsResponseListOffsetsTopicResponse)

LATEST = -1
EARLIEST = -2


def legacy_offsets(part: Any, timestamp: int, max_num: int) -> list[int]:
    """ListOffsets v0 (Kafka's ``legacyFetchOffsetsBefore``): offsets from the segment bases and
    the log end, descending, at most ``max_num``, starting at the last one whose segment was
    modified at or before ``timestamp`` (LATEST: the log end, EARLIEST: the first segment);
    offsets above the high watermark are replaced by it, as a consumer may read no further."""
    log = part.log
    segments = log.segments
    points = [(max(seg.base_offset, log.log_start_offset), _modified_ms(seg)) for seg in segments]
    if segments and segments[-1].size > 0:
        points.append((log.log_end_offset, 1 << 62))
    if timestamp == LATEST:
        start = len(points) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    offsets = sorted((points[i][0] for i in range(start, max(start - max(max_num, 0), -1), -1)), reverse=True)
    hw = part.high_watermark
    if any(o > hw for o in offsets):
        offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets[:max(max_num, 0)]


def _modified_ms(segment: Any) -> int:
    # One stat of a segment file, for v0 clients only: metadata, no data I/O (Kafka uses the mtime too).
    try:
        return int(os.stat(segment.log_path).st_mtime * 1000)
    except OSError:
        return 0


@api(ApiKey.LIST_OFFSETS, 0, 6)
def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    rm = ctx.replicas
    if ctx.api_version == 0:
        return _handle_v0(ctx, req)
    committed = req["isolation_level"] == READ_COMMITTED
    topics: list[ListOffsetsResponseListOffsetsTopicResponse] = []
    for t in req["topics"]:
        parts: list[ListOffsetsResponseListOffsetsPartitionResponse] = []
        may_describe = ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t["name"])     # as Kafka
        for p in t["partitions"]:
            entry: ListOffsetsResponseListOffsetsPartitionResponse = {
                "partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                     "offset": -1, "leader_epoch": -1}
            if not may_describe:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                parts.append(entry)
                continue
            try:
                part = rm.leader(t["name"], p["partition_index"], p["current_leader_epoch"])
                ts = p["timestamp"]
                fetchable = part.last_stable_offset if committed else part.high_watermark
                if ts == LATEST:
                    entry["offset"] = fetchable
                elif ts == EARLIEST:
                    entry["offset"] = part.log_start_offset
                else:
                    fmt = ctx.topic_configs.effective(t["name"])["message.format.version"]
                    if kafka_version(fmt).record_version == 0:
                        raise UnsupportedForMessageFormatError(
                            "Cannot search offsets based on timestamp because message format version for partition "
                            f"{t['name']}-{p['partition_index']} is {fmt} which is earlier than the minimum "
                            "required version 0.10.0-IV0")
                    found = part.log.offset_for_timestamp(ts)
                    if found is not None and found[0] < fetchable:
                        entry["offset"], entry["timestamp"] = found[0], found[1]
                entry["leader_epoch"] = part.leader_epoch
            except KafkaError as exc:
                entry["error_code"] = int(exc.code)
            parts.append(entry)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _handle_v0(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    topics: list[ListOffsetsResponseListOffsetsTopicResponse] = []
    for t in req["topics"]:
        parts: list[ListOffsetsResponseListOffsetsPartitionResponse] = []
        may_describe = ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t["name"])
        for p in t["partitions"]:
            entry: ListOffsetsResponseListOffsetsPartitionResponse = {
                "partition_index": p["partition_index"], "error_code": 0, "old_style_offsets": []}
            if not may_describe:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                parts.append(entry)
                continue
            try:
                part = ctx.replicas.leader(t["name"], p["partition_index"], -1)
                entry["old_style_offsets"] = legacy_offsets(part, p["timestamp"], p["max_num_offsets"])
            except KafkaError as exc:
                entry["error_code"] = int(exc.code)
            parts.append(entry)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
