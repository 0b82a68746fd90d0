"""Batches built by kafka-python and aiokafka decode identically with ours, and theirs read ours.

aiokafka does every codec through cramjam (snappy in the xerial framing); kafka-python does gzip
itself and needs python-snappy, lz4 and zstandard for the rest, which are not installed here, so
those cases are skipped with that reason.
"""
from __future__ import annotations

import pytest

from kafkalite.records import BatchBuilder, Codec, Record, decode_batch, read_header, validate_batches

pytestmark = pytest.mark.unit

aiokafka_records = pytest.importorskip("aiokafka.record.default_records")
kafka_records = pytest.importorskip("kafka.record.default_records")
import kafka.codec as kafka_codec  # noqa: E402

T0 = 1_700_000_000_000
RECORDS = [
    (T0, b"key-0", b"value-0", []),
    (T0 + 7, None, b"null key", []),
    (T0 - 3, b"tombstone", None, []),
    (T0 + 1, b"k", b"v" * 3000, [("trace", b"abc"), ("empty", b""), ("none", None), ("\u00e9t\u00e9", b"\x00\xff")]),
    (T0 + 2, b"", b"", []),
] + [(T0 + 100 + i, b"key-%d" % i, bytes([i % 251]) * (i * 7), [("i", str(i).encode())]) for i in range(60)]

EXPECTED = [Record(i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(RECORDS)]
CODECS = list(Codec)

_KAFKA_PYTHON_HAS = {Codec.NONE: True, Codec.GZIP: kafka_codec.has_gzip(), Codec.SNAPPY: kafka_codec.has_snappy(),
                     Codec.LZ4: kafka_codec.has_lz4(), Codec.ZSTD: kafka_codec.has_zstd()}


def _their_batch(module, codec: int) -> bytes:
    b = module.DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=0, producer_id=-1,
                                         producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    for i, (ts, k, v, h) in enumerate(RECORDS):
        assert b.append(i, timestamp=ts, key=k, value=v, headers=h) is not None
    return bytes(b.build())


def _read_theirs(module, batch: bytes) -> list[Record]:
    return [Record(r.offset, r.timestamp, r.key, r.value, [(hk, hv) for hk, hv in r.headers])
            for r in module.DefaultRecordBatch(batch)]


def _ours(codec: int) -> bytes:
    b = BatchBuilder(compression=codec)
    for ts, k, v, h in RECORDS:
        b.append(ts, k, v, h)
    return bytes(b.build())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_aiokafka_batches_decode(codec: Codec) -> None:
    """An aiokafka batch (each codec, keys/null keys/null values/headers) passes validate_batches
    and decodes to exactly the records that went in."""
    batch = _their_batch(aiokafka_records, codec)
    info = validate_batches(batch, max_batch_bytes=1 << 22)[0]
    assert info.compression == codec
    assert decode_batch(batch) == EXPECTED


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_ours_read_by_aiokafka(codec: Codec) -> None:
    """aiokafka's reader (its own CRC check included) reads our batch of each codec identically."""
    batch = _ours(codec)
    theirs = aiokafka_records.DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert _read_theirs(aiokafka_records, batch) == EXPECTED


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_batches_decode(codec: Codec) -> None:
    """A kafka-python batch of each codec it can write decodes to the same records with ours."""
    if not _KAFKA_PYTHON_HAS[codec]:
        pytest.skip(f"kafka-python lacks its {codec.name.lower()} library (python-snappy/lz4/zstandard)")
    batch = _their_batch(kafka_records, codec)
    assert validate_batches(batch, max_batch_bytes=1 << 22)[0].compression == codec
    assert decode_batch(batch) == EXPECTED


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_ours_read_by_kafka_python(codec: Codec) -> None:
    """kafka-python's reader reads our batch of each codec it supports identically."""
    if not _KAFKA_PYTHON_HAS[codec]:
        pytest.skip(f"kafka-python lacks its {codec.name.lower()} library (python-snappy/lz4/zstandard)")
    batch = _ours(codec)
    assert kafka_records.DefaultRecordBatch(batch).validate_crc()
    assert _read_theirs(kafka_records, batch) == EXPECTED


def test_uncompressed_matches_kafka_python_bytes() -> None:
    """Uncompressed, kafka-python's batch equals ours except partitionLeaderEpoch (0 vs -1),
    which the CRC does not cover (record-batch.md §4)."""
    ours = _ours(Codec.NONE)
    theirs = _their_batch(kafka_records, Codec.NONE)
    assert ours[:12] == theirs[:12] and ours[16:] == theirs[16:]
    assert read_header(theirs).partition_leader_epoch == 0 and read_header(ours).partition_leader_epoch == -1


def test_idempotent_transactional_header_read_by_aiokafka() -> None:
    """Producer id/epoch/sequence and the transactional bit reach aiokafka's reader unchanged."""
    b = BatchBuilder(producer_id=77, producer_epoch=3, base_sequence=2147483647, transactional=True,
                     compression=Codec.ZSTD)
    for i in range(3):
        b.append(T0, b"k%d" % i, b"v")
    theirs = aiokafka_records.DefaultRecordBatch(bytes(b.build()))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (77, 3, 2147483647)
    assert theirs.is_transactional and not theirs.is_control_batch
    assert [r.key for r in theirs] == [b"k0", b"k1", b"k2"]
