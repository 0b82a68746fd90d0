"""Record batch v2 headers: parse, validate and patch them without touching the records.

On-disk and on-wire layout of one batch (big-endian, 61-byte header, then the records area)::

    0  baseOffset            int64   rewritten by the broker   (not under the CRC)
    8  batchLength           int32   bytes after this field = batch size - 12
    12 partitionLeaderEpoch  int32   rewritten by the broker   (not under the CRC)
    16 magic                 int8    2
    17 crc                   uint32  CRC-32C of bytes [21, end)
    21 attributes            int16   bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control,
                                     6 delete horizon; kafkalite's 8-9: stored format (see below)
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records ...           (one compressed blob when attributes & 7 != 0)

Bits 8-9 of the attributes, unused by Kafka, hold kafkalite's stored message format: 0 for a
plain v2 batch, else the magic (0 or 1) plus one of a topic whose ``message.format.version`` was
below 0.11.0 when the batch was appended. The log keeps v2 batches (indexes, producer state and
replication read them), and the Fetch path serves a marked batch as the v0/v1 message set Kafka
would have stored (records/legacy.py). Kafka's readers ignore those bits, so the files stay
readable by Kafka's tools.

Everything here works per batch: the hot path of the broker (validate, assign offsets, append)
never decodes a record. Offset assignment rewrites bytes 0-7 and 12-15, which lie outside the CRC,
so the common case needs no CRC work at all.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from kafkalite.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from kafkalite.records.crc import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12          # baseOffset + batchLength: the part not counted by batchLength
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21     # the CRC covers [ATTRIBUTES_OFFSET, end of batch)
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08   # set = LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
FORMAT_MAGIC_SHIFT = 8
FORMAT_MAGIC_MASK = 0x0300    # stored magic + 1; 0 (or 3) is v2

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

#: The one header layout (the table above); every reader and writer of headers goes through it
#: or through the named offsets and the functions below.
_HEADER = struct.Struct(">qiiBIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_ATTRS = struct.Struct(">h")

BytesLike = bytes | bytearray | memoryview


class BatchInfo(NamedTuple):
    """The header of one batch and where it sits in its buffer."""

    position: int                 # byte position of the batch in the buffer it was read from
    size: int                     # whole batch in bytes (batchLength + 12)
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def stored_magic(self) -> int:
        """The message format the batch is served in: 2, or 0/1 when appended under that format."""
        return stored_magic(self.attributes)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from 2**31-1 to 0."""
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def end(self) -> int:
        return self.position + self.size


#: a BatchInfo from a tuple of its fields, in order
_new_info = BatchInfo._make


