"""The demo run by ``scripts/demo``: truck positions through a local kafkalite cluster.

Trucks report their position every 20 seconds, keyed by truck id (the truck_gps example of the
Kafka material). The demo creates ``trucks_gps`` with 10 partitions, produces a simulated day of
positions with confluent-kafka (keys keep each truck's positions in one partition, in order),
reads every partition back and checks it, then prints per-truck figures.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TOPIC = "trucks_gps"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite-demo")
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--trucks", type=int, default=50)
    parser.add_argument("--reports", type=int, default=2000, help="positions per truck")
    parser.add_argument("--replication-factor", type=int, default=1)
    args = parser.parse_args(argv)

    admin = AdminClient({"bootstrap.servers": args.bootstrap_server})
    meta = admin.list_topics(timeout=10)
    print(f"cluster: {len(meta.brokers)} brokers {sorted(meta.brokers)}, controller {meta.controller_id}")
    if TOPIC not in meta.topics:
        fut = admin.create_topics([NewTopic(TOPIC, 10, args.replication_factor)])[TOPIC]
        fut.result(30)
        print(f"created topic {TOPIC}: 10 partitions, replication factor {args.replication_factor}")
    meta = admin.list_topics(TOPIC, timeout=10)
    for p, pm in sorted(meta.topics[TOPIC].partitions.items()):
        print(f"  partition {p}: leader {pm.leader} replicas {pm.replicas} isr {pm.isrs}")

    producer = Producer({"bootstrap.servers": args.bootstrap_server, "linger.ms": 20, "acks": "all",
                         "enable.idempotence": True, "compression.type": "lz4"})
    acked: dict[int, int] = defaultdict(int)
    start = time.monotonic()
    day_start = 1_700_000_000_000

    def delivered(err, msg) -> None:
        if err is None:
            acked[msg.partition()] += 1

    for r in range(args.reports):
        for t in range(args.trucks):
            value = json.dumps({"truck": t, "lat": 48.0 + t * 0.01 + r * 1e-4, "lon": 2.0 + r * 1e-4}).encode()
            producer.produce(TOPIC, value, key=f"truck-{t}".encode(), timestamp=day_start + r * 20_000,
                             on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    produced = sum(acked.values())
    took = time.monotonic() - start
    print(f"produced {produced} positions in {took:.1f} s ({produced / took:,.0f} records/s)")

    consumer = Consumer({"bootstrap.servers": args.bootstrap_server, "group.id": "demo-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(10)])
    last: dict[str, dict] = {}
    count: dict[str, int] = defaultdict(int)
    truck_partition: dict[str, int] = {}
    seen = 0
    deadline = time.monotonic() + 60
    while seen < produced and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 1.0):
            if msg.error():
                raise KafkaException(msg.error())
            key = msg.key().decode()
            if truck_partition.setdefault(key, msg.partition()) != msg.partition():
                print(f"ERROR: {key} appeared in two partitions", file=sys.stderr)
                return 1
            last[key] = json.loads(msg.value())
            count[key] += 1
            seen += 1
    consumer.close()
    print(f"consumed {seen} positions; {len(last)} trucks, each in exactly one partition")
    for key in sorted(last, key=lambda k: int(k.split('-')[1]))[:5]:
        print(f"  {key}: {count[key]} reports, last at lat {last[key]['lat']:.4f} lon {last[key]['lon']:.4f}")
    if seen != produced:
        print(f"ERROR: consumed {seen} of {produced}", file=sys.stderr)
        return 1
    print("demo OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
