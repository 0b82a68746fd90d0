"""Java's default partitioner: murmur2 for keyed records, sticky for null keys (KIP-480).

Keys land where the Java client (and kafka-python, aiokafka, librdkafka's ``murmur2_random``)
puts them: ``(murmur2(key) & 0x7fffffff) % num_partitions`` over all partitions of the topic,
available or not (consumer-groups.md §5.1).
"""
from __future__ import annotations

import random

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (MurmurHash2, 32 bit), returned as a signed int32 like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    full = length & ~3
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[full + 2] << 16
    if tail >= 2:
        h ^= data[full + 1] << 8
    if tail >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: mask the sign bit (not ``abs``)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Null-key records stick to one partition until its batch is closed, then move on.

    The partition is chosen among those with a leader when there are any (Java's
    ``StickyPartitionCache``), and a new one differs from the previous when possible.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._current: dict[str, int] = {}
        self._rng = rng or random.Random()

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = self._choose(available, num_partitions, None)
            self._current[topic] = p
        return p

    def on_new_batch(self, topic: str, previous: int, available: list[int], num_partitions: int) -> int:
        """Called when a batch for the sticky partition was completed: pick the next one."""
        if self._current.get(topic) == previous:
            self._current[topic] = self._choose(available, num_partitions, previous)
        return self._current[topic]

    def _choose(self, available: list[int], num_partitions: int, previous: int | None) -> int:
        pool = available or list(range(num_partitions))
        if previous is not None and len(pool) > 1:
            pool = [p for p in pool if p != previous]
        return self._rng.choice(pool)
