"""ControlledShutdown (key 7): a stopping broker asks the controller to move its leaderships.

Served by the controller only (others answer NOT_CONTROLLER so the caller re-reads who the
controller is, as Kafka's brokers do). The answer comes once the new leaders and ISRs are
written to ZooKeeper; ``remaining_partitions`` lists the replicated partitions the broker still
leads (no other in-sync replica could take them), which makes the caller retry after
``controlled.shutdown.retry.backoff.ms``. Version 0 (non-standard header) is not served.
"""
from __future__ import annotations

from collections.abc import Generator
from typing import Any

from twisted.internet import defer

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import ControlledShutdownRequest, ControlledShutdownResponse


@api(ApiKey.CONTROLLED_SHUTDOWN, 1, 3)
@defer.inlineCallbacks
def handle_controlled_shutdown(ctx: RequestContext, req: ControlledShutdownRequest,
                               ) -> Generator[Any, Any, ControlledShutdownResponse]:
    if not ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER):    # only brokers may ask
        return {"error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "remaining_partitions": []}
    code, remaining = yield ctx.controller.controlled_shutdown(req["broker_id"], req["broker_epoch"])
    return {"error_code": int(code),
            "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}
