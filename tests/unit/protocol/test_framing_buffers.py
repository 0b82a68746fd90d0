"""FrameDecoder's read-into-buffer side (``get_buffer`` / ``buffer_updated``), as a plaintext
connection drives it with ``recv_into``: a big frame's bytes land in the frame itself, small
frames go through the caller's spare buffer, and the result is the same as ``feed`` for any way
the stream is cut into reads."""
from __future__ import annotations

import os
import random
import struct

import pytest

from kafkalite.protocol.errors import InvalidFrameError
from kafkalite.protocol.framing import DIRECT_READ_MIN, FrameDecoder, FramePool, unshared

pytestmark = pytest.mark.unit


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Reads:
    """Drives a decoder as ``RecvIntoServer.doRead`` does: ask for a buffer, 'receive' into it
    at most what the socket holds and the limit allows, report the count."""

    def __init__(self, decoder: FrameDecoder, spare_bytes: int = 4096) -> None:
        self.decoder = decoder
        self.spare = memoryview(bytearray(spare_bytes))
        self.direct = 0          # reads that went straight into a frame
        self.through_spare = 0   # bytes that went through the spare buffer

    def read(self, data: bytes, limit: int | None = None) -> tuple[list[bytearray], int]:
        buf = self.decoder.get_buffer(self.spare)
        assert len(buf) > 0, "an empty recv_into target reads as end of stream"
        n = min(len(buf), len(data), limit if limit is not None else len(data))
        buf[:n] = data[:n]
        if buf.obj is self.spare.obj:
            self.through_spare += n
        else:
            self.direct += 1
        del buf
        frames = self.decoder.buffer_updated(n)
        self.spare[:] = b"\xee" * len(self.spare)    # the decoder kept nothing of it
        return frames, n

    def all(self, stream: bytes, limits: list[int] | None = None) -> list[bytearray]:
        frames: list[bytearray] = []
        pos = 0
        limits = list(limits or [])
        while pos < len(stream):
            got, n = self.read(stream[pos:], limits.pop(0) if limits else None)
            frames += got
            pos += n
        return frames


PAYLOADS = [b"tiny frame", os.urandom(DIRECT_READ_MIN + 50), b"", b"abc"]
STREAM = b"".join(_framed(p) for p in PAYLOADS)


def test_every_split_of_the_first_read_gives_the_same_frames() -> None:
    """The stream cut into a first read of k bytes, for every k, then reads as large as the
    buffers allow: always the same frames, each its own writable bytearray."""
    for k in range(1, len(STREAM)):
        reads = Reads(FrameDecoder(1 << 20))
        got = reads.all(STREAM, [k])
        assert got == PAYLOADS, f"first read of {k} bytes"
        assert all(type(f) is bytearray for f in got)
        assert reads.decoder.buffered == 0


