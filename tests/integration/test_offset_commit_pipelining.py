"""Hundreds of pipelined asynchronous commits from one librdkafka consumer all succeed, in order.

Each OffsetCommit is an acks=all write to ``__consumer_offsets``; with replication factor 1 the
high watermark covers it at once, so its Deferred has already fired when the connection gets it
back. The connection used to recurse once per such request and overflowed the stack after a few
hundred pipelined commits: that connection then stayed busy and every later request on it timed
out (librdkafka reported REQUEST_TIMED_OUT after 60 s and the member's session expired).
"""
from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

COMMITS = 500


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_500_pipelined_async_commits_all_succeed(broker: Any) -> None:
    topic, group = "pipelined-commits", "pipelined-commits-group"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    results: list[tuple[Any, list[TopicPartition]]] = []
    captured = Captured()
    client_log = logging.getLogger("pipelined-commits.librdkafka")
    client_log.addHandler(captured)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "on_commit": lambda err, parts: results.append((err, parts))}, logger=client_log)
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        for i in range(COMMITS):
            consumer.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=True)
        deadline = time.monotonic() + 120
        while len(results) < COMMITS and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert len(results) == COMMITS, f"only {len(results)} of {COMMITS} commits answered"
        failed = [(err, [p.error for p in parts]) for err, parts in results
                  if err is not None or any(p.error for p in parts)]
        assert not failed, failed[:5]
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed.offset == COMMITS          # applied in request order: the last one wins
        # librdkafka retries timed-out commits by itself, so success alone does not show the
        # connection kept answering: no request may have timed out, and the broker logged no error
        consumer.poll(0)
        assert not [line for line in captured.lines if "Timed out" in line or "REQTMOUT" in line], captured.lines[-5:]
        server_log = broker.log_path.read_text(errors="replace")
        assert "Traceback" not in server_log and "Unhandled error" not in server_log
    except KafkaException as exc:
        raise AssertionError(f"consumer failed: {exc}") from exc
    finally:
        consumer.close()
