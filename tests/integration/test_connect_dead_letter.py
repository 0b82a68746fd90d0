"""Dead-letter topics (KIP-298) on a real broker: a sink reading a topic where one record is not
JSON dead-letters that record with Kafka's ``__connect.errors.*`` headers and delivers the rest."""
from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kafkalite.client import Consumer, Producer, TopicPartition
from tests.support.waiting import wait_for


def test_poison_record_is_dead_lettered_and_the_rest_delivered(broker: Any, connect_factory: Any,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with Producer(broker.bootstrap) as producer:
        for value in (b'"one"', b"{not json", b'"three"'):
            producer.send("dlq-in", value, b'"k"', partition=0)
        producer.flush(10)
    worker = connect_factory(broker.bootstrap, standalone=[{
        "name": "json-sink", "connector.class": "FileStreamSink", "topics": "dlq-in", "file": str(out),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.log.enable": "true", "errors.log.include.messages": "true",
        "errors.deadletterqueue.topic.name": "dlq-out", "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}])
    wait_for(lambda: out.exists() and out.read_text() == "one\nthree\n", timeout=60, what="the good records")
    with Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer:
        tp = TopicPartition("dlq-out", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning([tp])
        records: list[Any] = []
        wait_for(lambda: records.extend(consumer.poll(500)) or records, what="the dead-lettered record")
    assert len(records) == 1
    r = records[0]
    assert r.value == b"{not json" and r.key == b'"k"'
    headers = {k: v.decode() for k, v in r.headers if v is not None}
    assert headers["__connect.errors.topic"] == "dlq-in"
    assert headers["__connect.errors.partition"] == "0" and headers["__connect.errors.offset"] == "1"
    assert headers["__connect.errors.connector.name"] == "json-sink"
    assert headers["__connect.errors.task.id"] == "0"
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"].endswith("JsonConverter")
    assert "DataException" in headers["__connect.errors.exception.class.name"]
    assert headers["__connect.errors.exception.message"]
    assert "Traceback" in headers["__connect.errors.exception.stacktrace"]
    with urllib.request.urlopen(worker.url + "/metrics", timeout=10) as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    labels = {"connector": "json-sink", "task": "0"}

    def value(family: str) -> float:
        return next(s.value for s in families[family].samples if s.labels == labels and s.name.endswith("_total"))
    assert value("kafka_connect_task_error_metrics_deadletterqueue_produce_requests") == 1
    assert value("kafka_connect_task_error_metrics_total_record_errors") == 1
    assert value("kafka_connect_sink_task_metrics_sink_record_read") == 3
    assert value("kafka_connect_sink_task_metrics_sink_record_send") == 2
