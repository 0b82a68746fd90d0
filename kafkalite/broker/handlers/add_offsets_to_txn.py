"""AddOffsetsToTxn (key 25, v0-3 as Kafka 2.8, v3 flexible): a transaction will commit offsets for a consumer group.

The coordinator adds the group's ``__consumer_offsets`` partition to the transaction (so the
COMMIT/ABORT marker reaches it), as Kafka does; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH
before v2.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.handlers.add_partitions_to_txn import fenced_code
from kafkalite.broker.offsets_topic import OFFSETS_TOPIC
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse


@api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3)
@defer.inlineCallbacks
def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> Generator[Any, Any, AddOffsetsToTxnResponse]:
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    if not ctx.authorize(Operation.READ, ResourceType.GROUP, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    partition = ctx.groups.coordinator.partition_of(req["group_id"])
    code = yield ctx.txns.coordinator.add_partitions(req["transactional_id"], req["producer_id"],
                                                    req["producer_epoch"], [(OFFSETS_TOPIC, partition)])
    return {"throttle_time_ms": 0, "error_code": int(fenced_code(ErrorCode(code), ctx.api_version))}
