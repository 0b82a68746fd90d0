"""The client's one exception type, carrying Kafka's error code when there is one."""
from __future__ import annotations

from kafkalite.errors import RETRIABLE, ErrorCode


class ClientError(Exception):
    """A failed client call; ``str(e)`` is one line a tool can print as is.

    ``code`` is the Kafka error code that caused it, or None for local failures (no broker
    reachable, timeout, bad argument). ``retriable`` says whether trying again later may help.
    """

    def __init__(self, message: str, code: ErrorCode | int | None = None, *, retriable: bool | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode | None = None if code is None else _as_code(code)
        if retriable is None:
            retriable = self.code in RETRIABLE if self.code is not None else False
        self.retriable = retriable

    @classmethod
    def from_code(cls, code: int, context: str, message: str | None = None) -> "ClientError":
        ec = _as_code(code)
        text = f"{context}: {ec.name}" + (f" ({message})" if message else "")
        return cls(text, ec)


class ConnectionFailed(ClientError):
    """A broker could not be reached or dropped the connection (retriable: another try may work)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.NETWORK_EXCEPTION, retriable=True)


class UnknownPartition(ClientError):
    """Metadata fetched just now names no such topic or partition. Retriable, since a topic being
    created or given partitions shows up within a few refreshes, but not a sign of the cluster
    changing under the client (``KafkaClient.note_retriable``): it counts against ``retries``, so
    a partition that does not exist is reported after a few back-offs, not at the call's deadline."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, retriable=True)


def _as_code(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def check(code: int, context: str, message: str | None = None) -> None:
    """Raise the ClientError for a non-zero error code."""
    if code:
        raise ClientError.from_code(code, context, message)
