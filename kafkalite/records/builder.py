"""Build magic-2 record batches: the producer side of :mod:`kafkalite.records.record`.

:class:`BatchBuilder` appends records straight into one ``bytearray`` that starts with room for
the 61-byte header; :meth:`BatchBuilder.build` compresses the records area if asked, fills the
header and computes the CRC-32C over ``[attributes, end)`` once. Each record is encoded into a
small scratch ``bytearray`` first because its length prefix is only known at the end; the copy of
that ~100-byte scratch is cheaper than sizing every field twice.

Callers are the project's producer, the broker (control batches, ``__consumer_offsets`` records)
and perf tools; misuse (offsets out of order, values out of range) raises ValueError/TypeError,
as it is a bug in the caller rather than bad input from the wire.
"""
from __future__ import annotations

from typing import Iterable, Sequence, TypedDict, Unpack

from kafkalite.records.batch import (
    CONTROL_MASK, DELETE_HORIZON_MASK, FORMAT_MAGIC_SHIFT, HEADER_SIZE, NO_PRODUCER_ID, NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, write_header,
)
from kafkalite.records.compression import Codec, compress
from kafkalite.records.varint import INT32_MAX, INT64_MAX, INT64_MIN, encode_varint, encode_varlong

BytesLike = bytes | bytearray | memoryview
Header = tuple[str, BytesLike | None]


#: Worst-case bytes of a record beyond its key, value and headers: length (5), attributes (1),
#: timestampDelta (10), offsetDelta (5), keyLength (5), valueLength (5), headerCount (5).
MAX_RECORD_OVERHEAD = 36

__all__ = ["BatchBuilder", "build_batch", "MAX_RECORD_OVERHEAD"]


