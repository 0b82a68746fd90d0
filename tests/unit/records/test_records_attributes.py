"""Attribute bits, LogAppendTime rewriting, control batches and reading fetched blobs."""
from __future__ import annotations

import pytest

from kafkalite.errors import CorruptRecordError, InvalidRecordError
from kafkalite.records import (
    BatchBuilder, Codec, ControlType, EndTxnMarker, Record, build_batch, build_end_txn_marker, decode_batch,
    iter_batches, iter_records, parse_control_record, read_header, set_log_append_time, validate_batches,
)

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


def _batch(codec: Codec = Codec.NONE, base_offset: int = 0, n: int = 3, **kw) -> bytearray:
    b = BatchBuilder(compression=codec, base_offset=base_offset, **kw)
    for i in range(n):
        b.append(T0 + i, b"k%d" % i, b"v%d" % i)
    return b.build()


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_codec_bits(codec: Codec) -> None:
    """Bits 0-2 carry the codec id and nothing else is set for a plain producer batch."""
    info = read_header(_batch(codec))
    assert info.attributes == int(codec) and info.compression == codec
    assert not (info.is_log_append_time or info.is_transactional or info.is_control)


def test_flag_bits() -> None:
    """LogAppendTime, transactional and control set bits 3, 4 and 5 alongside the codec."""
    info = read_header(_batch(Codec.LZ4, log_append_time=T0 + 99, transactional=True, producer_id=5,
                              producer_epoch=1, base_sequence=0))
    assert info.attributes == 0x08 | 0x10 | 3
    assert info.is_log_append_time and info.is_transactional and info.max_timestamp == T0 + 99
    info = read_header(_batch(control=True))
    assert info.attributes == 0x20 and info.is_control


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_set_log_append_time_keeps_batch_valid(codec: Codec) -> None:
    """After batch.set_log_append_time the CRC still checks, and every record decodes with the
    new max timestamp (LogAppendTime semantics), for each codec."""
    buf = _batch(codec)
    info = validate_batches(buf, max_batch_bytes=1 << 20)[0]
    assert [r.timestamp for r in decode_batch(buf)] == [T0, T0 + 1, T0 + 2]
    new = set_log_append_time(buf, info, T0 + 5000)
    again = validate_batches(buf, max_batch_bytes=1 << 20)[0]
    assert again.crc == new.crc != info.crc
    assert again.is_log_append_time and again.max_timestamp == T0 + 5000
    recs = decode_batch(bytes(buf))
    assert [r.timestamp for r in recs] == [T0 + 5000] * 3
    assert [r.key for r in recs] == [b"k0", b"k1", b"k2"]


def test_end_txn_marker_round_trip() -> None:
    """A COMMIT marker batch is transactional+control, decodes as one record, and parses back;
    clients may not produce it (validate_batches refuses with INVALID_RECORD)."""
    buf = build_end_txn_marker(ControlType.COMMIT, producer_id=4000, producer_epoch=2, coordinator_epoch=9,
                               timestamp=T0, base_offset=77)
    info = read_header(buf)
    assert info.is_control and info.is_transactional and info.records_count == 1
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (4000, 2, -1)
    (rec,) = decode_batch(buf)
    assert rec.offset == 77 and rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x09"
    assert parse_control_record(rec) == EndTxnMarker(ControlType.COMMIT, 9)
    with pytest.raises(InvalidRecordError):
        validate_batches(buf, max_batch_bytes=1 << 20)


@pytest.mark.parametrize("key,value", [(None, b"\0\0\0\0\0\0"), (b"\0\0", b"\0\0\0\0\0\0"),
                                       (b"\0\0\0\x07", b"\0\0\0\0\0\0"), (b"\0\0\0\0", b"\0\0")])
