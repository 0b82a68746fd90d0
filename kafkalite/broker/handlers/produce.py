"""Produce (key 0): validate each partition's batches, append as leader, answer per acks.

acks=0 gets no response at all, and if any partition failed the connection is closed so that the
producer refreshes its metadata (Kafka's behaviour). acks=1 answers after the leader's append;
acks=-1 waits (``ReplicaManager.await_replication``) until the high watermark covers the batch or
TimeoutMs expires, and answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
``min.insync.replicas`` meanwhile.

Produce v0-2 carry message format v0/v1 (Kafka before 0.11): each partition's message set is
converted to one v2 batch before the append (records/legacy.py), as Kafka's LogValidator
converts them for a topic on message format v2; a bad set answers CORRUPT_MESSAGE. A topic whose
``message.format.version`` is below 0.11.0 gets every client's batches in its own format
(``ReplicaManager.append``, records/legacy.py ``to_stored_format``): idempotent and transactional
ones answer UNSUPPORTED_FOR_MESSAGE_FORMAT, records with headers UNKNOWN_SERVER_ERROR, as Kafka 2.8.

Transactional batches need the request's transactional id (else the whole request answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka 2.8's KafkaApis); like Kafka 2.8 the broker does
not check that the partition was added to the transaction (that is KIP-890, Kafka 3.6): the
partition's producer state fences old epochs and refuses a plain batch during an open
transaction (INVALID_TXN_STATE).

Produce v8 (KIP-467) names the refused records: a batch with records a compacted topic or the
timestamp rule refuses answers INVALID_RECORD / INVALID_TIMESTAMP with ``record_errors`` (each
record's index in its batch and why) and ``error_message``. v9 is the flexible version.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.broker.registry import api
from kafkalite.broker.delayed_produce import PendingAck
from kafkalite.broker.services import RequestContext
from kafkalite.errors import CorruptRecordError, ErrorCode, KafkaError, RecordValidationError
from kafkalite.net.server import NO_RESPONSE, CloseConnection, NoResponse, Overlapped
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import (ProduceRequest, ProduceResponse, ProduceResponsePartitionProduceResponse,
                                               ProduceResponseTopicProduceResponse)
from kafkalite.records.batch import HEADER_SIZE, TRANSACTIONAL_MASK, attributes_at, batch_size_at, crc_ok_at
from kafkalite.records.legacy import upconvert

log = logging.getLogger(__name__)


def _has_transactional_batch(records: Any) -> bool:
    """Whether a whole, CRC-valid batch of a partition's records has the transactional bit. Only
    a batch with the bit pays for the CRC (a plain producer's never do); anything malformed is
    left to validate_batches, which answers CORRUPT_MESSAGE for it."""
    if records is None:
        return False
    pos, total = 0, len(records)
    while total - pos >= HEADER_SIZE:
        size = batch_size_at(records, pos)
        if size < HEADER_SIZE or pos + size > total:
            return False
        if attributes_at(records, pos) & TRANSACTIONAL_MASK and crc_ok_at(records, pos, size):
            return True
        pos += size
    return False


def _entry(index: int, code: int, base_offset: int = -1, append_time: int = -1, log_start: int = -1,
           message: str | None = None, record_errors: list[tuple[int, str]] | None = None) -> ProduceResponsePartitionProduceResponse:
    return {"index": index, "error_code": int(code), "base_offset": base_offset,
            "log_append_time_ms": append_time, "log_start_offset": log_start,
            "record_errors": [{"batch_index": i, "batch_index_error_message": m} for i, m in record_errors or ()],
            "error_message": message}


@api(ApiKey.PRODUCE, 0, 9)
def handle_produce(ctx: RequestContext, req: ProduceRequest,
                   ) -> ProduceResponse | defer.Deferred[ProduceResponse] | Overlapped | NoResponse:
    replicas = ctx.replicas
    acks = req["acks"]
    # producer_byte_rate counts whole requests, as Kafka's produce quota does
    ctx.throttle(ctx.quotas.produce.record(ctx.quota_user, ctx.client_id or "", ctx.request_size, ctx.now_ms))
    results: list[tuple[str, list[ProduceResponsePartitionProduceResponse]]] = []
    waiting: list[tuple[ProduceResponsePartitionProduceResponse, PendingAck]] = []
    failed = False
    legacy = ctx.api_version < 3          # message format v0/v1: converted to a v2 batch first
    has_txn = not legacy and any(
        _has_transactional_batch(pd["records"]) for t in req["topic_data"] for pd in t["partition_data"])
    untagged_txn = req["transactional_id"] is None and has_txn
    # Kafka: transactional records need Write on the transactional id, every topic Write on it
    txn_denied = (has_txn and req["transactional_id"] is not None
                  and not ctx.authorize(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req["transactional_id"]))
    # the waiters (follower fetches above all) wake once, after every partition is appended
    with replicas.batched_wakeups():
        for topic in req["topic_data"]:
            name = topic["name"]
            entries: list[ProduceResponsePartitionProduceResponse] = []
            if txn_denied or not ctx.authorize(Operation.WRITE, ResourceType.TOPIC, name):
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if txn_denied else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                results.append((name, [_entry(pd["index"], code) for pd in topic["partition_data"]]))
                failed = True
                continue
            for pd in topic["partition_data"]:
                index = pd["index"]
                if acks not in (0, 1, -1):
                    entries.append(_entry(index, ErrorCode.INVALID_REQUIRED_ACKS))
                    failed = True
                    continue
                if untagged_txn:
                    entries.append(_entry(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                          message="transactional records without a transactional id"))
                    failed = True
                    continue
                records = pd["records"]
                if legacy and records is not None:
                    try:
                        records = upconvert(records if isinstance(records, (bytes, bytearray, memoryview))
                                            else b"".join(records))
                    except CorruptRecordError as exc:
                        failed = True
                        entries.append(_entry(index, ErrorCode.CORRUPT_MESSAGE, message=str(exc)))
                        ctx.metrics.produce_failed(name)
                        continue
                try:
                    part, res = replicas.append(name, index, records, acks, ctx.api_version)
                except KafkaError as exc:
                    failed = True
                    log.debug("produce to %s-%d refused: %s", name, index, exc)
                    entries.append(_entry(index, exc.code, message=str(exc),
                                          record_errors=exc.record_errors if isinstance(exc, RecordValidationError) else None))
                    ctx.metrics.produce_failed(name)
                    continue
                if not res.duplicate:          # per partition: its bytes, and the offsets it was given
                    ctx.metrics.produced(name, res.bytes, res.last_offset - res.first_offset + 1)
                entry = _entry(index, ErrorCode.NONE, res.first_offset, res.log_append_time, part.log_start_offset)
                entries.append(entry)
                if acks == -1 and not res.duplicate:
                    waiting.append((entry, replicas.pending_ack(part, res)))
            results.append((name, entries))

    def response(codes: list[ErrorCode] | None = None) -> ProduceResponse:
        for (entry, _), code in zip(waiting, codes or ()):
            entry["error_code"] = int(code)
        topics: list[ProduceResponseTopicProduceResponse] = [{"name": n, "partition_responses": e} for n, e in results]
        return {"responses": topics, "throttle_time_ms": 0}

    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed on some partition")
        return NO_RESPONSE
    if not waiting:
        return response()
    replicated = replicas.await_replication([p for _, p in waiting], req["timeout_ms"]).addCallback(response)
    if ctx.throttle_ms > 0:
        return replicated            # over a quota: nothing more from this client until answered and muted
    # appended, only the acks=all wait is left: the connection may start its next Produce now
    # (net/server.py, Overlapped); answers still leave in request order
    return Overlapped(replicated)
