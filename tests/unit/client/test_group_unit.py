"""Assignors and ConsumerProtocol bytes (consumer-groups.md §4 examples; bytes cross-read by
kafka-python's hand-written ConsumerProtocol structs when that package is installed)."""
from __future__ import annotations

import pytest

from kafkalite.client import TopicPartition as TP
from kafkalite.client.group import (decode_assignment, decode_subscription, encode_assignment,
                                    encode_subscription, range_assign, roundrobin_assign)


def test_range_and_roundrobin_reference_example():
    subs = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}
    counts = {"t0": 3, "t1": 3}
    assert range_assign(subs, counts) == {"C0": [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)],
                                          "C1": [TP("t0", 2), TP("t1", 2)]}
    assert roundrobin_assign(subs, counts) == {"C0": [TP("t0", 0), TP("t0", 2), TP("t1", 1)],
                                               "C1": [TP("t0", 1), TP("t1", 0), TP("t1", 2)]}


def test_range_uneven_subscriptions():
    subs = {"a": ["x"], "b": ["x", "y"], "c": ["y"]}
    out = range_assign(subs, {"x": 5, "y": 1})
    assert out == {"a": [TP("x", 0), TP("x", 1), TP("x", 2)], "b": [TP("x", 3), TP("x", 4), TP("y", 0)], "c": []}


def test_roundrobin_skips_unsubscribed_members():
    out = roundrobin_assign({"a": ["x"], "b": ["y"]}, {"x": 2, "y": 2})
    assert out == {"a": [TP("x", 0), TP("x", 1)], "b": [TP("y", 0), TP("y", 1)]}


def test_consumer_protocol_round_trip_and_layout():
    sub = encode_subscription(["b", "a"])
    # int16 version 1, array of 2 strings, null user data, empty owned partitions
    assert sub == b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x01b" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x00"
    assert decode_subscription(sub) == ["a", "b"]
    asg = encode_assignment([TP("t", 1), TP("t", 0), TP("u", 2)])
    assert decode_assignment(asg) == [TP("t", 0), TP("t", 1), TP("u", 2)]
    assert decode_assignment(b"") == []


def test_kafka_python_reads_our_bytes():
    """kafka-python's independent v0 structs parse our v1 blobs (v1 only appends fields)."""
    protocol = pytest.importorskip("kafka.protocol.old.consumer_protocol")
    meta = protocol.ConsumerProtocolMemberMetadata_v0.decode(encode_subscription(["t1", "t2"]))
    assert sorted(meta.topics) == ["t1", "t2"]
    asg = protocol.ConsumerProtocolMemberAssignment_v0.decode(encode_assignment([TP("t1", 0), TP("t1", 3)]))
    assert sorted(asg.partitions()) == [("t1", 0), ("t1", 3)]
