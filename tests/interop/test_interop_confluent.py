"""confluent-kafka (librdkafka 2.16) against kafkalite: 100,000 records (20,000 per codec) round
trip byte for byte through Producer -> broker -> Consumer(assign), on 3-partition topics created
with AdminClient; plus offsetsForTimes and the three acks settings."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.interop_support import (CODECS, Got, check_round_trip, crc32_partition, expected_offset_for_time,
                                           client_codec_check, make_records)

PER_CODEC = 20_000
PARTITIONS = 3


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30)
    futures[name].result(30)


def produce(bootstrap: str, topic: str, recs: list, **conf) -> tuple[list[int], list[int]]:
    """Produce ``recs`` with their timestamps and headers; returns (partition, offset) per record
    from the delivery reports, failing on any delivery error."""
    parts = [-1] * len(recs)
    offsets = [-1] * len(recs)
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **conf})

    def report(i: int):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                parts[i], offsets[i] = msg.partition(), msg.offset()
        return cb

    for i, r in enumerate(recs):
        while True:
            try:
                producer.produce(topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                                 timestamp=r.ts, on_delivery=report(i))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    assert left == 0, f"{left} messages not delivered"
    assert not errors, f"delivery errors: {errors[:3]}"
    return parts, offsets


def consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 90) -> list[Got]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"assign-only-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for m in consumer.consume(2000, 1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                ts_type, ts = m.timestamp()
                assert ts_type == TIMESTAMP_CREATE_TIME, f"timestamp type {ts_type}"
                got.append(Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts))
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip_per_codec(broker, codec: str) -> None:
    """20,000 records (keys, null keys, empty and null values, binary and null headers, explicit
    timestamps) produced with compression.type=<codec> come back identical with contiguous
    offsets; every keyed record sits in crc32(key) % 3 (librdkafka's consistent_random), the
    broker's segments hold batches of exactly that codec (lz4: see FINDINGS F1), and offsetsForTimes answers the first
    offset at or after a timestamp."""
    topic = f"ck-rt-{codec}"
    create_topic(broker.bootstrap, topic)
    base = int(time.time() * 1000) - 3_600_000 + CODECS.index(codec) * 100_000
    recs = make_records(PER_CODEC, seed=CODECS.index(codec), base_ts=base)
    parts, offsets = produce(broker.bootstrap, topic, recs, **{"compression.type": codec})
    for p in range(PARTITIONS):
        delivered = sorted(o for pp, o in zip(parts, offsets) if pp == p)
        assert delivered == list(range(len(delivered))), f"delivery-report offsets of partition {p}"
    got = consume(broker.bootstrap, topic, PARTITIONS, len(recs))
    by_part = check_round_trip(recs, parts, got, partitioner=crc32_partition(PARTITIONS))

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    try:
        for p, part_recs in by_part.items():
            probes = [part_recs[0].ts - 1, part_recs[len(part_recs) // 2].ts, part_recs[-7].ts + 1,
                      part_recs[-1].ts + 1000]
            # one partition per request: a partition may appear only once in a ListOffsets request
            answer = [consumer.offsets_for_times([TopicPartition(topic, p, ts)], timeout=10)[0] for ts in probes]
            want = [expected_offset_for_time(part_recs, ts) for ts in probes]
            # librdkafka reports "no such offset" (-1 from the broker) as OFFSET_END (-1)
            want[-1] = -1
            assert [tp.offset for tp in answer] == want, f"partition {p} probes {probes}"
    finally:
        consumer.close()
    client_codec_check(broker, topic, codec)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_acks(broker, acks: str) -> None:
    """acks=0, 1 and all each deliver 500 records without error, and all 500 can be read back
    (acks=0 gets no broker answer, so reading back is the only proof it arrived)."""
    topic = f"ck-acks-{acks}"
    create_topic(broker.bootstrap, topic, partitions=1)
    recs = make_records(500, seed=42, base_ts=int(time.time() * 1000))
    parts, offsets = produce(broker.bootstrap, topic, recs, acks=acks)
    if acks != "0":
        assert sorted(offsets) == list(range(500))
    got = consume(broker.bootstrap, topic, 1, len(recs), timeout=30)
    check_round_trip(recs, parts, got)
