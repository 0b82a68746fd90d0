"""Transactions with confluent-kafka (librdkafka) against one broker: a transactional producer's
committed records reach read_committed consumers and its aborted ones do not (read_uncommitted
sees both), an open transaction holds read_committed consumers at its first offset, and a second
producer with the same transactional id fences the first (zombie fencing)."""
from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_for
from tests.support.topics import create_topic

pytestmark = pytest.mark.interop


def producer(bootstrap: str, txn_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                  "linger.ms": 5})
    p.init_transactions(30)
    return p


def read_all(bootstrap: str, topic: str, isolation: str, expect_at_least: int, partitions: int = 2,
             timeout: float = 30) -> list[bytes]:
    """Every value of ``topic`` a consumer with ``isolation.level`` sees until the end offsets it
    reports, waiting for at least ``expect_at_least`` (the markers reach the partitions after
    EndTxn answers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rd-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(eof) == partitions and len(got) >= expect_at_least:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            eof.discard(m.partition())
            got.append(m.value())
    finally:
        c.close()
    return got


def test_commit_and_abort_as_read_committed_and_read_uncommitted_see_them(broker: Any) -> None:
    """Transaction 1 (commit) and 2 (abort) over two partitions, then plain records: read_committed
    gets transaction 1 and the plain records, never transaction 2; read_uncommitted gets all."""
    topic = f"txn-rt-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    p = producer(broker.bootstrap, f"tx-{topic}")
    p.begin_transaction()
    for i in range(50):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, value=b"a%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"d%d" % i, partition=i % 2)
    p.commit_transaction(30)
    committed = read_all(broker.bootstrap, topic, "read_committed", 60)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(50)] + [b"d%d" % i for i in range(10)])
    uncommitted = read_all(broker.bootstrap, topic, "read_uncommitted", 90)
    assert sorted(uncommitted) == sorted([b"c%d" % i for i in range(50)] + [b"a%d" % i for i in range(30)]
                                         + [b"d%d" % i for i in range(10)])
    del p                                   # librdkafka's handle goes before the broker does


def test_open_transaction_holds_read_committed_and_zombie_is_fenced(broker: Any) -> None:
    """While producer 1's transaction is open, read_committed sees nothing of it (and a
    read_committed end offset stays below it); producer 2 with the same transactional id
    initializes, which aborts producer 1's transaction; producer 1's commit then fails as
    fenced, and read_committed sees only producer 2's committed records."""
    topic = f"txn-zombie-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    txn_id = f"tx-{topic}"
    p1 = producer(broker.bootstrap, txn_id)
    p1.begin_transaction()
    for i in range(20):
        p1.produce(topic, value=b"z%d" % i, partition=0)
    p1.flush(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"lso-{topic}",
                  "isolation.level": "read_committed"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        c.close()
    assert (low, high) == (0, 0)          # librdkafka asks ListOffsets(latest) read_committed: the LSO
    assert read_all(broker.bootstrap, topic, "read_committed", 0, partitions=1, timeout=5) == []

    p2 = producer(broker.bootstrap, txn_id)       # fences p1, aborting its transaction
    p2.begin_transaction()
    for i in range(5):
        p2.produce(topic, value=b"ok%d" % i, partition=0)
    p2.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        p1.commit_transaction(10)
    assert exc.value.args[0].fatal() or exc.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert sorted(read_all(broker.bootstrap, topic, "read_committed", 5, partitions=1)) == \
        sorted(b"ok%d" % i for i in range(5))
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted", 25, partitions=1)) == 25
    del p1, p2


def test_consume_transform_produce_with_send_offsets_on_three_brokers(cluster_factory: Any) -> None:
    """A confluent-kafka consume-transform-produce loop on a 3-broker cluster (RF 3, min ISR 2 for
    the data and both internal topics): every transaction produces the upper-cased inputs and
    commits the consumer's positions with send_offsets_to_transaction; every third transaction is
    flushed, then aborted, and the consumer rewinds to the positions of the last committed transaction. Then a
    read_committed read of the output has every input exactly once, read_uncommitted also the
    aborted copies, and the group's committed offsets reach the input's end offsets (once the last
    COMMIT marker is in __consumer_offsets: OffsetFetch below v7 does not wait for it)."""
    cluster = cluster_factory(3, {"transaction.state.log.replication.factor": "3",
                                  "transaction.state.log.min.isr": "2",
                                  "offsets.topic.replication.factor": "3"})
    src, dst, group = "ctp-in", "ctp-out", "ctp-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # librdkafka's admin waits on "the controller" if Metadata named none yet (FINDINGS.md F2)
    wait_for(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30, "Metadata to name a controller")
    for name in (src, dst):
        admin.create_topics([NewTopic(name, 3, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    feed = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    inputs = [b"rec-%03d" % i for i in range(300)]
    for i, v in enumerate(inputs):
        feed.produce(src, value=v, partition=i % 3)
    assert feed.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(src, p) for p in range(3)])
    prod = producer(cluster.bootstrap, "ctp-worker")
    done: set[bytes] = set()
    txns = aborted = 0
    last_committed = [TopicPartition(src, p, 0) for p in range(3)]
    deadline = time.monotonic() + 120
    try:
        while len(done) < len(inputs) and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(50, 1.0) if not m.error()]
            if not msgs:
                continue
            prod.begin_transaction()
            for m in msgs:
                prod.produce(dst, value=m.value().upper(), partition=m.partition())
            positions = consumer.position([TopicPartition(src, p) for p in range(3)])
            prod.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            txns += 1
            if txns % 3 == 0:
                # sent first: abort_transaction purges records still queued in the client, and
                # the read_uncommitted count below expects every aborted copy in the log
                assert prod.flush(30) == 0
                prod.abort_transaction(30)
                aborted += len(msgs)
                for tp in last_committed:
                    consumer.seek(tp)
                continue
            prod.commit_transaction(30)
            done.update(m.value() for m in msgs)
            last_committed = [TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else last.offset)
                              for tp, last in zip(positions, last_committed)]
        assert len(done) == len(inputs), f"only {len(done)} inputs processed"
        wait_for(lambda: sorted(tp.offset for tp in consumer.committed(
            [TopicPartition(src, p) for p in range(3)], 30)) == [100, 100, 100], 30, "committed offsets at the end")
    finally:
        consumer.close()
    del prod, feed
    out = read_all(cluster.bootstrap, dst, "read_committed", len(inputs), partitions=3, timeout=60)
    assert sorted(out) == sorted(v.upper() for v in inputs)
    raw = read_all(cluster.bootstrap, dst, "read_uncommitted", len(inputs) + aborted, partitions=3, timeout=60)
    assert aborted > 0 and len(raw) == len(inputs) + aborted


