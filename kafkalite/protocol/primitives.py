"""Variable-length primitives shared by the generated codecs.

Fixed-width fields are handled inline by the compiler with ``struct.Struct``; what lives here
is what cannot be a single ``struct`` call: LEB128 unsigned varints (compact lengths, tagged
fields), zigzag varints (for completeness; record batches use them), tag-section skipping,
and writing a bytes/records value that may be one buffer or a list of chunks without joining.
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

from kafkalite.records.file_region import FileRegion

from .errors import EncodeError, InvalidFrameError, TruncatedError

BytesLike = bytes | bytearray | memoryview

#: Chunks at least this long are handed to the transport by reference instead of copied.
ZERO_COPY_MIN = 4096

_I32 = struct.Struct(">i")
_U32_MAX = 0xFFFFFFFF
_I32_MAX = 0x7FFFFFFF
_NULL32 = b"\xff\xff\xff\xff"


def uvarint_rest(buf: BytesLike, pos: int, first: int) -> tuple[int, int]:
    """Finish an unsigned varint whose first byte (``first`` >= 0x80) was already read.

    At most 5 bytes in total (a 32-bit value), as Kafka's ``ByteUtils.readUnsignedVarint``.
    """
    value = first & 0x7F
    shift = 7
    for _ in range(4):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            if value > _U32_MAX:
                raise InvalidFrameError("unsigned varint exceeds 32 bits")
            return value, pos
        shift += 7
    raise InvalidFrameError("unsigned varint longer than 5 bytes")


def read_uvarint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; returns (value, next position)."""
    try:
        b = buf[pos]
    except IndexError:
        raise TruncatedError("unsigned varint past the end") from None
    if b < 0x80:
        return b, pos + 1
    try:
        return uvarint_rest(buf, pos + 1, b)
    except IndexError:
        raise TruncatedError("unsigned varint past the end") from None


def uvarint(value: int) -> bytes:
    """Encode ``0 <= value < 2**32`` as an unsigned varint."""
    if not 0 <= value <= _U32_MAX:
        raise EncodeError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def put_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint to ``out``."""
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += uvarint(value)


def zigzag_varint(value: int, bits: int = 32) -> bytes:
    """Signed VARINT (bits=32) or VARLONG (bits=64): zigzag, then LEB128."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= value <= hi:
        raise EncodeError(f"varint out of range for {bits} bits: {value}")
    u = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def read_zigzag_varint(buf: BytesLike, pos: int, bits: int = 32) -> tuple[int, int]:
    """Read a signed VARINT (max 5 bytes) or VARLONG (bits=64, max 10 bytes)."""
    max_len = 5 if bits == 32 else 10
    u = shift = 0
    for i in range(max_len):
        try:
            b = buf[pos + i]
        except IndexError:
            raise TruncatedError("varint past the end") from None
        u |= (b & 0x7F) << shift
        if b < 0x80:
            if u >> bits:
                raise InvalidFrameError(f"varint exceeds {bits} bits")
            return (u >> 1) ^ -(u & 1), pos + i + 1
        shift += 7
    raise InvalidFrameError(f"varint longer than {max_len} bytes")


def skip_tags(buf: BytesLike, pos: int) -> int:
    """Skip a tagged-field section whose tags are all unknown to this version."""
    count, pos = read_uvarint(buf, pos)
    end = len(buf)
    if count > end - pos:
        raise TruncatedError(f"tag section claims {count} fields, {end - pos} bytes left")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > end - pos:
            raise TruncatedError(f"tagged field of {size} bytes, {end - pos} left")
        pos += size
    return pos


def _nbytes(chunk: Any, what: str) -> int:
    if type(chunk) is bytes or type(chunk) is bytearray:
        return len(chunk)
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    if isinstance(chunk, (bytes, bytearray, FileRegion)):
        return len(chunk)
    raise EncodeError(f"{what}: expected bytes-like, got {type(chunk).__name__}")


def put_bytes(out: bytearray, parts: list, value: Any, compact: bool, nullable: bool,
              what: str) -> bytearray:
    """Write a BYTES/RECORDS value (one buffer or a list/tuple of chunks) with its length.

    Chunks of at least :data:`ZERO_COPY_MIN` bytes are appended to ``parts`` by reference
    (after flushing ``out``) so big record sets are never copied; returns the buffer to keep
    writing into. A :class:`FileRegion` (records left in their segment file for a zero-copy
    Fetch) counts by its length in the size prefix and always goes to ``parts`` as itself: the
    connection's writer sends it with ``os.sendfile``.
    """
    if value is None:
        if not nullable:
            raise EncodeError(f"{what}: null is not allowed in this version")
        if compact:
            out.append(0)
        else:
            out += _NULL32
        return out
    if isinstance(value, (list, tuple)):
        chunks = value
        size = 0
        for c in chunks:
            size += _nbytes(c, what)
    else:
        chunks = (value,)
        size = _nbytes(value, what)
    if size > _I32_MAX:
        raise EncodeError(f"{what}: {size} bytes do not fit a length field")
    if compact:
        put_uvarint(out, size + 1)
    else:
        out += _I32.pack(size)
    for c in chunks:
        n = c.nbytes if isinstance(c, memoryview) else len(c)
        if n >= ZERO_COPY_MIN or (n and type(c) is FileRegion):
            if out:
                parts.append(out)
                out = bytearray()
            if isinstance(c, memoryview) and c.format != "B":
                c = c.cast("B")
            parts.append(c)
        elif n:
            out += c
    return out


def uuid_bytes(value: Any) -> bytes:
    """A UUID field value (``uuid.UUID`` or 16 raw bytes) to its 16 wire bytes."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise EncodeError(f"expected a uuid.UUID, got {value!r}")


def is_default(value: Any, default: Any) -> bool:
    """Whether a tagged field holds its default and so stays off the wire."""
    if value is None or default is None:
        return value is default
    if isinstance(value, (list, tuple)) and not isinstance(default, (list, tuple, dict)):
        # a bytes/records value given as chunks
        return sum(len(c) for c in value) == 0 and default == b""
    if isinstance(default, list):
        return len(value) == 0
    if isinstance(value, memoryview):
        return value.tobytes() == default
    return value == default
