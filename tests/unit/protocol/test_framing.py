"""FrameDecoder: splitting a byte stream into frames with bounded allocation."""
from __future__ import annotations

import struct

import pytest

from kafkalite.protocol.errors import InvalidFrameError, ProtocolError
from kafkalite.protocol.framing import FrameDecoder, frame

pytestmark = pytest.mark.unit


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frames_split_across_any_chunking() -> None:
    """Three frames fed one byte at a time, and all at once, come out the same."""
    payloads = [b"abc", b"", b"x" * 1000]
    stream = b"".join(_framed(p) for p in payloads)
    whole = FrameDecoder(2000).feed(stream)
    assert whole == payloads
    dec = FrameDecoder(2000)
    got = []
    for i in range(len(stream)):
        got += dec.feed(stream[i:i + 1])
    assert got == payloads
    assert dec.buffered == 0


def test_frames_are_independent_writable_bytearrays() -> None:
    """Each frame is its own bytearray; writing one does not touch the other."""
    a, b = FrameDecoder(100).feed(_framed(b"aaaa") + _framed(b"bbbb"))
    assert isinstance(a, bytearray) and isinstance(b, bytearray)
    a[0] = 0x7A
    assert b == b"bbbb" and a == b"zaaa"


def test_partial_frame_waits() -> None:
    """A frame missing its last byte is held; buffered counts what was received."""
    dec = FrameDecoder(100)
    assert dec.feed(_framed(b"hello")[:-1]) == []
    assert dec.buffered == 8
    assert dec.feed(b"o") == [bytearray(b"hello")]


@pytest.mark.parametrize("size", [-1, -2**31, 101, 2**31 - 1])
def test_bad_sizes_raise_and_stay_failed(size: int) -> None:
    """Negative or over-limit sizes raise InvalidFrameError (a ProtocolError) before any
    allocation, and the decoder refuses further input."""
    dec = FrameDecoder(100)
    with pytest.raises(InvalidFrameError):
        dec.feed(struct.pack(">i", size))
    with pytest.raises(ProtocolError):
        dec.feed(b"\x00\x00\x00\x01a")


def test_size_prefix_split_over_feeds() -> None:
    """The 4-byte size itself may arrive in pieces."""
    dec = FrameDecoder(100)
    raw = _framed(b"xyz")
    assert dec.feed(raw[:1]) == [] and dec.feed(raw[1:3]) == []
    assert dec.feed(raw[3:]) == [b"xyz"]


def test_frame_helper() -> None:
    """frame() puts the total size of all chunks first."""
    parts = frame([b"ab", memoryview(b"cde")])
    assert b"".join(parts) == b"\x00\x00\x00\x05abcde"
