"""A new leader and its followers find each other at once, whichever of them hears of the change
from ZooKeeper first (in process: a real ReplicaManager and the real Fetch and
OffsetForLeaderEpoch handlers on a task.Clock, no ZooKeeper).

Before, a controlled shutdown's acks=all producer waited 0.5 s or 1 s now and then for the
follower's first fetch from the new leader: the follower's OffsetForLeaderEpoch reached the
leader before the leader knew, and was refused (a 1 s back-off), or the partition waited for a
long poll that could not name it (0.5 s).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet import task

from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.handlers.offset_for_leader_epoch import handle_offset_for_leader_epoch
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.purgatory import FollowerFetches, Purgatory
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.replica_manager import FIRST_FETCH_WAIT_MS, ReplicaManager, StateToApply
from kafkalite.broker.services import Clock
from kafkalite.broker.topic_configs import TopicConfigs
from kafkalite.config import BrokerConfig
from kafkalite.errors import ErrorCode
from kafkalite.metadata import LeaderAndIsr, MetadataCache, TopicInfo
from kafkalite.storage import LogManager
from tests.support.deferreds import outcome as _answers

ME, FOLLOWER, OTHER = 1, 3, 2
WAIT_MAX_MS = 500                      # replica.fetch.wait.max.ms (the default)


class Node:
    """Broker 1: leads t-0 (replicas 1, 3); t-1 (replicas 1, 2, 3) is led by broker 2."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = BrokerConfig.from_properties({"broker.id": str(ME), "log.dirs": str(tmp_path / "data"),
                                                    "zookeeper.connect": "127.0.0.1:1"})
        self.metadata = MetadataCache(topics={"t": TopicInfo("t", {0: [ME, FOLLOWER], 1: [OTHER, ME, FOLLOWER],
                                                                   2: [OTHER, ME, FOLLOWER]}),
                                              "u": TopicInfo("u", {0: [OTHER, FOLLOWER]})})
        self.clock = task.Clock()
        self.topic_configs = TopicConfigs(self.config, self.metadata)
        self.logs = LogManager([str(tmp_path / "data")], self.topic_configs.log_config(None))
        self.rm = ReplicaManager(ME, self.config, self.logs, Purgatory(self.clock), self.topic_configs,
                                 Clock(self.clock), self.metadata, isr_writer=None)  # type: ignore[arg-type]
        self.rm.apply_state("t", 0, [ME, FOLLOWER], LeaderAndIsr(ME, 0, (ME, FOLLOWER), 1))
        for p in (1, 2):
            self.rm.apply_state("t", p, [OTHER, ME, FOLLOWER], LeaderAndIsr(OTHER, 0, (OTHER, ME, FOLLOWER), 1))
        self.clock.advance(1.0)        # past the first-fetch window of t-0's leadership

    def ctx(self) -> Any:
        return SimpleNamespace(replicas=self.rm, config=self.config, metadata=self.metadata, now_ms=self.clock.seconds() * 1000,
                               metrics=BrokerMetrics(), api_version=12, fetch_sessions=None, quotas=BrokerQuotas(),
                               quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                               authorize=lambda *action: True)

    def take_t1(self, partition: int = 1) -> None:
        """ZooKeeper tells broker 1 it now leads t-1 (epoch 1): broker 2 shut down."""
        self.rm.apply_state("t", partition, [OTHER, ME, FOLLOWER], LeaderAndIsr(ME, 1, (ME, FOLLOWER), 1))

    def follower_fetch(self, *partitions: int) -> list[Any]:
        """Follower 3's Fetch of t-<p> at its log end; the answers it got so far."""
        epochs = {p: self.rm.get("t", p).state.leader_epoch for p in partitions}  # type: ignore[union-attr]
        req = {"replica_id": FOLLOWER, "max_wait_ms": WAIT_MAX_MS, "min_bytes": 1, "max_bytes": 1 << 20,
               "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
               "topics": [{"topic": "t", "partitions": [
                   {"partition": p, "current_leader_epoch": epochs[p], "fetch_offset": 0, "log_start_offset": 0,
                    "last_fetched_epoch": -1, "partition_max_bytes": 1 << 20} for p in partitions]}]}
        return _answers(handle_fetch(self.ctx(), req))

    def epoch_request(self, current_leader_epoch: int, topic: str = "t", *partitions: int) -> list[Any]:
        req = {"replica_id": FOLLOWER, "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": current_leader_epoch, "leader_epoch": 0}
            for p in partitions or (1,)]}]}
        return _answers(handle_offset_for_leader_epoch(self.ctx(), req))


def _epoch_answer(answered: list[Any]) -> dict[str, Any]:
    return answered[0]["topics"][0]["partitions"][0]


@pytest.fixture
def node(tmp_path: Path) -> Any:
    n = Node(tmp_path)
    yield n
    n.logs.close()


