"""Spark reader benchmark: rows/s of ``spark.read.format("kafkalite")`` into Spark's noop sink,
next to the raw fetch rate of ``kafkalite.client`` on the same records; with ``--avro`` also the
same for registry-framed Avro values decoded into typed columns (``valueAvroSubject``).

Run: ``PYTHONPATH=$PWD .venv/bin/python -m bench.spark_reader [--records 5000000] [--avro]``.
Starts its own ZooKeeper and one broker under a temp dir (or uses ``--bootstrap-server``),
produces N records of 100-byte values over 10 partitions with confluent-kafka, then measures

* client fetch: one KafkaClient fetching every partition to its end (4 MiB per fetch), records
  counted from batch headers (no decoding): the wire + broker ceiling;
* client fetch + Arrow: the same with ``spark_integration.arrow_records.convert`` per fetch,
  i.e. what one Spark task does, without Spark;
* Spark noop: ``df.write.format("noop")`` over the whole topic with ``local[2]`` (2 tasks at a
  time over the 10 partitions); the first run includes Python worker start-up, the best of the
  next ``--repeat`` runs is reported as well.

With ``--avro`` a second topic gets N Avro records of about the same size (a 6-field ``Reading``
record: long, string, double, timestamp-millis, int, a 64-character string; 5 framing bytes
included, about 100 bytes), registered in a ``kafkalite-schema-registry`` started here, and the
Arrow and Spark measurements are repeated with the value decoded (``client fetch + Arrow + Avro``
is one task's work without Spark).

Everything started here is stopped and the temp dir removed on exit.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent


def produce_all(bootstrap: str, topic: str, partitions: int, values: Iterable[bytes]) -> float:
    """Create ``topic`` and write ``values`` round-robin over its partitions (key: the index) with
    a producer tuned for bulk loading; returns the seconds from the first produce to the flush."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1000000,
                         "batch.num.messages": 100000, "queue.buffering.max.messages": 2000000,
                         "queue.buffering.max.kbytes": 2097151, "acks": 1, "enable.idempotence": False})
    t0 = time.perf_counter()
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value, b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600):
        raise SystemExit("produce did not finish")
    return time.perf_counter() - t0


def produce(bootstrap: str, topic: str, records: int, partitions: int, value_size: int) -> float:
    value = b"v" * value_size
    return produce_all(bootstrap, topic, partitions, (value for _ in range(records)))


AVRO_SCHEMA = {"type": "record", "name": "Reading", "namespace": "kafkalite.bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}, {"name": "seq", "type": "int"},
    {"name": "note", "type": "string"}]}


def produce_avro(bootstrap: str, registry_url: str, topic: str, records: int, partitions: int) -> tuple[float, int]:
    """N registry-framed Avro values (one fastavro call each, timed with the produce, not with
    the reads); returns (seconds, bytes of one value)."""
    import io
    import json
    import struct

    import fastavro

    from kafkalite.registry.client import RegistryClient

    schema_id = RegistryClient(registry_url).register(f"{topic}-value", json.dumps(AVRO_SCHEMA))
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    header = struct.pack(">bI", 0, schema_id)
    size = 0

    def values() -> Iterator[bytes]:
        nonlocal size
        buf = io.BytesIO()
        for i in range(records):
            buf.seek(0)
            buf.truncate()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, {"id": i, "sensor": f"sensor-{i % 100:03d}", "value": i * 0.5,
                                                     "ts": 1_700_000_000_000 + i, "seq": i % 1000, "note": "n" * 64})
            value = buf.getvalue()
            size = len(value)
            yield value

    seconds = produce_all(bootstrap, topic, partitions, values())
    return seconds, size


def client_fetch(bootstrap: str, topic: str, convert_too: bool, avro: tuple = ()) -> tuple[float, int]:
    from kafkalite.client import KafkaClient, TopicPartition
    from kafkalite.records import scan_valid_prefix
    from spark_integration.arrow_records import convert

    if avro:
        from spark_integration.avro import decode_columns
        from spark_integration.broker_io import ReadSettings
        out_schema = ReadSettings(bootstrap, "bench", False, True, 1, 4 << 20, 30000, 120000, avro).output_schema()
    with KafkaClient(bootstrap) as client:
        tps = [TopicPartition(topic, p) for p in client.partitions_for(topic)]
        ends = {tp: o for tp, (o, _) in client.list_offsets({tp: -1 for tp in tps}).items()}
        rows = 0
        t0 = time.perf_counter()
        for tp in tps:
            offset = 0
            while offset < ends[tp]:
                fetched = client.fetch(tp, offset, max_bytes=4 << 20)
                if convert_too:
                    batch, nxt = convert(fetched.records, topic=tp.topic, partition=tp.partition, start=offset,
                                         end=ends[tp])
                    if batch is not None and avro:
                        batch = decode_columns(batch, avro, out_schema, tp.topic, tp.partition)
                    rows += batch.num_rows if batch is not None else 0
                else:
                    infos, _ = scan_valid_prefix(memoryview(fetched.records), verify_crc=False)
                    nxt = infos[-1].next_offset if infos else offset
                    rows += sum(i.records_count for i in infos)
                if nxt <= offset:
                    raise SystemExit(f"no progress at {tp} offset {offset}")
                offset = nxt
        return time.perf_counter() - t0, rows


