"""Log compaction of transactional data on a real broker: a compacted topic where a committed
transaction writes keys and a later aborted one overwrites them. The cleaner discards the aborted
records, so every key keeps its committed value for read_uncommitted and read_committed readers
alike (before, the aborted value won compaction and the committed one was lost); the ABORT
marker goes after delete.retention.ms once its data is gone, the COMMIT marker of data still
present stays, and the last stable offset equals the high watermark throughout. (The producer
writes one more transaction after the abort: while the aborted batch is its last one, Kafka's
cleaner keeps that batch as an empty header for the producer's sequence, and the marker with it.)"""
from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.client import KafkaClient
from kafkalite.client import TopicPartition as LiteTopicPartition
from kafkalite.records.batch import scan_valid_prefix
from kafkalite.records.control import read_end_txn_marker
from tests.support.waiting import wait_for
from tests.support.topics import create_topic, wait_controller

CLEANER = {"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "0"}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "3000"}


def latest_values(bootstrap: str, topic: str, isolation: str) -> dict[bytes, bytes]:
    """key -> last value a consumer with ``isolation`` reads up to its end offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rd-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out: dict[bytes, bytes] = {}
    try:
        for _ in range(200):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break                               # end of partition
            out[m.key()] = m.value()
    finally:
        c.close()
    return out


def markers(bootstrap: str, topic: str) -> list[str]:
    """The COMMIT/ABORT control batches of the partition, in log order (raw Fetch)."""
    out: list[str] = []
    with KafkaClient(bootstrap) as client:
        tp = LiteTopicPartition(topic, 0)
        offset = 0
        while True:
            f = client.fetch(tp, offset, max_wait_ms=0)
            if f.error and offset < f.log_start_offset:
                offset = f.log_start_offset
                continue
            data = bytes(f.records)
            infos, _ = scan_valid_prefix(data, 0, verify_crc=True)
            infos = [i for i in infos if i.next_offset > offset]
            if not infos:
                return out
            for i in infos:
                if i.is_control and i.records_count:
                    out.append(read_end_txn_marker(data, i).control_type.name)
            offset = infos[-1].next_offset


def filler(bootstrap: str, topic: str, tag: str, n: int = 60) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1000})   # several segments
    for i in range(n):
        p.produce(topic, b"x" * 200, key=b"%s-%d" % (tag.encode(), i % 10), partition=0)
    assert p.flush(30) == 0


def test_aborted_records_never_win_compaction(cluster_factory) -> None:
    cluster = cluster_factory(1, CLEANER)
    b = cluster.brokers[0]
    topic = f"ctxn-{uuid.uuid4().hex[:6]}"
    wait_controller(b)
    create_topic(b, topic, configs=TOPIC_CONFIG)
    keys = [b"k%d" % i for i in range(20)]
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 5})
    p.init_transactions(30)
    for commit, value, txn_keys in ((True, b"committed", keys), (False, b"aborted", keys), (True, b"z", [b"z"])):
        p.begin_transaction()
        for k in txn_keys:
            p.produce(topic, value, key=k, partition=0)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    del p
    assert latest_values(b.bootstrap, topic, "read_uncommitted")[b"k0"] == b"aborted"
    filler(b.bootstrap, topic, "a")                 # the transactions' segments become inactive

    expected = {k: b"committed" for k in keys}

    def cleaned() -> bool:
        got = latest_values(b.bootstrap, topic, "read_uncommitted")
        return {k: v for k, v in got.items() if k in expected} == expected
    wait_for(cleaned, 60, "the cleaner to discard the aborted records", interval=0.5)
    got = latest_values(b.bootstrap, topic, "read_committed")
    assert {k: v for k, v in got.items() if k in expected} == expected
    assert markers(b.bootstrap, topic) == ["COMMIT", "ABORT", "COMMIT"], \
        "the ABORT marker stays in the pass that removed its data"

    filler(b.bootstrap, topic, "b")                 # dirty again: the next pass gives the marker its horizon
    wait_for(lambda: markers(b.bootstrap, topic) == ["COMMIT", "COMMIT"], 60,
             "the ABORT marker to go after delete.retention.ms", interval=0.5)
    got = latest_values(b.bootstrap, topic, "read_committed")
    assert {k: v for k, v in got.items() if k in expected} == expected
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        lso = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()
    with KafkaClient(b.bootstrap) as client:
        hw = client.fetch(LiteTopicPartition(topic, 0), 0, max_bytes=1, max_wait_ms=0).high_watermark
    assert lso == hw
