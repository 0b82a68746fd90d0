"""The JDBC sink under the worker while PostgreSQL goes away: the worker redelivers the batch the
sink could not write (RetriableException, ``retry.backoff.ms``) until the database is back, so
every record lands exactly once (upsert on the key) and nothing is dead-lettered."""
from __future__ import annotations

import json
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kafkalite.client import Consumer, Producer, TopicPartition
from tests.support.waiting import wait_for

SCHEMA = {"type": "struct", "name": "position", "optional": False,
          "fields": [{"field": "truck", "type": "string", "optional": False},
                     {"field": "seq", "type": "int64", "optional": False}]}


def _produce(bootstrap: str, seqs: range) -> None:
    with Producer(bootstrap) as producer:
        for seq in seqs:
            value = {"schema": SCHEMA, "payload": {"truck": f"t{seq % 3}", "seq": seq}}
            producer.send("positions", json.dumps(value).encode(), str(seq).encode(), partition=0)
        producer.flush(10)


def _rows(postgres: Any) -> int:
    try:
        return int(postgres.execute("SELECT count(*) FROM positions")[0][0])
    except Exception:  # noqa: BLE001 - the table does not exist yet, or the server is down
        return -1


def _retries(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    return sum(s.value for s in families["kafka_connect_task_error_metrics_total_retries"].samples
               if s.name.endswith("_total"))


def test_sink_rides_out_a_postgres_outage(broker: Any, postgres: Any, connect_factory: Any) -> None:
    _produce(broker.bootstrap, range(10))
    worker = connect_factory(broker.bootstrap, standalone=[{
        "name": "pg-sink", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": postgres.jdbc_url, "topics": "positions", "auto.create": "true",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "seq",
        "max.retries": "1000", "retry.backoff.ms": "200",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "positions-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1"}])
    wait_for(lambda: _rows(postgres) == 10, timeout=60, what="the first rows in PostgreSQL")
    postgres.stop()
    _produce(broker.bootstrap, range(10, 25))
    wait_for(lambda: _retries(worker.url) > 0, timeout=60, what="the sink retrying while the database is down")
    postgres.start()
    wait_for(lambda: _rows(postgres) == 25, timeout=90, what="every row after the outage")
    rows = postgres.execute("SELECT seq, truck FROM positions ORDER BY seq")
    assert rows == [(i, f"t{i % 3}") for i in range(25)]
    with Consumer(broker.bootstrap) as consumer:
        tp = TopicPartition("positions-dlq", 0)
        assert consumer.end_offsets([tp])[tp] == 0                # nothing dead-lettered
