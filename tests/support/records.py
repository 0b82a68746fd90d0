"""Reading back what a test's subject wrote: one committed-records reader for every test that
checks an output topic with a real client (librdkafka through confluent-kafka)."""
from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition

__all__ = ["read_committed"]


def read_committed(bootstrap: str, topic: str, partitions: int = 1, quiet_s: float = 2.0) -> list[Any]:
    """The records of ``topic``'s first ``partitions`` partitions that a ``read_committed``
    consumer gets from offset 0 until ``quiet_s`` seconds pass with nothing new, in partition
    order per partition (confluent-kafka messages; error events left out).

    Why quiet time, not a count: tests call it inside ``wait_for`` to compare what an exactly-once
    writer has committed so far with an oracle, so an open transaction's records, which a
    read-committed consumer holds back, are simply not there yet."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    try:
        while True:
            msgs = c.consume(1000, quiet_s)
            if not msgs:
                return out
            out += [m for m in msgs if m.error() is None]
    finally:
        c.close()
