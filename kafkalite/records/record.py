"""Decode the records of magic-2 batches (record-batch.md §3) for consumers, tools and the broker.

Each record is ``length, attributes, timestampDelta, offsetDelta, key, value, headers`` with zigzag
varints (see :mod:`kafkalite.records.varint`). The loop below is the hot path of every reader in
the project (client, console consumer, Spark reader), so it works on one ``bytes`` object per batch
(slicing ``bytes`` yields the ``bytes`` keys and values directly), inlines the one- and two-byte
varint cases, and builds each :class:`Record` with ``tuple.__new__``. An uncompressed batch that
arrives as ``bytes`` is read in place; from any other buffer its records area is copied once.

Every length is checked against its record's declared ``length`` and every record against the
records area; any inconsistency is :class:`~kafkalite.errors.CorruptRecordError`, never an
IndexError or a long loop: the record count is capped by what the area can hold, and each header
is bounds-checked before it is sliced.
"""
from __future__ import annotations

import logging
from typing import Iterator, NamedTuple

from kafkalite.errors import CorruptRecordError
from kafkalite.records.batch import (
    HEADER_SIZE, LOG_OVERHEAD, BatchInfo, batch_size_at, crc_ok, read_header, scan_valid_prefix,
)
from kafkalite.records.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from kafkalite.records.varint import read_varint, read_varlong

log = logging.getLogger(__name__)

BytesLike = bytes | bytearray | memoryview

#: Smallest possible record: length, attributes, timestampDelta, offsetDelta, keyLength,
#: valueLength and headerCount, one byte each.
MIN_RECORD_SIZE = 7

__all__ = ["Record", "decode_batch", "iter_batches", "iter_records"]


class Record(NamedTuple):
    """One record with its absolute offset and timestamp; header keys are ``str``.

    A header key that is not valid UTF-8 is decoded with ``surrogateescape``, so it survives a
    round trip byte for byte (Java decodes it with replacement characters; rejecting it would
    refuse batches Kafka accepts).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def decode_batch(buf: BytesLike, info: BatchInfo | None = None, *, verify_crc: bool = True,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
    """All records of the batch at ``info.position`` (or at byte 0 when ``info`` is None).

    Decompresses the records area when the batch says so (at most ``max_decompressed`` bytes).
    ``verify_crc=False`` skips the CRC when the caller has just checked it (``validate_batches``,
    ``scan_valid_prefix``). With LogAppendTime every record carries the batch's max timestamp, as
    in Java. Control batches decode like any other (see :mod:`kafkalite.records.control`).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if info is None:
        info = read_header(mv, 0)
    pos = info.position
    if info.magic != 2:
        raise CorruptRecordError(f"record batch magic {info.magic} is not 2")
    if info.size < HEADER_SIZE or pos + info.size > len(mv) or pos < 0:
        raise CorruptRecordError(f"record batch of {info.size} bytes at byte {pos} does not fit its buffer")
    if verify_crc and not crc_ok(mv, info):
        raise CorruptRecordError(f"record batch at byte {pos} failed its CRC-32C check")
    area_start = pos + HEADER_SIZE
    codec = info.attributes & 0x07
    if codec:
        data = decompress(codec, mv[area_start:info.end], max_decompressed)
        start, end = 0, len(data)
    elif type(buf) is bytes:
        data, start, end = buf, area_start, info.end
    else:
        data = bytes(mv[area_start:info.end])
        start, end = 0, len(data)
    timestamp = info.max_timestamp if info.is_log_append_time else None
    return _decode_records(data, start, end, info.records_count, info.base_offset, info.base_timestamp, timestamp)


