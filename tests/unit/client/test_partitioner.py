"""murmur2 and the default partitioner against the worked examples of consumer-groups.md §5.1
(computed there by a Java transcription of Utils.murmur2 and cross-checked with librdkafka)."""
from __future__ import annotations

import random

import pytest

from kafkalite.client.partitioner import StickyPartitioner, murmur2, partition_for_key

EXAMPLES = [
    ("kafka", -798503068, 0),
    ("user-42", 1459644460, 0),
    ("a", -1563381124, 4),
    ("order#2024-11-21", 622498484, 4),
    ("foo", 597841616, 6),
    ("hello world", 1221641059, 9),
    ("", 275646681, 1),
]


@pytest.mark.parametrize("key,hashed,partition", EXAMPLES)
def test_murmur2_worked_examples(key, hashed, partition):
    assert murmur2(key.encode()) == hashed
    assert partition_for_key(key.encode(), 10) == partition


def test_mask_not_abs():
    """'kafka' hashes negative: abs() would give 8 of 10, Java's toPositive mask gives 0."""
    assert abs(murmur2(b"kafka")) % 10 == 8
    assert partition_for_key(b"kafka", 10) == 0


def test_sticky_partitioner_sticks_then_moves():
    sp = StickyPartitioner(random.Random(7))
    first = sp.partition("t", [0, 1, 2], 3)
    assert all(sp.partition("t", [0, 1, 2], 3) == first for _ in range(20))
    nxt = sp.on_new_batch("t", first, [0, 1, 2], 3)
    assert nxt != first and sp.partition("t", [0, 1, 2], 3) == nxt
    # only available (led) partitions are chosen
    sp2 = StickyPartitioner(random.Random(1))
    assert {sp2.on_new_batch("u", sp2.partition("u", [2], 3), [2], 3) for _ in range(5)} == {2}
