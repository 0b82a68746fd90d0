"""TxnOffsetCommit (key 28, v0-3 as Kafka 2.8, v3 flexible): a transactional producer commits a
consumer group's offsets inside its transaction (``send_offsets_to_transaction``).

The group coordinator writes them to ``__consumer_offsets`` as a transactional batch of the
producer and keeps them pending: OffsetFetch sees them only once the transaction's COMMIT marker
reaches the group's offsets partition (an ABORT drops them). v0-2 carry no generation or member,
so Kafka 2.8 checks none; v3 (KIP-447) carries the consumer's generation id, member id and group
instance id, checked against the group (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID). Unknown partitions answer UNKNOWN_TOPIC_OR_PARTITION; a fenced producer
epoch INVALID_PRODUCER_EPOCH before v3, PRODUCER_FENCED from v3.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.handlers.add_partitions_to_txn import fenced_code
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.group.state import OffsetAndMetadata
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (TxnOffsetCommitRequest, TxnOffsetCommitResponse,
                                               TxnOffsetCommitResponseTxnOffsetCommitResponsePartition)


@api(ApiKey.TXN_OFFSET_COMMIT, 0, 3)
@defer.inlineCallbacks
def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Generator[Any, Any, TxnOffsetCommitResponse]:
    v = ctx.api_version
    now = ctx.now_ms
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    order: list[tuple[str, int]] = []
    # Kafka: Write on the transactional id, Read on the group, Read on each topic
    refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
               if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req["transactional_id"])
               else ErrorCode.GROUP_AUTHORIZATION_FAILED
               if not ctx.authorize(Operation.READ, ResourceType.GROUP, req["group_id"]) else None)
    for topic in req["topics"]:
        topic_denied = not ctx.authorize(Operation.READ, ResourceType.TOPIC, topic["name"])
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            order.append(tp)
            if refused is not None or topic_denied:
                errors[tp] = refused if refused is not None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not ctx.metadata.partition_exists(*tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"] if v >= 2 else -1,
                                            p["committed_metadata"] or "", now)
    results: dict[tuple[str, int], ErrorCode] = {}
    if offsets:
        member: dict[str, Any] = {}
        if v >= 3:
            member = {"member_id": req["member_id"], "instance_id": req["group_instance_id"],
                      "generation": req["generation_id"]}
        results = yield ctx.groups.coordinator.commit_txn_offsets(req["group_id"], req["producer_id"],
                                                                  req["producer_epoch"], offsets, **member)
    merged = {**errors, **{tp: fenced_code(ErrorCode(c), v, since=3) for tp, c in results.items()}}
    topics: dict[str, list[TxnOffsetCommitResponseTxnOffsetCommitResponsePartition]] = {}
    for t, index in order:
        topics.setdefault(t, []).append({"partition_index": index, "error_code": int(merged[(t, index)])})
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
