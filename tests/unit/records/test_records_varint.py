"""Varints: the byte examples of kafka-protocol.md §2, int32/int64 edges, and the length bounds."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.errors import CorruptRecordError
from kafkalite.records.varint import (
    INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, UINT32_MAX, decode_zigzag, encode_unsigned_varint, encode_varint,
    encode_varlong, encode_zigzag32, read_unsigned_varint, read_varint, read_varlong, size_of_unsigned_varint,
    size_of_varint, size_of_varlong, write_unsigned_varint, write_varint, write_varlong,
)

pytestmark = pytest.mark.unit

EDGES32 = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1]
EDGES64 = EDGES32 + [INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, 1 << 35, -(1 << 35)]


@pytest.mark.parametrize("value,encoded", [(0, "00"), (-1, "01"), (1, "02"), (64, "8001"), (300, "d804"),
                                           (63, "7e"), (-64, "7f"), (13, "1a"), (15, "1e")])
def test_reference_bytes(value: int, encoded: str) -> None:
    """The documented VARINT bytes, both ways, and for VARLONG too."""
    assert encode_varint(value).hex() == encoded == encode_varlong(value).hex()
    assert read_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


def test_zigzag_table() -> None:
    """0, -1, 1, -2, 2, 63, -64, 64 map to 0..4, 126, 127, 128."""
    assert [encode_zigzag32(v) for v in (0, -1, 1, -2, 2, 63, -64, 64)] == [0, 1, 2, 3, 4, 126, 127, 128]
    assert [decode_zigzag(u) for u in (0, 1, 2, 3, 4, 126, 127, 128)] == [0, -1, 1, -2, 2, 63, -64, 64]


@pytest.mark.parametrize("value", EDGES32)
def test_varint_edges(value: int) -> None:
    """int32 edges round-trip in at most 5 bytes; size_of agrees; write_ appends the same bytes."""
    enc = encode_varint(value)
    assert len(enc) == size_of_varint(value) <= 5
    buf = bytearray(b"\xaa")
    write_varint(buf, value)
    assert bytes(buf[1:]) == enc
    assert read_varint(b"\xaa" + enc + b"\xff", 1) == (value, 1 + len(enc))


@pytest.mark.parametrize("value", EDGES64)
def test_varlong_edges(value: int) -> None:
    """int64 edges round-trip in at most 10 bytes."""
    enc = encode_varlong(value)
    assert len(enc) == size_of_varlong(value) <= 10
    buf = bytearray()
    write_varlong(buf, value)
    assert bytes(buf) == enc
    assert read_varlong(enc, 0) == (value, len(enc))


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, UINT32_MAX])
def test_unsigned_edges(value: int) -> None:
    """Unsigned varints up to 2**32-1 round-trip in at most 5 bytes."""
    enc = encode_unsigned_varint(value)
    assert len(enc) == size_of_unsigned_varint(value) <= 5
    buf = bytearray()
    write_unsigned_varint(buf, value)
    assert bytes(buf) == enc
    assert read_unsigned_varint(enc, 0) == (value, len(enc))


def test_out_of_range_values_refused_on_encode() -> None:
    """Encoding a value outside the type's width is a ValueError, not silent truncation."""
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            encode_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            encode_varlong(bad)
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)


def test_too_long_and_overflowing_are_corrupt() -> None:
    """Six bytes for a VARINT, eleven for a VARLONG, or a 5th byte that overflows 32 bits:
    CorruptRecordError, as are truncations."""
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x80\x80\x80\x80\x80\x00", 0)
    with pytest.raises(CorruptRecordError):
        read_varint(b"\xff\xff\xff\xff\x7f", 0)   # 35 bits
    assert read_varint(b"\xff\xff\xff\xff\x0f", 0) == (INT32_MIN, 5)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\x80" * 10 + b"\x00", 0)
    with pytest.raises(CorruptRecordError):
        read_varlong(b"\xff" * 9 + b"\x7f", 0)     # 70 bits
    with pytest.raises(CorruptRecordError):
        read_unsigned_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    for reader in (read_varint, read_varlong, read_unsigned_varint):
        with pytest.raises(CorruptRecordError):
            reader(b"\x80\x80", 0)
        with pytest.raises(CorruptRecordError):
            reader(b"", 0)


def test_reads_from_memoryview_and_bytearray() -> None:
    """Readers take any byte buffer, not just bytes."""
    enc = encode_varlong(-123456789)
    assert read_varlong(memoryview(enc), 0) == read_varlong(bytearray(enc), 0) == (-123456789, len(enc))


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_property(value: int) -> None:
    """Any int32 round-trips."""
    enc = encode_varint(value)
    assert read_varint(enc, 0) == (value, len(enc))


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_property(value: int) -> None:
    """Any int64 round-trips."""
    enc = encode_varlong(value)
    assert read_varlong(enc, 0) == (value, len(enc))


@given(st.binary(max_size=12), st.sampled_from([read_varint, read_varlong, read_unsigned_varint]))
def test_any_bytes_value_or_corrupt(data: bytes, reader) -> None:
    """Arbitrary bytes give a value with a consumed length within the bound, or CorruptRecordError."""
    try:
        value, pos = reader(data, 0)
    except CorruptRecordError:
        return
    assert 1 <= pos <= (10 if reader is read_varlong else 5)
    assert isinstance(value, int)
