"""OffsetCommit (key 8), OffsetFetch (key 9) and OffsetDelete (key 47): committed offsets of a group.

Commits are checked against the group's generation and member (stale generations get
ILLEGAL_GENERATION) and answered only after the records are replicated in ``__consumer_offsets``.
The metadata string round-trips (null is stored as ""). OffsetFetch with ``topics`` null (v2+)
returns every partition the group has an offset for. OffsetCommit v8 and OffsetFetch v6 are
the flexible versions; OffsetFetch v7 (KIP-447) ``require_stable``: a partition with a
transactional offset commit still pending (no marker yet) answers UNSTABLE_OFFSET_COMMIT with
offset -1, so the consumer retries instead of reading a stale position.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.group.state import OffsetAndMetadata
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (OffsetCommitRequest, OffsetCommitResponse,
                                               OffsetCommitResponseOffsetCommitResponsePartition, OffsetDeleteRequest,
                                               OffsetDeleteResponse, OffsetDeleteResponseOffsetDeleteResponsePartition,
                                               OffsetFetchRequest, OffsetFetchResponse,
                                               OffsetFetchResponseOffsetFetchResponsePartition)
from kafkalite.security.acl import Operation, ResourceType


@api(ApiKey.OFFSET_COMMIT, 2, 8)
def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest,
                         ) -> OffsetCommitResponse | defer.Deferred[OffsetCommitResponse]:
    v = ctx.api_version
    now = ctx.now_ms
    retention = req["retention_time_ms"] if v <= 4 else -1
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
            offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"] if v >= 6 else -1,
                                            p["committed_metadata"] or "", now,
                                            now + retention if retention >= 0 else None)
    coordinator = ctx.groups.coordinator
    d = coordinator.commit_offsets(req["group_id"], req["member_id"], req["group_instance_id"] if v >= 7 else None,
                                   req["generation_id_or_member_epoch"], offsets) if offsets else None

    def response(results: dict[tuple[str, int], ErrorCode] | None) -> OffsetCommitResponse:
        merged = {**errors, **(results or {})}
        topics: dict[str, list[OffsetCommitResponseOffsetCommitResponsePartition]] = {}
        for t, p in order:
            topics.setdefault(t, []).append({"partition_index": p, "error_code": int(merged[(t, p)])})
        return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    if d is None:
        return response(None)
    return d.addCallback(response)


@api(ApiKey.OFFSET_FETCH, 1, 7)
def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
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
    coordinator = ctx.groups.coordinator
    error, found = coordinator.fetch_offsets(req["group_id"], wanted)
    unstable = coordinator.pending_txn_partitions(req["group_id"]) if v >= 7 and req["require_stable"] else set()
    if requested is None:
        found = {tp: om for tp, om in found.items() if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, tp[0])}
        unstable = {tp for tp in unstable if ctx.authorize(Operation.DESCRIBE, ResourceType.TOPIC, tp[0])}
    if error and v >= 2:
        return {"throttle_time_ms": 0, "topics": [], "error_code": int(error)}
    topics: dict[str, list[OffsetFetchResponseOffsetFetchResponsePartition]] = {}
    rows = dict(found) if not error else {tp: None for tp in wanted or []}
    for tp in unstable:
        if wanted is None or tp in rows:
            rows[tp] = None
    for (t, p), om in rows.items():
        code = ErrorCode.UNSTABLE_OFFSET_COMMIT if (t, p) in unstable else error
        topics.setdefault(t, []).append({
            "partition_index": p, "committed_offset": om.offset if om else -1,
            "committed_leader_epoch": om.leader_epoch if om else -1, "metadata": om.metadata if om else "",
            "error_code": int(code)})
    for rt in requested or []:
        if rt["name"] in denied:
            topics.setdefault(rt["name"], []).extend({
                "partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)} for p in rt["partition_indexes"])
    return {"throttle_time_ms": 0, "error_code": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


@api(ApiKey.OFFSET_DELETE, 0, 0)
def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest,
                         ) -> OffsetDeleteResponse | defer.Deferred[OffsetDeleteResponse]:
    """KIP-496: drop a group's committed offsets of some partitions (the coordinator's rules:
    ``GroupCoordinator.delete_offsets``). Partitions of unknown topics answer
    UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator; a group-level error answers
    alone, with no topics, as Kafka's error response."""
    # Kafka: Delete on the group, or the whole request is refused; Read on each topic
    if not ctx.authorize(Operation.DELETE, ResourceType.GROUP, req["group_id"]):
        return {"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "throttle_time_ms": 0, "topics": []}
    order = [(t["name"], p["partition_index"]) for t in req["topics"] for p in t["partitions"]]
    unknown: dict[tuple[str, int], ErrorCode] = {}
    for tp in order:
        if not ctx.authorize(Operation.READ, ResourceType.TOPIC, tp[0]):
            unknown[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not ctx.metadata.partition_exists(*tp):
            unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    known = [tp for tp in order if tp not in unknown]

    def response(outcome: tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]) -> OffsetDeleteResponse:
        error, results = outcome
        if error:
            return {"error_code": int(error), "throttle_time_ms": 0, "topics": []}
        merged = {**unknown, **results}
        topics: dict[str, list[OffsetDeleteResponseOffsetDeleteResponsePartition]] = {}
        for t, p in dict.fromkeys(order):
            topics.setdefault(t, []).append({"partition_index": p, "error_code": int(merged.get((t, p), ErrorCode.NONE))})
        return {"error_code": 0, "throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    return ctx.groups.coordinator.delete_offsets(req["group_id"], known).addCallback(response)
