"""A continuous exactly-once pipeline: a topic's committed records, transformed, into another
topic, on ``local[2]`` or a Spark cluster (``--master spark://host:7077``).

The query reads ``--source`` with ``read_committed`` (so a transactional producer's aborted
records never enter), upper-cases each value (the key and headers pass through) and writes
``--target`` with the kafkalite sink's ``exactly_once`` guarantee: each task's share of a
micro-batch is one Kafka transaction carrying the batch's marker, and the checkpoint keeps the
offsets and the query id, so a pipeline killed at any point (driver, executor, worker or a
broker) and started again with the same ``--checkpoint`` leaves every source record in the
target exactly once for ``read_committed`` readers. ``--group`` commits each batch's end offsets
to a consumer group, so ``kafkalite-consumer-groups --describe --group ...`` shows the lag.

    .venv/bin/python -m spark_integration.examples.pipeline --bootstrap-server 127.0.0.1:9092 \\
        --source orders --target orders-upper --checkpoint var/pipeline-ckpt --available-now
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def start(spark: Any, bootstrap: str, source: str, target: str, checkpoint: str, *,
          max_offsets_per_trigger: int | None = None, group: str | None = None,
          trigger: dict[str, Any] | None = None) -> Any:
    """Start the streaming query; returns Spark's ``StreamingQuery``."""
    reader = (spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    if group:
        reader = reader.option("kafka.group.id", group)
    out = reader.load().selectExpr("key", "upper(CAST(value AS STRING)) AS value")
    return (out.writeStream.format("kafkalite").queryName(f"pipeline-{source}-{target}")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", target)
            .option("deliveryGuarantee", "exactly_once").option("checkpointLocation", checkpoint)
            .trigger(**(trigger or {"processingTime": "1 second"})).start())


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"pipeline: --conf takes KEY=VALUE, not {pair!r}")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--checkpoint", required=True, help="keep it to resume exactly where the query stopped")
    ap.add_argument("--master", default="local[2]", help="spark.master: local[N] or spark://host:port")
    ap.add_argument("--group", help="commit each batch's end offsets to this consumer group (lag)")
    ap.add_argument("--max-offsets-per-trigger", type=int)
    ap.add_argument("--trigger-interval", default="1 second",
                    help="processing-time trigger ('0 seconds': each batch as soon as the last one ends)")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is there now (in batches), then exit; default: run until killed")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")

    from spark_integration.session import spark_session

    spark = spark_session("kafkalite-pipeline", args.master, _conf(args.conf))
    try:
        query = start(spark, args.bootstrap_server, args.source, args.target, args.checkpoint,
                      max_offsets_per_trigger=args.max_offsets_per_trigger, group=args.group,
                      trigger={"availableNow": True} if args.available_now else {"processingTime": args.trigger_interval})
        print(f"pipeline: {args.source} -> {args.target} running on {spark.sparkContext.master} "
              f"(query {query.id})", flush=True)
        query.awaitTermination()
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        print(f"pipeline: done, {rows} records", flush=True)
    except Exception as exc:  # noqa: BLE001 - one clear line, non-zero exit
        print(f"pipeline: failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
