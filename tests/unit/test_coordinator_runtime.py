"""The coordinator runtime both coordinators extend: partition ownership (loading, loaded, gone,
with the epoch a load began under) and the one mapping of a failed append to the coordinator's
error, which the group coordinator passes on for unmapped codes and the transaction coordinator
answers UNKNOWN_SERVER_ERROR for (as Kafka's two managers do)."""
from __future__ import annotations

from kafkalite.coordinator_runtime import CoordinatorRuntime, coordinator_append_error
from kafkalite.errors import ErrorCode
from kafkalite.group.coordinator import GroupCoordinator
from kafkalite.group.hashing import partition_for
from kafkalite.txn.coordinator import TransactionCoordinator


def test_append_errors_map_the_same_for_both_coordinators() -> None:
    assert coordinator_append_error(ErrorCode.NOT_ENOUGH_REPLICAS) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator_append_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert coordinator_append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER) == ErrorCode.NOT_COORDINATOR
    assert coordinator_append_error(ErrorCode.KAFKA_STORAGE_ERROR) == ErrorCode.NOT_COORDINATOR
    assert coordinator_append_error(ErrorCode.NONE) == ErrorCode.NONE
    assert coordinator_append_error(ErrorCode.RECORD_LIST_TOO_LARGE) == ErrorCode.RECORD_LIST_TOO_LARGE
    assert coordinator_append_error(ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR) == \
        ErrorCode.UNKNOWN_SERVER_ERROR


def test_ownership_cycle_and_a_stale_load() -> None:
    runtime = CoordinatorRuntime(lambda: 4)
    key = "some-group"
    p = partition_for(key, 4)
    assert runtime.partition_of(key) == p
    assert runtime.coordinator_error(key) == ErrorCode.NOT_COORDINATOR and runtime.epoch_of(key) == -1
    runtime.begin_load(p, 7)
    assert runtime.coordinator_error(key) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and runtime.any_loading()
    assert not runtime._loading(p, 6)              # a load begun under another epoch is stale
    assert runtime._loading(p, 7)
    runtime._loaded(p, 7)
    assert runtime.coordinator_error(key) is None and runtime.is_loaded(p) and runtime.epoch_of(key) == 7
    runtime._disown(p)
    assert runtime.coordinator_error(key) == ErrorCode.NOT_COORDINATOR and not runtime.is_loaded(p)


def test_both_coordinators_are_the_runtime() -> None:
    assert issubclass(GroupCoordinator, CoordinatorRuntime)
    assert issubclass(TransactionCoordinator, CoordinatorRuntime)
