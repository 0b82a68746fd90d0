"""Produce (key 0): validate each partition's batches, append as leader, answer per acks.

acks=0 gets no response at all, and if any partition failed the connection is closed so that the
producer refreshes its metadata (Kafka's behaviour). acks=1 answers after the leader's append;
acks=-1 waits (``ReplicaManager.await_replication``) until the high watermark covers the batch or
TimeoutMs expires, and answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
``min.insync.replicas`` meanwhile.
"""
from __future__ import annotations

import logging
from typing import Any

from kafkalite.broker.registry import api
from kafkalite.broker.replica_manager import PendingAck
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.net.server import NO_RESPONSE, CloseConnection

log = logging.getLogger(__name__)


def _entry(index: int, code: int, base_offset: int = -1, append_time: int = -1, log_start: int = -1,
           message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": int(code), "base_offset": base_offset,
            "log_append_time_ms": append_time, "log_start_offset": log_start,
            "record_errors": [], "error_message": message}


@api(0, 3, 8, advertise_min=0)
def handle_produce(ctx: RequestContext, req: dict[str, Any]) -> Any:
    replicas = ctx.replicas
    acks = req["acks"]
    # producer_byte_rate counts whole requests, as Kafka's produce quota does
    ctx.throttle(ctx.quotas.produce.record(ctx.principal, ctx.client_id or "", ctx.request_size, ctx.now_ms))
    results: list[tuple[str, list[dict[str, Any]]]] = []
    waiting: list[tuple[dict[str, Any], PendingAck]] = []
    failed = False
    for topic in req["topic_data"]:
        name = topic["name"]
        entries = []
        for pd in topic["partition_data"]:
            index = pd["index"]
            if acks not in (0, 1, -1):
                entries.append(_entry(index, ErrorCode.INVALID_REQUIRED_ACKS))
                failed = True
                continue
            if req["transactional_id"] is not None:
                entries.append(_entry(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      message="transactions are not supported"))
                failed = True
                continue
            try:
                part, res = replicas.append(name, index, pd["records"], acks, ctx.api_version)
            except KafkaError as exc:
                failed = True
                log.debug("produce to %s-%d refused: %s", name, index, exc)
                entries.append(_entry(index, exc.code, message=str(exc)))
                ctx.metrics.produce_failed(name)
                continue
            if not res.duplicate:          # per partition: its bytes, and the offsets it was given
                ctx.metrics.produced(name, res.bytes, res.last_offset - res.first_offset + 1)
            entry = _entry(index, ErrorCode.NONE, res.first_offset, res.log_append_time, part.log_start_offset)
            entries.append(entry)
            if acks == -1 and not res.duplicate:
                waiting.append((entry, replicas.pending_ack(part, res)))
        results.append((name, entries))

    def response(codes: list[ErrorCode] | None = None) -> dict[str, Any]:
        for (entry, _), code in zip(waiting, codes or ()):
            entry["error_code"] = int(code)
        return {"responses": [{"name": n, "partition_responses": e} for n, e in results], "throttle_time_ms": 0}

    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed on some partition")
        return NO_RESPONSE
    if not waiting:
        return response()
    return replicas.await_replication([p for _, p in waiting], req["timeout_ms"]).addCallback(response)
