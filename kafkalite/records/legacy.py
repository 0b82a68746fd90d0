"""Message formats v0 and v1 (magic 0 and 1, Kafka before 0.11), for clients that still speak them.

Kafka 2.x serves Produce v0-2 and Fetch v0-3 (removed only in Kafka 4.0): what an old producer
sends is converted to v2 batches on the way in (Kafka's LogValidator), and what an old consumer
fetches is converted down to the format its request version implies (Fetch v0-1: magic 0,
v2-3: magic 1). The log itself only ever holds v2 batches.

A topic whose ``message.format.version`` is below 0.11.0 stores what Kafka's LogValidator would
convert to magic 0/1 (:func:`to_stored_format`): the batch stays v2 on disk, marked with its
magic (records/batch.py, attribute bits 8-9), and every consumer's Fetch, of any version, gets it
as that v0/v1 message set (:func:`convert_for_reader`), as Kafka returns what it stored.

A message set is a sequence of ``offset int64, size int32, message``; a message is ``crc uint32``
(CRC-32 of everything after it), ``magic int8``, ``attributes int8`` (bits 0-2 the codec, bit 3 the
timestamp type, v1 only), ``timestamp int64`` (v1 only), ``key bytes``, ``value bytes``. A
compressed message set is one *wrapper* message whose value is the compressed inner message set:
with magic 1 the inner offsets are relative (0..n-1) and the wrapper carries the last absolute
offset; with magic 0 the inner offsets are absolute.

LZ4 with magic 0 uses the frame-descriptor checksum as Kafka 0.8-0.9 computed it, over the
frame's magic number too (KAFKA-3160); it is corrected on the way in and reproduced on the way
out, as Kafka 2.x does for those clients.

Everything here is pure: bytes in, bytes out. Bad input raises CorruptRecordError.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterator, NamedTuple

from kafkalite.errors import CorruptRecordError, ErrorCode, KafkaError, UnsupportedForMessageFormatError
from kafkalite.records.batch import (CONTROL_MASK, FORMAT_MAGIC_MASK, BatchInfo, BytesLike, mark_stored_magic, read_header,
                                    scan_valid_prefix)
from kafkalite.records.builder import BatchBuilder
from kafkalite.records.compression import DEFAULT_MAX_DECOMPRESSED, LZ4, NONE, ZSTD, compress, decompress
from kafkalite.records.record import decode_batch

NO_TIMESTAMP = -1
TIMESTAMP_TYPE_MASK = 0x08
CODEC_MASK = 0x07
_ENTRY = struct.Struct(">qi")              # offset, message size
_HEAD_V0 = struct.Struct(">Ibb")           # crc, magic, attributes
_HEAD_V1 = struct.Struct(">Ibbq")          # crc, magic, attributes, timestamp
_INT32 = struct.Struct(">i")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class UnsupportedForMagic(CorruptRecordError):
    """A v2 batch an old consumer cannot read in its format (zstd: Kafka answers
    UNSUPPORTED_COMPRESSION_TYPE to such fetches)."""


class LegacyMessage(NamedTuple):
    """One message of a v0/v1 set; ``offset`` as written by the producer (ignored on append)."""

    offset: int
    magic: int
    timestamp: int                 # NO_TIMESTAMP for magic 0
    log_append_time: bool
    key: bytes | None
    value: bytes | None


# --------------------------------------------------------------------------- reading (Produce v0-2)


def read_message_set(buf: BytesLike, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[int, int, list[LegacyMessage]]:
    """(magic, codec, messages) of a producer's message set, compressed wrappers expanded.

    Every message's CRC is checked; the set must hold one magic only, whole messages only, and
    no compressed message inside a compressed one. ``codec`` is the wrappers' codec (0 if none).
    """
    mv = memoryview(buf)
    out: list[LegacyMessage] = []
    magics: set[int] = set()
    codecs: set[int] = set()
    for offset, magic, attributes, timestamp, key, value in _iter_messages(mv, "message set"):
        magics.add(magic)
        codec = attributes & CODEC_MASK
        codecs.add(codec)
        if codec == NONE:
            out.append(LegacyMessage(offset, magic, timestamp, bool(attributes & TIMESTAMP_TYPE_MASK), key, value))
            continue
        if value is None:
            raise CorruptRecordError("a compressed wrapper message has no value")
        inner = decompress(codec, _fix_lz4_descriptor(value) if codec == LZ4 and magic == 0 else value,
                           max_decompressed)
        for i_offset, i_magic, i_attributes, i_timestamp, i_key, i_value in _iter_messages(memoryview(inner),
                                                                                             "compressed message set"):
            if i_attributes & CODEC_MASK:
                raise CorruptRecordError("a compressed message inside a compressed message set")
            if i_magic != magic:
                raise CorruptRecordError(f"inner message magic {i_magic} differs from its wrapper's {magic}")
            ts = i_timestamp
            if magic == 1 and attributes & TIMESTAMP_TYPE_MASK:
                ts = timestamp            # LogAppendTime: the wrapper's time is every record's
            out.append(LegacyMessage(i_offset, i_magic, ts, bool(attributes & TIMESTAMP_TYPE_MASK), i_key, i_value))
    if not out:
        raise CorruptRecordError("the message set holds no message")
    if len(magics) != 1:
        raise CorruptRecordError(f"a message set mixes magic values {sorted(magics)}")
    compressed = codecs - {NONE}
    if len(compressed) > 1 or (compressed and NONE in codecs):
        raise CorruptRecordError("a message set mixes compressed and uncompressed messages")
    return magics.pop(), (compressed.pop() if compressed else NONE), out


def _iter_messages(mv: memoryview, what: str) -> Iterator[tuple[int, int, int, int, bytes | None, bytes | None]]:
    """(offset, magic, attributes, timestamp, key, value) of each whole, CRC-valid message."""
    pos, end = 0, len(mv)
    while pos < end:
        if end - pos < _ENTRY.size:
            raise CorruptRecordError(f"{what}: {end - pos} trailing bytes are no whole message")
        offset, size = _ENTRY.unpack_from(mv, pos)
        start = pos + _ENTRY.size
        if size < _HEAD_V0.size + 8 or start + size > end:
            raise CorruptRecordError(f"{what}: a message of {size} bytes does not fit at byte {pos}")
        crc, magic, attributes = _HEAD_V0.unpack_from(mv, start)
        if magic not in (0, 1):
            raise CorruptRecordError(f"{what}: message magic {magic} is not 0 or 1")
        if zlib.crc32(mv[start + 4:start + size]) != crc:
            raise CorruptRecordError(f"{what}: the message at byte {pos} failed its CRC-32 check")
        p = start + _HEAD_V0.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if size < _HEAD_V1.size + 8:
                raise CorruptRecordError(f"{what}: a v1 message of {size} bytes is too short")
            timestamp = _HEAD_V1.unpack_from(mv, start)[3]
            p = start + _HEAD_V1.size
        key, p = _read_bytes(mv, p, start + size, what)
        value, p = _read_bytes(mv, p, start + size, what)
        if p != start + size:
            raise CorruptRecordError(f"{what}: the message at byte {pos} has {start + size - p} stray bytes")
        yield offset, magic, attributes, timestamp, key, value
        pos = start + size


def _read_bytes(mv: memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError(f"{what}: a message ends inside a length")
    n = _INT32.unpack_from(mv, pos)[0]
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"{what}: a field of {n} bytes runs past its message")
    return bytes(mv[pos:pos + n]), pos + n


def to_batch(messages: list[LegacyMessage], codec: int) -> bytearray:
    """One v2 batch holding ``messages`` (offsets from 0: the log assigns them), compressed with
    ``codec``. Magic 0 messages get no timestamp (-1), as Kafka's up-conversion gives them."""
    builder = BatchBuilder(compression=codec)
    for m in messages:
        builder.append(m.timestamp, m.key, m.value, ())
    return builder.build()