def _decode_records(data: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int,
                    log_append_time: int | None) -> list[Record]:
    """The per-record loop over ``data[pos:end]``; see the module docstring for why it looks so."""
    if count < 0 or count > (end - pos) // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"record batch claims {count} records in a records area of {end - pos} bytes")
    new = tuple.__new__
    cls = Record
    out: list[Record] = []
    append = out.append
    try:
        for _ in range(count):
            # length: 1 or 2 bytes in nearly every batch
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    u = (b & 0x7F) | (b2 << 7)
                    length = (u >> 1) ^ -(u & 1)
                    pos += 2
                else:
                    length, pos = read_varint(data, pos)
            rec_end = pos + length
            if length < MIN_RECORD_SIZE - 1 or rec_end > end:
                raise CorruptRecordError(f"record of {length} bytes does not fit the records area")
            # attributes (unused) at data[pos], then timestampDelta
            b = data[pos + 1]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                u = (b & 0x7F) | (data[pos + 2] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 3
            else:
                ts_delta, pos = read_varlong(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b == 1:
                key = None
                pos += 1
            elif b < 0x80 and not b & 1:
                pos += 1
                key = data[pos:pos + (b >> 1)]
                pos += b >> 1
            else:
                key, pos = _read_nullable_bytes(data, pos)
            # value
            b = data[pos]
            if b == 1:
                value = None
                pos += 1
            elif b < 0x80 and not b & 1:
                pos += 1
                value = data[pos:pos + (b >> 1)]
                pos += b >> 1
            elif b & 0x81 == 0x80 and data[pos + 1] < 0x80:   # two bytes, non-negative
                n = ((b & 0x7F) | (data[pos + 1] << 7)) >> 1
                pos += 2
                value = data[pos:pos + n]
                pos += n
            else:
                value, pos = _read_nullable_bytes(data, pos)
            # headers
            if data[pos] == 0:
                headers: list[tuple[str, bytes | None]] = []
                pos += 1
            else:
                headers, pos = _read_headers(data, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError(f"record declares {length} bytes but its fields take {length + pos - rec_end}")
            append(new(cls, (base_offset + offset_delta,
                             base_ts + ts_delta if log_append_time is None else log_append_time,
                             key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the records area") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left in the records area after {count} records")
    return out


def _read_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    """A VARINT length (-1 = null) and that many bytes: the general case of key and value."""
    n, pos = read_varint(data, pos)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"negative length {n} in a record")
        return None, pos
    return data[pos:pos + n], pos + n


def _read_headers(data: bytes, pos: int, rec_end: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = read_varint(data, pos)
    if count < 0 or count > (rec_end - pos) // 2:
        raise CorruptRecordError(f"record claims {count} headers in {rec_end - pos} bytes")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        klen, pos = read_varint(data, pos)
        if klen < 0 or pos + klen > rec_end:
            raise CorruptRecordError(f"record header key length {klen} is negative or runs past its record")
        hkey = data[pos:pos + klen].decode("utf-8", "surrogateescape")
        pos += klen
        vlen, pos = read_varint(data, pos)
        if vlen < 0:
            if vlen != -1:
                raise CorruptRecordError(f"negative header value length {vlen}")
            headers.append((hkey, None))
        else:
            if pos + vlen > rec_end:
                raise CorruptRecordError("record header value runs past its record")
            headers.append((hkey, data[pos:pos + vlen]))
            pos += vlen
    return headers, pos


def iter_batches(buf: BytesLike, *, verify_crc: bool = True,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[tuple[BatchInfo, list[Record]]]:
    """Each batch of a fetched records blob with its decoded records.

    A truncated batch at the end is skipped silently (a Fetch response may cut the last batch,
    and clients ignore it); a complete batch that is bad (CRC, magic, framing) raises
    CorruptRecordError after the good batches before it have been yielded.
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    infos, good_end = scan_valid_prefix(mv, verify_crc=verify_crc)
    for info in infos:
        yield info, decode_batch(buf, info, verify_crc=False, max_decompressed=max_decompressed)
    if good_end < len(mv) and not _is_truncated_tail(mv, good_end):
        raise CorruptRecordError(f"record batch at byte {good_end} is corrupt (magic, length or CRC)")


def iter_records(buf: BytesLike, *, min_offset: int | None = None, include_control: bool = False,
                 verify_crc: bool = True, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
    """The records of a fetched blob of batches, as a consumer sees them.

    Control batches (transaction markers) are left out unless ``include_control``; records below
    ``min_offset`` are dropped (a fetch returns whole batches, so the first may start earlier).
    """
    for info, records in iter_batches(buf, verify_crc=verify_crc, max_decompressed=max_decompressed):
        if info.is_control and not include_control:
            continue
        if min_offset is not None and info.base_offset < min_offset:
            yield from (r for r in records if r.offset >= min_offset)
        else:
            yield from records


def _is_truncated_tail(mv: memoryview, pos: int) -> bool:
    """True when the bytes from ``pos`` are the start of a batch cut off by the fetch size."""
    remaining = len(mv) - pos
    if remaining < LOG_OVERHEAD:
        return True
    size = batch_size_at(mv, pos)
    if size < HEADER_SIZE:
        return False
    if size > remaining:
        return True
    log.debug("complete record batch of %d bytes at byte %d failed validation", size, pos)
    return False
