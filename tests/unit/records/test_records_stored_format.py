"""Topics on message format v0/v1 (records/legacy.py ``to_stored_format``, ``convert_for_reader``;
records/batch.py bits 8-9): what Kafka's LogValidator refuses is refused with its codes, what it
converts is marked (v1) or rebuilt without timestamps (v0) and stays a valid v2 batch, and a
reader gets each marked batch as the v0/v1 messages Kafka would have stored, v2 batches next to
them byte for byte (kafka-python reads the mixture back)."""
from __future__ import annotations

import pytest

from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.records import BatchBuilder, Codec, decode_batch, read_header, validate_batches
from kafkalite.records.batch import FORMAT_MAGIC_MASK, crc_ok, mark_stored_magic, set_log_append_time
from kafkalite.records.legacy import as_v2_batches, convert_for_reader, read_message_set, to_stored_format
from kafkalite.records.record import iter_batches

pytestmark = pytest.mark.unit

memory_records = pytest.importorskip("kafka.record.memory_records")

T0 = 1_700_000_000_000
ROWS = [(b"k%d" % i, b"v%d" % i) for i in range(5)]


def batch(codec: int = Codec.NONE, base_offset: int = 0, headers: bool = False, **options: object) -> bytearray:
    b = BatchBuilder(compression=codec, base_offset=base_offset, **options)  # type: ignore[arg-type]
    for i, (k, v) in enumerate(ROWS):
        b.append(T0 + i, k, v, [("h", b"x")] if headers else [])
    return b.build()


def kafka_python_read(buf: bytes) -> list[tuple[int, int, int | None, bytes | None]]:
    """(magic, offset, timestamp, value) of every record, as kafka-python's consumer reads them."""
    out = []
    records = memory_records.MemoryRecords(bytes(buf))
    while (b := records.next_batch()) is not None:
        out += [(b.magic, r.offset, r.timestamp, r.value) for r in b]
    return out


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4])
def test_format_v1_marks_the_batch_in_place_and_keeps_it_valid(codec: int) -> None:
    buf = batch(codec)
    infos = validate_batches(buf, max_batch_bytes=1 << 20)
    out, new = to_stored_format(buf, infos, 1)
    assert out is buf and new[0].stored_magic == 1
    assert read_header(out).stored_magic == 1 and crc_ok(out, new[0])
    assert validate_batches(out, max_batch_bytes=1 << 20)[0].attributes & 0x07 == codec
    assert [(r.timestamp, r.key, r.value) for r in decode_batch(out)] == [(T0 + i, k, v) for i, (k, v) in enumerate(ROWS)]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.SNAPPY])
def test_format_v0_rebuilds_the_batch_without_timestamps(codec: int) -> None:
    buf = batch(codec)
    out, new = to_stored_format(buf, validate_batches(buf, max_batch_bytes=1 << 20), 0)
    assert new[0].stored_magic == 0 and new[0].compression == codec and crc_ok(out, new[0])
    assert [(r.timestamp, r.key, r.value) for r in decode_batch(out)] == [(-1, k, v) for k, v in ROWS]
    # LogAppendTime leaves a v0 batch alone (no timestamps in that format), stamps a v1 one
    assert set_log_append_time(out, new[0], T0 + 99).max_timestamp == -1
    v1, v1_infos = to_stored_format(batch(), validate_batches(batch(), max_batch_bytes=1 << 20), 1)
    assert set_log_append_time(v1, v1_infos[0], T0 + 99).max_timestamp == T0 + 99


@pytest.mark.parametrize("options,code,message", [
    ({"producer_id": 7, "producer_epoch": 0, "base_sequence": 0}, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
     "Idempotent records cannot be used with magic version 1"),
    ({"producer_id": 7, "producer_epoch": 0, "base_sequence": 0, "transactional": True},
     ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "Transactional records cannot be used with magic version 1"),
    ({"headers": True}, ErrorCode.UNKNOWN_SERVER_ERROR, "Magic v1 does not support record headers"),
    ({"codec": Codec.ZSTD}, ErrorCode.UNKNOWN_SERVER_ERROR, "ZStandard compression is not supported for magic 1"),
])
def test_what_kafka_refuses_on_format_v1(options: dict, code: ErrorCode, message: str) -> None:
    buf = batch(**options)
    infos = validate_batches(buf, max_batch_bytes=1 << 20)
    with pytest.raises(KafkaError, match=message) as exc:
        to_stored_format(buf, infos, 1)
    assert exc.value.code == code


