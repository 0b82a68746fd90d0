"""Records written by one client are read identically by another: the broker stores what a client
sent and serves it to any other client unchanged (keys, values, headers, CreateTime, offsets,
partitions). 5,000 gzip records per pair on a 3-partition topic."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.interop import test_interop_aiokafka as aio
from tests.interop import test_interop_confluent as ck
from tests.interop import test_interop_kafka_python as kp
from tests.interop import test_interop_kcat as kc
from tests.interop.interop_support import Rec, check_round_trip, kcat_consume, make_records

N = 5_000
PARTITIONS = 3


def produce_with(client: str, bootstrap: str, topic: str, recs: list[Rec]) -> list[int] | None:
    """Partition of each record (None for kcat, which has no delivery reports)."""
    if client == "confluent":
        return ck.produce(bootstrap, topic, recs, **{"compression.type": "gzip"})[0]
    if client == "kafka-python":
        return kp.produce(bootstrap, topic, recs, compression_type="gzip")[0]
    if client == "aiokafka":
        return asyncio.run(aio.produce(bootstrap, topic, recs, compression_type="gzip"))[0]
    headers = recs[0].headers
    assert all(r.headers == headers for r in recs), "kcat sends one header set per run"
    kc.kcat_produce(bootstrap, topic, recs, [f"{k}={v.decode()}" for k, v in headers], "compression.codec=gzip")
    return None


def consume_with(client: str, bootstrap: str, topic: str, expected: int) -> list:
    if client == "confluent":
        return ck.consume(bootstrap, topic, PARTITIONS, expected)
    if client == "kafka-python":
        return kp.consume(bootstrap, topic, PARTITIONS, expected)
    if client == "aiokafka":
        return asyncio.run(aio.consume(bootstrap, topic, PARTITIONS, expected))
    return kcat_consume(bootstrap, topic)


def records_for(producer: str, consumer: str, seed: int) -> list[Rec]:
    """The richest record set both sides can express (see each client's module for why)."""
    python_producer = producer in ("kafka-python", "aiokafka")
    # kafka-python and aiokafka refuse to send null header values and records with neither key
    # nor value; kcat's stdin framing has no empty-but-not-null value
    recs = make_records(N, seed=seed, base_ts=int(time.time() * 1000) - 600_000,
                        null_key_and_value=not python_producer, null_header_values=not python_producer,
                        empty_values=producer != "kcat",
                        banned=kc.KEY_DELIM + kc.MSG_DELIM if producer == "kcat" else b"")
    if producer == "kcat":
        # one static header set per run; librdkafka stamps CreateTime itself
        return [Rec(r.key, r.value, (("from", b"kcat"), ("run", b"%d" % seed)), 0) for r in recs]
    if consumer == "kcat":
        # kcat prints headers as text "n=v,n=v": keep them printable and comma-free
        return [Rec(r.key, r.value, (("seq", b"%d" % i), ("from", producer.encode())), r.ts)
                for i, r in enumerate(recs)]
    return recs


PAIRS = [("confluent", "kafka-python"), ("kafka-python", "aiokafka"), ("aiokafka", "kcat"),
         ("kcat", "confluent"), ("confluent", "kcat"), ("aiokafka", "confluent")]


@pytest.mark.parametrize("producer,consumer", PAIRS, ids=[f"{p}-to-{c}" for p, c in PAIRS])
def test_cross_client(broker, producer: str, consumer: str) -> None:
    """5,000 gzip records from <producer> read by <consumer>: same partitions and contiguous
    offsets, byte-identical keys/values/headers and (unless kcat produced them) equal CreateTime."""
    topic = f"x-{producer}-{consumer}"
    ck.create_topic(broker.bootstrap, topic, PARTITIONS)
    recs = records_for(producer, consumer, seed=PAIRS.index((producer, consumer)))
    where = produce_with(producer, broker.bootstrap, topic, recs)
    got = consume_with(consumer, broker.bootstrap, topic, len(recs))
    if producer == "kcat":
        got = [g.__class__(g.partition, g.offset, g.key, g.value, g.headers, 0) for g in got]
    check_round_trip(recs, where, got)
