"""CRC-32C: every buffer kind, either side of the copy limit, gives crcmod's value."""
from __future__ import annotations

import random

import pytest

from kafkalite.records import crc


@pytest.mark.parametrize("size", [0, 1, 61, 4096, crc.COPY_LIMIT, crc.COPY_LIMIT + 1, 300_000])
def test_every_buffer_kind_matches_crcmod(size: int) -> None:
    raw = random.Random(size).randbytes(size + 16)
    for data in (raw[8:size + 8], bytearray(raw[8:size + 8]), memoryview(bytearray(raw))[8:size + 8],
                 memoryview(raw)[8:size + 8]):
        assert crc.crc32c(data) == crc.crc32c_crcmod(bytes(data)), type(data)
        # continuing a CRC over a split buffer gives the whole buffer's
        half = len(data) // 2
        assert crc.crc32c(data[half:], crc.crc32c(data[:half])) == crc.crc32c_crcmod(bytes(data))


def test_the_check_value() -> None:
    assert crc.crc32c(b"123456789") == crc.crc32c(memoryview(bytearray(b"123456789"))) == 0xE3069283