def read_header(buf: BytesLike, pos: int = 0, position: int | None = None) -> BatchInfo:
    """Parse the 61-byte header at ``pos``; no CRC check. Raises CorruptRecordError if short.
    ``position``: the batch's position to record when ``buf`` is a copy of the header alone
    (a header read from a file), instead of a ``_replace`` copy of the answer."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated at byte {pos}")
    f = _HEADER.unpack_from(buf, pos)
    return BatchInfo(pos if position is None else position, f[1] + LOG_OVERHEAD, *f[:1], *f[2:])


def crc_ok(buf: BytesLike, info: BatchInfo) -> bool:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c(mv[info.position + ATTRIBUTES_OFFSET:info.end]) == info.crc


def validate_batches(buf: BytesLike, *, max_batch_bytes: int) -> list[BatchInfo]:
    """Check the batches of one produce partition, as Kafka's LogValidator does per batch.

    ``buf`` must hold whole magic-2 batches back to back. Raises CorruptRecordError (CRC, framing,
    magic), MessageTooLargeError (a batch above ``max_batch_bytes``) or InvalidRecordError
    (counts, control batches, producer id without sequence) with a one-line reason.
    """
    infos: list[BatchInfo] = []
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    total = len(mv)
    pos = 0
    if total == 0:
        raise CorruptRecordError("empty record set")
    while pos < total:
        if total - pos < LOG_OVERHEAD:
            raise CorruptRecordError(f"trailing {total - pos} bytes are not a record batch")
        batch_length = _INT32.unpack_from(mv, pos + 8)[0]
        size = batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"record batch length {batch_length} is below the header size")
        if pos + size > total:
            raise CorruptRecordError(f"record batch of {size} bytes runs past the request's {total - pos}")
        if mv[pos + MAGIC_OFFSET] != 2:
            raise CorruptRecordError(f"record batch magic {mv[pos + MAGIC_OFFSET]} is not 2")
        info = read_header(mv, pos)
        if size > max_batch_bytes:
            raise MessageTooLargeError(f"record batch of {size} bytes exceeds the limit of {max_batch_bytes}")
        if crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + size]) != info.crc:
            raise CorruptRecordError(f"record batch at byte {pos} failed its CRC-32C check")
        if info.records_count <= 0 or info.last_offset_delta + 1 != info.records_count:
            raise InvalidRecordError(
                f"record batch claims {info.records_count} records with lastOffsetDelta {info.last_offset_delta}")
        if info.is_control:
            raise InvalidRecordError("clients may not produce control batches")
        if info.producer_id >= 0 and info.base_sequence < 0:
            raise InvalidRecordError("idempotent batch without a base sequence")
        infos.append(info)
        pos += size
    return infos


def scan_valid_prefix(buf: BytesLike, start: int = 0, *, verify_crc: bool = True) -> tuple[list[BatchInfo], int]:
    """Walk batches from ``start`` and stop at the first torn, malformed or CRC-bad one.

    Returns the good batches and the byte position where the good prefix ends. Log recovery
    truncates there; readers of fetch responses use it to drop a partial trailing batch.
    """
    infos: list[BatchInfo] = []
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    total = len(mv)
    pos = start
    while total - pos >= HEADER_SIZE:
        batch_length = _INT32.unpack_from(mv, pos + 8)[0]
        size = batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > total or mv[pos + MAGIC_OFFSET] != 2:
            break
        info = read_header(mv, pos)
        if info.last_offset_delta < 0:
            break
        if verify_crc and crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + size]) != info.crc:
            break
        infos.append(info)
        pos += size
    return infos, pos


def assign_offsets(buf: bytearray | memoryview, infos: list[BatchInfo], first_offset: int,
                   leader_epoch: int) -> list[BatchInfo]:
    """Stamp consecutive offsets from ``first_offset`` and the leader epoch into each batch header.

    Rewrites bytes 0-7 and 12-15 in place (outside the CRC) and returns the updated infos.
    """
    out: list[BatchInfo] = []
    offset = first_offset
    for info in infos:
        _INT64.pack_into(buf, info.position, offset)
        _INT32.pack_into(buf, info.position + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        # BatchInfo built directly: namedtuple._replace goes through a dict and a map per call
        out.append(_new_info((info[0], info[1], offset, leader_epoch, *info[4:])))
        offset += info.last_offset_delta + 1
    return out


def stored_magic(attributes: int) -> int:
    """The stored format of a batch with these attributes (bits 8-9, see the module docstring)."""
    mark = (attributes & FORMAT_MAGIC_MASK) >> FORMAT_MAGIC_SHIFT
    return mark - 1 if mark in (1, 2) else 2


def set_log_append_time(buf: bytearray | memoryview, info: BatchInfo, now_ms: int) -> BatchInfo:
    """Mark a batch LogAppendTime with ``now_ms`` as its max timestamp; both lie under the CRC,
    so the CRC is recomputed (Kafka's ``DefaultRecordBatch.setMaxTimestamp``). A batch stored in
    format v0 is left alone: magic 0 has no timestamps."""
    if info.stored_magic == 0:
        return info
    return _patch_attributes(buf, info, info.attributes | TIMESTAMP_TYPE_MASK, now_ms)


def mark_stored_magic(buf: bytearray | memoryview, info: BatchInfo, magic: int) -> BatchInfo:
    """Record in the batch that it was appended under message format ``magic`` (0 or 1; 2
    clears the mark): bits 8-9 of the attributes, under the CRC, which is recomputed."""
    if magic not in (0, 1, 2):
        raise ValueError(f"magic {magic} is not 0, 1 or 2")
    attributes = (info.attributes & ~FORMAT_MAGIC_MASK) | ((magic + 1) << FORMAT_MAGIC_SHIFT if magic < 2 else 0)
    return _patch_attributes(buf, info, attributes, info.max_timestamp)


def _patch_attributes(buf: bytearray | memoryview, info: BatchInfo, attributes: int, max_timestamp: int) -> BatchInfo:
    """Write attributes and maxTimestamp (both under the CRC) and the new CRC."""
    _ATTRS.pack_into(buf, info.position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, info.position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    crc = crc32c(mv[info.position + ATTRIBUTES_OFFSET:info.end])
    _UINT32.pack_into(buf, info.position + CRC_OFFSET, crc)
    return info._replace(attributes=attributes, max_timestamp=max_timestamp, crc=crc)


def batch_size_at(buf: BytesLike, pos: int) -> int:
    """The whole size of the batch at ``pos`` from its batchLength field (a bare read: the caller
    checks it against the buffer and :data:`HEADER_SIZE`)."""
    return _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD


def attributes_at(buf: BytesLike, pos: int) -> int:
    return _ATTRS.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]


def crc_ok_at(buf: BytesLike, pos: int, size: int) -> bool:
    """Does the stored CRC of the ``size``-byte batch at ``pos`` match its bytes?"""
    with memoryview(buf) as mv, mv[pos + ATTRIBUTES_OFFSET:pos + size] as covered:
        return crc32c(covered) == _UINT32.unpack_from(buf, pos + CRC_OFFSET)[0]


def write_header(buf: bytearray, *, base_offset: int, partition_leader_epoch: int, attributes: int,
                 last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int,
                 producer_epoch: int, base_sequence: int, records_count: int) -> None:
    """Fill the header of the one batch ``buf`` holds (header, then its records area): batchLength
    from ``len(buf)``, magic 2, and the CRC over everything from the attributes on."""
    _HEADER.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
                      last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, records_count)
    with memoryview(buf) as mv, mv[ATTRIBUTES_OFFSET:] as covered:
        crc = crc32c(covered)
    _UINT32.pack_into(buf, CRC_OFFSET, crc)


def offset_and_length(buf: BytesLike, pos: int) -> tuple[int, int]:
    """(baseOffset, whole batch size) at ``pos``: the two fields storage needs to walk a log."""
    base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    return base, length + LOG_OVERHEAD
