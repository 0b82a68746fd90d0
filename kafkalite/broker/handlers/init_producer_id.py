"""InitProducerId (key 22): a fresh producer id and epoch 0 for an idempotent producer.

Transactions are not served (no transaction coordinator), so a request with a transactional id
is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a fatal error clients report clearly.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import InitProducerIdRequest


@api(ApiKey.INIT_PRODUCER_ID, 0, 1)
@defer.inlineCallbacks
def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> Any:
    if req["transactional_id"] is not None:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    try:
        pid = yield ctx.producer_ids.next()
    except Exception:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "producer_id": -1, "producer_epoch": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": 0}
