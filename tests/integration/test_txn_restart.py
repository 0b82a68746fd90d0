"""The transaction coordinator after a kill -9: its state comes back from __transaction_state.

One broker; a transactional id commits one transaction (a COMMIT marker in the data partition)
and leaves a second one open; kill -9 and start on the same directories. The reloaded
coordinator knows the id: InitProducerId first answers CONCURRENT_TRANSACTIONS while it fences
the open transaction (abort under a bumped epoch), then the same producer id with the epoch
bumped twice; the data partition holds the COMMIT and ABORT markers and its read_committed
latest offset passes both."""
from __future__ import annotations

from typing import Any

from kafkalite.errors import ErrorCode
from tests.support.waiting import wait_for
from tests.support.wire import request

FIND, INIT, ADD_PARTITIONS, END_TXN, LIST_OFFSETS, CREATE = 10, 22, 24, 26, 2, 19


def coordinator_ready(bootstrap: str, txn_id: str) -> None:
    def found() -> Any:
        r = request(bootstrap, FIND, 2, {"key": txn_id, "key_type": 1})
        return r if r["error_code"] == 0 else None
    wait_for(found, 30, "the transaction coordinator")


def init(bootstrap: str, txn_id: str) -> dict[str, Any]:
    def answered() -> Any:
        r = request(bootstrap, INIT, 1, {"transactional_id": txn_id, "transaction_timeout_ms": 60000})
        return r if r["error_code"] not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR) else None
    return wait_for(answered, 30, "InitProducerId to be served")


def add(bootstrap: str, txn_id: str, pid: int, epoch: int, topic: str) -> int:
    r = request(bootstrap, ADD_PARTITIONS, 1, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                               "topics": [{"name": topic, "partitions": [0]}]})
    return r["results"][0]["results"][0]["error_code"]


def latest(bootstrap: str, topic: str, isolation: int) -> int:
    r = request(bootstrap, LIST_OFFSETS, 2, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return r["topics"][0]["partitions"][0]["offset"]


def test_coordinator_state_survives_kill_9(cluster_factory: Any) -> None:
    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    txn_id, topic = "tx-restart", "txn-restart-data"
    r = request(b.bootstrap, CREATE, 4, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                     "assignments": [], "configs": []}],
                                         "timeout_ms": 15000, "validate_only": False})
    assert r["topics"][0]["error_code"] == 0, r
    coordinator_ready(b.bootstrap, txn_id)
    first = init(b.bootstrap, txn_id)
    pid, epoch = first["producer_id"], first["producer_epoch"]
    assert first["error_code"] == 0 and epoch == 0
    assert add(b.bootstrap, txn_id, pid, epoch, topic) == 0
    r = request(b.bootstrap, END_TXN, 1, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                          "committed": True})
    assert r["error_code"] == 0
    wait_for(lambda: latest(b.bootstrap, topic, 1) == 1, 30, "the COMMIT marker")
    assert add(b.bootstrap, txn_id, pid, epoch, topic) == 0          # a second transaction, left open

    b.kill()
    b.start()
    coordinator_ready(b.bootstrap, txn_id)
    fenced = init(b.bootstrap, txn_id)
    assert fenced["error_code"] == ErrorCode.CONCURRENT_TRANSACTIONS
    again = wait_for(lambda: (lambda r: r if r["error_code"] == 0 else None)(init(b.bootstrap, txn_id)), 30,
                     "InitProducerId after the abort")
    assert (again["producer_id"], again["producer_epoch"]) == (pid, 2)
    wait_for(lambda: latest(b.bootstrap, topic, 1) == 2, 30, "the ABORT marker")
    assert latest(b.bootstrap, topic, 0) == 2
