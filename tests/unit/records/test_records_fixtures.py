"""Stored batches written by aiokafka, kafka-python and in librdkafka's raw-snappy form decode to
the records recorded beside them (tests/data/batches/README.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkalite.records import Record, decode_batch, validate_batches

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[2] / "data" / "batches"
EXPECTED = json.loads((DATA / "expected.json").read_text())
RECORDS = [Record(r["offset"], r["timestamp"], None if r["key"] is None else bytes.fromhex(r["key"]),
                  None if r["value"] is None else bytes.fromhex(r["value"]),
                  [(hk, None if hv is None else bytes.fromhex(hv)) for hk, hv in r["headers"]])
           for r in EXPECTED["records"]]


@pytest.mark.parametrize("name", EXPECTED["files"])
def test_fixture_decodes(name: str) -> None:
    """Each stored batch passes validate_batches and decodes to the expected records."""
    data = (DATA / name).read_bytes()
    info = validate_batches(data, max_batch_bytes=1 << 20)[0]
    assert info.records_count == len(RECORDS)
    assert decode_batch(data) == RECORDS


def test_fixture_codecs_and_producer_fields() -> None:
    """The files carry the codecs and producer fields their names say."""
    codecs = {name: validate_batches((DATA / name).read_bytes(), max_batch_bytes=1 << 20)[0]
              for name in EXPECTED["files"]}
    assert [codecs[f"aiokafka_{n}.bin"].compression for n in ("none", "gzip", "snappy_xerial", "lz4", "zstd")] \
        == [0, 1, 2, 3, 4]
    assert (DATA / "aiokafka_snappy_xerial.bin").read_bytes()[61:69] == b"\x82SNAPPY\x00"
    raw = (DATA / "librdkafka_style_raw_snappy.bin").read_bytes()
    assert codecs["librdkafka_style_raw_snappy.bin"].compression == 2 and raw[61:69] != b"\x82SNAPPY\x00"
    idem = codecs["kafka_python_gzip_idempotent.bin"]
    assert (idem.producer_id, idem.producer_epoch, idem.base_sequence, idem.last_sequence) == (4242, 1, 17, 20)
