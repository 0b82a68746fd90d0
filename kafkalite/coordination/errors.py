"""Coordination errors, so no caller needs to import kazoo.

Low-level ZooKeeper outcomes subclass :class:`ZkError`; Kafka-domain refusals subclass
:class:`kafkalite.errors.KafkaError` so the broker can answer with Kafka's error code. The real
client maps kazoo's exceptions onto these (:mod:`.kazoo_errors`); the in-memory ZooKeeper
(:mod:`.memory`) raises them directly, with the same messages.
"""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode, KafkaError


class ZkError(Exception):
    """A ZooKeeper request failed; ``path`` is the znode it was about (if known)."""

    def __init__(self, message: str = "", path: str | None = None) -> None:
        text = message or type(self).__name__
        super().__init__(f"{text} ({path})" if path else text)
        self.path = path


class NoNodeError(ZkError):
    pass


class NodeExistsError(ZkError):
    pass


class BadVersionError(ZkError):
    pass


class NotEmptyError(ZkError):
    pass


class ZkVersionConflictError(ZkError):
    """A conditional write lost: the znode is no longer at the version the writer read (someone
    else wrote it meanwhile, or it is gone: ``current_version`` None). The writer's view is stale;
    the newer state reaches it through its watch."""

    def __init__(self, path: str, expected_version: int, current_version: int | None) -> None:
        super().__init__(f"expected zkVersion {expected_version}, found "
                         f"{'no node' if current_version is None else current_version}", path)
        self.expected_version = expected_version
        self.current_version = current_version


class NoChildrenForEphemeralsError(ZkError):
    """An ephemeral znode cannot have children."""


class BadArgumentsError(ZkError):
    """The server refused the request's arguments (e.g. deleting "/", a bad character)."""


class RolledBackError(ZkError):
    """Multi-op result of an op before the failing one: it was undone."""


class RuntimeInconsistencyError(ZkError):
    """Multi-op result of an op after the failing one: it was never tried."""


class ConnectionLossError(ZkError):
    """The request may or may not have been applied; the session is still alive."""


class SessionExpiredError(ZkError):
    """The session is gone, and with it every ephemeral node it owned."""


class ClientClosedError(ZkError):
    """The client was stopped (or never started)."""


class ZkTimeoutError(ZkError):
    """No connection to any ZooKeeper server within the connect timeout."""


class TransactionFailedError(ZkError):
    """A multi-op was rolled back; ``error`` is the failing op's own error.

    ``results`` has one entry per op, as ZooKeeper answers a failed multi: RolledBackError
    before ``index``, the failing op's error at ``index``, RuntimeInconsistencyError after it.
    """

    def __init__(self, index: int, op: Any, error: BaseException, results: list[Any]) -> None:
        super().__init__(f"multi-op failed at op {index} ({op!r}): {error}")
        self.index = index
        self.op = op
        self.error = error
        self.results = results


class BrokerIdInUseError(KafkaError):
    """Another live ZooKeeper session holds ``/brokers/ids/<id>``."""

    def __init__(self, broker_id: int, owner_session: int, waited_ms: int) -> None:
        super().__init__(
            f"broker.id {broker_id} is already registered (znode /brokers/ids/{broker_id} is held"
            f" by live session 0x{owner_session:x}; waited {waited_ms} ms for it to expire)."
            " Configure a unique broker.id, or stop the other broker.")
        self.broker_id = broker_id
        self.owner_session = owner_session


class TopicAlreadyExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidTopicError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class ControllerMovedError(KafkaError):
    """A fenced write found ``/controller_epoch`` at another version: we are not controller."""

    code = ErrorCode.NOT_CONTROLLER