def test_a_mark_a_client_set_itself_is_cleared_on_a_v2_topic() -> None:
    plain = batch()
    infos = validate_batches(plain, max_batch_bytes=1 << 20)
    assert to_stored_format(plain, infos, 2) == (plain, infos)      # nothing to do: same objects
    forged = bytes(batch(stored_magic=1))                           # read-only input is copied
    out, new = to_stored_format(forged, validate_batches(forged, max_batch_bytes=1 << 20), 2)
    assert not new[0].attributes & FORMAT_MAGIC_MASK and new[0].stored_magic == 2 and crc_ok(out, new[0])


def test_a_v2_reader_gets_marked_batches_as_v1_messages_and_v2_batches_unchanged() -> None:
    v2 = batch(base_offset=0)
    v1 = batch(base_offset=5)
    v1 = bytearray(to_stored_format(v1, validate_batches(v1, max_batch_bytes=1 << 20), 1)[0])
    v1_gzip = batch(Codec.GZIP, base_offset=10)
    v1_gzip = bytearray(to_stored_format(v1_gzip, validate_batches(v1_gzip, max_batch_bytes=1 << 20), 1)[0])
    stored = bytes(v2 + v1 + v1_gzip)
    plain = memoryview(stored)[:len(v2)]
    assert convert_for_reader(plain, 2) is plain                     # nothing marked: the same buffer
    out = convert_for_reader(stored, 2)
    assert bytes(out[:len(v2)]) == bytes(v2)
    got = kafka_python_read(bytes(out))
    assert [(m, o, v) for m, o, _, v in got] == [(2 if o < 5 else 1, o, ROWS[o % 5][1]) for o in range(15)]
    assert [t for _, _, t, _ in got] == [T0 + i % 5 for i in range(15)]
    for part, codec in ((v1, Codec.NONE), (v1_gzip, Codec.GZIP)):      # gzip stays one compressed wrapper
        magic, got_codec, messages = read_message_set(bytes(convert_for_reader(bytes(part), 2)))
        assert (magic, got_codec, len(messages)) == (1, codec, 5)


def test_readers_get_the_lower_of_the_stored_and_their_own_format() -> None:
    v0 = batch(base_offset=0)
    v0 = bytearray(to_stored_format(v0, validate_batches(v0, max_batch_bytes=1 << 20), 0)[0])
    v1 = batch(base_offset=5)
    mark_stored_magic(v1, read_header(v1), 1)
    got = kafka_python_read(bytes(convert_for_reader(bytes(v0 + v1), 2, fetch_offset=2)))
    assert [(m, o, t) for m, o, t, _ in got] == [(0, o, None) for o in range(2, 5)] + [(1, o, T0 + o - 5) for o in range(5, 10)]
    old_reader = kafka_python_read(bytes(convert_for_reader(bytes(v0 + v1), 0)))
    assert {m for m, *_ in old_reader} == {0} and len(old_reader) == 10


def test_v2_readers_get_v0_v1_entries_back_as_v2_batches_with_their_offsets() -> None:
    """kafkalite's consumer and the Spark reader read v2 only: ``as_v2_batches`` turns each v0/v1
    entry of a fetch (uncompressed, a v1 gzip wrapper with relative inner offsets, v0) into a v2
    batch with the same offsets, values, timestamps and timestamp type; plain v2 is untouched."""
    v2 = batch(base_offset=0)
    v1 = batch(base_offset=5)
    mark_stored_magic(v1, read_header(v1), 1)
    v1_gzip = batch(Codec.GZIP, base_offset=10, log_append_time=T0 + 99)
    mark_stored_magic(v1_gzip, read_header(v1_gzip), 1)
    v0 = batch(base_offset=15)
    mark_stored_magic(v0, read_header(v0), 0)
    plain = bytes(v2)
    assert as_v2_batches(plain) is plain
    fetched = bytes(convert_for_reader(bytes(v2 + v1 + v1_gzip + v0), 2))
    converted = as_v2_batches(fetched + bytes(v2)[:30])            # a cut-off tail stays for the reader
    assert bytes(converted).endswith(bytes(v2)[:30])
    got = [(info.is_log_append_time, r.offset, r.timestamp, r.value) for info, rs in iter_batches(converted) for r in rs]
    assert [(o, v) for _, o, _, v in got] == [(o, ROWS[o % 5][1]) for o in range(20)]
    assert [(a, t) for a, _, t, _ in got] == ([(False, T0 + i) for i in range(5)] * 2 + [(True, T0 + 99)] * 5
                                              + [(False, -1)] * 5)
