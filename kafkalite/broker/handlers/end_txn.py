"""EndTxn (key 26, v0-3 as Kafka 2.8, v3 flexible): commit or abort the producer's transaction.

Answered once PrepareCommit/PrepareAbort is in ``__transaction_state``; the coordinator then
writes the markers and the Complete state. Kafka 2.8's codes (txn/coordinator.py);
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH before v2.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.handlers.add_partitions_to_txn import fenced_code
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import EndTxnRequest, EndTxnResponse


@api(ApiKey.END_TXN, 0, 3)
@defer.inlineCallbacks
def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> Generator[Any, Any, EndTxnResponse]:
    if not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    code = yield ctx.txns.coordinator.end_txn(req["transactional_id"], req["producer_id"], req["producer_epoch"],
                                             bool(req["committed"]))
    return {"throttle_time_ms": 0, "error_code": int(fenced_code(ErrorCode(code), ctx.api_version))}
