"""truck_gps: the scheduled batch job over the committed range of a consumer group.

Trucks report their position every 20 seconds to the 10-partition topic ``trucks_gps``, keyed by
truck id (so one truck's reports stay in order in one partition), value JSON
``{"truck_id": "truck-7", "lat": 51.5, "lon": -0.12, "ts": 1700000000000}``.
Each run of this job:

1. reads exactly what the group has not processed yet: from the group's committed offsets (the
   earliest offsets the first time) to the high watermark at planning time;
2. computes per truck the number of reports and the last position (by offset, i.e. report order);
3. appends the result to Parquet under ``--output`` (one ``run_id`` per run);
4. commits the range's end offsets to the group, only after the write succeeded, so a failed run
   is simply read again next time and ``kafkalite-consumer-groups --describe`` shows lag 0.

    PYTHONPATH=$PWD .venv/bin/python -m spark_integration.examples.truck_gps \\
        --bootstrap-server 127.0.0.1:9092 --group truck-report --output /tmp/truck_report

``--demo-reports N`` first produces N reports of 25 trucks (needs confluent-kafka), for a try-out.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "trucks_gps"
REPORT_SCHEMA = "truck_id string, lat double, lon double, ts long"


def run(spark: Any, bootstrap: str, group: str, output: str, topic: str = TOPIC) -> dict[str, Any]:
    """One run of the job; returns what it read and committed (for logs and tests)."""
    from pyspark.sql import functions as F

    from spark_integration import commit_ranges, ranges_of

    raw = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic).option("groupId", group).load())
    _, ranges = ranges_of(raw)
    planned = sum(r.size for r in ranges)
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]
    if planned:
        reports = raw.select(F.col("key").cast("string").alias("truck"), "offset",
                             F.from_json(F.col("value").cast("string"), REPORT_SCHEMA).alias("r"))
        per_truck = reports.groupBy("truck").agg(
            F.count("*").alias("reports"),
            F.max_by(F.struct(F.col("r.lat").alias("lat"), F.col("r.lon").alias("lon"), F.col("r.ts").alias("ts")),
                     F.col("offset")).alias("last"),
        ).select("truck", "reports", F.col("last.lat").alias("last_lat"), F.col("last.lon").alias("last_lon"),
                 F.col("last.ts").alias("last_ts"), F.lit(run_id).alias("run_id"))
        per_truck.write.mode("append").partitionBy("run_id").parquet(output)
    committed = commit_ranges(spark, raw)          # after the write: at-least-once output
    return {"run_id": run_id, "records": planned, "committed": committed}


def produce_demo(bootstrap: str, reports: int, topic: str = TOPIC, trucks: int = 25) -> None:
    """Create the topic (10 partitions) if needed and send ``reports`` positions, 20 s apart per truck."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=30).topics:
        admin.create_topics([NewTopic(topic, 10, 1)], operation_timeout=30)[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    now = int(time.time() * 1000)
    for i in range(reports):
        truck = f"truck-{i % trucks}"
        step = i // trucks
        value = {"truck_id": truck, "lat": 51.0 + 0.001 * step, "lon": -0.1 - 0.001 * (i % trucks),
                 "ts": now + 20_000 * step}
        producer.produce(topic, json.dumps(value).encode(), truck.encode())
        producer.poll(0)
    producer.flush(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Per-truck report counts and last positions for a group's new range")
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--output", required=True, help="Parquet directory (appended to, one run_id per run)")
    ap.add_argument("--topic", default=TOPIC)
    ap.add_argument("--demo-reports", type=int, default=0, help="first produce this many demo reports")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.demo_reports:
        produce_demo(args.bootstrap_server, args.demo_reports, args.topic)

    from pyspark.sql import SparkSession

    from spark_integration import register

    spark = (SparkSession.builder.appName("truck_gps").master(os.environ.get("SPARK_MASTER", "local[2]"))
             .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    register(spark)
    try:
        result = run(spark, args.bootstrap_server, args.group, args.output, args.topic)
    except Exception as exc:  # noqa: BLE001 - one clear line for the scheduler's log, non-zero exit
        print(f"truck_gps: failed, nothing committed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(f"truck_gps: run {result['run_id']} read {result['records']} reports, committed "
          f"{len(result['committed'])} partitions for group {args.group}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
