"""FindCoordinator (key 10): which broker coordinates a group (key type 0) or a transactional id (1).

The coordinator of a group is the leader of its ``__consumer_offsets`` partition, that of a
transactional id the leader of its ``__transaction_state`` partition (both by Java ``hashCode``,
``kafkalite.group.hashing``). The first request creates the topic; until a leader exists the
answer is COORDINATOR_NOT_AVAILABLE (retriable). While the coordinator loads the partition the
answer is already the leader, as in Kafka (its requests answer COORDINATOR_LOAD_IN_PROGRESS).
"""
from __future__ import annotations

from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import FindCoordinatorRequest, FindCoordinatorResponse

GROUP_KEY, TXN_KEY = 0, 1


def _error(code: ErrorCode, message: str) -> FindCoordinatorResponse:
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message,
            "node_id": -1, "host": "", "port": -1}


@api(ApiKey.FIND_COORDINATOR, 0, 3)
def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = req["key_type"]        # v0: the decoder's default, 0 (a group)
    if key_type not in (GROUP_KEY, TXN_KEY):
        return _error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if key_type == GROUP_KEY and not ctx.authorize(Operation.DESCRIBE, ResourceType.GROUP, req["key"]):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    if key_type == TXN_KEY and not ctx.authorize(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, req["key"]):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
    service = ctx.groups if key_type == GROUP_KEY else ctx.txns
    what = "offsets" if key_type == GROUP_KEY else "transaction state"
    if not service.exists():
        service.ensure_topic()
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the {what} topic is being created")
    node = service.coordinator_node(req["key"])
    info = ctx.metadata.brokers.get(node)
    endpoint = info.endpoint(ctx.listener) if info is not None else None
    if endpoint is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the {what} partition has no leader")
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "node_id": node,
            "host": endpoint[0], "port": endpoint[1]}
