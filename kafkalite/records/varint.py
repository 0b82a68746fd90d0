"""Zigzag varints (record fields) and unsigned varints (compact protocol fields).

Encoding (kafka-protocol.md §2): little-endian base-128 groups, high bit = "more follows";
signed values are zigzag-mapped first so small negatives stay short. A 32-bit value takes at most
5 bytes and a 64-bit one at most 10; a longer run, or a value that does not fit its width, is
:class:`~kafkalite.errors.CorruptRecordError` (wire input is never trusted).

Readers take ``(buf, pos)`` and return ``(value, new_pos)`` so callers walk a buffer without
slicing it. Most varints in real batches are one byte (attributes, offset deltas, null markers,
header counts), so every reader tries that first; :mod:`kafkalite.records.record` inlines the
same fast path in its per-record loop. ``buf`` may be ``bytes``, ``bytearray`` or a
``memoryview`` of format ``B``.
"""
from __future__ import annotations

from kafkalite.errors import CorruptRecordError

BytesLike = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

_ONE_BYTE: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))

__all__ = [
    "decode_zigzag", "encode_unsigned_varint", "encode_varint", "encode_varlong", "encode_zigzag32",
    "encode_zigzag64", "read_unsigned_varint", "read_varint", "read_varlong", "size_of_unsigned_varint",
    "size_of_varint", "size_of_varlong", "write_unsigned_varint", "write_varint", "write_varlong",
]


# --- zigzag ---------------------------------------------------------------------------------

def encode_zigzag32(value: int) -> int:
    """Map a signed int32 to an unsigned one (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a 32-bit varint")
    return (value << 1) ^ (value >> 31)


def encode_zigzag64(value: int) -> int:
    """Map a signed int64 to an unsigned one."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a 64-bit varlong")
    return (value << 1) ^ (value >> 63)


def decode_zigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


# --- encoding -------------------------------------------------------------------------------

def encode_unsigned_varint(u: int) -> bytes:
    """LEB128 bytes of a non-negative integer (callers bound its width)."""
    if u < 0x80:
        if u < 0:
            raise ValueError(f"unsigned varint of negative {u}")
        return _ONE_BYTE[u]
    if u < 0x4000:
        return bytes(((u & 0x7F) | 0x80, u >> 7))
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag VARINT (int32)."""
    if -64 <= value <= 63:
        return _ONE_BYTE[(value << 1) ^ (value >> 31)]
    return encode_unsigned_varint(encode_zigzag32(value))


def encode_varlong(value: int) -> bytes:
    """Zigzag VARLONG (int64)."""
    if -64 <= value <= 63:
        return _ONE_BYTE[(value << 1) ^ (value >> 63)]
    return encode_unsigned_varint(encode_zigzag64(value))


def write_unsigned_varint(buf: bytearray, u: int) -> None:
    """Append an unsigned varint to ``buf``."""
    if 0 <= u < 0x80:
        buf.append(u)
    else:
        buf += encode_unsigned_varint(u)


def write_varint(buf: bytearray, value: int) -> None:
    """Append a zigzag VARINT to ``buf``."""
    if -64 <= value <= 63:
        buf.append((value << 1) ^ (value >> 31))
    else:
        buf += encode_unsigned_varint(encode_zigzag32(value))


def write_varlong(buf: bytearray, value: int) -> None:
    """Append a zigzag VARLONG to ``buf``."""
    if -64 <= value <= 63:
        buf.append((value << 1) ^ (value >> 63))
    else:
        buf += encode_unsigned_varint(encode_zigzag64(value))


def size_of_unsigned_varint(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varint(value: int) -> int:
    return size_of_unsigned_varint(encode_zigzag32(value))


def size_of_varlong(value: int) -> int:
    return size_of_unsigned_varint(encode_zigzag64(value))


# --- decoding -------------------------------------------------------------------------------

def _read_unsigned(buf: BytesLike, pos: int, max_bytes: int, limit: int, what: str) -> tuple[int, int]:
    """The multi-byte path: at most ``max_bytes`` bytes and a value of at most ``limit``."""
    result = 0
    shift = 0
    stop = pos + max_bytes
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            if pos >= stop:
                raise CorruptRecordError(f"{what} longer than {max_bytes} bytes at byte {pos - max_bytes}")
            shift += 7
    except IndexError:
        raise CorruptRecordError(f"{what} truncated at byte {pos}") from None
    if result > limit:
        raise CorruptRecordError(f"{what} value {result:#x} overflows its width")
    return result, pos


def read_unsigned_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """An unsigned 32-bit varint at ``pos``: ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"unsigned varint truncated at byte {pos}") from None
    if b < 0x80:
        return b, pos + 1
    return _read_unsigned(buf, pos, 5, UINT32_MAX, "unsigned varint")


def read_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """A zigzag VARINT (int32) at ``pos``: ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"varint truncated at byte {pos}") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _read_unsigned(buf, pos, 5, UINT32_MAX, "varint")
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """A zigzag VARLONG (int64) at ``pos``: ``(value, next_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"varlong truncated at byte {pos}") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _read_unsigned(buf, pos, 10, (1 << 64) - 1, "varlong")
    return (u >> 1) ^ -(u & 1), pos
