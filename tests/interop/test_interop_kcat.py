"""kcat 1.7.1 (librdkafka 2.0.2) against kafkalite, as a subprocess: 100,000 records (20,000 per
codec) with binary keys and values, null keys and null values (-Z), and headers (-H, which kcat
applies to every record of a run) go in with kcat -P and come back with kcat -C, parsed by length
so binary bytes compare exactly; plus kcat -Q / -o s@ts (ListOffsets by timestamp) and acks.

kcat has no admin API: its 3-partition topics are created with CreateTopics (tests/support/topics.py).
kcat cannot set record timestamps, so the CreateTime check here is "stamped by librdkafka during
the produce run, non-decreasing per partition"; kcat *reading* producer-set timestamps exactly is
covered in test_interop_cross_client.py."""
from __future__ import annotations

import time

import pytest

from tests.interop.interop_support import (CODECS, check_round_trip, crc32_partition, expected_offset_for_time,
                                           kcat, kcat_consume, client_codec_check, make_records)
from tests.support.topics import create_topic

PER_CODEC = 20_000
PARTITIONS = 3
KEY_DELIM, MSG_DELIM = b"\x1f", b"\x1e"


def kcat_produce(bootstrap: str, topic: str, recs: list, headers: list[str], *conf: str) -> None:
    """One kcat -P run: key<US>value<RS> per record; an empty key or value is sent as NULL (-Z)."""
    data = b"".join((r.key or b"") + KEY_DELIM + (r.value or b"") + MSG_DELIM for r in recs)
    args = ["-b", bootstrap, "-P", "-t", topic, "-K", "\\x1f", "-D", "\\x1e", "-Z"]
    for h in headers:
        args += ["-H", h]
    for c in conf:
        args += ["-X", c]
    out = kcat(*args, data=data, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert b"ERROR" not in out.stderr, out.stderr.decode(errors="replace")[-2000:]


def kcat_records(n: int, seed: int, headers: tuple) -> list:
    # kcat's stdin framing cannot express an empty-but-not-null key or value, nor per-record headers
    recs = make_records(n, seed=seed, base_ts=0, empty_values=False, headers=False, banned=KEY_DELIM + MSG_DELIM)
    return [type(r)(r.key, r.value, headers, 0) for r in recs]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_round_trip_per_codec(broker, codec: str) -> None:
    """20,000 records sent by kcat -P -X compression.codec=<codec> come back from kcat -C identical
    (binary key/value, NULL key, NULL value, the -H headers incl. a value containing '=') with
    contiguous offsets from 0, each key in crc32(key) % 3, CreateTime stamps inside the produce run;
    the stored batches use the codec (lz4: FINDINGS F1); kcat -Q and kcat -o s@<ts> find the first
    offset at or after a timestamp."""
    topic = f"kcat-rt-{codec}"
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    headers = (("src", b"kcat"), ("codec", codec.encode()), ("eq", b"a=b"))
    recs = kcat_records(PER_CODEC, 300 + CODECS.index(codec), headers)
    before = int(time.time() * 1000)
    kcat_produce(broker.bootstrap, topic, recs, [f"{n}={v.decode()}" for n, v in headers],
                 f"compression.codec={codec}", "linger.ms=20")
    after = int(time.time() * 1000)
    got = kcat_consume(broker.bootstrap, topic)
    by_part = check_round_trip(recs, None, [g.__class__(g.partition, g.offset, g.key, g.value, g.headers, 0)
                                            for g in got], partitioner=crc32_partition(PARTITIONS))
    stamped = {g.partition: [] for g in got}
    for g in sorted(got, key=lambda g: (g.partition, g.offset)):
        stamped[g.partition].append(g)
    for p, recs_p in stamped.items():
        ts = [g.ts for g in recs_p]
        assert before - 1000 <= ts[0] and ts[-1] <= after + 1000, f"partition {p}: CreateTime outside the run"
        assert ts == sorted(ts), f"partition {p}: CreateTime goes backwards"
        assert len(by_part[p]) == len(recs_p)

    # ListOffsets by timestamp, two ways: -Q (offsetsForTimes) and consuming from s@<ts>
    for p, recs_p in stamped.items():
        mid = recs_p[len(recs_p) // 2].ts
        want = expected_offset_for_time(recs_p, mid)
        q = kcat("-b", broker.bootstrap, "-Q", "-t", f"{topic}:{p}:{mid}")
        assert q.returncode == 0 and q.stdout.decode().split() == [topic, f"[{p}]", "offset", str(want)], q
        c = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-p", str(p), "-o", f"s@{mid}", "-c", "1", "-f", "%o")
        assert c.returncode == 0 and c.stdout.decode() == str(want), c
        late = kcat("-b", broker.bootstrap, "-Q", "-t", f"{topic}:{p}:{recs_p[-1].ts + 1000}")
        assert late.stdout.decode().split()[-1] == "-1", late
    client_codec_check(broker, topic, codec)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_kcat_acks(broker, acks: str) -> None:
    """kcat -X acks=<0|1|all> sends 300 records without error and all 300 read back in order."""
    topic = f"kcat-acks-{acks}"
    create_topic(broker.bootstrap, topic, partitions=1)
    recs = kcat_records(300, 77, ())
    kcat_produce(broker.bootstrap, topic, recs, [], f"acks={acks}")
    got = kcat_consume(broker.bootstrap, topic)
    check_round_trip(recs, [0] * len(recs), [g.__class__(g.partition, g.offset, g.key, g.value, g.headers, 0)
                                             for g in got])
