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
    assert f.format([_rec(None, b"\xff\xfe", ts=-1)]) == [
        "rowtime: N/A, key: <null>, value: <Failed to deserialize>, partition: 1"]
    assert [line[:50] for line in f.format_lines()] == ["Value format:  does not match any supported format"]
    fresh = RecordFormatter()
    fresh.format([_rec(None, struct.pack(">d", 1.5))])
    assert fresh.format_lines() == [f"Key format: {NO_DATA}", "Value format: KAFKA_BIGINT or KAFKA_DOUBLE"]


def test_topic_names() -> None:
    topics = ["Trucks", "gps", "GPS"]
    assert resolve_topic(ast.Print("trucks"), topics, "PRINT trucks;") == "Trucks"
    assert resolve_topic(ast.Print("GPS", quoted=True), topics, "") == "GPS"
    with pytest.raises(KsqlError, match="Could not find topic 'trucks', or the KSQL user"):
        resolve_topic(ast.Print("trucks", quoted=True), topics, "")
    with pytest.raises(KsqlError, match="Topic names are case-sensitive"):
        resolve_topic(ast.Print("Gps"), topics, "")                  # two candidates: ambiguous
