"""Which ``__consumer_offsets`` partition holds a group (and so which broker coordinates it).

Kafka: ``Utils.abs(groupId.hashCode()) % partitionCount`` (``GroupMetadataManager.partitionFor``),
where ``hashCode`` is Java's ``String.hashCode`` over UTF-16 code units and ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (``Math.abs`` would leave it negative). Any other formula puts groups on
other partitions than Kafka does, so a mixed or migrated cluster would disagree on coordinators.
"""
from __future__ import annotations

INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit signed, characters outside the BMP count as two units)."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` except that ``Integer.MIN_VALUE`` becomes 0."""
    return 0 if n == INT_MIN else abs(n)


def partition_for(group_id: str, partition_count: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % partition_count
