"""Broker restarts on the same log directories: a clean SIGTERM restart keeps topics, offsets,
configs and data; a kill -9 with a few hundred MB of log measures how long recovery takes."""
from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from tests.support.wire import Wire, request
from tests.support.topics import create_topic, wait_controller, wait_leaders

CI_BULK_BYTES = int(os.environ.get("KAFKALITE_RESTART_BULK_MB", "1024")) * 1024 * 1024


def list_offsets(b: Any, topic: str, partitions: int, ts: int) -> list[int]:
    resp = request(b.bootstrap, ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
                                       for p in range(partitions)]}]})
    parts = resp["topics"][0]["partitions"]
    assert all(p["error_code"] == 0 for p in parts), parts
    return [p["offset"] for p in parts]


def read_partition(bootstrap: str, topic: str, partition: int, end: int) -> list[tuple[int, bytes | None, bytes]]:
    """(offset, key, value) of every record in [0, end) through confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, bytes | None, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def test_clean_restart_keeps_topics_offsets_configs_and_data(cluster_factory) -> None:
    """SIGTERM exits with code 0 within 5 s and the broker's ephemeral registration vanishes at
    once; after start() on the same directories the topic has its 3 partitions with this broker
    leading, ListOffsets earliest/latest are unchanged, DescribeConfigs still shows the
    retention.ms override with source 1, and every record reads back identical (offsets, keys,
    values); new records continue at the old log end offsets."""
    from confluent_kafka import Producer

    cluster = cluster_factory(1)
    b = cluster.brokers[0]
    wait_controller(b)
    topic = f"restart-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic, 3, configs={"retention.ms": "86400001"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    counts = [500, 1200, 0]
    for part, n in enumerate(counts):
        for i in range(n):
            p.produce(topic, b"value-%d-%d" % (part, i), key=b"k%d" % i, partition=part)
    assert p.flush(30) == 0
    earliest, latest = list_offsets(b, topic, 3, -2), list_offsets(b, topic, 3, -1)
    assert (earliest, latest) == ([0, 0, 0], counts)
    before = [read_partition(b.bootstrap, topic, part, n) for part, n in enumerate(counts) if n]
    del p   # no client left reconnecting to the stopped broker

    t0 = time.monotonic()
    code = b.stop()
    stop_s = time.monotonic() - t0
    assert code == 0, b.tail()
    assert stop_s < 5, f"clean shutdown took {stop_s:.1f} s"
    assert cluster.zk_get(f"/brokers/ids/{b.broker_id}") is None   # session closed, not expired
    assert "Traceback" not in b.log_path.read_text(errors="replace")

    t0 = time.monotonic()
    b.start()
    print(f"\nclean stop {stop_s:.2f} s, restart to registration {time.monotonic() - t0:.2f} s")
    wait_leaders(b, topic, 3)
    assert list_offsets(b, topic, 3, -2) == earliest
    assert list_offsets(b, topic, 3, -1) == latest
    cfg = request(b.bootstrap, ApiKey.DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms"]}],
        "include_synonyms": False, "include_documentation": False})["results"][0]
    assert cfg["error_code"] == 0
    assert [(c["name"], c["value"], c["config_source"]) for c in cfg["configs"]] == [("retention.ms", "86400001", 1)]
    after = [read_partition(b.bootstrap, topic, part, n) for part, n in enumerate(counts) if n]
    assert after == before
    p = Producer({"bootstrap.servers": b.bootstrap})
    offsets: list[int] = []
    for part in range(3):
        p.produce(topic, b"post-restart", partition=part, on_delivery=lambda err, m: offsets.append(m.offset()))
    assert p.flush(30) == 0
    assert sorted(offsets) == sorted(counts)


def write_bulk(bootstrap: str, topic: str, total_bytes: int, value_size: int = 16384) -> tuple[int, float]:
    """Produce about ``total_bytes`` of values quickly (1 MB batches); returns (records acked, seconds)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1000000,
                  "queue.buffering.max.kbytes": 262144, "acks": 1, "compression.type": "none"})
    acked = {"n": 0, "err": None}

    def done(err: Any, _m: Any) -> None:
        if err is None:
            acked["n"] += 1
        else:
            acked["err"] = err

    value = os.urandom(value_size)
    n = total_bytes // value_size
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(120) == 0
    assert acked["err"] is None, acked["err"]
    return acked["n"], time.monotonic() - t0


def loaded_line(b: Any) -> str:
    lines = re.findall(r"loaded \d+ partition log\(s\) in [\d.]+ s", b.log_path.read_text(errors="replace"))
    return lines[-1] if lines else "?"


def kill_and_measure_recovery(cluster: Any, b: Any, topic: str, partitions: int, total_bytes: int) -> dict[str, Any]:
    acked, secs = write_bulk(b.bootstrap, topic, total_bytes)
    latest = list_offsets(b, topic, partitions, -1)
    assert sum(latest) == acked
    owner = cluster.zk.exists(cluster.chroot + f"/brokers/ids/{b.broker_id}").ephemeralOwner
    b.kill()
    t0 = time.monotonic()
    b.start(timeout=180)
    registered = time.monotonic() - t0
    new_owner = cluster.zk.exists(cluster.chroot + f"/brokers/ids/{b.broker_id}").ephemeralOwner
    assert new_owner != owner
    wait_leaders(b, topic, partitions, timeout=60)
    served = time.monotonic() - t0
    assert list_offsets(b, topic, partitions, -1) == latest
    data_bytes = sum(f.stat().st_size for f in (b.dir / "data").rglob("*.log"))
    return {"acked": acked, "write_s": secs, "write_MBps": total_bytes / secs / 2**20, "registered_s": registered,
            "serving_s": served, "log_bytes": data_bytes, "loaded": loaded_line(b)}


def test_recovery_after_kill_9_with_bulk_log(cluster_factory) -> None:
    """1 GB (KAFKALITE_RESTART_BULK_MB=1024; about 12 s in all) written in 1 MB batches to 4 partitions, kill -9, then
    start() on the same directories: the broker re-registers with a new ZooKeeper session, leads
    every partition again, and ListOffsets latest equals the acknowledged record count per
    partition. Prints the recovery time (registration includes waiting out the dead session)."""
    cluster = cluster_factory(1, {"log.segment.bytes": str(64 * 1024 * 1024)})
    b = cluster.brokers[0]
    wait_controller(b)
    topic = f"bulk-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic, 4)
    r = kill_and_measure_recovery(cluster, b, topic, 4, CI_BULK_BYTES)
    print("\n" + json.dumps(r))
    assert r["log_bytes"] >= CI_BULK_BYTES
    assert r["serving_s"] < 60, r
    code = b.stop()
    assert code == 0, f"broker exited with {code}:\n{b.tail(60)}"
    shutil.rmtree(b.dir / "data")   # pytest keeps the last runs' tmp dirs: do not leave 1 GB behind