def upconvert(buf: BytesLike, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytearray:
    """A Produce v0-2 partition's message set as the one v2 batch the log stores."""
    _magic, codec, messages = read_message_set(buf, max_decompressed=max_decompressed)
    return to_batch(messages, codec)


def fetch_magic(fetch_version: int) -> int:
    """The message format a Fetch version's reader understands: v0-1 magic 0, v2-3 magic 1."""
    return 0 if fetch_version <= 1 else 1


# --------------------------------------------------------------------------- topics on format v0/v1


def to_stored_format(buf: BytesLike, infos: list[BatchInfo], magic: int, *,
                     max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[BytesLike, list[BatchInfo]]:
    """Validated v2 batches as a topic on message format ``magic`` stores them. Magic 2: as
    they are, except that a mark a client set itself is cleared (Kafka ignores bits 8-9; they
    must not make kafkalite serve a batch as v0/v1). Magic 0/1, with Kafka 2.8's answers: idempotent or transactional batches UNSUPPORTED_FOR_MESSAGE_FORMAT
    (LogValidator.validateBatch); headers, zstd and negative timestamps UNKNOWN_SERVER_ERROR (the
    IllegalArgumentException of Kafka's MemoryRecordsBuilder reaches the client as that).

    Magic 1 keeps every field of a v2 record but headers, so its batches are only marked, in
    place (``buf`` must be writable); magic 0 has no timestamps, so its batches are rebuilt with
    -1 (same codec) into a new buffer. Per batch; records are decoded for the header check only.
    """
    if magic == 2:
        if any(info.attributes & FORMAT_MAGIC_MASK for info in infos):
            buf = _writable(buf)
            infos = [mark_stored_magic(buf, info, 2) for info in infos]
        return buf, infos
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not 0, 1 or 2")
    decoded = []
    for info in infos:
        if info.is_transactional:
            raise UnsupportedForMessageFormatError(f"Transactional records cannot be used with magic version {magic}")
        if info.has_producer_id:
            raise UnsupportedForMessageFormatError(f"Idempotent records cannot be used with magic version {magic}")
        if info.compression == ZSTD:
            raise KafkaError(f"ZStandard compression is not supported for magic {magic}", ErrorCode.UNKNOWN_SERVER_ERROR)
        records = decode_batch(buf, info, verify_crc=False, max_decompressed=max_decompressed)
        for r in records:
            if r.headers:
                raise KafkaError(f"Magic v{magic} does not support record headers", ErrorCode.UNKNOWN_SERVER_ERROR)
            if r.timestamp < NO_TIMESTAMP:
                raise KafkaError(f"Invalid negative timestamp {r.timestamp}", ErrorCode.UNKNOWN_SERVER_ERROR)
        decoded.append(records)
    if magic == 1:
        buf = _writable(buf)
        return buf, [mark_stored_magic(buf, info, 1) for info in infos]
    out = bytearray()
    out_infos = []
    for info, records in zip(infos, decoded):
        builder = BatchBuilder(compression=info.compression, stored_magic=0)
        for r in records:
            builder.append(NO_TIMESTAMP, r.key, r.value)
        pos = len(out)
        out += builder.build()
        out_infos.append(read_header(out, pos))
    return out, out_infos


def _writable(buf: BytesLike) -> bytearray | memoryview:
    """``buf``, or a copy when it cannot be patched in place (positions stay the same)."""
    if isinstance(buf, bytearray) or (isinstance(buf, memoryview) and not buf.readonly):
        return buf
    return bytearray(buf)


def convert_for_reader(buf: BytesLike, reader_magic: int, *, fetch_offset: int = 0,
                       max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> BytesLike:
    """Stored batches as a consumer that reads up to ``reader_magic`` gets them: each batch in
    the lower of its stored format (batch.py's mark, else 2) and the reader's, so a v2 reader
    gets v2 batches as they are and marked ones as the v0/v1 message sets Kafka stored, and an
    old reader gets everything down-converted as :func:`down_convert` does. Per batch; returns
    ``buf`` itself when no batch needs converting."""
    mv = memoryview(buf)
    infos, end = scan_valid_prefix(mv, 0, verify_crc=False)
    out: bytearray | None = None
    copied = 0
    for info in infos:
        target = min(info.stored_magic, reader_magic)
        if target == 2:
            continue
        if out is None:
            out = bytearray()
        out += mv[copied:info.position]
        out += down_convert(mv[info.position:info.end], target, fetch_offset=fetch_offset,
                            max_decompressed=max_decompressed)
        copied = info.end
    if out is None:
        return buf
    out += mv[copied:end]
    return bytes(out)


def as_v2_batches(buf: BytesLike) -> BytesLike:
    """A fetched records blob as v2 batches only, for readers of v2 (kafkalite's consumer, the
    Spark reader): a topic on format v0/v1 answers v0/v1 entries, alone or after v2 batches, and
    each becomes one uncompressed v2 batch with the same absolute offsets, keys, values,
    timestamps and timestamp type. ``buf`` itself when the v2 scan reaches its end or stops at
    anything but a v0/v1 entry (so the all-v2 case costs the scan the reader does anyway); a
    cut-off tail stays as it is, for the reader to ignore. Bad v0/v1 entries raise
    CorruptRecordError."""
    mv = memoryview(buf)
    _infos, pos = scan_valid_prefix(mv, 0, verify_crc=False)
    if not old_format_at(mv, pos):
        return buf
    total = len(mv)
    out = bytearray(mv[:pos])
    while total - pos > _HEAD_V0.size + _ENTRY.size:
        end = pos + _ENTRY.size + _ENTRY.unpack_from(mv, pos)[1]
        if end > total:
            break                                   # a cut-off tail
        entry = mv[pos:end]
        out += _entry_as_batch(entry) if entry[_ENTRY.size + 4] in (0, 1) else entry
        pos = end
    out += mv[pos:]
    return bytes(out)


def old_format_at(buf: BytesLike, pos: int) -> bool:
    """Whether a v0/v1 entry (a whole header at least) starts at ``pos``: where a v2 scan stopped,
    this tells a topic on an older message format from a cut-off or corrupt tail."""
    return len(buf) - pos > _HEAD_V0.size + _ENTRY.size and buf[pos + _ENTRY.size + 4] in (0, 1)


def _entry_as_batch(entry: memoryview) -> bytearray:
    """One v0/v1 message (or compressed wrapper) as a v2 batch; a v1 wrapper's inner offsets are
    relative to its own, which is the last one's (KIP-31), v0's are absolute."""
    magic, codec, messages = read_message_set(entry)
    offsets = [m.offset for m in messages]
    if codec != NONE and magic == 1:
        wrapper = _ENTRY.unpack_from(entry, 0)[0]
        offsets = [wrapper - offsets[-1] + o for o in offsets]
    append_time = messages[0].timestamp if messages[0].log_append_time and magic == 1 else None
    builder = BatchBuilder(base_offset=offsets[0], log_append_time=append_time)
    for m, offset in zip(messages, offsets):
        builder.append(m.timestamp, m.key, m.value, (), offset_delta=offset - offsets[0])
    return builder.build()


# --------------------------------------------------------------------------- writing (Fetch v0-3)


def down_convert(buf: BytesLike, magic: int, *, fetch_offset: int = 0,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """The v2 batches of ``buf`` as a message set of ``magic`` (0 or 1).

    Control batches are left out (old consumers know no transaction markers). An uncompressed
    batch becomes one message per record (records below ``fetch_offset`` dropped); a compressed
    one becomes one wrapper message with the same codec, as Kafka's down-conversion keeps the
    compression. A trailing partial batch is left out. zstd raises UnsupportedForMagic.
    """
    if magic not in (0, 1):
        raise ValueError(f"magic {magic}: down-conversion writes 0 or 1")
    mv = memoryview(buf)
    infos, _end = scan_valid_prefix(mv, 0, verify_crc=False)
    out = bytearray()
    for info in infos:
        if info.attributes & CONTROL_MASK:
            continue
        codec = info.attributes & CODEC_MASK
        if codec == ZSTD:
            raise UnsupportedForMagic("zstd-compressed records cannot be read with message format "
                                      f"v{magic}")
        records = decode_batch(mv, info, verify_crc=False, max_decompressed=max_decompressed)
        if not records:
            continue
        append_time = info.max_timestamp if _is_log_append_time(info) else None
        if codec == NONE:
            for r in records:
                if r.offset >= fetch_offset:
                    _put_message(out, r.offset, magic, 0, _ts(r.timestamp, append_time), r.key, r.value,
                                 append_time is not None)
            continue
        inner = bytearray()
        last = records[-1].offset
        for i, r in enumerate(records):
            inner_offset = i if magic == 1 else r.offset
            _put_message(inner, inner_offset, magic, 0, _ts(r.timestamp, append_time), r.key, r.value,
                         append_time is not None)
        value = compress(codec, bytes(inner))
        if codec == LZ4 and magic == 0:
            value = _break_lz4_descriptor(value)
        wrapper_ts = append_time if append_time is not None else max(r.timestamp for r in records)
        _put_message(out, last, magic, codec, wrapper_ts, None, value, append_time is not None)
    return bytes(out)


def _is_log_append_time(info: BatchInfo) -> bool:
    return bool(info.attributes & TIMESTAMP_TYPE_MASK)


def _ts(timestamp: int, append_time: int | None) -> int:
    return append_time if append_time is not None else timestamp


def _put_message(out: bytearray, offset: int, magic: int, codec: int, timestamp: int, key: bytes | None,
                 value: bytes | None, log_append_time: bool) -> None:
    attributes = codec | (TIMESTAMP_TYPE_MASK if log_append_time and magic == 1 else 0)
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    out += _ENTRY.pack(offset, len(body) + 4)
    out += struct.pack(">I", zlib.crc32(body))
    out += body


def cut_to_size(data: BytesLike, max_bytes: int) -> BytesLike:
    """Cut a converted message set (v2 batches among its entries too: they share the offset and
    size framing) to whole entries within ``max_bytes`` (at least one, as a fetch always returns
    the first message even when it is bigger)."""
    pos = 0
    while pos + _ENTRY.size <= len(data):
        size = _ENTRY.unpack_from(data, pos)[1]
        nxt = pos + _ENTRY.size + size
        if nxt > max_bytes and pos > 0:
            break
        pos = nxt
    return data[:pos]


# --------------------------------------------------------------------------- LZ4 of Kafka 0.8-0.9


def _lz4_descriptor_end(frame: bytes) -> int:
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 data does not start with an LZ4 frame")
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _fix_lz4_descriptor(frame: bytes) -> bytes:
    """Replace Kafka 0.8-0.9's descriptor checksum (over magic and descriptor) with the standard
    one (descriptor only), so a standard LZ4 reader takes the frame."""
    end = _lz4_descriptor_end(frame)
    if len(frame) <= end:
        raise CorruptRecordError("lz4 frame ends inside its descriptor")
    good = (xxh32(frame[4:end]) >> 8) & 0xFF
    if frame[end] == good:
        return frame
    return frame[:end] + bytes([good]) + frame[end + 1:]


def _break_lz4_descriptor(frame: bytes) -> bytes:
    """The descriptor checksum as Kafka 0.8-0.9's LZ4 reader expects it (over magic too)."""
    end = _lz4_descriptor_end(frame)
    return frame[:end] + bytes([(xxh32(frame[:end]) >> 8) & 0xFF]) + frame[end + 1:]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (the LZ4 frame format's checksum); only ever run over a few descriptor bytes here."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos:pos + 4], "little")
                v[i] = (_rotl((v[i] + lane * _P2) & _M, 13) * _P1) & _M
                pos += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while pos + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[pos:pos + 4], "little") * _P3) & _M, 17) * _P4) & _M
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M, 11) * _P1) & _M
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M
    h ^= h >> 13
    h = (h * _P3) & _M
    h ^= h >> 16
    return h
