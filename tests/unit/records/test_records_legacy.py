"""Message formats v0/v1: what kafka-python's legacy builder writes reads back exactly, what
down-conversion writes kafka-python's legacy reader reads back exactly (offsets, timestamps,
keys, values), per codec; bad message sets raise CorruptRecordError."""
from __future__ import annotations

import struct
import zlib

import cramjam
import pytest

from kafkalite.errors import CorruptRecordError
from kafkalite.records import BatchBuilder, Codec, decode_batch
from kafkalite.records.control import ControlType, build_end_txn_marker
from kafkalite.records.legacy import (UnsupportedForMagic, cut_to_size, down_convert, read_message_set, to_batch,
                                      xxh32)

pytestmark = pytest.mark.unit

legacy = pytest.importorskip("kafka.record.legacy_records")
memory_records = pytest.importorskip("kafka.record.memory_records")

T0 = 1_700_000_000_000
ROWS = [(b"k%d" % i if i % 3 else None, (b"value-%d" % i) * (i % 5) if i % 7 else None) for i in range(40)]
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def kafka_python_set(magic: int, codec: int) -> bytes:
    b = legacy.LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 22)
    for i, (k, v) in enumerate(ROWS):
        b.append(i, timestamp=T0 + i if magic else None, key=k, value=v)
    return bytes(b.build())


def kafka_python_read(buf: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    out = []
    records = memory_records.MemoryRecords(buf)
    while (batch := records.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


def v2_batch(codec: int, base_offset: int = 100, **options: object) -> bytearray:
    b = BatchBuilder(compression=codec, base_offset=base_offset, **options)  # type: ignore[arg-type]
    for i, (k, v) in enumerate(ROWS):
        b.append(T0 + i, k, v, [("h", b"dropped")])
    return b.build()


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_reads_what_kafka_python_writes_and_converts_it_to_v2(magic: int, codec: int) -> None:
    got_magic, got_codec, messages = read_message_set(kafka_python_set(magic, codec))
    assert (got_magic, got_codec) == (magic, codec)
    assert [(m.key, m.value) for m in messages] == ROWS
    assert [m.timestamp for m in messages] == ([T0 + i for i in range(len(ROWS))] if magic else [-1] * len(ROWS))
    batch = to_batch(messages, got_codec)
    records = decode_batch(batch)
    assert [(r.key, r.value) for r in records] == ROWS
    assert [r.offset for r in records] == list(range(len(ROWS)))
    assert records[0].timestamp == (T0 if magic else -1)
    assert struct.unpack_from(">h", batch, 21)[0] & 0x07 == codec   # attributes keep the producer's codec


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_down_converted_sets_read_back_in_kafka_python(magic: int, codec: int) -> None:
    data = bytes(v2_batch(codec)) + bytes(v2_batch(codec, base_offset=100 + len(ROWS)))
    converted = down_convert(data, magic)
    got = kafka_python_read(converted)
    expected_ts = [T0 + i for i in range(len(ROWS))] * 2 if magic else [None] * (2 * len(ROWS))
    assert [o for o, _, _, _ in got] == list(range(100, 100 + 2 * len(ROWS)))
    assert [(k, v) for _, _, k, v in got] == ROWS * 2
    assert [t for _, t, _, _ in got] == expected_ts
    # and our own reader agrees (the wrapper codec survives)
    assert read_message_set(converted)[:2] == (magic, codec)


def test_magic_1_compressed_wrapper_uses_relative_inner_offsets() -> None:
    converted = down_convert(bytes(v2_batch(Codec.GZIP)), 1)
    offset, size = struct.unpack_from(">qi", converted, 0)
    assert offset == 100 + len(ROWS) - 1                    # the wrapper carries the last offset
    inner = zlib.decompress(converted[12 + 4 + 2 + 8 + 4 + 4:], 31)
    assert struct.unpack_from(">q", inner, 0)[0] == 0       # inner offsets start at 0


def test_lz4_with_magic_0_uses_kafka_09s_descriptor_checksum() -> None:
    converted = down_convert(bytes(v2_batch(Codec.LZ4)), 0)
    value = converted[12 + 4 + 2 + 4 + 4:]
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(value)                       # a standard reader refuses it ...
    assert value[6] == (xxh32(value[:6]) >> 8) & 0xFF      # ... it is computed over the magic too
    assert [(m.key, m.value) for m in read_message_set(converted)[2]] == ROWS   # and we read it


def test_xxh32_known_values() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_down_conversion_drops_control_batches_headers_and_records_below_the_fetch_offset() -> None:
    marker = build_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                                  base_offset=100 + len(ROWS), timestamp=T0)
    converted = down_convert(bytes(v2_batch(Codec.NONE)) + bytes(marker), 1, fetch_offset=105)
    got = kafka_python_read(converted)
    assert [o for o, _, _, _ in got] == list(range(105, 100 + len(ROWS)))


def test_log_append_time_reaches_v1_readers() -> None:
    converted = down_convert(bytes(v2_batch(Codec.NONE, log_append_time=T0 + 999)), 1)
    assert {t for _, t, _, _ in kafka_python_read(converted)} == {T0 + 999}
    assert converted[12 + 5] & 0x08                         # timestamp type bit set


def test_zstd_cannot_go_down() -> None:
    with pytest.raises(UnsupportedForMagic):
        down_convert(bytes(v2_batch(Codec.ZSTD)), 1)


def test_cut_to_size_keeps_whole_messages_and_at_least_one() -> None:
    converted = down_convert(bytes(v2_batch(Codec.NONE)), 1)
    first = 12 + struct.unpack_from(">i", converted, 8)[0]
    assert cut_to_size(converted, 1) == converted[:first]
    cut = cut_to_size(converted, len(converted) - 1)
    assert len(kafka_python_read(cut)) == len(ROWS) - 1


def _message(magic: int, attributes: int, key: bytes | None, value: bytes | None, offset: int = 0,
             crc_delta: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", T0) if magic else b"")
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return struct.pack(">qiI", offset, len(body) + 4, (zlib.crc32(body) + crc_delta) & 0xFFFFFFFF) + body


@pytest.mark.parametrize("data, why", [
    (_message(1, 0, b"k", b"v", crc_delta=1), "CRC"),
    (_message(1, 0, b"k", b"v")[:-1], "fit"),
    (_message(1, 0, b"k", b"v") + b"\x00\x00", "trailing"),
    (_message(2, 0, b"k", b"v"), "magic"),
    (_message(0, 0, b"k", b"v") + _message(1, 0, b"k", b"v"), "mixes magic"),
    (_message(1, 1, None, zlib.compress(_message(1, 1, None, b"x"), wbits=31)), "inside a compressed"),
    (_message(1, 1, None, b"not gzip"), "decompress"),
    (_message(1, 1, None, None), "no value"),
    (b"", "no message"),
])
def test_bad_message_sets_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(CorruptRecordError, match=why):
        read_message_set(data)
