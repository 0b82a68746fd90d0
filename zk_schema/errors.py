"""Errors raised by :mod:`zk_schema`.

Both are ``ValueError`` subclasses so callers that only care about "bad input" can catch one
type, while the broker can still map :class:`InvalidTopicNameError` to Kafka's
INVALID_TOPIC_EXCEPTION (17) without importing anything else.
"""
from __future__ import annotations


class ZkDataError(ValueError):
    """A znode payload is not the JSON (or text) Kafka would have written there."""

    def __init__(self, znode: str, reason: str) -> None:
        super().__init__(f"malformed {znode} payload: {reason}")
        self.znode = znode
        self.reason = reason


class InvalidTopicNameError(ValueError):
    """A topic name Kafka would refuse (``Topic.validate``)."""
