"""Hypothesis: random records x every codec round-trip; mangled batches fail only with typed errors."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkalite.errors import KafkaError
from kafkalite.records import (
    BatchBuilder, Codec, Record, decode_batch, iter_records, scan_valid_prefix, validate_batches,
)
from kafkalite.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET
from kafkalite.records.crc import crc32c
from kafkalite.records.varint import INT32_MAX

pytestmark = pytest.mark.unit

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=4)
record = st.tuples(st.integers(-(1 << 40), 1 << 40), maybe_bytes, maybe_bytes, headers)
records = st.lists(record, min_size=1, max_size=25)
codecs = st.sampled_from(list(Codec))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, codecs, st.integers(-(1 << 62), 1 << 62))
def test_round_trip(recs, codec, base_ts) -> None:
    """builder -> validate_batches -> decode_batch returns every record as it went in; timestamps
    go backwards and forwards around a random base (negative deltas)."""
    b = BatchBuilder(compression=codec)
    for ts, k, v, h in recs:
        b.append(base_ts + ts, k, v, h)
    batch = bytes(b.build())
    info = validate_batches(batch, max_batch_bytes=1 << 24)[0]
    assert info.records_count == len(recs) and info.compression == codec
    assert info.max_timestamp == base_ts + max(r[0] for r in recs)
    assert decode_batch(batch, info, verify_crc=False) == [
        Record(i, base_ts + ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 1 << 28), min_size=1, max_size=8), codecs)
def test_large_offset_deltas(gaps, codec) -> None:
    """Explicit, widely spaced offset deltas (a compacted batch) survive, up to int32 max."""
    deltas = []
    d = -1
    for g in gaps:
        d += g
        deltas.append(d)
    deltas.append(INT32_MAX)
    assume(len(set(deltas)) == len(deltas))
    b = BatchBuilder(compression=codec, base_offset=1 << 40)
    for i, d in enumerate(deltas):
        b.append(1000 + i, b"%d" % i, None, [], offset_delta=d)
    batch = bytes(b.build())
    infos, end = scan_valid_prefix(batch)
    assert end == len(batch) and infos[0].last_offset_delta == INT32_MAX
    assert [r.offset for r in decode_batch(batch)] == [(1 << 40) + d for d in deltas]


def _fixed_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def _sample_batch(codec: Codec) -> bytearray:
    b = BatchBuilder(compression=codec)
    b.append(5, b"key", b"value" * 20, [("h1", b"x"), ("h2", None)])
    b.append(3, None, b"", [])
    b.append(900, b"k" * 70, None, [("\u00fc", b"y" * 70)])
    return b.build()


def _decode_everything(data: bytes) -> None:
    """Every entry point that reads untrusted bytes; only KafkaError subclasses may escape."""
    for verify in (True, False):
        try:
            decode_batch(data, verify_crc=verify)
        except KafkaError:
            pass
    try:
        validate_batches(data, max_batch_bytes=1 << 20)
    except KafkaError:
        pass
    try:
        list(iter_records(data))
    except KafkaError:
        pass


@settings(max_examples=400, deadline=None)
@given(codecs, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
       st.booleans())
def test_mutated_batches_fail_typed(codec, edits, recrc) -> None:
    """Random byte edits anywhere (with the CRC repaired or not, so the structural checks behind
    the CRC are reached) never raise anything but KafkaError subclasses."""
    buf = _sample_batch(codec)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    data = _fixed_crc(buf) if recrc else bytes(buf)
    _decode_everything(data)


@settings(max_examples=200, deadline=None)
@given(codecs, st.integers(0, 400), st.binary(max_size=40))
def test_truncated_and_extended_batches_fail_typed(codec, cut, tail) -> None:
    """Cutting a batch short or appending junk gives typed errors only."""
    buf = _sample_batch(codec)
    cut = min(cut, len(buf))
    _decode_everything(bytes(buf[:cut]) + tail)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([23, 57]), st.integers(-(1 << 31), (1 << 31) - 1), codecs)
def test_header_counts_lie(offset, value, codec) -> None:
    """lastOffsetDelta or recordsCount set to any int32 (CRC repaired) gives typed errors or,
    when the value happens to be right, the records."""
    buf = _sample_batch(codec)
    struct.pack_into(">i", buf, offset, value)
    _decode_everything(_fixed_crc(buf))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_records_area_garbage(area) -> None:
    """An uncompressed batch whose records area is random bytes, CRC valid: typed errors only."""
    b = BatchBuilder()
    b.append(0, None, b"v")
    buf = b.build()
    del buf[61:]
    buf += area
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    _decode_everything(_fixed_crc(buf))
