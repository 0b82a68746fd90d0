"""PRINT's record formatting (ksqlDB's RecordFormatter): candidate formats dropped as records
contradict them, format lines only when the possible formats change, ksqlDB's rowtime text,
and the topic name rule (quoted exact, unquoted case-insensitive)."""
from __future__ import annotations

import struct

import pytest

from kafkalite.client.consumer import ConsumerRecord
from kafkalite.sql import ast
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.printing import NO_DATA, RecordFormatter, resolve_topic


def _rec(key: bytes | None, value: bytes | None, ts: int = 1700000000123, partition: int = 1) -> ConsumerRecord:
    return ConsumerRecord("t", partition, 0, ts, 0, key, value, [])


def test_formats_narrow_as_records_arrive() -> None:
    f = RecordFormatter()
    assert f.format([_rec(struct.pack(">i", 7), b'{"A": 10}')]) == [
        'rowtime: 2023/11/14 22:13:20.123 Z, key: 7, value: {"A": 10}, partition: 1']
    assert f.format_lines() == ["Key format: KAFKA_INT or KAFKA_STRING", "Value format: JSON or KAFKA_STRING"]
    assert f.format([_rec(struct.pack(">i", 8), b'{"A": 20}')])[0].startswith("rowtime")
    assert f.format_lines() == []                                   # nothing changed: no format line
    assert f.format([_rec(b"abc", b"not json")]) == [
        "rowtime: 2023/11/14 22:13:20.123 Z, key: abc, value: not json, partition: 1"]
    assert f.format_lines() == ["Key format: KAFKA_STRING", "Value format: KAFKA_STRING"]
    # bytes no format reads: Kafka's Bytes.toString (ksqlDB's UNRECOGNISED_BYTES)
    assert f.format([_rec(None, b"\xff\\\xfe", ts=-1)]) == [
        "rowtime: N/A, key: <null>, value: \\xFF\\x5C\\xFE, partition: 1"]
    assert [line[:50] for line in f.format_lines()] == ["Value format:  does not match any supported format"]
    fresh = RecordFormatter()
    fresh.format([_rec(None, struct.pack(">d", 1.5))])
    assert fresh.format_lines() == [f"Key format: {NO_DATA}", "Value format: KAFKA_BIGINT or KAFKA_DOUBLE"]


def test_windowed_keys_show_their_window() -> None:
    """Kafka Streams' windowed keys, as ksqlDB's PRINT shows them: a time window's start (its end
    is not in the bytes), a session's start and end; the inner format is any of the key formats."""
    f = RecordFormatter()
    tumbling = b"u1" + struct.pack(">q", 1700000000000)
    assert f.format([_rec(tumbling, b"1")])[0].startswith(
        "rowtime: 2023/11/14 22:13:20.123 Z, key: [u1@1700000000000/-], ")
    assert f.format_lines()[0] == "Key format: HOPPING(KAFKA_STRING) or TUMBLING(KAFKA_STRING)"
    session = RecordFormatter()
    key = b"u1" + struct.pack(">qq", 1700000005000, 1700000000000)            # end, then start
    assert ", key: [u1@1700000000000/1700000005000], " in session.format([_rec(key, b"1")])[0]
    assert session.format_lines()[0] == "Key format: SESSION(KAFKA_STRING)"

    def avro(data: bytes) -> str | None:                   # a registry-framed one-byte record
        return '{"ID": "x"}' if len(data) == 6 and data[5:] == b"x" else None
    framed = RecordFormatter(avro)
    line = framed.format([_rec(b"\0\0\0\0\1x" + struct.pack(">q", 60_000), b"1")])[0]
    assert ', key: [{"ID": "x"}@60000/-], ' in line
    assert framed.format_lines()[0] == ("Key format: HOPPING(AVRO) or TUMBLING(AVRO) or HOPPING(KAFKA_STRING) or "
                                        "TUMBLING(KAFKA_STRING)")
    # a negative start is no window: the plain formats remain
    plain = RecordFormatter()
    plain.format([_rec(b"u1" + struct.pack(">q", -5), b"1")])
    assert "HOPPING" not in plain.format_lines()[0]


def test_a_batch_is_shown_in_the_formats_its_records_leave() -> None:
    """ksqlDB formats a whole batch before showing it: an 8-byte string key first in the batch
    would read as a BIGINT, until a key of another length rules that out."""
    f = RecordFormatter()
    lines = f.format([_rec(b"Die Hard", b"1"), _rec(b"Alien", b"2")])
    assert [line.split(", ")[1] for line in lines] == ["key: Die Hard", "key: Alien"]
    assert f.format_lines()[0] == "Key format: KAFKA_STRING"


def test_topic_names() -> None:
    topics = ["Trucks", "gps", "GPS"]
    assert resolve_topic(ast.Print("trucks"), topics, "PRINT trucks;") == "Trucks"
    assert resolve_topic(ast.Print("GPS", quoted=True), topics, "") == "GPS"
    with pytest.raises(KsqlError, match="Could not find topic 'trucks', or the KSQL user"):
        resolve_topic(ast.Print("trucks", quoted=True), topics, "")
    with pytest.raises(KsqlError, match="Topic names are case-sensitive"):
        resolve_topic(ast.Print("Gps"), topics, "")                  # two candidates: ambiguous
