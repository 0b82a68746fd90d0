"""The controller's one reaction to being fenced (Controller.job_failed): a write refused on the
controller epoch, whichever job made it (a round's partition-state write, a reassignment's topic
znode write, a controlled shutdown's round), makes the controller resign, and every request it
had not answered gets NOT_CONTROLLER. Against the in-memory ZooKeeper on a task.Clock.
"""
from __future__ import annotations


import pytest
from twisted.internet import task

from kafkalite.controller.controller import Controller
from kafkalite.coordination import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperServer
from kafkalite.errors import ErrorCode
from kafkalite.metadata import LeaderAndIsr, MetadataCache
from kafkalite.metadata.cache import BrokerInfo, TopicInfo
from zk_schema import paths
from tests.support.deferreds import settle

pytestmark = pytest.mark.unit


class World:
    """Brokers 1-3, topic t (one partition, replicas 1, 2, 3) led by broker 2; broker 1 is the
    controller. The cache is filled as the watches would fill it."""

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
        self.controller = Controller(1, self.zk, self.cache, lambda: set(), lambda t: False, reactor=self.clock)
        settle(self.clock, self.controller.maybe_elect())
        settle(self.clock)
        assert self.controller.active
        s = self.refresh()
        settle(self.clock, self.zk.update_leader_and_isr("t", 0, LeaderAndIsr(2, s.leader_epoch + 1, s.isr,
                                                                              s.controller_epoch, s.zk_version)))
        assert self.refresh().leader == 2

    def refresh(self) -> LeaderAndIsr:
        state = settle(self.clock, self.zk.get_partition_state("t", 0))
        self.cache.states[("t", 0)] = state
        return state

    def depose(self) -> None:
        """Another controller was elected: /controller_epoch moved on."""
        settle(self.clock, self.zk.zk.set(paths.CONTROLLER_EPOCH, b"99"))


def test_fenced_reassignment_write_resigns_and_answers_not_controller() -> None:
    """The reassignment's topic znode write is refused on the epoch: both requests of the round
    are answered NOT_CONTROLLER, the controller resigns, the topic znode keeps its replicas."""
    w = World()
    w.depose()
    first = w.controller.reassign({("t", 0): (3, 2, 1)})
    second = w.controller.reassign({("t", 0): (2, 3, 1)})
    assert settle(w.clock, first)[("t", 0)][0] == ErrorCode.NOT_CONTROLLER
    assert settle(w.clock, second)[("t", 0)][0] == ErrorCode.NOT_CONTROLLER
    assert not w.controller.active
    node = settle(w.clock, w.zk.get_topic_assignment("t")).value
    assert node.partitions[0] == (1, 2, 3) and not node.adding_replicas


def test_controlled_shutdown_whose_round_is_fenced_answers_not_controller() -> None:
    """Broker 2 asks to shut down; the round's leadership move is refused on the epoch: the
    controller resigns before the waiting shutdown is answered, so it answers NOT_CONTROLLER
    (not NONE with a stale list), and the state znode still names leader 2."""
    w = World()
    w.depose()
    code, _ = settle(w.clock, w.controller.controlled_shutdown(2))
    assert code == ErrorCode.NOT_CONTROLLER
    assert not w.controller.active
    assert w.refresh().leader == 2