def spark_noop(bootstrap: str, topic: str, repeat: int, options: dict[str, str] | None = None
               ) -> list[tuple[float, int]]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from spark_integration import register

    log4j = ROOT / "tests" / "spark" / "log4j2.properties"
    spark = (SparkSession.builder.master("local[2]").appName("kafkalite-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "1g")
             .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
             .getOrCreate())
    register(spark)
    out = []
    try:
        for _ in range(1 + repeat):
            reader = (spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", topic))
            for k, v in (options or {}).items():
                reader = reader.option(k, v)
            df = reader.load()
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - t0
            out.append((elapsed, df.count() if not out else out[0][1]))
    finally:
        spark.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2, help="warm Spark runs after the first")
    ap.add_argument("--bootstrap-server", help="use this cluster instead of starting one")
    ap.add_argument("--avro", action="store_true", help="also measure Avro values decoded into typed columns")
    ap.add_argument("--schema-registry-url", help="with --avro and --bootstrap-server: use this registry")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-spark-bench-"))
    zk = cluster = registry = None
    try:
        if args.bootstrap_server:
            bootstrap = args.bootstrap_server
        else:
            from tests.support.brokers import Cluster
            from tests.support.zookeeper import ZooKeeperServer
            zk = ZooKeeperServer(tmp / "zookeeper")
            zk.start()
            cluster = Cluster(zk, tmp / "cluster", 1).start()
            bootstrap = cluster.bootstrap
        topic = f"spark-bench-{int(time.time())}"
        produce_s = produce(bootstrap, topic, args.records, args.partitions, args.value_size)
        print(f"produced {args.records:,} records of {args.value_size} B over {args.partitions} partitions "
              f"in {produce_s:.1f} s ({args.records / produce_s:,.0f} rec/s, confluent-kafka)", flush=True)
        rows_table = []
        fetch_s, fetch_rows = client_fetch(bootstrap, topic, convert_too=False)
        rows_table.append(("kafkalite.client fetch (1 process, no decode)", fetch_s, fetch_rows))
        conv_s, conv_rows = client_fetch(bootstrap, topic, convert_too=True)
        rows_table.append(("client fetch + Arrow convert (1 process)", conv_s, conv_rows))
        runs = spark_noop(bootstrap, topic, args.repeat)
        rows_table.append(("Spark local[2] -> noop, first run", runs[0][0], runs[0][1]))
        if len(runs) > 1:
            best = min(runs[1:])
            rows_table.append((f"Spark local[2] -> noop, best of {len(runs) - 1} warm", best[0], runs[0][1]))
        if args.avro:
            registry_url = args.schema_registry_url
            if registry_url is None:
                from kafkalite.cluster.processes import SchemaRegistryProcess
                registry = SchemaRegistryProcess(tmp, bootstrap)
                registry.launch()
                registry.wait_ready(60, need_primary=True)
                registry_url = registry.url
            avro_topic = f"{topic}-avro"
            avro_s, size = produce_avro(bootstrap, registry_url, avro_topic, args.records, args.partitions)
            print(f"produced {args.records:,} Avro records of {size} B (framed) in {avro_s:.1f} s "
                  "(fastavro + confluent-kafka)", flush=True)
            from spark_integration.avro import resolve_reader
            reader = resolve_reader("value", registry_url, f"{avro_topic}-value", "latest")
            s, n = client_fetch(bootstrap, avro_topic, convert_too=True, avro=(reader,))
            rows_table.append(("client fetch + Arrow + Avro decode (1 process)", s, n))
            opts = {"schemaRegistryUrl": registry_url, "valueAvroSubject": f"{avro_topic}-value"}
            runs = spark_noop(bootstrap, avro_topic, args.repeat, opts)
            rows_table.append(("Spark local[2] -> noop, Avro values, first run", runs[0][0], runs[0][1]))
            if len(runs) > 1:
                best = min(runs[1:])
                rows_table.append((f"Spark local[2] -> noop, Avro values, best of {len(runs) - 1} warm",
                                   best[0], runs[0][1]))
        print(f"\n{'measurement':<50} {'rows':>12} {'seconds':>9} {'rows/s':>12}")
        for name, seconds, rows in rows_table:
            if rows != args.records:
                print(f"!! {name}: {rows} rows, expected {args.records}")
            print(f"{name:<50} {rows:>12,} {seconds:>9.2f} {rows / seconds:>12,.0f}")
        return 0
    finally:
        if registry is not None:
            registry.stop(10)
        if cluster is not None:
            cluster.stop()
        if zk is not None:
            zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
