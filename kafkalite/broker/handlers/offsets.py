"""OffsetCommit (key 8) and OffsetFetch (key 9): committed offsets of a group.

Commits are checked against the group's generation and member (stale generations get
ILLEGAL_GENERATION) and answered only after the records are replicated in ``__consumer_offsets``.
The metadata string round-trips (null is stored as ""). OffsetFetch with ``topics`` null (v2+)
returns every partition the group has an offset for.
"""
from __future__ import annotations

from typing import Any

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.group.state import OffsetAndMetadata
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.messages_typed import OffsetCommitRequest, OffsetFetchRequest


@api(ApiKey.OFFSET_COMMIT, 2, 7)
def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> Any:
    v = ctx.api_version
    now = ctx.now_ms
    retention = req.get("retention_time_ms", -1) if v <= 4 else -1
    cache = ctx.metadata
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    order: list[tuple[str, int]] = []
    # Kafka: Read on the group, else every partition is GROUP_AUTHORIZATION_FAILED; Read on each topic
    group_denied = not ctx.authorize(Operation.READ, ResourceType.GROUP, req["group_id"])
    for topic in req["topics"]:
        topic_denied = not group_denied and not ctx.authorize(Operation.READ, ResourceType.TOPIC, topic["name"])
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            order.append(tp)
            if group_denied or topic_denied:
                errors[tp] = (ErrorCode.GROUP_AUTHORIZATION_FAILED if group_denied
                              else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            if not cache.partition_exists(*tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(p["committed_offset"], p.get("committed_leader_epoch", -1) if v >= 6 else -1,
                                            p["committed_metadata"] or "", now,
                                            now + retention if retention >= 0 else None)
    coordinator = ctx.groups.coordinator
    d = coordinator.commit_offsets(req["group_id"], req["member_id"], req.get("group_instance_id") if v >= 7 else None,
                                   req["generation_id_or_member_epoch"], offsets) if offsets else None

    def response(results: dict[tuple[str, int], ErrorCode] | None) -> dict[str, Any]:
        merged = {**errors, **(results or {})}
        topics: dict[str, list[dict[str, Any]]] = {}
        for t, p in order:
            topics.setdefault(t, []).append({"partition_index": p, "error_code": int(merged[(t, p)])})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    if d is None:
        return response(None)
    return d.addCallback(response)


@api(ApiKey.OFFSET_FETCH, 1, 5)
def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> dict[str, Any]:
    v = ctx.api_version
    requested = req["topics"]
    if not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, req["group_id"]):
        if v >= 2:
            return {"throttle_time_ms": 0, "topics": [], "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
        return {"throttle_time_ms": 0, "error_code": 0, "topics": [{"name": t["name"], "partitions": [
            {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)} for p in t["partition_indexes"]]}
            for t in requested or []]}
    # Kafka: topics the principal may not Describe are TOPIC_AUTHORIZATION_FAILED when named and
    # left out of an all-partitions answer
    denied = {t["name"] for t in requested or [] if not ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, t["name"])}
    wanted = None if requested is None else [(t["name"], p) for t in requested for p in t["partition_indexes"]
                                              if t["name"] not in denied]
    error, found = ctx.groups.coordinator.fetch_offsets(req["group_id"], wanted)
    if requested is None:
        found = {tp: om for tp, om in found.items() if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, tp[0])}
    if error and v >= 2:
        return {"throttle_time_ms": 0, "topics": [], "error_code": int(error)}
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), om in (found.items() if not error else ((tp, None) for tp in wanted or [])):
        topics.setdefault(t, []).append({
            "partition_index": p, "committed_offset": om.offset if om else -1,
            "committed_leader_epoch": om.leader_epoch if om else -1, "metadata": om.metadata if om else "",
            "error_code": int(error)})
    for rt in requested or []:
        if rt["name"] in denied:
            topics.setdefault(rt["name"], []).extend({
                "partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)} for p in rt["partition_indexes"])
    return {"throttle_time_ms": 0, "error_code": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
