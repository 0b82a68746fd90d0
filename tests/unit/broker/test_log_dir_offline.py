"""A failed log dir takes its replicas offline in the ReplicaManager, in process: two real log
dirs, a task.Clock purgatory, no ZooKeeper (the ISR writer is never reached). Shows Kafka's
``handleLogDirFailure`` on the broker side: waiting acks=all appends answer KAFKA_STORAGE_ERROR,
every later request for those replicas does too, state changes for them are ignored, the other
dir keeps serving, and DescribeLogDirs reports the failed dir with code 56."""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer, task

from kafkalite.broker.handlers.describe_log_dirs import handle_describe_log_dirs
from kafkalite.broker.partition import Partition
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.config import BrokerConfig
from kafkalite.errors import ErrorCode, KafkaStorageError
from kafkalite.metadata import LeaderAndIsr, MetadataCache, TopicInfo
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogManager


class NoIsrWrites:
    def update_leader_and_isr(self, topic: str, partition: int, state: LeaderAndIsr) -> defer.Deferred:
        raise AssertionError("no ISR change expected")


class Node:
    def __init__(self, tmp_path: Path) -> None:
        self.dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
        self.config = BrokerConfig.from_properties({"broker.id": "1", "log.dirs": ",".join(self.dirs),
                                                    "zookeeper.connect": "127.0.0.1:1"})
        self.metadata = MetadataCache(topics={"t": TopicInfo("t", {0: [1, 2], 1: [1, 2], 2: [1, 2]})})
        self.clock = task.Clock()
        self.topic_configs = TopicConfigs(self.config, self.metadata)
        self.logs = LogManager(self.dirs, self.topic_configs.log_config(None))
        self.rm = ReplicaManager(1, self.config, self.logs, Purgatory(self.clock), self.topic_configs,
                                 Clock(self.clock), self.metadata, NoIsrWrites())
        self.roles: list[tuple[int, bool]] = []
        self.rm.role_listeners.append(lambda p: self.roles.append((p.index, p.is_leader)))
        for p in (0, 1):
            self.rm.apply_state("t", p, [1, 2], LeaderAndIsr(1, 0, (1, 2), 1, 0))

    def append_acks_all(self, partition: int) -> tuple[Partition, Any]:
        records = build_batch([(1_700_000_000_000, None, b"v", ())])
        part, res = self.rm.append("t", partition, records, -1, 8)
        return part, res

    def fail_dir_of(self, partition: int) -> str:
        d = self.logs.dir_of("t", partition)
        assert d is not None
        self.logs.failures.report(d, "test", OSError(errno.EIO, "injected"))
        self.logs.handle_dir_failures()
        self.rm.take_offline(self.logs.partitions_in(d))
        return d


@pytest.fixture
def node(tmp_path: Path) -> Any:
    n = Node(tmp_path)
    yield n
    n.logs.close()


def test_waiting_acks_all_answer_storage_error_and_other_dir_serves(node: Node) -> None:
    """An acks=all append waiting on a replica whose dir fails is answered 56 at once (not at its
    timeout); the partition then refuses Produce/Fetch with 56 while the other dir's partition still
    takes appends; the role listeners hear that it no longer leads."""
    n = node
    assert n.logs.dir_of("t", 0) != n.logs.dir_of("t", 1)       # spread over both dirs
    part, res = n.append_acks_all(0)
    answered: list[Any] = []
    n.rm.await_replication([n.rm.pending_ack(part, res)], 30_000).addCallback(answered.append)
    assert answered == []                                    # the follower has not fetched yet
    n.roles.clear()
    n.fail_dir_of(0)
    assert answered == [[ErrorCode.KAFKA_STORAGE_ERROR]]
    assert n.roles == [(0, False)]
    with pytest.raises(KafkaStorageError):
        n.append_acks_all(0)
    with pytest.raises(KafkaStorageError):
        n.rm.read("t", 0, 0, 1024, -1, 0, -1, True)
    _, res1 = n.append_acks_all(1)
    assert res1.first_offset == 0
    assert n.rm.leader("t", 1).is_leader


def test_state_changes_for_offline_replicas_are_ignored(node: Node) -> None:
    """After the failure a new state for the offline replica (e.g. the controller's new leader)
    is not applied (nothing is followed or re-created), while a new partition goes to the online dir
    when it is new and is refused (offline) when it may have had data on the failed disk."""
    n = node
    failed = n.fail_dir_of(0)
    assert n.rm.apply_state("t", 0, [1, 2], LeaderAndIsr(2, 1, (2,), 1, 1)) is None
    assert ("t", 0) not in n.rm.partitions
    assert n.rm.apply_state("t", 2, [1, 2], LeaderAndIsr(1, 0, (1, 2), 1, 0), is_new=False) is None
    with pytest.raises(KafkaStorageError):
        n.rm.leader("t", 2)
    n.rm.offline.discard(("t", 2))
    created = n.rm.apply_state("t", 2, [1, 2], LeaderAndIsr(1, 0, (1, 2), 1, 0), is_new=True)
    assert created is not None and n.logs.dir_of("t", 2) != failed


def test_describe_log_dirs_reports_the_failed_dir(node: Node) -> None:
    """DescribeLogDirs lists both dirs: the failed one with KAFKA_STORAGE_ERROR and no topics, the
    other with its partition and size; a topic filter narrows the partitions."""
    n = node
    n.append_acks_all(1)
    failed = n.fail_dir_of(0)
    ctx: Any = type("Ctx", (), {"replicas": n.rm, "authorize": lambda self, *action: True})()   # no authorizer
    resp = handle_describe_log_dirs(ctx, {"topics": None})
    by_dir = {r["log_dir"]: r for r in resp["results"]}
    assert set(by_dir) == set(n.logs.log_dirs)
    assert by_dir[failed]["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR and by_dir[failed]["topics"] == []
    [other] = [r for d, r in by_dir.items() if d != failed]
    assert other["error_code"] == 0
    [topic] = other["topics"]
    assert topic["name"] == "t" and [p["partition_index"] for p in topic["partitions"]] == [1]
    assert topic["partitions"][0]["partition_size"] > 0
    filtered = handle_describe_log_dirs(ctx, {"topics": [{"topic": "t", "partition_index": [0]}]})
    assert all(r["topics"] == [] for r in filtered["results"])
