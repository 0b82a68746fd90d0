"""``__transaction_state`` records in Kafka's key/value formats (``TransactionLog.scala``).

key = int16 version (0) + ``TransactionLogKey``; value = int16 version (0) +
``TransactionLogValue``, null = tombstone (the id expired). Both structs come from the protocol
tables (``kafkalite/protocol/descriptors/TransactionLog*.json``, one generic codec). An Empty
transaction stores null partitions, as Kafka does.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafkalite.protocol import codec
from kafkalite.txn.state import TransactionMetadata, TxnState, TxnTransition

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


def txn_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + codec.encode_data("TransactionLogKey", KEY_VERSION,
                                                          {"transactional_id": transactional_id})


def txn_value(t: TxnTransition) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(p)
    partitions: list[dict[str, Any]] | None = None
    if t.state != TxnState.EMPTY:
        partitions = [{"topic": topic, "partition_ids": ids} for topic, ids in by_topic.items()]
    return _VERSION.pack(VALUE_VERSION) + codec.encode_data("TransactionLogValue", VALUE_VERSION, {
        "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "transaction_timeout_ms": t.txn_timeout_ms, "transaction_status": int(t.state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": t.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": t.txn_start_timestamp})


class TxnRecord(NamedTuple):
    transactional_id: str
    metadata: TransactionMetadata | None          # None = tombstone


def decode(key: bytes, value: bytes | None) -> TxnRecord | None:
    """One record of ``__transaction_state``; None for a key version this broker does not know."""
    (kv,) = _VERSION.unpack_from(key)
    if kv != KEY_VERSION:
        return None
    txn_id = codec.decode_data("TransactionLogKey", kv, memoryview(key)[2:])["transactional_id"]
    if value is None:
        return TxnRecord(txn_id, None)
    (vv,) = _VERSION.unpack_from(value)
    v = codec.decode_data("TransactionLogValue", min(vv, VALUE_VERSION), memoryview(value)[2:])
    partitions = {(e["topic"], p) for e in v["transaction_partitions"] or () for p in e["partition_ids"]}
    meta = TransactionMetadata(txn_id, v["producer_id"], producer_epoch=v["producer_epoch"],
                               txn_timeout_ms=v["transaction_timeout_ms"],
                               state=TxnState(v["transaction_status"]), partitions=partitions,
                               txn_start_timestamp=v["transaction_start_timestamp_ms"],
                               txn_last_update_timestamp=v["transaction_last_update_timestamp_ms"])
    return TxnRecord(txn_id, meta)
