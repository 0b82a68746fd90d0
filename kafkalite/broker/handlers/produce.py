"""Produce (key 0): validate each partition's batches, append as leader, answer per acks.

acks=0 gets no response at all, and if any partition failed the connection is closed so that the
producer refreshes its metadata (Kafka's behaviour). acks=1 answers after the leader's append;
acks=-1 waits in the purgatory until the high watermark covers the batch or TimeoutMs expires.
"""
from __future__ import annotations

import logging
from typing import Any

from kafkalite.broker.dispatcher import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.net.server import NO_RESPONSE, CloseConnection
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import ProduceRequest

log = logging.getLogger(__name__)


def _entry(index: int, code: int, base_offset: int = -1, append_time: int = -1, log_start: int = -1,
           message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": int(code), "base_offset": base_offset,
            "log_append_time_ms": append_time, "log_start_offset": log_start,
            "record_errors": [], "error_message": message}


@api(ApiKey.PRODUCE, 3, 8, advertise_min=0)
def handle_produce(ctx: RequestContext, req: ProduceRequest) -> Any:
    broker = ctx.broker
    acks = req["acks"]
    now = ctx.now_ms
    results: list[tuple[str, list[dict[str, Any]]]] = []
    waiting: list[tuple[dict[str, Any], Any, int]] = []   # (entry, partition, offset the HW must reach)
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
                part, res = broker.replica_manager.append(name, index, pd["records"], acks, ctx.api_version, now)
            except KafkaError as exc:
                failed = True
                log.debug("produce to %s-%d refused: %s", name, index, exc)
                entries.append(_entry(index, exc.code, message=str(exc)))
                continue
            entry = _entry(index, ErrorCode.NONE, res.first_offset, res.log_append_time, part.log_start_offset)
            entries.append(entry)
            if acks == -1 and not res.duplicate:
                waiting.append((entry, part, res.last_offset + 1))
        results.append((name, entries))

    def response() -> dict[str, Any]:
        return {"responses": [{"name": n, "partition_responses": e} for n, e in results], "throttle_time_ms": 0}

    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed on some partition")
        return NO_RESPONSE
    if not waiting:
        return response()

    min_isr = {id(p): broker.topic_config(p.topic)["min.insync.replicas"] for _, p, _ in waiting}

    def replicated(part: Any, needed: int) -> bool:
        return part.high_watermark >= needed or not part.is_leader

    def ready() -> bool:
        return all(replicated(p, n) for _, p, n in waiting)

    def finish(timed_out: bool) -> dict[str, Any]:
        for entry, part, needed in waiting:
            if not part.is_leader:
                entry["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif part.high_watermark < needed:
                entry["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
            elif len(part.isr) < min_isr[id(part)]:
                entry["error_code"] = int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return response()

    if ready():
        return finish(False)
    return broker.purgatory.watch([p.key for _, p, _ in waiting], req["timeout_ms"], ready, finish)
