"""The controller's requested elections against the in-memory ZooKeeper: written through the
fenced path, the /admin/preferred_replica_election znode elected then deleted, a deposed
controller answering NOT_CONTROLLER.

The controller reads a MetadataCache that the test fills the way the watches would (from what
ZooKeeper holds); everything runs on a task.Clock that pumps the memory ZooKeeper.
"""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import task

from kafkalite.controller.controller import Controller
from kafkalite.controller.decisions import PREFERRED
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperServer
from kafkalite.errors import ErrorCode
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.metadata.admin_znode import AdminZNode
from kafkalite.metadata.cache import BrokerInfo, TopicInfo
from zk_schema import paths
from zk_schema.admin import PreferredReplicaElection
from tests.support.deferreds import settle

pytestmark = pytest.mark.unit


class World:
    def __init__(self) -> None:
        self.clock = task.Clock()
        self.server = MemoryZooKeeperServer(self.clock)
        self.zk = KafkaZkClient(zk=self.server.client("memory"))
        settle(self.clock, self.zk.start())
        settle(self.clock, self.zk.create_persistent_paths())
        settle(self.clock, self.zk.create_topic("t", {0: [1, 2, 3]}))
        self.cache = MetadataCache()
        for b in (1, 2, 3):
            self.cache.brokers[b] = BrokerInfo(b, {"PLAINTEXT": ("127.0.0.1", 9000 + b)}, None)
        self.cache.topics["t"] = TopicInfo("t", {0: [1, 2, 3]})
        self.znode: Any = None
        self.controller = Controller(1, self.zk, self.cache, lambda: set(), lambda t: False,
                                     reactor=self.clock, preferred_election=lambda: self.znode)
        settle(self.clock, self.controller.maybe_elect())
        settle(self.clock)
        assert self.controller.active
        self.refresh()

    def refresh(self) -> LeaderAndIsr:
        """What the state watch would deliver."""
        state = settle(self.clock, self.zk.get_partition_state("t", 0))
        self.cache.states[("t", 0)] = state
        return state

    def move_leader_to(self, broker: int) -> None:
        s = self.refresh()
        settle(self.clock, self.zk.update_leader_and_isr("t", 0, LeaderAndIsr(broker, s.leader_epoch + 1, s.isr,
                                                                               s.controller_epoch, s.zk_version)))
        assert self.refresh().leader == broker


def test_api_election_writes_through_the_fenced_path() -> None:
    """Leader 2, preferred 1 in the ISR: the election writes leader 1 at epoch + 1 with the ISR
    unchanged, and answers NONE (expected leader 1); an unknown partition gets its own code."""
    w = World()
    w.move_leader_to(2)
    before = w.refresh()
    results = settle(w.clock, w.controller.elect_leaders(PREFERRED, [("t", 0), ("t", 7)]))
    assert results[("t", 0)] == (ErrorCode.NONE, None, 1)
    assert results[("t", 7)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    after = w.refresh()
    assert (after.leader, after.leader_epoch, after.isr) == (1, before.leader_epoch + 1, before.isr)


def test_znode_request_is_elected_then_deleted() -> None:
    """The znode's partitions get their preferred leader; the controller deletes the znode."""
    w = World()
    w.move_leader_to(3)
    request = PreferredReplicaElection((("t", 0),))
    settle(w.clock, w.zk.zk.create(paths.PREFERRED_REPLICA_ELECTION, request.encode()))
    _, stat = settle(w.clock, w.zk.zk.get(paths.PREFERRED_REPLICA_ELECTION))
    w.znode = AdminZNode(request, stat.version, stat.mzxid)          # what metadata_sync's watch hands over
    w.controller.reconcile()
    settle(w.clock)
    assert w.refresh().leader == 1
    assert settle(w.clock, w.zk.zk.exists(paths.PREFERRED_REPLICA_ELECTION)) is None


def test_deposed_controller_answers_not_controller() -> None:
    """Another controller bumped /controller_epoch: the fenced write fails, the controller resigns
    and the request is answered NOT_CONTROLLER; the state znode is untouched."""
    w = World()
    w.move_leader_to(2)
    settle(w.clock, w.zk.zk.set(paths.CONTROLLER_EPOCH, b"99"))
    results = settle(w.clock, w.controller.elect_leaders(PREFERRED, [("t", 0)]))
    assert results[("t", 0)][0] == ErrorCode.NOT_CONTROLLER
    assert not w.controller.active
    assert w.refresh().leader == 2
