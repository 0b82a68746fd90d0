"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional producer.

Without a transactional id: a fresh producer id (blocks from ZooKeeper) at epoch 0. With one:
the transaction coordinator's answer (``kafkalite.txn.coordinator``): NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS when the id's ``__transaction_state`` partition is not loaded here,
INVALID_TRANSACTION_TIMEOUT above ``transaction.max.timeout.ms``, an epoch bump that fences the
previous producer, CONCURRENT_TRANSACTIONS while its open transaction is being aborted.
Versions 0-4 as Kafka 2.8: v2+ flexible; v3+ carry the producer's current id and epoch (KIP-360:
a known producer bumps its own epoch after an error instead of being fenced; both or neither
must be -1, else INVALID_REQUEST); v4+ answer PRODUCER_FENCED, which older versions get as
INVALID_PRODUCER_EPOCH. Without a transactional id the id and epoch are ignored and a fresh
producer id is handed out (2.8's idempotent path).
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
from kafkalite.protocol.messages_typed import InitProducerIdRequest, InitProducerIdResponse


def _answer(code: ErrorCode, pid: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return {"throttle_time_ms": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}


@api(ApiKey.INIT_PRODUCER_ID, 0, 4)
@defer.inlineCallbacks
def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest,
                            ) -> Generator[Any, Any, InitProducerIdResponse]:
    txn_id = req["transactional_id"]
    # Kafka 2.8: a transactional producer needs Write on its id; an idempotent one IdempotentWrite
    # on the cluster, or Write on some topic
    if txn_id is not None and not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if txn_id is None and not ctx.authorize(Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER) \
            and not ctx.authorize_by_resource_type(Operation.WRITE, ResourceType.TOPIC):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if txn_id is not None:
        expected = (req["producer_id"], req["producer_epoch"]) if ctx.api_version >= 3 else (-1, -1)
        if (expected[0] == -1) != (expected[1] == -1):
            return _answer(ErrorCode.INVALID_REQUEST)
        result = yield ctx.txns.coordinator.init_producer_id(txn_id, req["transaction_timeout_ms"], *expected)
        code = result.error
        if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return _answer(code, result.producer_id, result.producer_epoch)
    try:
        pid = yield ctx.producer_ids.next()
    except Exception:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _answer(ErrorCode.NONE, pid, 0)