def test_bad_control_records(key, value) -> None:
    """Short keys/values and unknown control types are CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(0, 0, key, value, []))


def _blob() -> bytes:
    return bytes(_batch(base_offset=0) + _batch(Codec.ZSTD, base_offset=3)
                 + build_end_txn_marker(ControlType.ABORT, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                        timestamp=T0, base_offset=6)
                 + _batch(Codec.GZIP, base_offset=7))


def test_iter_records_over_many_batches() -> None:
    """iter_records walks mixed-codec batches, leaves out the control batch unless asked."""
    assert [r.offset for r in iter_records(_blob())] == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    assert [r.offset for r in iter_records(_blob(), include_control=True)] == list(range(10))
    assert [r.offset for r in iter_records(_blob(), min_offset=4)] == [4, 5, 7, 8, 9]


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 61, 62])
def test_truncated_trailing_batch_skipped(cut: int) -> None:
    """A fetch response cut inside the last batch yields the complete batches and no error."""
    blob = _blob()
    last = len(_batch(Codec.GZIP))
    assert [r.offset for r in iter_records(blob[:len(blob) - last + cut])] == [0, 1, 2, 3, 4, 5]


def test_corrupt_complete_batch_raises_after_good_ones() -> None:
    """A complete batch with a bad CRC is not a truncation: the good batches come first, then
    CorruptRecordError."""
    blob = bytearray(_blob())
    blob[len(_batch()) + 70] ^= 0xFF   # inside the second batch's records area
    it = iter_batches(bytes(blob))
    info, recs = next(it)
    assert info.base_offset == 0 and len(recs) == 3
    with pytest.raises(CorruptRecordError):
        next(it)


def test_decode_batch_checks_crc_and_buffer() -> None:
    """decode_batch verifies the CRC by default and refuses a batch longer than its buffer."""
    buf = _batch()
    buf[-2] ^= 1   # last value b"v2" -> b"v3"
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(buf)
    assert decode_batch(buf, verify_crc=False)[2].value == b"v3"
    with pytest.raises(CorruptRecordError):
        decode_batch(_batch()[:-1])


def test_decode_from_offset_in_larger_buffer() -> None:
    """decode_batch with a BatchInfo reads the batch in place at its position, from bytes,
    bytearray and memoryview alike."""
    blob = _blob()
    info = list(iter_batches(blob))[1][0]
    for buf in (blob, bytearray(blob), memoryview(blob)):
        assert [r.value for r in decode_batch(buf, info)] == [b"v0", b"v1", b"v2"]


def test_build_batch_and_builder_misuse() -> None:
    """build_batch wraps the builder; empty batches, offset deltas out of order, builds twice and
    out-of-range fields are refused."""
    out = build_batch([(T0, None, b"a", []), (T0 - 10, b"b", None, [("x", None)])], compression=Codec.SNAPPY)
    assert decode_batch(out) == [Record(0, T0, None, b"a", []), Record(1, T0 - 10, b"b", None, [("x", None)])]
    assert read_header(out).max_timestamp == T0
    with pytest.raises(ValueError):
        BatchBuilder().build()
    b = BatchBuilder()
    b.append(0, None, None, offset_delta=5)
    with pytest.raises(ValueError):
        b.append(0, None, None, offset_delta=5)
    with pytest.raises(ValueError):
        b.append(0, None, None, offset_delta=1 << 31)
    with pytest.raises(ValueError):
        b.append(1 << 63, None, None)
    b.build()
    with pytest.raises(RuntimeError):
        b.build()
    with pytest.raises(ValueError):
        BatchBuilder(compression=5)
    with pytest.raises(ValueError):
        BatchBuilder(producer_epoch=1 << 15)


def test_size_accounting() -> None:
    """size_in_bytes tracks the uncompressed batch and never exceeds the sum of upper bounds."""
    b = BatchBuilder()
    bound = 61
    for i in range(50):
        key, value, hdrs = b"k" * i, b"v" * (i * 40), [("h" * i, b"x" * i)]
        bound += BatchBuilder.record_size_upper_bound(key, value, hdrs)
        b.append(T0 + i * 1_000_000, key, value, hdrs)
        assert b.size_in_bytes <= bound
    assert len(b) == 50 and len(b.build()) == b.size_in_bytes


def test_non_utf8_header_key_survives() -> None:
    """A header key that is not UTF-8 (legal for Java, which replaces it) round-trips byte for byte."""
    raw = b"\xff\xfekey"
    b = BatchBuilder()
    b.append(0, None, b"v", [(raw.decode("utf-8", "surrogateescape"), b"1")])
    out = b.build()
    assert raw in out
    (rec,) = decode_batch(out)
    assert rec.headers[0][0].encode("utf-8", "surrogateescape") == raw
