"""The Controller learns offline replicas from log-dir events, in process: an in-memory ZooKeeper
on a MemoryReactorClock, a fake DescribeLogDirs, the real fenced writes. The metadata cache is
filled by hand (no MetadataSync), so each test shows the controller's own reasoning."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.testing import MemoryReactorClock

from kafkalite.controller.controller import DESCRIBE_LOG_DIRS_BACKOFF_S, Controller
from kafkalite.coordination import KafkaZkClient, MemoryZooKeeperServer
from kafkalite.errors import ErrorCode
from kafkalite.metadata import BrokerInfo, MetadataCache, TopicInfo
from tests.support.deferreds import drive

STORAGE = int(ErrorCode.KAFKA_STORAGE_ERROR)


class World:
    """ZooKeeper, a cache with brokers 1-3 and topic ``t`` (p0 [2, 1, 3], p1 [2, 3, 1]), and the
    log dirs each broker answers with (default: one healthy dir holding all its replicas)."""

    def __init__(self) -> None:
        self.clock = MemoryReactorClock()
        self.server = MemoryZooKeeperServer(self.clock)
        self.zk = self.kafka_zk()
        self.result(self.zk.create_topic("t", {0: [2, 1, 3], 1: [2, 3, 1]}))
        self.cache = MetadataCache(brokers={b: BrokerInfo(b, {}) for b in (1, 2, 3)},
                                   topics={"t": TopicInfo("t", {0: [2, 1, 3], 1: [2, 3, 1]})})
        self.epochs = {1: 10, 2: 20, 3: 30}
        self.dirs: dict[int, list[tuple[str, int, set[tuple[str, int]]]]] = {
            b: [("/d1", 0, {("t", 0), ("t", 1)})] for b in (1, 2, 3)}
        self.asked: list[int] = []
        self.failures: dict[int, int] = {}      # broker -> how many DescribeLogDirs to fail first

    def kafka_zk(self) -> KafkaZkClient:
        kz = KafkaZkClient(zk=self.server.client("memory/kafka"))
        self.result(kz.start())
        self.result(kz.create_persistent_paths())
        return kz

    def result(self, d: defer.Deferred) -> Any:
        return drive(self.clock, d)

    def settle(self) -> None:
        for _ in range(200):
            self.clock.advance(0)

    def describe(self, broker_id: int) -> defer.Deferred:
        self.asked.append(broker_id)
        if self.failures.get(broker_id, 0) > 0:
            self.failures[broker_id] -= 1
            return defer.fail(ConnectionRefusedError("injected"))
        return defer.succeed(self.dirs[broker_id])

    def controller(self, broker_id: int = 1) -> Controller:
        c = Controller(broker_id, self.zk, self.cache, set, lambda t: False, reactor=self.clock,
                       broker_epochs=lambda: self.epochs, describe_log_dirs=self.describe)
        c.maybe_elect()
        self.settle()
        assert c.active
        return c

    def state(self, partition: int) -> Any:
        return self.result(self.zk.get_partition_state("t", partition))


def test_log_dir_event_moves_leadership_of_offline_replicas_only() -> None:
    """Broker 2 reports a failed dir holding p0: the controller asks it, moves p0's leadership
    to the next in-sync replica and drops 2 from p0's ISR, leaves p1 (still on a healthy dir) led
    by 2, and deletes the notification it consumed."""
    w = World()
    c = w.controller()
    assert (w.state(0).leader, w.state(1).leader) == (2, 2)
    w.dirs[2] = [("/d1", 0, {("t", 1)}), ("/d2", STORAGE, set())]
    w.asked.clear()
    w.result(w.zk.propagate_log_dir_event(2))
    w.settle()
    assert w.asked == [2]
    s0, s1 = w.state(0), w.state(1)
    assert (s0.leader, s0.isr, s0.leader_epoch) == (1, (1, 3), 1)
    assert (s1.leader, s1.isr) == (2, (2, 3, 1))
    assert c.all_offline_replicas() == {("t", 0, 2)}
    assert w.result(w.zk.get_log_dir_event_notifications()) == []


def test_offline_replicas_are_forgotten_when_the_broker_epoch_changes() -> None:
    """A restarted broker (new registration czxid) is a new epoch: its old offline replicas no
    longer count and the next round may elect it again."""
    w = World()
    c = w.controller()
    w.dirs[2] = [("/d1", 0, {("t", 1)}), ("/d2", STORAGE, set())]
    w.result(w.zk.propagate_log_dir_event(2))
    w.settle()
    assert c.all_offline_replicas() == {("t", 0, 2)}
    w.epochs[2] = 21
    c.reconcile()
    w.settle()
    assert c.offline_replicas == {}


def test_healthy_answer_marks_nothing_offline() -> None:
    """A notification from a broker whose dirs all answer 0 (e.g. a stale event) changes nothing."""
    w = World()
    c = w.controller()
    w.result(w.zk.propagate_log_dir_event(3))
    w.settle()
    assert c.all_offline_replicas() == set()
    assert (w.state(0).leader, w.state(0).isr) == (2, (2, 1, 3))
    assert w.result(w.zk.get_log_dir_event_notifications()) == []


def test_new_controller_asks_every_live_broker_and_clears_pending_events() -> None:
    """A controller elected while notifications are pending cannot know what earlier ones said:
    it asks every live broker (so an offline dir reported to its predecessor still counts) and
    deletes them all, fenced, as Kafka's controller does at failover."""
    w = World()
    w.dirs[2] = [("/d1", 0, {("t", 1)}), ("/d2", STORAGE, set())]
    w.result(w.zk.propagate_log_dir_event(2))
    w.result(w.zk.propagate_log_dir_event(2))
    c = w.controller(3)
    w.settle()
    assert sorted(w.asked) == [1, 2, 3]
    assert c.all_offline_replicas() == {("t", 0, 2)}
    # p0 had no state yet: it is created with the online replicas only, led by 1
    assert (w.state(0).leader, w.state(0).isr) == (1, (1, 3))
    assert w.result(w.zk.get_log_dir_event_notifications()) == []


def test_deposed_controller_stops_consuming_events() -> None:
    """After resigning, a controller ignores notifications (its watch is cancelled), so only the
    new controller acts on them."""
    w = World()
    c = w.controller()
    c.resign("test")
    w.asked.clear()
    w.result(w.zk.propagate_log_dir_event(2))
    w.settle()
    assert w.asked == []
    assert len(w.result(w.zk.get_log_dir_event_notifications())) == 1


def test_describe_log_dirs_is_retried_after_a_failure() -> None:
    """A broker that does not answer at once is asked again after a back-off; its offline replica
    counts once it answers, and the notification is deleted only then."""
    w = World()
    c = w.controller()
    w.dirs[2] = [("/d1", 0, {("t", 1)}), ("/d2", STORAGE, set())]
    w.failures[2] = 1
    w.asked.clear()
    w.result(w.zk.propagate_log_dir_event(2))
    w.settle()
    assert w.asked == [2] and c.all_offline_replicas() == set()
    assert len(w.result(w.zk.get_log_dir_event_notifications())) == 1
    w.clock.advance(DESCRIBE_LOG_DIRS_BACKOFF_S)
    w.settle()
    assert w.asked == [2, 2]
    assert c.all_offline_replicas() == {("t", 0, 2)}
    assert w.state(0).leader == 1
    assert w.result(w.zk.get_log_dir_event_notifications()) == []