def test_kafka_python_and_aiokafka_transactional_producers(broker: Any) -> None:
    """kafka-python's and aiokafka's transactional producers each commit one transaction and
    abort one; confluent-kafka's and kafka-python's read_committed consumers agree: exactly the
    committed records, none of the aborted ones."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    topic = f"txn-py-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"kp-{topic}")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(10):
        kp.send(topic, value=b"kp-ok-%d" % i, partition=0)
    kp.commit_transaction()
    kp.begin_transaction()
    for i in range(10):
        kp.send(topic, value=b"kp-no-%d" % i, partition=0)
    kp.flush()
    kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"aio-{topic}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send_and_wait(topic, value=b"aio-ok-%d" % i, partition=0)
            await p.begin_transaction()
            for i in range(10):
                await p.send_and_wait(topic, value=b"aio-no-%d" % i, partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(aio())

    expected = sorted([b"kp-ok-%d" % i for i in range(10)] + [b"aio-ok-%d" % i for i in range(10)])
    assert sorted(read_all(broker.bootstrap, topic, "read_committed", 20, partitions=1)) == expected
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=5000)
    consumer.assign([KpTopicPartition(topic, 0)])
    try:
        got = sorted(m.value for m in consumer)
    finally:
        consumer.close()
    assert got == expected
    assert len(read_all(broker.bootstrap, topic, "read_uncommitted", 40, partitions=1)) == 40


def test_hanging_transaction_is_aborted_after_its_timeout(broker: Any) -> None:
    """A producer that stops in the middle of a transaction (transaction.timeout.ms 2000) holds
    read_committed consumers only until the coordinator's periodic check aborts it: then the
    read_committed end offset passes the abort marker and the records stay invisible."""
    topic = f"txn-hang-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}",
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"hang-%d" % i, partition=0)
    p.flush(30)                                  # written, never committed
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"lso-{topic}",
                  "isolation.level": "read_committed"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False) == (0, 0)
        # the abort check runs every transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s)
        wait_for(lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] == 6,
                 40, "the timed-out transaction to be aborted")
    finally:
        c.close()
    assert read_all(broker.bootstrap, topic, "read_committed", 0, partitions=1, timeout=5) == []
    del p


def test_kafkalite_client_read_committed_skips_aborted_transactions(broker: Any) -> None:
    """kafkalite's own consumer (the tools' and the Spark reader's client) in read_committed mode
    returns only committed records, with small fetches that start inside an aborted transaction
    too; read_uncommitted returns every record; control batches never show."""
    from kafkalite.client import Consumer as LiteConsumer
    from kafkalite.client import TopicPartition as LiteTopicPartition

    topic = f"txn-lite-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    p = producer(broker.bootstrap, f"tx-{topic}")
    for n, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for i in range(7):
            p.produce(topic, value=b"t%d-%d" % (n, i), partition=0)
        p.flush(30)
        p.commit_transaction(30) if commit else p.abort_transaction(30)
    del p
    wanted = sorted(b"t%d-%d" % (n, i) for n in (0, 2, 4) for i in range(7))
    wait_for(lambda: sorted(read_all(broker.bootstrap, topic, "read_committed", 21, partitions=1, timeout=5))
             == wanted, 30, "the last COMMIT marker")

    def lite(isolation: str, fetch_bytes: int) -> list[bytes]:
        c = LiteConsumer(broker.bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                         max_partition_fetch_bytes=fetch_bytes)
        c.assign([LiteTopicPartition(topic, 0)])
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                records = c.poll(500)
                if not records and got:
                    break
                got.extend(r.value for r in records)
        finally:
            c.close()
        return sorted(got)
    assert lite("read_committed", 1 << 20) == wanted
    assert lite("read_committed", 100) == wanted            # one batch per fetch
    assert len(lite("read_uncommitted", 1 << 20)) == 35


def _requests_by_version(metrics_url: str) -> dict[tuple[str, int], float]:
    """(API name, version) -> requests served, from the broker's Prometheus /metrics."""
    import re
    import urllib.request
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    out: dict[tuple[str, int], float] = {}
    for m in re.finditer(r'^kafka_network_requestmetrics_requests_total\{request="(\w+)",version="(\d+)"\} (\S+)$',
                         text, re.M):
        out[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return out


def test_librdkafka_uses_the_kafka_2_8_transaction_api_versions(cluster_factory: Any) -> None:
    """With Kafka 2.8's ranges advertised, librdkafka's transactional producer and
    send_offsets_to_transaction run on the flexible versions (InitProducerId v4 with KIP-360's
    producer id/epoch, TxnOffsetCommit v3 with the consumer's generation and member), and a
    committed transaction with offsets is visible to read_committed and to OffsetFetch."""
    cluster = cluster_factory(1, metrics=True)
    (b,) = cluster.brokers
    topic, group = "v28-out", "v28-group"
    create_topic(cluster.bootstrap, topic, 1)
    create_topic(cluster.bootstrap, "v28-in", 1)
    feed = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(3):
        feed.produce("v28-in", value=b"in%d" % i, partition=0)
    assert feed.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe(["v28-in"])
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < 3 and time.monotonic() < deadline:
        got.extend(m for m in consumer.consume(10, 1.0) if not m.error())
    assert len(got) == 3
    p = producer(cluster.bootstrap, "v28-tx")
    p.begin_transaction()
    for m in got:
        p.produce(topic, value=m.value().upper(), partition=0)
    p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    assert sorted(read_all(cluster.bootstrap, topic, "read_committed", 3, partitions=1)) == [b"IN0", b"IN1", b"IN2"]
    wait_for(lambda: [tp.offset for tp in consumer.committed([TopicPartition("v28-in", 0)], 30)] == [3], 30,
             "the transaction's offsets committed")
    consumer.close()
    served = _requests_by_version(b.metrics_url)
    for api, version in (("InitProducerId", 4), ("TxnOffsetCommit", 3)):
        assert served.get((api, version), 0) >= 1, f"{api} v{version} not used: {sorted(served)}"
    for api in ("AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"):
        assert any(n for (name, _), n in served.items() if name == api), f"{api} not served: {sorted(served)}"
    del p, feed
