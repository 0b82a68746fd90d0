"""DeleteRecords on the leader: the log start moves at once, the answer waits for the followers'
log starts (the low watermark), and Kafka's refusals.

A real, unstarted :class:`KafkaBroker` (the test kit's ``unstarted_broker``: storage in a temp
dir, in-memory ZooKeeper, task.Clock); the follower is played by recording its Fetch offsets and log start on the leader.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalite.broker.server import KafkaBroker
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.metadata import LeaderAndIsr
from kafkalite.metadata.cache import BrokerInfo, TopicInfo
from kafkalite.records.builder import build_batch
from tests.support.inprocess import unstarted_broker

pytestmark = pytest.mark.unit

TOPIC = "events"


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    b = unstarted_broker(tmp_path / "data")
    b.metadata.topics[TOPIC] = TopicInfo(TOPIC, {0: [1, 2]})
    b.metadata.topics["compacted"] = TopicInfo("compacted", {0: [1]}, config={"cleanup.policy": "compact"})
    for broker_id in (1, 2):
        b.metadata.brokers[broker_id] = BrokerInfo(broker_id, {"PLAINTEXT": ("127.0.0.1", 1)}, None)
    b.replica_manager.apply_state(TOPIC, 0, [1, 2], LeaderAndIsr(1, 0, (1, 2), 1, 0))
    for i in range(10):
        b.replica_manager.append(TOPIC, 0, build_batch([(1000, b"k", b"v", ())]), 1, 8)
    b.replica_manager.record_follower_fetch(b.replica_manager.get(TOPIC, 0), 2, 10, 0)   # HW = 10
    yield b
    b.log_manager.close()


def test_log_start_moves_and_the_answer_waits_for_the_follower(broker: KafkaBroker) -> None:
    """The leader's log start is 6 at once; the low watermark stays at the follower's 0, so the
    answer waits, and fires NONE with low watermark 6 once the follower reports 6."""
    rm = broker.replica_manager
    part, required = rm.delete_records(TOPIC, 0, 6)
    assert (required, part.log_start_offset) == (6, 6)
    answers: list = []
    rm.await_low_watermarks([(part, required)], 30000).addCallback(answers.append)
    assert answers == []
    rm.record_follower_fetch(part, 2, 10, 6)
    assert answers == [[(ErrorCode.NONE, 6)]]


def test_dead_follower_does_not_hold_the_low_watermark(broker: KafkaBroker) -> None:
    """A follower whose broker is not alive is left out, as in Kafka's lowWatermarkIfLeader;
    offset -1 means the high watermark."""
    del broker.metadata.brokers[2]
    answers: list = []
    part, required = broker.replica_manager.delete_records(TOPIC, 0, -1)
    broker.replica_manager.await_low_watermarks([(part, required)], 30000).addCallback(answers.append)
    assert answers == [[(ErrorCode.NONE, 10)]]


def test_timeout_answers_request_timed_out(broker: KafkaBroker) -> None:
    answers: list = []
    part, required = broker.replica_manager.delete_records(TOPIC, 0, 4)
    broker.replica_manager.await_low_watermarks([(part, required)], 500).addCallback(answers.append)
    broker.reactor.advance(0.6)
    assert answers == [[(ErrorCode.REQUEST_TIMED_OUT, 0)]]


@pytest.mark.parametrize("topic,offset,code", [(TOPIC, 11, ErrorCode.OFFSET_OUT_OF_RANGE),
                                               (TOPIC, -2, ErrorCode.OFFSET_OUT_OF_RANGE),
                                               ("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION),
                                               ("compacted", 0, ErrorCode.POLICY_VIOLATION),
                                               ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
def test_refusals(broker: KafkaBroker, topic: str, offset: int, code: ErrorCode) -> None:
    """Above the high watermark, an internal topic, a compact-only topic, an unknown partition."""
    if topic == "compacted":
        broker.replica_manager.apply_state(topic, 0, [1], LeaderAndIsr(1, 0, (1,), 1, 0))
    with pytest.raises(KafkaError) as info:
        broker.replica_manager.delete_records(topic, 0, offset)
    assert info.value.code == code
    assert broker.replica_manager.get(TOPIC, 0).log_start_offset == 0
