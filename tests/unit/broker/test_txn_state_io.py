"""The transaction coordinator's I/O half over real partitions: ``__transaction_state`` writes
through the replica manager (acks=all), replay on leadership with COORDINATOR_LOAD_IN_PROGRESS
meanwhile and the partition's leader epoch as coordinator epoch, markers written to a local leader
and sent with WriteTxnMarkers to a remote one, retried through a leader change."""
from __future__ import annotations

import os
from typing import Any

import pytest
from twisted.internet import defer, task

from kafkalite.broker.partition import Partition
from kafkalite.broker.producer_ids import ProducerIdManager
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock, InlineRunner
from kafkalite.broker.txn_markers import TxnMarkerChannel
from kafkalite.broker.txn_topic import TXN_TOPIC, TransactionTopic
from kafkalite.errors import ErrorCode
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.metadata.cache import BrokerInfo, TopicInfo
from kafkalite.records.batch import read_header, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.control import ControlType, read_end_txn_marker
from kafkalite.storage import LogConfig, PartitionLog
from kafkalite.txn.state import TxnState
from tests.support.deferreds import fired

pytestmark = pytest.mark.unit
ME, OTHER = 1, 2
CONFIG = {"replica.lag.time.max.ms": 30000, "request.timeout.ms": 5000,
          "transaction.state.log.num.partitions": 1, "transaction.max.timeout.ms": 900000,
          "transactional.id.expiration.ms": 604800000,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
          "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
          "transaction.state.log.load.buffer.size": 1 << 20}


class TopicConfigs:
    def effective(self, topic: str) -> dict[str, Any]:
        return {"max.message.bytes": 1 << 20, "cleanup.policy": "compact" if topic == TXN_TOPIC else "delete",
                "min.insync.replicas": 1, "message.timestamp.type": "CreateTime",
                "message.timestamp.difference.max.ms": 2**63 - 1}


class HeldRunner:
    """A worker pool whose jobs run only when the test says (to observe the loading state)."""

    def __init__(self) -> None:
        self.jobs: list[tuple[defer.Deferred, Any, tuple]] = []

    def run(self, fn: Any, *args: Any) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.jobs.append((d, fn, args))
        return d

    def release(self) -> None:
        jobs, self.jobs = self.jobs, []
        for d, fn, args in jobs:
            d.callback(fn(*args))


