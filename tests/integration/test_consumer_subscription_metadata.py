"""The project's Consumer rejoins its group when a subscribed topic appears or grows, as Java's
consumer does, so a sink subscribed before its topic exists (a Connect sink started before the
source wrote anything) still gets the partitions."""
from __future__ import annotations

from typing import Any

from kafkalite.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.support.waiting import wait_for


def test_subscribed_topic_created_later_is_assigned(broker: Any) -> None:
    with Consumer(broker.bootstrap, group_id="late-topic-group", auto_offset_reset="earliest",
                  session_timeout_ms=6000, heartbeat_interval_ms=500) as consumer:
        consumer.subscribe(["late-topic"])
        assert consumer.poll(200) == [] and consumer.assignment() == []
        with Admin(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("late-topic", 2, 1)])
        with Producer(broker.bootstrap) as producer:
            producer.send("late-topic", b"hello", partition=1)
            producer.flush(10)
        got: list[Any] = []
        wait_for(lambda: got.extend(consumer.poll(300)) or got, timeout=30, what="the late topic's record")
        assert [r.value for r in got] == [b"hello"]
        assert sorted(consumer.assignment()) == [TopicPartition("late-topic", 0), TopicPartition("late-topic", 1)]
        with Admin(broker.bootstrap) as admin:
            admin.create_partitions({"late-topic": 3})
        consumer.metadata_max_age = 0.5                      # metadata.max.age.ms, shortened for the test
        wait_for(lambda: consumer.poll(200) is not None and len(consumer.assignment()) == 3, timeout=30,
                 what="the new partition assigned")
