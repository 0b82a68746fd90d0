"""A topic-partition (Kafka's ``TopicPartition``): the key of nearly every per-partition map of
the broker, the storage, the controller, the coordinators and the Spark source.

It is a plain ``(topic, partition)`` tuple: keys are built per partition on the produce and fetch
paths, where a tuple literal costs a fraction of a named tuple's construction, and a
``kafkalite.client.TopicPartition`` (the client's named form, with ``.topic`` and ``.partition``)
is one of these: a subtype, equal and hashing alike, so either can index the same map.
"""
from __future__ import annotations

TopicPartition = tuple[str, int]