class BatchBuilder:
    """Collects records for one batch; call :meth:`append` per record, then :meth:`build` once.

    ``log_append_time`` builds a LogAppendTime batch (attribute bit 3, maxTimestamp = that time),
    which only a broker does. ``producer_id``/``producer_epoch``/``base_sequence`` make the batch
    idempotent; ``transactional`` and ``control`` set attribute bits 4 and 5.
    ``delete_horizon_ms`` (the log cleaner only, KIP-534) sets attribute bit 6 and makes that
    time the batch's baseTimestamp; record timestamps stay exact (their deltas are taken from it).
    ``stored_magic`` 0 or 1 marks a batch appended under that message format (batch.py, bits 8-9:
    the broker's conversion and the cleaner, which keeps the mark of a batch it rebuilds).
    """

    __slots__ = ("_buf", "_codec", "_level", "_count", "_base_ts", "_max_ts", "_last_delta", "_built",
                 "_producer_id", "_producer_epoch", "_base_sequence", "_attributes", "_log_append_time",
                 "_base_offset", "_leader_epoch", "_horizon")

    def __init__(self, *, compression: int = Codec.NONE, compression_level: int | None = None,
                 producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1, base_sequence: int = NO_SEQUENCE,
                 transactional: bool = False, control: bool = False, log_append_time: int | None = None,
                 base_offset: int = 0, partition_leader_epoch: int = -1,
                 delete_horizon_ms: int | None = None, stored_magic: int = 2) -> None:
        codec = Codec(compression)   # ValueError for ids outside 0-4
        if stored_magic not in (0, 1, 2):
            raise ValueError(f"stored magic {stored_magic} is not 0, 1 or 2")
        if not -1 <= producer_id <= INT64_MAX:
            raise ValueError(f"producer id {producer_id} out of range")
        if not -1 <= producer_epoch <= 0x7FFF:
            raise ValueError(f"producer epoch {producer_epoch} out of range")
        if not -1 <= base_sequence <= INT32_MAX:
            raise ValueError(f"base sequence {base_sequence} out of range")
        self._buf = bytearray(HEADER_SIZE)
        self._codec = codec
        self._level = compression_level
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1
        self._last_delta = -1
        self._built = False
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._attributes = (int(codec) | (TIMESTAMP_TYPE_MASK if log_append_time is not None else 0)
                            | (TRANSACTIONAL_MASK if transactional else 0) | (CONTROL_MASK if control else 0)
                            | (DELETE_HORIZON_MASK if delete_horizon_ms is not None else 0)
                            | ((stored_magic + 1) << FORMAT_MAGIC_SHIFT if stored_magic < 2 else 0))
        self._horizon = delete_horizon_ms
        if delete_horizon_ms is not None:
            self._base_ts = delete_horizon_ms
        self._log_append_time = log_append_time
        self._base_offset = base_offset
        self._leader_epoch = partition_leader_epoch

    def __len__(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batch so far, uncompressed (what a producer compares with ``batch.size``)."""
        return len(self._buf)

    @staticmethod
    def record_size_upper_bound(key: BytesLike | None, value: BytesLike | None,
                                headers: Sequence[Header] = ()) -> int:
        """A bound on what :meth:`append` will add for this record, before encoding it."""
        size = MAX_RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
        for hkey, hvalue in headers:
            size += 10 + len(hkey.encode("utf-8", "surrogateescape")) + (len(hvalue) if hvalue is not None else 0)
        return size

    def append(self, timestamp: int, key: BytesLike | None, value: BytesLike | None,
               headers: Sequence[Header] = (), offset_delta: int | None = None) -> int:
        """Add one record and return its offset delta.

        Offset deltas default to 0, 1, 2, ...; an explicit ``offset_delta`` (compacted batches)
        must be larger than the previous one. Timestamps may go backwards (negative deltas).
        """
        if self._built:
            raise RuntimeError("append() after build()")
        if offset_delta is None:
            offset_delta = self._last_delta + 1
        elif offset_delta <= self._last_delta:
            raise ValueError(f"offset delta {offset_delta} does not follow {self._last_delta}")
        if offset_delta > INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} does not fit an int32")
        if not INT64_MIN <= timestamp <= INT64_MAX:
            raise ValueError(f"timestamp {timestamp} does not fit an int64")
        if self._count == 0:
            if self._horizon is None:
                self._base_ts = timestamp
            self._max_ts = timestamp
            ts_delta = timestamp - self._base_ts
        else:
            ts_delta = timestamp - self._base_ts
            if timestamp > self._max_ts:
                self._max_ts = timestamp

        r = bytearray(b"\x00")   # attributes, unused
        if -64 <= ts_delta <= 63:
            r.append((ts_delta << 1) ^ (ts_delta >> 63))
        elif -8192 <= ts_delta < 8192:
            u = (ts_delta << 1) ^ (ts_delta >> 63)
            r.append((u & 0x7F) | 0x80)
            r.append(u >> 7)
        else:
            r += encode_varlong(ts_delta)
        if offset_delta < 64:
            r.append(offset_delta << 1)
        else:
            r += encode_varint(offset_delta)
        if key is None:
            r.append(1)
        else:
            n = len(key)
            if n < 64:
                r.append(n << 1)
            else:
                r += encode_varint(n)
            r += key
        if value is None:
            r.append(1)
        else:
            n = len(value)
            if n < 64:
                r.append(n << 1)
            elif n < 8192:
                r.append(((n << 1) & 0x7F) | 0x80)
                r.append(n >> 6)
            else:
                r += encode_varint(n)
            r += value
        if not headers:
            r.append(0)
        else:
            r += encode_varint(len(headers))
            for hkey, hvalue in headers:
                kb = hkey.encode("utf-8", "surrogateescape")
                r += encode_varint(len(kb))
                r += kb
                if hvalue is None:
                    r.append(1)
                else:
                    r += encode_varint(len(hvalue))
                    r += hvalue

        buf = self._buf
        n = len(r)
        if n < 64:
            buf.append(n << 1)
        elif n < 8192:
            buf.append(((n << 1) & 0x7F) | 0x80)
            buf.append(n >> 6)
        else:
            buf += encode_varint(n)
        buf += r
        self._count += 1
        self._last_delta = offset_delta
        return offset_delta

    def build(self, last_offset_delta: int | None = None) -> bytearray:
        """Finish the batch: compress, write the header and CRC; returns the whole batch.

        The builder is spent afterwards. An empty batch is refused: producers never send one and
        a zero ``recordsCount`` is invalid on produce. ``last_offset_delta`` (the log cleaner)
        keeps a rewritten batch's original last offset, hence its producer's last sequence.
        """
        if self._built:
            raise RuntimeError("build() called twice")
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        if last_offset_delta is None:
            last_offset_delta = self._last_delta
        elif not self._last_delta <= last_offset_delta <= INT32_MAX:
            raise ValueError(f"last offset delta {last_offset_delta} is below the last record's {self._last_delta}")
        buf = self._buf
        if self._codec:
            mv = memoryview(buf)
            area = mv[HEADER_SIZE:]
            try:
                packed = compress(self._codec, area, self._level)
            finally:
                area.release()
                mv.release()
            del buf[HEADER_SIZE:]
            buf += packed
        max_ts = self._max_ts if self._log_append_time is None else self._log_append_time
        write_header(buf, base_offset=self._base_offset, partition_leader_epoch=self._leader_epoch,
                     attributes=self._attributes, last_offset_delta=last_offset_delta,
                     base_timestamp=self._base_ts, max_timestamp=max_ts, producer_id=self._producer_id,
                     producer_epoch=self._producer_epoch, base_sequence=self._base_sequence,
                     records_count=self._count)
        self._built = True
        return buf


class BatchOptions(TypedDict, total=False):
    """BatchBuilder's keyword arguments, for :func:`build_batch`."""

    compression: int
    compression_level: int | None
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool
    log_append_time: int | None
    base_offset: int
    partition_leader_epoch: int
    delete_horizon_ms: int | None


def build_batch(records: Iterable[tuple[int, BytesLike | None, BytesLike | None, Sequence[Header]]],
                **options: Unpack[BatchOptions]) -> bytearray:
    """One batch from ``(timestamp, key, value, headers)`` tuples; ``options`` as for BatchBuilder."""
    builder = BatchBuilder(**options)
    append = builder.append
    for timestamp, key, value, headers in records:
        append(timestamp, key, value, headers)
    return builder.build()
