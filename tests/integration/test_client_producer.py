"""Producer, manual-assignment Consumer and Admin of kafkalite.client against a real broker."""
from __future__ import annotations

import uuid

import pytest

from kafkalite.client import Admin, ClientError, Consumer, NewTopic, Producer, TopicPartition
from kafkalite.client.partitioner import partition_for_key
from kafkalite.errors import ErrorCode
from kafkalite.records import iter_batches
from tests.support.waiting import wait_for


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str, partitions: int) -> list:
    with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        end = sum(c.end_offsets(c.assignment()).values())
        out: list = []
        wait_for(lambda: out.extend(c.poll(200)) or len(out) >= end, what="all records")
        return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyed_records_land_by_murmur2_and_round_trip(broker, codec):
    """Keys go where Java puts them; every record (keys, values, nulls, headers) comes back
    unchanged, in order per partition, through each compression codec."""
    topic = unique(f"keys-{codec}")
    with Admin(broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(topic, 4, 1)]) == {topic: None}
    sent = []
    with Producer(broker.bootstrap, compression_type=codec, linger_ms=5, acks="all") as p:
        futs = []
        for i in range(300):
            key = None if i % 7 == 0 else b"key-%d" % (i % 25)
            value = None if i % 11 == 0 else b"value-%d" % i
            headers = [("h", b"%d" % i)] if i % 3 == 0 else []
            futs.append((key, value, headers, p.send(topic, value, key, headers=headers)))
        for key, value, headers, f in futs:
            md = f.result(30)
            if key is not None:
                assert md.partition == partition_for_key(key, 4)
            sent.append((md.partition, md.offset, key, value, headers))
    got = read_all(broker.bootstrap, topic, 4)
    assert sorted((r.partition, r.offset, r.key, r.value, r.headers) for r in got) == sorted(sent)


def test_compression_codec_is_on_the_wire(broker):
    topic = unique("codec")
    with Producer(broker.bootstrap, compression_type="gzip", linger_ms=20) as p:
        for i in range(50):
            p.send(topic, b"x" * 200, partition=0)
        p.flush()
    with Consumer(broker.bootstrap) as c:
        f = c.client.fetch(TopicPartition(topic, 0), 0)
        codecs = {info.compression for info, _ in iter_batches(f.records)}
    assert codecs == {1}


def test_idempotent_producer_writes_sequences(broker):
    """enable_idempotence: InitProducerId gives a producer id; batches carry it with consecutive
    sequences per partition, and the broker accepts them (no OUT_OF_ORDER)."""
    topic = unique("idem")
    with Producer(broker.bootstrap, enable_idempotence=True, acks="all", batch_size=500) as p:
        assert p.producer_id >= 0
        futs = [p.send(topic, b"%05d" % i, partition=0) for i in range(200)]
        offsets = [f.result(30).offset for f in futs]
    assert offsets == list(range(200))
    with Consumer(broker.bootstrap) as c:
        f = c.client.fetch(TopicPartition(topic, 0), 0, max_bytes=10 << 20)
        infos = [info for info, _ in iter_batches(f.records)]
    assert len(infos) > 1
    assert {i.producer_id for i in infos} == {p.producer_id}
    assert [i.base_sequence for i in infos] == [i.base_offset for i in infos]


def test_null_keys_spread_sticky(broker):
    """Null keys stick to a partition per batch and move on: with small batches all partitions get data."""
    topic = unique("sticky")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])
    with Producer(broker.bootstrap, batch_size=1000, linger_ms=50) as p:
        parts = [f.result(30).partition for f in [p.send(topic, b"v" * 50) for _ in range(300)]]
    assert set(parts) == {0, 1, 2}
    # consecutive records mostly share a partition (batches, not per-record round robin)
    switches = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert switches < len(parts) / 2


def test_consumer_seek_positions_and_reset(broker):
    topic = unique("seek")
    with Producer(broker.bootstrap) as p:
        for i in range(10):
            p.send(topic, b"%d" % i, partition=0)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.position(tp) == 10
        c.seek(tp, 4)
        recs = []
        wait_for(lambda: recs.extend(c.poll(200)) or len(recs) >= 6, what="records from 4")
        assert [r.value for r in recs] == [b"%d" % i for i in range(4, 10)]
        c.seek(tp, 1000)                       # out of range: reset to latest
        assert c.poll(300) == [] and c.position(tp) == 10
        c.seek_to_beginning()
        assert c.position(tp) == 0
        assert c.offsets_for_times({tp: 0})[tp] == 0
    with Consumer(broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        with pytest.raises(ClientError) as info:
            c.poll(500)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_admin_topics_partitions_configs(broker):
    topic = unique("adm")
    with Admin(broker.bootstrap) as admin:
        res = admin.create_topics([NewTopic(topic, 2, 1, configs={"retention.ms": "12345"})])
        assert res == {topic: None}
        again = admin.create_topics([NewTopic(topic, 2, 1)])[topic]
        assert again.code == ErrorCode.TOPIC_ALREADY_EXISTS
        bad = admin.create_topics([NewTopic(unique("rf"), 1, 5)])
        assert next(iter(bad.values())).code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert topic in admin.list_topics()
        cfg = admin.describe_configs(2, topic)
        assert cfg["retention.ms"].value == "12345" and cfg["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
        assert cfg["segment.bytes"].source == "DEFAULT_CONFIG"
        assert admin.create_partitions({topic: 5}) == {topic: None}
        assert admin.client.partitions_for(topic) == [0, 1, 2, 3, 4]
        assert admin.create_partitions({topic: 3})[topic].code == ErrorCode.INVALID_PARTITIONS
        assert admin.delete_topics([topic]) == {topic: None}
        wait_for(lambda: topic not in admin.list_topics(), what="topic gone")
        with pytest.raises(ClientError):
            admin.describe_configs(2, topic)