def test_offset_for_leader_epoch_waits_until_this_broker_hears_of_the_epoch(node: Node) -> None:
    answered = node.epoch_request(current_leader_epoch=1)
    assert answered == []                              # the follower knows more than we do: wait
    node.clock.advance(0.1)
    assert answered == []
    node.take_t1()
    assert answered and _epoch_answer(answered)["error_code"] == ErrorCode.NONE
    assert _epoch_answer(answered)["end_offset"] == 0
    assert len(node.rm.purgatory) == 0


def test_offset_for_leader_epoch_answers_once_every_partition_caught_up(node: Node) -> None:
    answered = node.epoch_request(1, "t", 1, 2)
    node.take_t1(1)
    assert answered == []                              # t-2 still behind
    node.take_t1(2)
    assert answered
    assert [p["error_code"] for p in answered[0]["topics"][0]["partitions"]] == [ErrorCode.NONE, ErrorCode.NONE]


def test_offset_for_leader_epoch_gives_up_after_the_long_poll_time(node: Node) -> None:
    answered = node.epoch_request(current_leader_epoch=1)
    node.clock.advance(WAIT_MAX_MS / 1000 - 0.001)
    assert answered == []
    node.clock.advance(0.002)
    # Kafka's answer to an epoch newer than ours (its epoch check comes before the leadership's)
    assert answered and _epoch_answer(answered)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_offset_for_leader_epoch_answers_at_once_what_waiting_cannot_change(node: Node) -> None:
    # the asker is not ahead of us: the usual answer, now
    assert _epoch_answer(node.epoch_request(current_leader_epoch=0))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # we hold no replica of u-0: no state of ours will ever catch up
    assert _epoch_answer(node.epoch_request(5, "u", 0))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # the asker is behind: fenced, now
    node.take_t1()
    assert _epoch_answer(node.epoch_request(current_leader_epoch=0))["error_code"] == ErrorCode.FENCED_LEADER_EPOCH


def test_taking_a_leadership_answers_the_followers_parked_fetch(node: Node) -> None:
    answered = node.follower_fetch(0)                  # nothing new in t-0: a long poll
    assert answered == []
    node.take_t1()                                     # the follower also replicates t-1
    assert answered, "the follower's long poll was not answered when this broker took t-1"
    assert answered[0]["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE


def test_a_batch_of_leaderships_takes_every_role_then_wakes_each_follower_once(node: Node) -> None:
    """A controller round's changes come as one batch (Kafka's one LeaderAndIsr request): every
    partition takes its role first, then the follower's parked Fetch is woken once, for all of
    them, and each partition's own waiters once."""
    woken: list[Any] = []
    real_check = node.rm.purgatory.check

    def check(key: Any) -> None:
        woken.append((key, node.rm.get("t", 1).is_leader, node.rm.get("t", 2).is_leader))  # type: ignore[union-attr]
        real_check(key)
    node.rm.purgatory.check = check  # type: ignore[method-assign]
    taken = node.rm.apply_states([StateToApply("t", p, [OTHER, ME, FOLLOWER], LeaderAndIsr(ME, 1, (ME, FOLLOWER), 1))
                                  for p in (1, 2)])
    assert set(taken) == {("t", 1), ("t", 2)} and all(part.is_leader for part in taken.values())
    assert woken == [(FollowerFetches(FOLLOWER), True, True), (("t", 1), True, True), (("t", 2), True, True)]
    assert list(node.rm.first_fetch_due[FOLLOWER])[-2:] == [("t", 1), ("t", 2)]    # (t-0: the fixture's)


def test_a_follower_that_has_not_fetched_the_new_partition_polls_briefly(node: Node) -> None:
    node.take_t1()
    answered = node.follower_fetch(0)                  # it has not heard of t-1 yet
    assert answered == []
    node.clock.advance(FIRST_FETCH_WAIT_MS / 1000)
    assert answered, "a follower that has not fetched t-1 yet waited a whole long poll"
    answered = node.follower_fetch(0, 1)               # now it fetches t-1 (empty so far)...
    node.clock.advance(FIRST_FETCH_WAIT_MS / 1000)
    assert answered == []                              # ...and its long polls are long again
    node.clock.advance(WAIT_MAX_MS / 1000)
    assert answered
    assert node.rm.first_fetch_due == {}


def test_the_brief_polls_end_after_the_long_poll_time_if_the_follower_never_comes(node: Node) -> None:
    node.take_t1()
    assert list(node.rm.first_fetch_due) == [FOLLOWER]   # not broker 2: it left the ISR (shut down)
    node.clock.advance(WAIT_MAX_MS / 1000)
    answered = node.follower_fetch(0)
    node.clock.advance(FIRST_FETCH_WAIT_MS / 1000)
    assert answered == []
    assert node.rm.first_fetch_due == {}
