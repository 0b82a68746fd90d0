"""The two worked batches of record-batch.md §4, byte for byte."""
from __future__ import annotations

import pytest

from kafkalite.records import (
    BatchBuilder, Record, assign_offsets, crc32c, decode_batch, read_header, validate_batches,
)

pytestmark = pytest.mark.unit

EXAMPLE_1 = bytes.fromhex(
    "00000000000000000000004fffffffff024469c88d0000000000010000018bcfe568"
    "000000018bcfe56805ffffffffffffffffffffffffffff000000021a000000046b31"
    "0a68656c6c6f001e000a02010a776f726c640202680276")
EXAMPLE_1_APPENDED = bytes.fromhex(
    "000000000000002a0000004f00000007024469c88d0000000000010000018bcfe568"
    "000000018bcfe56805ffffffffffffffffffffffffffff000000021a000000046b31"
    "0a68656c6c6f001e000a02010a776f726c640202680276")
EXAMPLE_2 = bytes.fromhex(
    "000000000000000000000039ffffffff02ce7ed26c0000000000000000018bcfe568"
    "000000018bcfe5680000000000000003e9000000000000000000010e00000001027800")
T0 = 1700000000000


def build_example_1() -> bytearray:
    b = BatchBuilder()
    b.append(T0, b"k1", b"hello")
    b.append(T0 + 5, None, b"world", [("h", b"v")])
    return b.build()


def test_example_1_built_byte_exact() -> None:
    """Our builder reproduces the 91-byte plain batch exactly, CRC 0x4469C88D included."""
    out = build_example_1()
    assert len(out) == 91
    assert bytes(out) == EXAMPLE_1
    assert read_header(out).crc == 0x4469C88D == 1147783309
    assert crc32c(out[21:]) == 0x4469C88D


def test_example_1_decodes() -> None:
    """Decoding the reference bytes gives the two records with keys, null key and the header."""
    assert decode_batch(EXAMPLE_1) == [
        Record(0, T0, b"k1", b"hello", []),
        Record(1, T0 + 5, None, b"world", [("h", b"v")]),
    ]


def test_example_1_append_at_42_epoch_7() -> None:
    """validate_batches accepts it and assign_offsets gives the quoted post-append bytes, same CRC;
    decoded offsets then start at 42."""
    buf = bytearray(EXAMPLE_1)
    infos = validate_batches(buf, max_batch_bytes=1048588)
    assert len(infos) == 1 and infos[0].records_count == 2
    out = assign_offsets(buf, infos, 42, 7)
    assert bytes(buf) == EXAMPLE_1_APPENDED
    assert out[0].base_offset == 42 and out[0].next_offset == 44
    assert read_header(buf).crc == 0x4469C88D
    validate_batches(buf, max_batch_bytes=1048588)   # still valid: only uncovered bytes changed
    assert [r.offset for r in decode_batch(bytes(buf))] == [42, 43]


def test_example_2_idempotent_built_byte_exact() -> None:
    """The idempotent one-record batch (pid 1001, epoch 0, seq 0) builds to the quoted 69 bytes."""
    b = BatchBuilder(producer_id=1001, producer_epoch=0, base_sequence=0)
    b.append(T0, None, b"x")
    out = b.build()
    assert bytes(out) == EXAMPLE_2
    info = validate_batches(out, max_batch_bytes=1048588)[0]
    assert info.crc == 0xCE7ED26C == 3464417900
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.last_sequence) == (1001, 0, 0, 0)
    assert decode_batch(EXAMPLE_2) == [Record(0, T0, None, b"x", [])]


def test_example_2_appended_keeps_crc() -> None:
    """Offset assignment on the idempotent batch leaves the CRC and the decoded record intact."""
    buf = bytearray(EXAMPLE_2)
    assign_offsets(buf, validate_batches(buf, max_batch_bytes=1048588), 1000, 3)
    assert buf[17:] == EXAMPLE_2[17:]
    assert decode_batch(bytes(buf)) == [Record(1000, T0, None, b"x", [])]
