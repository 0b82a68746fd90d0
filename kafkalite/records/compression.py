"""The record-batch codecs: gzip, snappy, lz4, zstd (attribute bits 0-2), bounded on the way in.

Only the records area of a batch is compressed, as one blob (record-batch.md §2). The framings are
the ones real clients write:

* gzip: a gzip stream (RFC 1952); concatenated members are read like Java's GZIPInputStream.
* snappy: librdkafka writes *raw* snappy, the Java client, kafka-python and aiokafka write the
  snappy-java ("xerial") framing; :func:`decompress` accepts both, told apart by the xerial magic.
* lz4: the LZ4 *frame* format with independent blocks (KIP-57).
* zstd: standard zstd frames.

Every :func:`decompress` is bounded by ``max_size``: a batch of a few KiB can claim gigabytes
(a decompression bomb), so output is written into a buffer of at most ``max_size`` bytes and the
codec stops when it is full. Whatever goes wrong with the input surfaces as
:class:`~kafkalite.errors.CorruptRecordError`, never a codec library's own exception.
"""
from __future__ import annotations

import logging
import struct
import zlib
from enum import IntEnum

import cramjam

from kafkalite.errors import CorruptRecordError

log = logging.getLogger(__name__)

BytesLike = bytes | bytearray | memoryview


