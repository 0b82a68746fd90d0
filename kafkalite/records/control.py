"""Control records: the transaction markers (COMMIT/ABORT) that fill control batches.

A control batch (attribute bits 4 and 5 set) holds exactly one record whose key is
``INT16 version, INT16 type`` and whose value is ``INT16 version, INT32 coordinatorEpoch``
(record-batch.md §3, ``EndTransactionMarker.java``). Only the broker writes them; consumers skip
them, and a transactional consumer uses them to end or abort a producer's run of records.
"""
from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from kafkalite.errors import CorruptRecordError
from kafkalite.records.batch import BatchInfo
from kafkalite.records.builder import BatchBuilder
from kafkalite.records.record import Record, decode_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CURRENT_VERSION = 0

__all__ = ["AbortedTransactionFilter", "ControlType", "EndTxnMarker", "build_end_txn_marker", "parse_control_record",
           "read_end_txn_marker"]


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    control_type: ControlType
    coordinator_epoch: int


def parse_control_record(record: Record) -> EndTxnMarker:
    """Read the marker of a control batch's record; anything else is CorruptRecordError.

    Newer key/value versions may append fields, so only the leading fields are required (Java's
    ``ControlRecordType.parse`` and ``EndTransactionMarker.deserialize`` read them the same way).
    """
    key, value = record.key, record.value
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is missing or shorter than 4 bytes")
    _version, ctype = _KEY.unpack_from(key)
    if ctype not in (ControlType.ABORT, ControlType.COMMIT):
        raise CorruptRecordError(f"unknown control record type {ctype}")
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("transaction marker value is missing or shorter than 6 bytes")
    _version, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(ControlType(ctype), coordinator_epoch)


def build_end_txn_marker(control_type: ControlType, *, producer_id: int, producer_epoch: int,
                         coordinator_epoch: int, timestamp: int, base_offset: int = 0,
                         partition_leader_epoch: int = -1) -> bytearray:
    """The one-record control batch the broker appends when a transaction ends."""
    builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch, transactional=True,
                           control=True, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch)
    builder.append(timestamp, _KEY.pack(CURRENT_VERSION, int(control_type)),
                   _VALUE.pack(CURRENT_VERSION, coordinator_epoch))
    return builder.build()


def read_end_txn_marker(buf: bytes | bytearray | memoryview, info: BatchInfo) -> EndTxnMarker:
    """The marker of the control batch ``info`` that sits in ``buf`` (CRC already checked)."""
    records = decode_batch(buf, info, verify_crc=False)
    if len(records) != 1:
        raise CorruptRecordError(f"control batch at offset {info.base_offset} holds {len(records)} records, not 1")
    return parse_control_record(records[0])


class AbortedTransactionFilter:
    """What a read_committed consumer skips in one Fetch answer (the Java consumer's rule).

    ``aborted`` is the partition's ``AbortedTransactions`` (producer id, first offset) from the
    Fetch response. Walking the batches in order: every aborted transaction whose first offset
    is at or below a batch's last offset marks its producer as aborting; that producer's
    transactional data batches are skipped until its ABORT marker. Control batches are never
    data. Per batch, never per record; only ABORT markers are decoded (one record each).
    """

    def __init__(self, aborted: "list[tuple[int, int]] | tuple[tuple[int, int], ...]") -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._aborting: set[int] = set()

    def skip(self, buf: "bytes | bytearray | memoryview", info: BatchInfo) -> bool:
        """True when the batch at ``info`` (in ``buf``) holds no record to hand out."""
        if info.producer_id >= 0:
            pending = self._pending
            while pending and pending[0][1] <= info.last_offset:
                self._aborting.add(pending.pop(0)[0])
            if info.is_control:
                if info.producer_id in self._aborting and info.records_count and \
                        read_end_txn_marker(buf, info).control_type == ControlType.ABORT:
                    self._aborting.discard(info.producer_id)
                return True
            return info.is_transactional and info.producer_id in self._aborting
        return info.is_control
