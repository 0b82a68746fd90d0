"""Exactly-once with the kafkalite source: to Parquet, and from Kafka to Kafka.

**To Parquet.** A streaming query reads ``read_committed`` (only committed transactions, never a
control record; ranges end at the last stable offset) and writes Parquet with a checkpoint. Spark
records each micro-batch's offset range in the checkpoint before running it, and the file sink
records which files a batch wrote in its own log (``_spark_metadata``): a batch that is run again
after a crash reads the same range and its files replace the half-written ones, so every committed
record lands in the table once. Readers must go through the sink's log (``spark.read.parquet``
on the path does).

**Kafka to Kafka.** Spark's own Kafka sink is at-least-once. :func:`to_kafka` writes each
micro-batch from ``foreachBatch`` with one transactional producer and, in the same transaction,
the batch id as the latest record of a compacted progress topic. A batch Spark runs again after a
crash finds its id already committed there and is skipped; a transaction cut short by the crash
is aborted by the coordinator (or fenced by the next ``init_transactions`` with the same
transactional id), so ``read_committed`` readers of the output see every input record once.

    PYTHONPATH=$PWD .venv/bin/python -m spark_integration.examples.exactly_once \\
        --bootstrap-server 127.0.0.1:9092 --topic payments --parquet /tmp/payments --checkpoint /tmp/ckpt
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]


def to_parquet(spark: Any, bootstrap: str, topic: str, path: str, checkpoint: str) -> int:
    """Run the streaming query until the topic's current end (availableNow); returns the rows this
    run wrote. Run it again (same checkpoint) to continue where it stopped."""
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").load())
    query = (df.selectExpr("cast(key as string) key", "cast(value as string) value", "partition", "offset")
             .writeStream.format("parquet").option("path", path).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return sum(p["numInputRows"] for p in query.recentProgress)


def last_committed_batch(bootstrap: str, progress_topic: str, query: str) -> int:
    """The highest batch id committed for ``query`` (-1: none), read read_committed: everything
    below the last stable offset, until a poll brings nothing more."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{query}-progress-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(progress_topic, 0), timeout=30, cached=False)
        if high <= low:                  # high is the LSO: nothing committed yet
            return -1
        c.assign([TopicPartition(progress_topic, 0, low)])
        last, wait = -1, 10.0
        while True:
            msgs = c.consume(500, wait)
            if not msgs:                 # (below the LSO there may be only aborted data and markers)
                return last
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"reading {progress_topic}: {m.error()}")
                value = m.value()
                if m.key() == query.encode() and value is not None:
                    last = max(last, int(value))
            wait = 1.0
    finally:
        c.close()


def ensure_progress_topic(bootstrap: str, progress_topic: str) -> None:
    """The compacted one-partition topic holding each query's last committed batch id."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(progress_topic, 1, -1, config={"cleanup.policy": "compact"})])[progress_topic]
    try:
        future.result(60)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def transactional_writer(bootstrap: str, out_topic: str, progress_topic: str, query: str,
                         transactional_id: str) -> Callable[[Any, int], None]:
    """The ``foreachBatch`` function of :func:`to_kafka` (also usable on its own: it is idempotent
    per batch id)."""
    from confluent_kafka import Producer

    producer: dict[str, Any] = {}

    def write(batch: Any, batch_id: int) -> None:
        if "p" not in producer:
            ensure_progress_topic(bootstrap, progress_topic)
            p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
            p.init_transactions(60)          # fences (and aborts) an earlier incarnation's transaction
            producer["p"] = p
        p = producer["p"]
        if batch_id <= last_committed_batch(bootstrap, progress_topic, query):
            return                            # a replayed batch: its output is already committed
        rows = batch.select("key", "value").collect()     # example-sized batches go through the driver
        p.begin_transaction()
        try:
            for row in rows:
                p.produce(out_topic, key=row["key"], value=row["value"])
            p.produce(progress_topic, key=query.encode(), value=str(batch_id).encode(), partition=0)
            p.commit_transaction(60)
        except Exception:
            p.abort_transaction(60)
            raise
    return write


def to_kafka(spark: Any, bootstrap: str, topic: str, out_topic: str, checkpoint: str, query: str = "eos-copy") -> int:
    """Copy ``topic`` to ``out_topic`` exactly once (read_committed in, transactions out)."""
    progress_topic = f"{out_topic}-progress"
    df = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").load())
    handle = (df.writeStream.foreachBatch(transactional_writer(bootstrap, out_topic, progress_topic, query,
                                                               f"{query}-writer"))
              .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    handle.awaitTermination()
    return sum(p["numInputRows"] for p in handle.recentProgress)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--parquet", help="write the committed records here (with --checkpoint)")
    ap.add_argument("--copy-to", help="copy the committed records to this topic, exactly once")
    ap.add_argument("--checkpoint", required=True)
    a = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_integration import register

    spark = SparkSession.builder.appName("kafkalite-exactly-once").getOrCreate()
    register(spark)
    if a.parquet:
        print(f"{to_parquet(spark, a.bootstrap_server, a.topic, a.parquet, a.checkpoint)} rows to {a.parquet}")
    if a.copy_to:
        print(f"{to_kafka(spark, a.bootstrap_server, a.topic, a.copy_to, a.checkpoint + '-copy')} rows to {a.copy_to}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