class RemoteBroker:
    """Broker 2 on the other end of the marker channel: answers WriteTxnMarkers with ``codes``."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, dict]] = []
        self.codes: list[int] = []
        self.closed = False

    def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> defer.Deferred:
        self.requests.append((api_key, version, body))
        code = self.codes.pop(0) if self.codes else 0
        m = body["markers"][0]
        return defer.succeed({"markers": [{"producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                               for p in t["partition_indexes"]]} for t in m["topics"]]}]})

    def close(self) -> None:
        self.closed = True


class Env:
    def __init__(self, tmp_path: Any, blocking: Any = None) -> None:
        self.tmp = str(tmp_path)
        self.clock = task.Clock()
        self.clock.advance(1000)
        self.purgatory = Purgatory(self.clock)
        self.metadata = MetadataCache(brokers={ME: BrokerInfo(ME, {"PLAINTEXT": ("h1", 1)}),
                                               OTHER: BrokerInfo(OTHER, {"PLAINTEXT": ("h2", 2)})})
        self.rm = ReplicaManager(ME, CONFIG, None, self.purgatory, TopicConfigs(), Clock(self.clock),  # type: ignore[arg-type]
                                 self.metadata, None)  # type: ignore[arg-type]
        self.remote = RemoteBroker()
        self.connects: list[tuple[str, int]] = []

        def connect(clock: Any, host: str, port: int, client_id: str, timeout: float) -> defer.Deferred:
            self.connects.append((host, port))
            return defer.succeed(self.remote)
        self.markers = TxnMarkerChannel(lambda: ME, self.clock, self.metadata, self.rm,
                                        lambda b: self.metadata.brokers[b].endpoint("PLAINTEXT"), connect=connect)
        self.blocking = blocking or InlineRunner()
        pids = ProducerIdManager(lambda: defer.succeed((1000, 1999)))
        self.txns = TransactionTopic(CONFIG, Clock(self.clock), self.metadata, None, self.rm,  # type: ignore[arg-type]
                                     self.blocking, pids, self.markers)
        self.rm.role_listeners.append(self.txns.on_partition_role)
        self.partition(TXN_TOPIC, 0, leader=ME, epoch=5)

    def partition(self, topic: str, index: int, leader: int, epoch: int) -> Partition | None:
        info = self.metadata.topics.setdefault(topic, TopicInfo(topic, {}))
        info.assignment[index] = [ME, OTHER] if leader == OTHER else [ME]
        state = LeaderAndIsr(leader, epoch, (leader,), 1)
        self.metadata.states[(topic, index)] = state
        if leader != ME:
            return None
        part = self.rm.partitions.get((topic, index))
        if part is None:
            plog = PartitionLog.open(os.path.join(self.tmp, f"{topic}-{index}"), LogConfig(), 0)
            part = Partition(topic, index, ME, plog, self.purgatory, None)  # type: ignore[arg-type]
            self.rm.partitions[(topic, index)] = part
        part.become_leader(state, [ME], 1000)
        self.rm._notify_role(part)
        return part


def batches(part: Partition) -> list[Any]:
    res = part.log.read(0, 1 << 20)
    buf, pos, out = bytes(res.records), 0, []
    while pos < len(buf):
        info = read_header(buf, pos)
        out.append((info, read_end_txn_marker(buf, info) if info.is_control else None))
        pos = info.end
    return out


def test_commit_writes_the_log_markers_and_survives_a_leader_change(tmp_path):
    """InitProducerId, AddPartitions (one local, one remote partition), a transactional batch,
    EndTxn(commit): the state changes are records in __transaction_state, the local partition
    gets a COMMIT marker with coordinator epoch 5 (its LSO reaches the end), the remote leader a
    WriteTxnMarkers v0; a new leader epoch while staying leader keeps the loaded state (and coordinator
epoch), becoming leader again after a resignation replays it to CompleteCommit."""
    env = Env(tmp_path)
    coord = env.txns.coordinator
    data = env.partition("data", 0, leader=ME, epoch=0)
    env.partition("data", 1, leader=OTHER, epoch=0)
    r = fired(coord.init_producer_id("tx", 60000))
    assert (r.error, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, 1000, 0)
    assert fired(coord.add_partitions("tx", 1000, 0, [("data", 0), ("data", 1)])) == ErrorCode.NONE
    raw = build_batch([(1000, None, b"x", ())], producer_id=1000, producer_epoch=0, base_sequence=0,
                      transactional=True)
    data.append_as_leader(raw, validate_batches(raw, max_batch_bytes=1 << 20), 1000, -1, 1)
    assert data.last_stable_offset == 0
    assert fired(coord.end_txn("tx", 1000, 0, True)) == ErrorCode.NONE
    assert coord.describe("tx").state == TxnState.COMPLETE_COMMIT
    marker = batches(data)[-1]
    assert marker[0].is_control and marker[1] == (ControlType.COMMIT, 5)
    assert data.last_stable_offset == data.log_end_offset == 2
    assert env.connects == [("h2", 2)]
    ((key, version, body),) = env.remote.requests
    assert (key, version) == (27, 0)
    assert body["markers"][0]["topics"] == [{"name": "data", "partition_indexes": [1]}]
    assert body["markers"][0]["transaction_result"] is True and body["markers"][0]["coordinator_epoch"] == 5
    states = [state for state in batches(env.rm.get(TXN_TOPIC, 0))]
    assert len(states) == 4            # Empty, Ongoing, PrepareCommit, CompleteCommit

    part = env.partition(TXN_TOPIC, 0, leader=ME, epoch=6)  # a new epoch, still leader: kept as is
    assert coord.owned[0] == ("loaded", 5)                   # (Kafka: not isNewLeader, no onElection)
    assert part is not None
    part.become_follower(LeaderAndIsr(OTHER, 7, (OTHER, ME), 1), [ME, OTHER])
    env.rm._notify_role(part)                                 # resigned: unloaded
    assert coord.describe("tx") is None
    env.partition(TXN_TOPIC, 0, leader=ME, epoch=8)          # elected again: replayed from the log
    meta = coord.describe("tx")
    assert (meta.state, meta.producer_id, meta.producer_epoch) == (TxnState.COMPLETE_COMMIT, 1000, 0)
    assert coord.owned[0] == ("loaded", 8)


def test_requests_wait_for_the_load_and_stop_with_the_leadership(tmp_path):
    """While the partition is read in the worker, its ids answer COORDINATOR_LOAD_IN_PROGRESS;
    after losing the leadership, NOT_COORDINATOR."""
    held = HeldRunner()
    env = Env(tmp_path, blocking=held)
    coord = env.txns.coordinator
    assert fired(coord.init_producer_id("tx", 60000)).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    held.release()
    assert fired(coord.init_producer_id("tx", 60000)).error == ErrorCode.NONE
    part = env.rm.get(TXN_TOPIC, 0)
    part.become_follower(LeaderAndIsr(OTHER, 7, (OTHER, ME), 1), [ME, OTHER])
    env.rm._notify_role(part)
    assert fired(coord.init_producer_id("tx", 60000)).error == ErrorCode.NOT_COORDINATOR
    assert coord.describe("tx") is None


def test_markers_retry_through_a_leader_change(tmp_path):
    """The remote leader answers NOT_LEADER_OR_FOLLOWER; after the backoff the marker goes to
    the new leader (this broker) and the transaction completes. A partition whose topic was
    deleted needs no marker."""
    env = Env(tmp_path)
    coord = env.txns.coordinator
    env.partition("data", 0, leader=OTHER, epoch=0)
    env.partition("gone", 0, leader=OTHER, epoch=0)
    r = fired(coord.init_producer_id("tx", 60000))
    assert fired(coord.add_partitions("tx", r.producer_id, 0, [("data", 0), ("gone", 0)])) == ErrorCode.NONE
    env.remote.codes = [int(ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert fired(coord.end_txn("tx", r.producer_id, 0, False)) == ErrorCode.NONE
    assert coord.describe("tx").state == TxnState.PREPARE_ABORT
    del env.metadata.topics["gone"]
    data = env.partition("data", 0, leader=ME, epoch=1)
    env.clock.advance(0.1)
    assert coord.describe("tx").state == TxnState.COMPLETE_ABORT
    assert batches(data)[-1][1] == (ControlType.ABORT, 5)


def test_refused_state_write_changes_nothing(tmp_path):
    """A write the replica manager refuses (not the leader any more) is answered with Kafka's
    coordinator code and changes nothing."""
    env = Env(tmp_path)
    coord = env.txns.coordinator
    r = fired(coord.init_producer_id("tx", 60000))
    env.rm.partitions.pop((TXN_TOPIC, 0))                   # the replica is gone under the coordinator
    assert fired(coord.add_partitions("tx", r.producer_id, 0, [("data", 0)])) == ErrorCode.NOT_COORDINATOR
    assert coord.describe("tx").state == TxnState.EMPTY
