"""The exactly-once paths of spark_integration/examples/exactly_once.py on transactional input:
committed and aborted transactions interleaved. To Parquet: two runs of the streaming query from
one checkpoint hold every committed record once and no aborted one. Kafka to Kafka: the copy holds
the committed records once (read_committed), and a micro-batch run again (as after a crash) writes
nothing more."""
from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition


def transactions(bootstrap: str, topic: str, batches: list[tuple[str, int, bool]]) -> list[bytes]:
    """(prefix, count, commit) transactions in order; returns the committed values."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-eos-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    committed: list[bytes] = []
    for prefix, count, commit in batches:
        p.begin_transaction()
        values = [b"%s-%d" % (prefix.encode(), i) for i in range(count)]
        for v in values:
            p.produce(topic, key=v, value=v, partition=0)
        if commit:
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
    return committed


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        while True:
            msgs = c.consume(1000, 3.0)
            if not msgs:
                return got
            got += [m.value() for m in msgs if m.error() is None]
    finally:
        c.close()


def test_exactly_once_to_parquet_and_to_kafka(spark: Any, kafka: Any, tmp_path: Any) -> None:
    from spark_integration.examples.exactly_once import (last_committed_batch, to_kafka, to_parquet,
                                                         transactional_writer)

    topic, out_topic = f"eos-{uuid.uuid4().hex[:6]}", f"eos-out-{uuid.uuid4().hex[:6]}"
    committed = transactions(kafka.bootstrap, topic, [("a", 100, True), ("x", 40, False), ("b", 100, True)])
    path, ckpt = str(tmp_path / "table"), str(tmp_path / "ckpt")
    assert to_parquet(spark, kafka.bootstrap, topic, path, ckpt) == 200
    committed += transactions(kafka.bootstrap, topic, [("y", 30, False), ("c", 50, True)])
    assert to_parquet(spark, kafka.bootstrap, topic, path, ckpt) == 50       # from the checkpoint on
    table = sorted(r.value.encode() for r in spark.read.parquet(path).collect())
    assert table == sorted(committed)

    assert to_kafka(spark, kafka.bootstrap, topic, out_topic, str(tmp_path / "ckpt-copy"), "copy") == 250
    assert sorted(read_committed(kafka.bootstrap, out_topic)) == sorted(committed)
    last = last_committed_batch(kafka.bootstrap, f"{out_topic}-progress", "copy")
    assert last >= 0
    # Spark runs a batch again after a crash: the same batch id writes nothing a second time
    replay = spark.createDataFrame([(b"dup", b"dup")], "key binary, value binary")
    transactional_writer(kafka.bootstrap, out_topic, f"{out_topic}-progress", "copy", "copy-writer")(replay, last)
    assert sorted(read_committed(kafka.bootstrap, out_topic)) == sorted(committed)