def test_split_at_every_position_with_small_reads_around_it() -> None:
    """Reads of 7 bytes up to k, one read to k + 1 ..: every boundary falls inside a size prefix,
    a frame or between frames somewhere, and the frames still come out whole."""
    for k in range(0, len(STREAM), 257):
        limits = [7] * (k // 7) + [k % 7 or 1]
        got = Reads(FrameDecoder(1 << 20)).all(STREAM, limits)
        assert got == PAYLOADS


def test_size_prefix_split_across_reads() -> None:
    payload = os.urandom(DIRECT_READ_MIN * 2)
    reads = Reads(FrameDecoder(1 << 20))
    got = reads.all(_framed(payload), [1, 1, 1, 1])       # the prefix byte by byte
    assert got == [payload]
    # after the prefix, the frame was filled by direct reads only
    assert reads.through_spare == 4 and reads.direct >= 1


def test_a_frame_larger_than_the_read_buffer_is_read_into_itself() -> None:
    payload = os.urandom(1 << 20)
    reads = Reads(FrameDecoder(2 << 20), spare_bytes=64 * 1024)
    rng = random.Random(7)
    limits = [rng.randrange(1, 200_000) for _ in range(200)]
    got = reads.all(_framed(payload), limits)
    assert got == [payload]
    # at most one spare buffer's worth before the frame was known, then (below
    # DIRECT_READ_MIN) its tail: everything else went straight into the frame
    assert reads.through_spare <= 64 * 1024 + DIRECT_READ_MIN


def test_direct_reads_fill_the_frame_object_that_is_returned() -> None:
    payload = os.urandom(DIRECT_READ_MIN * 3)
    dec = FrameDecoder(1 << 20)
    spare = memoryview(bytearray(100))
    buf = dec.get_buffer(spare)
    buf[:100] = _framed(payload)[:100]
    assert dec.buffer_updated(100) == []
    direct = dec.get_buffer(spare)
    frame = direct.obj
    assert frame is not spare.obj and len(direct) == len(payload) - 96
    direct[:] = payload[96:]
    del direct
    (got,) = dec.buffer_updated(len(payload) - 96)
    assert got is frame and got == payload


@pytest.mark.parametrize("size", [-1, 1001])
def test_max_frame_size_is_enforced_and_the_decoder_stays_failed(size: int) -> None:
    reads = Reads(FrameDecoder(1000))
    with pytest.raises(InvalidFrameError):
        reads.read(struct.pack(">i", size) + b"x" * 50)
    with pytest.raises(InvalidFrameError):
        reads.decoder.get_buffer(reads.spare)


def test_a_frame_at_the_limit_is_accepted() -> None:
    payload = os.urandom(DIRECT_READ_MIN + 1)
    assert Reads(FrameDecoder(len(payload))).all(_framed(payload)) == [payload]


def test_a_stream_ending_mid_frame_leaves_no_frame() -> None:
    """What the decoder holds when the peer closes mid-frame: the partial frame, never returned."""
    payload = os.urandom(DIRECT_READ_MIN * 2)
    reads = Reads(FrameDecoder(1 << 20))
    data = _framed(payload)[: 4 + DIRECT_READ_MIN]
    assert reads.all(data) == []
    assert reads.decoder.buffered == len(data)


def test_feed_and_reads_mix_on_one_decoder() -> None:
    """Bytes before a transport switch (e.g. fed) and after (read into buffers) join up."""
    dec = FrameDecoder(1 << 20)
    assert dec.feed(STREAM[:10]) == []
    assert Reads(dec).all(STREAM[10:]) == PAYLOADS


# -- FramePool: big frames' buffers reused once their request is done ---------------------------


def test_unshared_sees_references_and_views() -> None:
    buf = bytearray(10)
    assert unshared(buf)
    view = memoryview(buf)[2:]
    assert not unshared(buf)
    del view
    kept = [buf]
    assert not unshared(buf)
    del kept
    assert unshared(buf)


def test_pool_hands_back_a_buffer_cut_to_the_size_asked() -> None:
    pool = FramePool(max_bytes=1 << 20)
    big = bytearray(os.urandom(100_000))
    pool.give(big)
    assert pool.take(200_001) is None                 # too small for it
    assert pool.take(49_999) is None                  # would waste more than half of it
    got = pool.take(60_000)
    assert got is big and len(got) == 60_000 and pool.bytes == 0 and pool.take(60_000) is None


def test_pool_keeps_only_big_buffers_up_to_its_bound() -> None:
    pool = FramePool(max_bytes=100_000)
    pool.give(bytearray(DIRECT_READ_MIN - 1))         # small frames are cheap: not kept
    pool.give(bytearray(60_000))
    pool.give(bytearray(60_000))                      # over the bound: dropped
    assert len(pool.free) == 1 and pool.bytes == 60_000


def test_a_decoder_fills_a_pooled_buffer_with_the_new_frame_only() -> None:
    pool = FramePool()
    old = bytearray(b"\xaa" * (DIRECT_READ_MIN * 2))
    pool.give(old)
    payload = os.urandom(DIRECT_READ_MIN * 2 - 10)
    (got,) = Reads(FrameDecoder(1 << 20, pool)).all(_framed(payload))
    assert got is old and got == payload
