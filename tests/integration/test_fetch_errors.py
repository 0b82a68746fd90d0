"""Fetch answers for a failing partition carry empty records, never null, as Kafka's
(MemoryRecords.EMPTY): librdkafka rejects the whole response on a null record set ("invalid
MessageSetSize -1"), so a consumer whose committed offset is past the log end never saw
OFFSET_OUT_OF_RANGE, never applied auto.offset.reset and consumed nothing, forever."""
from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.support.wire import request


def test_out_of_range_fetch_has_empty_records_and_librdkafka_resets(broker: Any) -> None:
    topic = "fetch-out-of-range"
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0

    r = request(broker.bootstrap, ApiKey.FETCH, 11, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 99,
                                                   "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    [entry] = r["responses"][0]["partitions"]
    assert entry["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert entry["records"] is not None and len(entry["records"]) == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fetch-out-of-range-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 1000)])       # past the log end (3)
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [b"m0", b"m1", b"m2"]
    finally:
        consumer.close()
