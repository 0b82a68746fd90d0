"""ListOffsets (key 2): earliest (-2), latest (-1) or the first offset at or after a timestamp.

read_committed requests (isolation_level 1, v2+) see the log up to the last stable offset, as
Kafka's ``fetchOffsetForTimestamp`` does: latest is the LSO and a timestamp lookup finds nothing
at or above it; read_uncommitted ones see it up to the high watermark."""
from __future__ import annotations

from typing import Any

from kafkalite.broker.partition import READ_COMMITTED
from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import ListOffsetsRequest

LATEST = -1
EARLIEST = -2


@api(ApiKey.LIST_OFFSETS, 1, 6)
def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> dict[str, Any]:
    rm = ctx.replicas
    committed = req.get("isolation_level", 0) == READ_COMMITTED
    topics = []
    for t in req["topics"]:
        parts = []
        for p in t["partitions"]:
            entry = {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                     "offset": -1, "leader_epoch": -1}
            try:
                part = rm.leader(t["name"], p["partition_index"], p.get("current_leader_epoch", -1))
                ts = p["timestamp"]
                fetchable = part.last_stable_offset if committed else part.high_watermark
                if ts == LATEST:
                    entry["offset"] = fetchable
                elif ts == EARLIEST:
                    entry["offset"] = part.log_start_offset
                else:
                    found = part.log.offset_for_timestamp(ts)
                    if found is not None and found[0] < fetchable:
                        entry["offset"], entry["timestamp"] = found[0], found[1]
                entry["leader_epoch"] = part.leader_epoch
            except KafkaError as exc:
                entry["error_code"] = int(exc.code)
            parts.append(entry)
        topics.append({"name": t["name"], "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
