"""aiokafka 0.14 against kafkalite: 100,000 records (20,000 per codec; aiokafka compresses with
cramjam, so all five codecs run) round trip through AIOKafkaProducer -> broker ->
AIOKafkaConsumer(assign), on 3-partition topics created with AIOKafkaAdminClient; plus
offsets_for_times and the three acks settings. Each test drives its own asyncio.run loop."""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.interop.interop_support import (CODECS, Got, check_round_trip, client_codec_check,
                                           expected_offset_for_time, make_records, murmur2_partition)

PER_CODEC = 20_000
PARTITIONS = 3


async def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=30000)
        errors = [t for t in resp.topic_errors if t[1] != 0]
        assert not errors, errors
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, recs: list, **conf) -> tuple[list[int], list[int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=64 * 1024, **conf)
    await producer.start()
    try:
        futures = [await producer.send(topic, value=r.value, key=r.key, headers=list(r.headers), timestamp_ms=r.ts)
                   for r in recs]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    # acks=0: aiokafka resolves each future with None (there is no broker answer)
    return [m.partition if m else -1 for m in metas], [m.offset if m else -1 for m in metas]


async def consume(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 90) -> list[Got]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                max_partition_fetch_bytes=4 * 1024 * 1024)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for tp, msgs in (await consumer.getmany(timeout_ms=500, max_records=5000)).items():
                for m in msgs:
                    assert m.timestamp_type == 0, f"timestamp type {m.timestamp_type}"
                    got.append(Got(m.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp))
        return got
    finally:
        await consumer.stop()


async def offsets_for_times(bootstrap: str, topic: str, queries: list[tuple[int, int]]) -> list:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        return [(await consumer.offsets_for_times({TopicPartition(topic, p): ts}))[TopicPartition(topic, p)]
                for p, ts in queries]
    finally:
        await consumer.stop()


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_round_trip_per_codec(broker, codec: str) -> None:
    """20,000 records with compression_type=<codec> come back identical (key, value, headers,
    CreateTime) with contiguous offsets; keyed records sit in murmur2(key) % 3; the stored
    batches use the codec; offsets_for_times finds the first offset at or after a timestamp and
    None past the last record."""
    topic = f"aio-rt-{codec}"
    base = int(time.time() * 1000) - 3_600_000 + CODECS.index(codec) * 100_000
    recs = make_records(PER_CODEC, seed=200 + CODECS.index(codec), base_ts=base, null_header_values=False,
                        null_key_and_value=False)

    async def run():
        await create_topic(broker.bootstrap, topic)
        parts, offsets = await produce(broker.bootstrap, topic, recs,
                                       compression_type=None if codec == "none" else codec)
        return parts, offsets, await consume(broker.bootstrap, topic, PARTITIONS, len(recs))

    parts, offsets, got = asyncio.run(run())
    for p in range(PARTITIONS):
        delivered = sorted(o for pp, o in zip(parts, offsets) if pp == p)
        assert delivered == list(range(len(delivered))), f"delivered offsets of partition {p}"
    by_part = check_round_trip(recs, parts, got, partitioner=murmur2_partition(PARTITIONS))
    client_codec_check(broker, topic, codec)

    queries, wants = [], []
    for p, part_recs in by_part.items():
        for ts in (part_recs[0].ts - 1, part_recs[len(part_recs) // 2].ts, part_recs[-3].ts + 1):
            queries.append((p, ts))
            want = expected_offset_for_time(part_recs, ts)
            wants.append((want, part_recs[want].ts))
        queries.append((p, part_recs[-1].ts + 1000))
        wants.append(None)
    answers = asyncio.run(offsets_for_times(broker.bootstrap, topic, queries))
    assert [None if a is None else (a.offset, a.timestamp) for a in answers] == wants


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_aiokafka_acks(broker, acks) -> None:
    """acks=0, 1 and all each send 500 records without error and all 500 read back."""
    topic = f"aio-acks-{acks}"
    recs = make_records(500, seed=9, base_ts=int(time.time() * 1000), null_header_values=False,
                        null_key_and_value=False)

    async def run():
        await create_topic(broker.bootstrap, topic, partitions=1)
        parts, offsets = await produce(broker.bootstrap, topic, recs, acks=acks)
        return parts, offsets, await consume(broker.bootstrap, topic, 1, len(recs), timeout=30)

    parts, offsets, got = asyncio.run(run())
    if acks != 0:
        assert offsets == list(range(500))
    else:
        assert parts == [-1] * 500, "acks=0 has no delivery metadata"
        parts = [0] * 500        # one partition: everything went to 0
    check_round_trip(recs, parts, got)
