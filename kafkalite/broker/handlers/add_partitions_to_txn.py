"""AddPartitionsToTxn (key 24, v0-3 as Kafka 2.8, v3 flexible): the partitions a transactional producer is about to write.

As Kafka 2.8: partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, without touching the transaction; otherwise every partition gets the
coordinator's code (PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH before v2).
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                               AddPartitionsToTxnResponseAddPartitionsToTxnPartitionResult)


def fenced_code(code: ErrorCode, version: int, since: int = 2) -> ErrorCode:
    """PRODUCER_FENCED exists from ``since``; older clients get INVALID_PRODUCER_EPOCH."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED and version < since else code


@api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)
@defer.inlineCallbacks
def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> Generator[Any, Any, AddPartitionsToTxnResponse]:
    wanted = [(t["name"], p) for t in req["topics"] for p in t["partitions"]]
    unknown = {tp for tp in wanted if not ctx.metadata.partition_exists(*tp)}
    # Kafka: Write on the transactional id, then Write on each topic
    denied = {tp for tp in wanted if not ctx.authorize(Operation.WRITE, ResourceType.TOPIC, tp[0])}
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req["transactional_id"]):
        codes = {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    elif unknown or denied:
        codes = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in denied else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                 if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in wanted}
    else:
        code = yield ctx.txns.coordinator.add_partitions(req["transactional_id"], req["producer_id"],
                                                        req["producer_epoch"], wanted)
        code = fenced_code(ErrorCode(code), ctx.api_version)
        codes = {tp: code for tp in wanted}
    by_topic: dict[str, list[AddPartitionsToTxnResponseAddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": int(code)})
    return {"throttle_time_ms": 0, "results": [{"name": t, "results": ps} for t, ps in by_topic.items()]}
