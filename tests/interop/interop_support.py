"""Shared pieces of the interop tier: a deterministic record set, the checks every client's round
trip must pass, and a reader of the broker's own segment files (to prove which codec a client
really used — librdkafka silently falls back to no compression when it thinks the broker cannot
take a codec, so "it came back" alone does not prove a codec works).
"""
from __future__ import annotations

import random
import struct
import subprocess
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
Headers = tuple[tuple[str, "bytes | None"], ...]


@dataclass(frozen=True)
class Rec:
    """One record as produced: what must come back unchanged."""

    key: bytes | None
    value: bytes | None
    headers: Headers
    ts: int


@dataclass(frozen=True)
class Got:
    """One record as consumed."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    ts: int

    @property
    def rec(self) -> Rec:
        return Rec(self.key, self.value, self.headers, self.ts)


def make_records(n: int, seed: int, base_ts: int, *, key_space: int = 64, null_header_values: bool = True,
                 empty_values: bool = True, banned: bytes = b"", headers: bool = True,
                 null_key_and_value: bool = True) -> list[Rec]:
    """``n`` records mixing keyed / null-key, binary / empty / null values, and 0-4 headers
    (including a repeated header name and, if allowed, a null header value). Timestamps are
    ``base_ts + i``: strictly increasing, so "first offset at or after T" has one answer.
    ``banned`` bytes never occur in keys or values (kcat's stdin delimiters). Without
    ``null_key_and_value`` (kafka-python refuses a record with neither) such a record gets an empty
    value instead."""
    rng = random.Random(seed)
    alphabet = bytes(b for b in range(256) if b not in banned)
    def blob(size: int) -> bytes:
        # a random part (all byte values) and a repetitive part, so that every codec shrinks a
        # batch (librdkafka sends a batch uncompressed when compressing does not pay off)
        rand = size // 3
        head = bytes(rng.choice(alphabet) for _ in range(rand)) if banned else rng.randbytes(rand)
        return head + (b"interop-payload-%d|" % (size % 7) * (size // 10 + 1))[:size - rand]
    out = []
    for i in range(n):
        # keys repeat (so "same key, same partition" is tested) and carry non-ASCII bytes
        key = None if i % 13 == 0 else _key(rng.randrange(key_space), banned)
        if i % 11 == 0:
            value = None
        elif empty_values and i % 29 == 0:
            value = b""
        else:
            value = blob(rng.randrange(1, 160))
        if value is None and key is None and not null_key_and_value:
            value = b""
        hdrs: Headers = ()
        if headers:
            kind = i % 4
            if kind == 1:
                hdrs = (("trace-id", b"%08x" % rng.getrandbits(32)),)
            elif kind == 2:
                hdrs = (("bin", blob(12)), ("dup", b"1"), ("dup", b"2"))
            elif kind == 3:
                hdrs = (("empty", b""),) + ((("nil", None),) if null_header_values else ()) + (("z", blob(3)),)
        out.append(Rec(key, value, hdrs, base_ts + i))
    return out


def _key(k: int, banned: bytes) -> bytes:
    tail = bytes(b for b in (0xF0 | k % 15, 0x0A, 0x00) if b not in banned)
    return b"key-%d-" % k + tail


def check_round_trip(produced: list[Rec], where: list[int] | None, got: list[Got], *,
                     check_ts: bool = True, partitioner: Callable[[bytes], int] | None = None) -> dict[int, list[Got]]:
    """The interop acceptance checks, in one place:

    * every partition's offsets run 0, 1, 2, ... with no gap or repeat;
    * the records of a partition, in offset order, are exactly the produced records sent there,
      in production order, byte for byte (key, value, headers in order) and, with ``check_ts``,
      with their CreateTime timestamps;
    * ``where`` (the partition of each produced record, from delivery reports) agrees; without it
      the consumed multiset must equal the produced one and each partition keep production order;
    * each key lives in exactly one partition, and (with ``partitioner``) in the partition the
      client's documented partitioner picks.
    Returns the consumed records by partition."""
    by_part: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        by_part[g.partition].append(g)
    for p, recs in by_part.items():
        recs.sort(key=lambda g: g.offset)
        offsets = [g.offset for g in recs]
        assert offsets == list(range(len(recs))), f"partition {p}: offsets not contiguous from 0: " \
            f"first={offsets[:5]} count={len(offsets)} max={max(offsets)}"
    assert sum(len(v) for v in by_part.values()) == len(produced), \
        f"consumed {len(got)} records, produced {len(produced)}"
    strip = (lambda r: r) if check_ts else (lambda r: Rec(r.key, r.value, r.headers, 0))
    if where is not None:
        expected: dict[int, list[Rec]] = defaultdict(list)
        for r, p in zip(produced, where, strict=True):
            expected[p].append(strip(r))
        for p in set(expected) | set(by_part):
            actual = [strip(g.rec) for g in by_part.get(p, [])]
            if actual != expected[p]:
                first = next(i for i, (a, b) in enumerate(zip(actual + [None] * len(expected[p]), expected[p] + [None] * len(actual))) if a != b)
                raise AssertionError(f"partition {p}: record at offset {first} differs:\n"
                                     f" got      {actual[first] if first < len(actual) else None}\n"
                                     f" expected {expected[p][first] if first < len(expected[p]) else None}")
    else:
        # the same multiset of records, and each partition in production order (judged on the
        # records produced exactly once: identical records are interchangeable)
        want_count = Counter(strip(r) for r in produced)
        got_count = Counter(strip(g.rec) for g in got)
        assert got_count == want_count, f"consumed records differ from produced: " \
            f"missing {list((want_count - got_count).items())[:3]}, extra {list((got_count - want_count).items())[:3]}"
        position = {strip(r): i for i, r in enumerate(produced) if want_count[strip(r)] == 1}
        for p, recs in by_part.items():
            seq = [position[strip(g.rec)] for g in recs if strip(g.rec) in position]
            bad = next((i for i in range(1, len(seq)) if seq[i] < seq[i - 1]), None)
            assert bad is None, f"partition {p}: records out of production order around position {bad}"
    key_parts: dict[bytes, set[int]] = defaultdict(set)
    for p, recs in by_part.items():
        for g in recs:
            if g.key is not None:
                key_parts[g.key].add(p)
    split = {k: v for k, v in key_parts.items() if len(v) > 1}
    assert not split, f"keys spread over several partitions: {dict(list(split.items())[:3])}"
    if partitioner is not None:
        wrong = {k: (v, partitioner(k)) for k, v in key_parts.items() if v != {partitioner(k)}}
        assert not wrong, f"keys not in the partitioner's partition: {dict(list(wrong.items())[:3])}"
    return by_part


def expected_offset_for_time(recs: list[Got], ts: int) -> int:
    """Kafka's answer: the first offset whose timestamp is >= ts (log end if none)."""
    return next((g.offset for g in recs if g.ts >= ts), len(recs))


def crc32_partition(n: int) -> Callable[[bytes], int]:
    """librdkafka's default ``consistent_random`` for keyed records: CRC32(key) % partitions."""
    return lambda key: zlib.crc32(key) % n


def murmur2_partition(n: int) -> Callable[[bytes], int]:
    """Java's (and kafka-python's / aiokafka's) default for keyed records."""
    from kafka.partitioner.default import murmur2
    return lambda key: (murmur2(key) & 0x7FFFFFFF) % n


# -- the broker's segment files --------------------------------------------------------------------
@dataclass(frozen=True)
class StoredBatch:
    partition: int
    base_offset: int
    count: int
    codec: int
    timestamp_type: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def stored_batches(broker: Any, topic: str) -> list[StoredBatch]:
    """Every batch header in the broker's segment files of ``topic``, in log order."""
    out = []
    data = Path(broker.dir) / "data"
    for pdir in sorted(data.glob(f"{topic}-*")):
        part = pdir.name[len(topic) + 1:]
        if not part.isdigit():
            continue
        for seg in sorted(pdir.glob("*.log")):
            buf = seg.read_bytes()
            pos = 0
            while pos + 61 <= len(buf):
                base, length = struct.unpack_from(">qi", buf, pos)
                attributes = struct.unpack_from(">h", buf, pos + 21)[0]
                pid, epoch, seq, count = struct.unpack_from(">qhii", buf, pos + 43)
                out.append(StoredBatch(int(part), base, count, attributes & 0x7, (attributes >> 3) & 1,
                                       pid, epoch, seq))
                pos += 12 + length
    return out


def codecs_on_disk(broker: Any, topic: str) -> dict[int, int]:
    """codec id -> number of records stored in batches of that codec."""
    counts: dict[int, int] = defaultdict(int)
    for b in stored_batches(broker, topic):
        counts[b.codec] += b.count
    return dict(counts)


# -- kcat ---------------------------------------------------------------------------------------------
def kcat(*args: str, data: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    out = subprocess.run(["kcat", *args], input=data, capture_output=True, timeout=timeout)
    return out


def parse_kcat_framed(out: bytes) -> list[Got]:
    """Parse kcat output in the :data:`KCAT_FRAMED` format: the lengths make binary keys and
    values exact (-1 means NULL); headers come from kcat's ``n=v,n=v`` rendering, so they must be
    plain text without ``,`` (kcat cannot print binary headers unambiguously)."""
    got = []
    pos = 0
    while pos < len(out):
        nl = out.index(b"\n", pos)
        fields = out[pos:nl].split(b" ", 5)
        p, o, t, klen, vlen = (int(x) for x in fields[:5])
        headers: Headers = ()
        if len(fields) > 5 and fields[5]:
            headers = tuple((n.decode(), v) for n, _, v in (h.partition(b"=") for h in fields[5].split(b",")))
        pos = nl + 1
        key = None if klen < 0 else bytes(out[pos:pos + klen])
        pos += max(klen, 0)
        value = None if vlen < 0 else bytes(out[pos:pos + vlen])
        pos += max(vlen, 0)
        assert out[pos:pos + 1] == b"\n", f"kcat framing broken at byte {pos}"
        pos += 1
        got.append(Got(p, o, key, value, headers, t))
    return got


KCAT_FRAMED = "%p %o %T %K %S %h\\n%k%s\\n"


def kcat_consume(bootstrap: str, topic: str, *args: str, timeout: float = 90) -> list[Got]:
    """All records of ``topic`` from the beginning (kcat -C -e), parsed exactly."""
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", KCAT_FRAMED, *args,
               timeout=timeout)
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    return parse_kcat_framed(out.stdout)


def chunks(seq: list[Any], n: int) -> Iterable[list[Any]]:
    size = (len(seq) + n - 1) // n
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


def client_codec_check(broker: Any, topic: str, codec: str) -> None:
    """Assert the batches on disk use ``codec``. Every client here (librdkafka's
    rdkafka_msgset_writer.c, kafka-python's and aiokafka's ``_maybe_compress``) sends a batch
    uncompressed when compressing it does not make it smaller: only a batch of a record or two can
    be like that, and only a few. librdkafka (kcat and confluent-kafka alike) turns its LZ4 feature
    on only if the broker advertises FindCoordinator (its proxy for "Kafka >= 0.10"); kafkalite
    serves it, so lz4 must arrive as lz4 (FINDINGS.md F1, resolved)."""
    want = CODEC_IDS[codec]
    batches = stored_batches(broker, topic)
    on_disk = codecs_on_disk(broker, topic)
    stray = [b for b in batches if b.codec != want]
    assert all(b.codec == 0 and b.count <= 2 for b in stray), on_disk
    assert on_disk.get(want, 0) >= 0.99 * sum(on_disk.values()), on_disk
