"""Storage failures that have no Kafka error code of their own (Kafka's are internal exceptions)."""
from __future__ import annotations

from kafkalite.errors import ErrorCode, KafkaError


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose batches do not continue the log exactly (Kafka's
    UnexpectedAppendOffsetException); the replica fetcher truncates and retries."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class LogClosedError(KafkaError):
    """The log was closed or deleted (partition moved or deleted while a request was in flight)."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
