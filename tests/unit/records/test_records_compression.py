"""Codecs: both snappy framings, gzip members, frame size hints, and bounded decompression."""
from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest

from kafkalite.errors import CorruptRecordError
from kafkalite.records import BatchBuilder, Codec, Record, decode_batch, validate_batches
from kafkalite.records.batch import HEADER_SIZE
from kafkalite.records.compression import CODEC_NAMES, XERIAL_MAGIC, codec_by_name, compress, decompress
from kafkalite.records.crc import crc32c

pytestmark = pytest.mark.unit

PAYLOAD = (b"kafkalite " * 5000) + os.urandom(20000) + bytes(70000)
COMPRESSED = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_round_trip(codec: Codec) -> None:
    """compress then decompress gives the input back, for every codec."""
    assert decompress(codec, compress(codec, PAYLOAD), len(PAYLOAD)) == PAYLOAD


def test_names() -> None:
    """Codec ids and names follow CompressionType.java."""
    assert CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    assert codec_by_name("ZSTD") is Codec.ZSTD
    with pytest.raises(ValueError):
        codec_by_name("brotli")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_is_corrupt(codec: int) -> None:
    """Codec ids 5-7 (and nonsense) are CorruptRecordError both ways."""
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"abc", 100)
    with pytest.raises(CorruptRecordError):
        compress(codec, b"abc")


def test_snappy_written_in_xerial_framing() -> None:
    """Our snappy output is snappy-java's framing: magic, version 1, compat 1, 32 KiB chunks."""
    out = compress(Codec.SNAPPY, PAYLOAD)
    assert out[:8] == XERIAL_MAGIC and struct.unpack(">ii", out[8:16]) == (1, 1)
    pos, chunks = 16, 0
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        assert len(cramjam.snappy.decompress_raw(out[pos + 4:pos + 4 + n])) <= 32 * 1024
        pos += 4 + n
        chunks += 1
    assert pos == len(out) and chunks == -(-len(PAYLOAD) // (32 * 1024))


def test_raw_snappy_accepted() -> None:
    """Raw snappy, as librdkafka writes it, decompresses too."""
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(Codec.SNAPPY, raw, len(PAYLOAD)) == PAYLOAD


def _hand_batch(codec: int, area: bytes, count: int, last_delta: int, base_ts: int = 1000) -> bytes:
    """A batch header wrapped around an already-compressed records area, CRC computed."""
    body = struct.pack(">hiqqqhii", codec, last_delta, base_ts, base_ts, -1, -1, -1, count) + area
    crc = crc32c(body)
    return struct.pack(">qiiBI", 0, len(body) + 9, 0, 2, crc) + body


def _records_area(records: list[tuple[int, bytes | None, bytes | None]]) -> bytes:
    b = BatchBuilder()
    for ts, k, v in records:
        b.append(ts, k, v)
    return bytes(b.build()[HEADER_SIZE:])


def test_librdkafka_style_raw_snappy_batch() -> None:
    """A hand-built batch whose records area is raw snappy (librdkafka's form) validates and decodes."""
    area = _records_area([(1000, b"a", b"x" * 500), (1001, None, b"y" * 500)])
    batch = _hand_batch(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(area)), 2, 1)
    assert validate_batches(batch, max_batch_bytes=1 << 20)[0].compression == Codec.SNAPPY
    assert decode_batch(batch) == [Record(0, 1000, b"a", b"x" * 500, []), Record(1, 1001, None, b"y" * 500, [])]


def test_gzip_concatenated_members() -> None:
    """Two gzip members back to back read as one stream (Java's GZIPInputStream does the same)."""
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, data, 100) == b"first second"


def test_gzip_trailing_garbage_is_corrupt() -> None:
    """Bytes after the last gzip member that are not another member are CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        decompress(Codec.GZIP, gzip.compress(b"abc") + b"junk", 100)


def test_lz4_and_zstd_frames_without_size_grow_to_fit() -> None:
    """Frames that do not state their size (Java's writers) still decompress past the first guess."""
    big = os.urandom(1000) * 400   # 400 KB, above the 64 KiB first guess
    lz4 = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    lz4.compress(big)
    frame = bytes(lz4.finish())
    assert not frame[4] & 0x08   # no content size in the FLG byte
    assert decompress(Codec.LZ4, frame, len(big)) == big
    zc = cramjam.zstd.Compressor()
    zc.compress(big)
    assert decompress(Codec.ZSTD, bytes(zc.finish()), len(big)) == big


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name.lower())
def test_output_exactly_at_limit_is_fine(codec: Codec) -> None:
    """max_size is inclusive: output of exactly max_size bytes is accepted, one less is not."""
    blob = compress(codec, PAYLOAD)
    assert len(decompress(codec, blob, len(PAYLOAD))) == len(PAYLOAD)
    with pytest.raises(CorruptRecordError):
        decompress(codec, blob, len(PAYLOAD) - 1)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name.lower())
def test_decompression_bomb_is_bounded(codec: Codec) -> None:
    """256 MiB of zeros compressed (a few KB to ~1 MB) raises CorruptRecordError at a 1 MiB limit
    without inflating it all: the call returns fast and the result never exists."""
    import resource
    import time

    if codec == Codec.SNAPPY:
        # snappy's 32 KiB xerial chunks: many small chunks; the raw form claims its length up front.
        bombs = [compress(codec, bytes(8 << 20)), bytes(cramjam.snappy.compress_raw(bytes(64 << 20)))]
    else:
        c = {Codec.GZIP: cramjam.gzip, Codec.LZ4: cramjam.lz4, Codec.ZSTD: cramjam.zstd}[codec].Compressor()
        zeros = bytes(16 << 20)
        for _ in range(16):
            c.compress(zeros)
        del zeros
        bombs = [bytes(c.finish())]
    for bomb in bombs:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        with pytest.raises(CorruptRecordError):
            decompress(codec, bomb, 1 << 20)
        assert time.perf_counter() - t < 2.0
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 32 * 1024   # KiB: < 32 MiB


def test_stated_size_above_limit_fails_before_work() -> None:
    """A zstd/lz4 frame header or raw snappy preamble claiming more than max_size is refused."""
    zst = bytes(cramjam.zstd.compress(bytes(1 << 20)))
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(Codec.ZSTD, zst, 1000)
    lz = bytes(cramjam.lz4.compress(bytes(1 << 20)))
    if lz[4] & 0x08:
        with pytest.raises(CorruptRecordError, match="claims"):
            decompress(Codec.LZ4, lz, 1000)
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(bytes(1 << 20))), 1000)


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("junk", [b"", b"\x00", b"garbage" * 10, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01"
                                  + b"\x7f\xff\xff\xff", b"\x28\xb5\x2f\xfd" + b"\xff" * 20,
                                  b"\x04\x22\x4d\x18" + b"\x00" * 20, b"\x1f\x8b\x08" + b"\x00" * 20])
def test_garbage_is_corrupt(codec: Codec, junk: bytes) -> None:
    """Garbage and truncated frames surface as CorruptRecordError, never a codec library error."""
    try:
        out = decompress(codec, junk, 1 << 16)
    except CorruptRecordError:
        return
    assert codec == Codec.SNAPPY and junk == b"\x00" and out == b""   # raw snappy of empty input


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.name.lower())
def test_truncated_stream_is_corrupt(codec: Codec) -> None:
    """Cutting the last bytes off a compressed area is CorruptRecordError."""
    blob = compress(codec, PAYLOAD)
    with pytest.raises(CorruptRecordError):
        decompress(codec, blob[:-7], len(PAYLOAD))
