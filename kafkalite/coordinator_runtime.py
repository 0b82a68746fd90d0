"""What the group and the transaction coordinators share (Kafka's ``CoordinatorRuntime`` shape):
ownership of the partitions of the internal topic their state lives in, and the meaning of a
failed append to it.

A coordinator serves the keys (group ids, transactional ids) that hash to the partitions this
broker leads. Becoming leader of such a partition begins its load (its requests answer
COORDINATOR_LOAD_IN_PROGRESS), replaying it completes the load (they are served), losing the
leadership unloads it (NOT_COORDINATOR); the broker side of that cycle is
``broker/coordinator_topic.py``, which calls ``begin_load``/``complete_load``/``unload`` only on a
leadership change (a new leader epoch while staying leader does neither). The epoch recorded
with a partition is the one its load began under (the transaction coordinator's epoch; -1 for
groups, which have none); a load that completes under another epoch is stale.

Pure logic: no reactor, no I/O.
"""
from __future__ import annotations

from typing import Callable

from kafkalite.errors import ErrorCode
from kafkalite.group.hashing import partition_for

LOADING, LOADED = "loading", "loaded"

#: an append to the coordinator's topic failed: the error its caller gets (Kafka's
#: GroupMetadataManager.storeGroup and TransactionStateManager.appendTransactionToLog mappings)
APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def coordinator_append_error(code: int, unmapped: ErrorCode | None = None) -> ErrorCode:
    """The coordinator's error for an append that fired ``code``: ``APPEND_ERRORS``' mapping;
    another code is returned as it is, or as ``unmapped`` when given (the transaction
    coordinator answers UNKNOWN_SERVER_ERROR for those, the group coordinator passes them on)."""
    error = ErrorCode(code)
    mapped = APPEND_ERRORS.get(error)
    if mapped is not None:
        return mapped
    return error if unmapped is None else unmapped


class CoordinatorRuntime:
    """Partition ownership of one coordinator; the group and transaction coordinators extend it."""

    def __init__(self, partition_count: Callable[[], int]) -> None:
        self.partition_count = partition_count
        #: partitions this broker leads: partition -> (LOADING | LOADED, epoch the load began under)
        self.owned: dict[int, tuple[str, int]] = {}

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partition_count())

    def coordinator_error(self, key: str) -> ErrorCode | None:
        """Kafka's validateGroupStatus / coordinator checks: not ours -> NOT_COORDINATOR, still
        loading -> COORDINATOR_LOAD_IN_PROGRESS, else None (served here)."""
        owned = self.owned.get(self.partition_of(key))
        if owned is None:
            return ErrorCode.NOT_COORDINATOR
        if owned[0] == LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def begin_load(self, partition: int, epoch: int = -1) -> None:
        self.owned[partition] = (LOADING, epoch)

    def _loading(self, partition: int, epoch: int = -1) -> bool:
        """Is ``partition``'s load under ``epoch`` still the one to complete?"""
        return self.owned.get(partition) == (LOADING, epoch)

    def _loaded(self, partition: int, epoch: int = -1) -> None:
        self.owned[partition] = (LOADED, epoch)

    def _disown(self, partition: int) -> None:
        self.owned.pop(partition, None)

    def is_loaded(self, partition: int) -> bool:
        owned = self.owned.get(partition)
        return owned is not None and owned[0] == LOADED

    def any_loading(self) -> bool:
        return any(status == LOADING for status, _ in self.owned.values())

    def epoch_of(self, key: str) -> int:
        """The epoch the load of ``key``'s partition began under (-1: not ours)."""
        owned = self.owned.get(self.partition_of(key))
        return owned[1] if owned is not None else -1