class Codec(IntEnum):
    """Compression ids of attribute bits 0-2 (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


NONE, GZIP, SNAPPY, LZ4, ZSTD = Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD

#: Lower-case names as used by ``compression.type`` (topic/producer config) and clients.
CODEC_NAMES: dict[int, str] = {c.value: c.name.lower() for c in Codec}
_CODEC_BY_NAME: dict[str, Codec] = {c.name.lower(): c for c in Codec}

#: Decompression limit used when callers give none: well above any batch a producer with Kafka's
#: default ``batch.size``/``max.request.size`` builds, low enough that a bomb cannot hurt.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

#: snappy-java's stream header: magic, then int32 version 1 and int32 oldest-compatible 1.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_CHUNK = 32 * 1024   # snappy-java's default block size
_INT32 = struct.Struct(">i")

# Default levels match the Java client's (KIP-390): gzip 6 (Deflater default), zstd 3.
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3
_FIRST_GUESS = 64 * 1024    # first output buffer when a frame does not state its size


def codec_by_name(name: str) -> Codec:
    """``"gzip"`` -> ``Codec.GZIP``; unknown names raise ValueError (a configuration error)."""
    try:
        return _CODEC_BY_NAME[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}; one of {sorted(_CODEC_BY_NAME)}") from None


# --- compress -------------------------------------------------------------------------------

def compress(codec: int, data: BytesLike, level: int | None = None) -> bytes:
    """Compress a records area with ``codec``; ``level`` None means the Java client's default.

    Snappy is written in the xerial framing, as the Java client does: it is what every Kafka
    consumer can read (librdkafka detects the framing; kafka-python and the Java client require
    it when a stream starts with the magic, and older readers never expect raw snappy).
    """
    if codec == GZIP:
        co = zlib.compressobj(_GZIP_LEVEL if level is None else level, zlib.DEFLATED, 31)
        return co.compress(data) + co.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        # Independent blocks and no content checksum, as Kafka's KafkaLZ4BlockOutputStream writes.
        # cramjam's streaming compressor takes only ``bytes``, hence the one copy.
        c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        c.compress(data if type(data) is bytes else bytes(data))
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL if level is None else level))
    if codec == NONE:
        return bytes(data)
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _xerial_compress(data: BytesLike) -> bytes:
    """snappy-java framing: header, then (int32 length, raw snappy) per 32 KiB input block."""
    mv = data if isinstance(data, memoryview) else memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(mv), _XERIAL_CHUNK):
        block = cramjam.snappy.compress_raw(mv[start:start + _XERIAL_CHUNK])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


# --- decompress -----------------------------------------------------------------------------

def decompress(codec: int, data: BytesLike, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress a records area; more than ``max_size`` bytes of output is CorruptRecordError."""
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _bounded_into(cramjam.lz4.decompress_into, data, max_size, _lz4_content_size(data), "lz4")
        if codec == ZSTD:
            return _bounded_into(cramjam.zstd.decompress_into, data, max_size, _zstd_content_size(data), "zstd")
        if codec == NONE:
            if len(data) > max_size:
                raise CorruptRecordError(f"records area of {len(data)} bytes exceeds the limit {max_size}")
            return bytes(data)
    except (cramjam.DecompressionError, zlib.error, ValueError, OverflowError) as e:
        raise CorruptRecordError(f"{CODEC_NAMES[codec]} records area does not decompress: {e}") from None
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _gzip_decompress(data: BytesLike, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: BytesLike = data
    while True:
        d = zlib.decompressobj(31)
        chunk = d.decompress(rest, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise CorruptRecordError(f"gzip records area inflates beyond the limit of {max_size} bytes")
        parts.append(chunk)
        if not d.eof:
            raise CorruptRecordError("gzip records area is truncated")
        rest = d.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_decompress(data: BytesLike, max_size: int) -> bytes:
    mv = data if isinstance(data, memoryview) else memoryview(data)
    if len(mv) < 16 or mv[:8] != XERIAL_MAGIC:
        return _raw_snappy(mv, max_size)
    # First pass reads only each chunk's length header, so the limit is checked before any work.
    chunks: list[tuple[memoryview, int]] = []
    total = 0
    pos = 16
    end = len(mv)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("xerial snappy chunk length truncated")
        clen = _INT32.unpack_from(mv, pos)[0]
        pos += 4
        if clen <= 0 or clen > end - pos:
            raise CorruptRecordError(f"xerial snappy chunk of {clen} bytes does not fit the stream")
        chunk = mv[pos:pos + clen]
        pos += clen
        ulen = cramjam.snappy.decompress_raw_len(chunk)
        total += ulen
        if total > max_size:
            raise CorruptRecordError(f"snappy records area inflates beyond the limit of {max_size} bytes")
        chunks.append((chunk, ulen))
    out = bytearray(total)
    with memoryview(out) as omv:
        at = 0
        for chunk, ulen in chunks:
            if cramjam.snappy.decompress_raw_into(chunk, omv[at:at + ulen]) != ulen:
                raise CorruptRecordError("xerial snappy chunk is shorter than its header says")
            at += ulen
    return bytes(out)


def _raw_snappy(mv: memoryview, max_size: int) -> bytes:
    ulen = cramjam.snappy.decompress_raw_len(mv)
    if ulen > max_size:
        raise CorruptRecordError(f"snappy records area claims {ulen} bytes, above the limit of {max_size}")
    out = bytearray(ulen)
    if cramjam.snappy.decompress_raw_into(mv, out) != ulen:
        raise CorruptRecordError("raw snappy records area is shorter than its header says")
    return bytes(out)


def _bounded_into(fn, data: BytesLike, max_size: int, hint: int | None, name: str) -> bytes:
    """Decompress into a fixed buffer that grows x4 up to ``max_size``.

    cramjam's ``decompress_into`` stops with an error as soon as the buffer is full, so no step
    allocates more than the buffer; a frame that states its size is done in one step, and the
    x4 growth keeps the total work below twice that of one exact-size pass.
    """
    if hint is not None and hint > max_size:
        raise CorruptRecordError(f"{name} records area claims {hint} bytes, above the limit of {max_size}")
    size = min(max_size, hint if hint is not None else max(_FIRST_GUESS, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = fn(data, out)
        except cramjam.DecompressionError as e:
            # cramjam reports a full buffer as std::io's "failed to write whole buffer"; anything
            # else is bad input and is not worth a bigger buffer. The test suite pins this message.
            if size >= max_size or "whole buffer" not in str(e):
                raise CorruptRecordError(
                    f"{name} records area is corrupt or inflates beyond the limit of {max_size} bytes: {e}") from None
            size = min(max_size, max(size * 4, _FIRST_GUESS))
            continue
        del out[n:]
        return bytes(out)


def _zstd_content_size(data: BytesLike) -> int | None:
    """Frame_Content_Size of a zstd frame header, if the writer stored it (RFC 8878 §3.1.1.1)."""
    if len(data) < 6 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = fhd & 0x20
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(data) < pos + width:
        return None
    size = int.from_bytes(data[pos:pos + width], "little")
    return size + 256 if width == 2 else size


def _lz4_content_size(data: BytesLike) -> int | None:
    """Content size of an LZ4 frame header, if the FLG byte says it is present."""
    if len(data) < 15 or bytes(data[:4]) != b"\x04\x22\x4d\x18" or not data[4] & 0x08:
        return None
    return int.from_bytes(data[6:14], "little")
