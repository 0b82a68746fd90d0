"""Fetch and ListOffsets over a partition with transactions: read_committed consumers read only
below the last stable offset and get the aborted transactions of what they fetched; every
response carries the LSO; read_uncommitted and followers are unchanged (real Partition,
PartitionLog and ReplicaManager routing; the handlers as the dispatcher calls them)."""
from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet import task

from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.handlers.list_offsets import handle_list_offsets
from kafkalite.broker.partition import Partition
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.records.batch import read_header, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.control import ControlType
from kafkalite.storage import LogConfig, PartitionLog

NO_QUOTAS = dict(fetch_sessions=None, quotas=BrokerQuotas(), quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                 authorize=lambda *action: True)  # no authorizer: everything allowed

pytestmark = pytest.mark.unit

ME, FOLLOWER = 1, 2


class Env:
    def __init__(self, tmp_path: Any) -> None:
        self.clock = task.Clock()
        self.clock.advance(1000)
        purgatory = Purgatory(self.clock)
        self.rm = ReplicaManager(ME, {"replica.lag.time.max.ms": 30000}, None, purgatory, None,  # type: ignore[arg-type]
                                 Clock(self.clock), MetadataCache(), None)  # type: ignore[arg-type]
        plog = PartitionLog.open(os.path.join(str(tmp_path), "t-0"), LogConfig(), 0)
        self.part = Partition("t", 0, ME, plog, purgatory, None)  # type: ignore[arg-type]
        self.part.become_leader(LeaderAndIsr(ME, 3, (ME,), 1), [ME], 1000)
        self.rm.partitions[("t", 0)] = self.part
        self.ctx = SimpleNamespace(replicas=self.rm, config={"fetch.max.bytes": 1 << 20}, now_ms=1000,
                                   metrics=BrokerMetrics(), api_version=11, **NO_QUOTAS)

    def produce(self, values: list[bytes], pid: int = -1, seq: int = -1, txn: bool = False) -> int:
        raw = build_batch([(1000, None, v, ()) for v in values], producer_id=pid,
                          producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, transactional=txn)
        infos = validate_batches(raw, max_batch_bytes=1 << 20)
        return self.part.append_as_leader(raw, infos, 1000, 1, 1).first_offset

    def marker(self, pid: int, commit: bool) -> int:
        _, res = self.rm.append_txn_marker("t", 0, ControlType.COMMIT if commit else ControlType.ABORT,
                                           pid, 0, 0)
        return res.first_offset

    def fetch(self, offset: int, isolation: int, replica_id: int = -1) -> dict[str, Any]:
        req = {"replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
               "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
               "forgotten_topics_data": [], "rack_id": "",
               "topics": [{"topic": "t", "partitions": [
                   {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": 0,
                    "partition_max_bytes": 1 << 20}]}]}
        return handle_fetch(self.ctx, req)["responses"][0]["partitions"][0]

    def list_latest(self, isolation: int) -> int:
        req = {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
        return handle_list_offsets(self.ctx, req)["topics"][0]["partitions"][0]["offset"]


def batch_offsets(records: Any) -> list[int]:
    buf, pos, out = bytes(records), 0, []
    while pos < len(buf):
        info = read_header(buf, pos)
        out.append(info.base_offset)
        pos = info.end
    return out


def test_read_committed_stops_at_the_lso_and_gets_aborted_transactions(tmp_path):
    """An open transaction at offset 1 holds read_committed fetches and ListOffsets(latest) at 1
    while read_uncommitted ones go to the high watermark; after an ABORT, read_committed gets
    everything up to the LSO with the aborted transaction (producer 7 from offset 1)."""
    env = Env(tmp_path)
    env.produce([b"a"])                                       # 0
    first = env.produce([b"x", b"y"], pid=7, seq=0, txn=True)  # 1-2
    env.produce([b"b"])                                       # 3
    assert first == 1 and env.part.high_watermark == 4

    committed = env.fetch(0, 1)
    assert committed["last_stable_offset"] == 1 and committed["high_watermark"] == 4
    assert batch_offsets(committed["records"]) == [0]
    assert committed["aborted_transactions"] == []
    uncommitted = env.fetch(0, 0)
    assert batch_offsets(uncommitted["records"]) == [0, 1, 3]
    assert uncommitted["aborted_transactions"] is None and uncommitted["last_stable_offset"] == 1
    assert (env.list_latest(1), env.list_latest(0)) == (1, 4)
    assert env.fetch(1, 1)["records"] == b""                  # at the LSO: nothing yet

    m = env.marker(7, commit=False)
    assert m == 4 and env.part.last_stable_offset == 5
    committed = env.fetch(0, 1)
    assert batch_offsets(committed["records"]) == [0, 1, 3, 4]
    assert committed["aborted_transactions"] == [{"producer_id": 7, "first_offset": 1}]
    assert env.list_latest(1) == 5
    # a fetch after the aborted transaction's marker does not get it
    env.produce([b"c"])
    assert env.fetch(5, 1)["aborted_transactions"] == []


def test_followers_read_to_the_log_end_and_the_lso_waits_for_them(tmp_path):
    """With a follower in the ISR, a committed transaction's marker is not stable until the
    follower has fetched past it: the LSO stays at the transaction's first offset, then moves."""
    env = Env(tmp_path)
    part = env.part
    part.become_leader(LeaderAndIsr(ME, 4, (ME, FOLLOWER), 1), [ME, FOLLOWER], 1000)
    env.produce([b"x"], pid=7, seq=0, txn=True)               # 0
    m = env.marker(7, commit=True)                            # 1
    follower = env.fetch(0, 0, replica_id=FOLLOWER)
    assert batch_offsets(follower["records"]) == [0, 1]       # followers read the marker
    assert part.high_watermark == 0 and part.last_stable_offset == 0
    env.fetch(m + 1, 0, replica_id=FOLLOWER)                  # the follower has both batches
    assert part.high_watermark == 2 and part.last_stable_offset == 2
    assert batch_offsets(env.fetch(0, 1)["records"]) == [0, 1]
