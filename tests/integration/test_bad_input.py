"""Malformed input against a real broker: 10,000 bad frames over fresh connections, each judged
against what the Java broker does (answer with a Kafka error code, or close the connection), then
proof that the broker still serves normal clients, appended nothing it refused, and logged no
traceback."""
from __future__ import annotations

import random
import socket
import struct
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pytest

from kafkalite.errors import ErrorCode
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.records.builder import build_batch
from tests.support.wire import ConnectionClosed, Wire, request

SEED = 20240611
TOTAL_CASES = 10_000
POOL = 4
SMALL_LIMIT = 2000          # max.message.bytes of the "small" topic
ANSWER, CLOSE = "answer", "close"


def batch(values: list[bytes]) -> bytearray:
    now = int(time.time() * 1000)
    return build_batch([(now, None, v, ()) for v in values])


def produce_body(topic: str, parts: list[tuple[int, bytes]], acks: int = 1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": i, "records": r} for i, r in parts]}]}


def frame_bytes(api_key: int, version: int, corr: int, body: dict, client_id: str | None = "fuzz") -> bytes:
    return b"".join(bytes(p) for p in codec.encode_request(api_key, version, corr, client_id, body))


class Case:
    """One malformed (or deliberately wrong) frame and the outcome Kafka would give."""

    def __init__(self, category: str, data: bytes, expect: str, check: Callable[[bytes], str | None] | None = None,
                 half_close: bool = False) -> None:
        self.category, self.data, self.expect, self.check, self.half_close = category, data, expect, check, half_close


def run_case(bootstrap: str, case: Case) -> str | None:
    """None if the broker did what Kafka does, else a description of what it did instead."""
    try:
        with Wire(bootstrap, timeout=15) as w:
            try:
                w.send_raw(case.data)
                if case.half_close:
                    w.sock.shutdown(socket.SHUT_WR)
                got = w.read_frame()
            except ConnectionClosed:
                return None if case.expect in (CLOSE, "either") else "closed, expected an answer"
            except socket.timeout:
                return "neither answered nor closed within 15 s"
            if case.expect == CLOSE:
                return f"answered {len(got)} bytes, expected a close"
            return case.check(got) if case.check else None
    except OSError as exc:
        return f"socket error {exc!r}"


def response_check(api_key: int, version: int, corr: int, want: Callable[[dict], str | None] | None = None):
    def check(frame: bytes) -> str | None:
        try:
            got_corr, body = codec.decode_response(api_key, version, frame)
        except Exception as exc:  # noqa: BLE001 - any decode failure is the finding
            return f"undecodable response: {exc}"
        if got_corr != corr:
            return f"correlation id {got_corr} != {corr}"
        return want(body) if want else None
    return check


def produce_codes(expected: list[int]):
    def want(body: dict) -> str | None:
        codes = [p["error_code"] for t in body["responses"] for p in t["partition_responses"]]
        return None if codes == expected else f"produce error codes {codes}, expected {expected}"
    return want


class CaseFactory:
    def __init__(self, rng: random.Random, data_topic: str, small_topic: str) -> None:
        self.rng = rng
        self.data_topic = data_topic
        self.small_topic = small_topic
        self.corr = 0
        self.good_values: list[bytes] = []       # appended to data_topic-0 by "mixed" cases

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def valid_request(self) -> tuple[ApiKey, int, dict]:
        """A valid request that never waits (for truncation/garbling)."""
        r = self.rng
        choice = r.randrange(4)
        if choice == 0:
            return ApiKey.METADATA, r.randint(0, 8), {
                "topics": [{"name": self.data_topic}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
        if choice == 1:
            return ApiKey.LIST_OFFSETS, r.randint(1, 5), {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": self.data_topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                          "timestamp": -1}]}]}
        if choice == 2:
            return ApiKey.API_VERSIONS, r.randint(0, 3), {"client_software_name": "fuzz", "client_software_version": "1"}
        return ApiKey.PRODUCE, r.randint(3, 8), produce_body(self.small_topic, [(0, bytes(batch([b"x" * 10])))])

    # -- categories -------------------------------------------------------------------------------
    def random_bytes(self) -> Case:
        r = self.rng
        payload = r.randbytes(r.randint(0, 200))
        if r.random() < 0.5 and len(payload) >= 4:   # a served key and version, random rest
            key = r.choice([ApiKey.PRODUCE, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
                            ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.INIT_PRODUCER_ID,
                            ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_CONFIGS, ApiKey.CREATE_PARTITIONS])
            payload = struct.pack(">hh", key, r.randint(0, 3)) + payload[4:]
        return Case("random bytes", struct.pack(">i", len(payload)) + payload, "either", self._any_answer(payload))

    def _any_answer(self, payload: bytes):
        if len(payload) < 8:
            return None
        key, version, corr = struct.unpack_from(">hhi", payload)
        def check(frame: bytes) -> str | None:
            if struct.unpack_from(">i", frame)[0] != corr:
                return f"answer with correlation id {struct.unpack_from('>i', frame)[0]}, request had {corr}"
            return None
        return check

    def bad_size(self) -> Case:
        r = self.rng
        size = r.choice([-1, -2**31, -r.randint(1, 2**31 - 1), 2**31 - 1, 100 * 1024 * 1024 + 1,
                         r.randint(100 * 1024 * 1024 + 1, 2**31 - 1)])
        return Case("negative/huge size", struct.pack(">i", size) + r.randbytes(r.randint(0, 64)), CLOSE)

    def short_frame(self) -> Case:
        r = self.rng
        # fewer than the 8 header bytes, or a frame promising more than is ever sent
        if r.random() < 0.5:
            payload = r.randbytes(r.randint(0, 7))
            return Case("header shorter than 8 bytes", struct.pack(">i", len(payload)) + payload, CLOSE)
        key, version, body = self.valid_request()
        full = frame_bytes(key, version, self.next_corr(), body)
        return Case("size promises more than sent", full[:r.randint(1, len(full) - 1)], CLOSE, half_close=True)

    def unknown_key(self) -> Case:
        r = self.rng
        key = r.choice([r.randint(100, 32767), -r.randint(1, 32768), 17, 24, 25, 26, 36, 60, 71])
        payload = struct.pack(">hhih", key, r.randint(0, 5), self.next_corr(), -1) + r.randbytes(r.randint(0, 40))
        return Case("unknown/unserved API key", struct.pack(">i", len(payload)) + payload, CLOSE)

    def unsupported_version(self) -> Case:
        r = self.rng
        key, version = r.choice([(0, 0), (0, 1), (0, 2), (0, 9), (1, 3), (1, 12), (2, 0), (2, 6), (3, 9),
                                 (19, 1), (19, 5), (20, 0), (22, 2), (23, 1), (32, 0), (37, 2),
                                 (3, -1), (0, r.randint(10, 32767))])
        payload = struct.pack(">hhih", key, version, self.next_corr(), -1) + r.randbytes(r.randint(0, 40))
        return Case("unsupported version", struct.pack(">i", len(payload)) + payload, CLOSE)

    def api_versions_too_new(self) -> Case:
        r = self.rng
        corr = self.next_corr()
        version = r.randint(4, 32767)
        # a well-formed header v2 (client id, no tags); the body is never parsed, so random
        payload = struct.pack(">hhih", ApiKey.API_VERSIONS, version, corr, 4) + b"fuzz\x00" + r.randbytes(r.randint(0, 40))

        def want(body: dict) -> str | None:
            entries = [(k["api_key"], k["min_version"], k["max_version"]) for k in body["api_keys"]]
            if body["error_code"] != ErrorCode.UNSUPPORTED_VERSION or entries != [(18, 0, 3)]:
                return f"ApiVersions v{version}: {body['error_code']} {entries}"
            return None
        return Case("ApiVersions above max", struct.pack(">i", len(payload)) + payload, ANSWER,
                    response_check(ApiKey.API_VERSIONS, 0, corr, want))

    def truncated(self) -> Case:
        r = self.rng
        key, version, body = self.valid_request()
        while key == ApiKey.API_VERSIONS and version < 3:          # an empty body cannot be cut short
            key, version, body = self.valid_request()
        full = frame_bytes(key, version, self.next_corr(), body)[4:]
        header_len = 8 + 2 + len("fuzz") + (1 if codec.request_header_version(key, version) == 2 else 0)
        cut = r.randint(header_len, len(full) - 1)   # header intact, body cut short
        payload = full[:cut]
        return Case("truncated valid request", struct.pack(">i", len(payload)) + payload, CLOSE)

    def garbled(self) -> Case:
        r = self.rng
        key, version, body = self.valid_request()
        while key == ApiKey.API_VERSIONS and version < 3:          # an empty body: nothing after the header to garble
            key, version, body = self.valid_request()
        corr = self.next_corr()
        payload = bytearray(frame_bytes(key, version, corr, body)[4:])
        for _ in range(r.randint(1, 4)):
            pos = r.randrange(8, len(payload))     # keep key/version/correlation: judge the answer
            payload[pos] ^= 1 << r.randrange(8)
        return Case("garbled valid request", struct.pack(">i", len(payload)) + bytes(payload), "either",
                    response_check(key, version, corr) if key != 18 else self._any_answer(bytes(payload)))

    def crc_bad(self) -> Case:
        r = self.rng
        b = batch([b"crc-%d" % r.randrange(10**6) for _ in range(r.randint(1, 5))])
        pos = r.randrange(17, len(b))            # anywhere the CRC covers, or the CRC itself
        b[pos] ^= 1 << r.randrange(8)
        corr, version = self.next_corr(), r.randint(3, 8)
        if r.random() < 0.3:   # one good partition next to the bad one: only the bad one fails
            value = b"good-%d" % len(self.good_values)
            self.good_values.append(value)
            parts, expected = [(0, bytes(batch([value]))), (1, bytes(b))], [0, int(ErrorCode.CORRUPT_MESSAGE)]
        else:
            parts, expected = [(0, bytes(b))], [int(ErrorCode.CORRUPT_MESSAGE)]
        return Case("Produce, CRC-bad batch", frame_bytes(0, version, corr, produce_body(self.data_topic, parts)),
                    ANSWER, response_check(0, version, corr, produce_codes(expected)))

    def too_large(self) -> Case:
        r = self.rng
        corr, version = self.next_corr(), r.randint(3, 8)
        b = bytes(batch([r.randbytes(r.randint(SMALL_LIMIT, 3 * SMALL_LIMIT))]))
        return Case("Produce, batch above max.message.bytes",
                    frame_bytes(0, version, corr, produce_body(self.small_topic, [(0, b)])), ANSWER,
                    response_check(0, version, corr, produce_codes([int(ErrorCode.MESSAGE_TOO_LARGE)])))

    def unknown_partition(self) -> Case:
        r = self.rng
        corr, version = self.next_corr(), r.randint(3, 8)
        b = bytes(batch([b"nowhere"]))
        if r.random() < 0.5:
            body = produce_body(self.data_topic, [(r.choice([2, 99, 2**31 - 1, -1]), b)])
        else:
            body = produce_body(f"fuzz-missing-{r.randrange(10**9)}", [(0, b)])
        return Case("Produce, unknown topic/partition", frame_bytes(0, version, corr, body), ANSWER,
                    response_check(0, version, corr, produce_codes([int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])))

    def make(self) -> Case:
        makers = [(self.random_bytes, 20), (self.bad_size, 6), (self.short_frame, 8), (self.unknown_key, 8),
                  (self.unsupported_version, 8), (self.api_versions_too_new, 5), (self.truncated, 15),
                  (self.garbled, 15), (self.crc_bad, 8), (self.too_large, 3), (self.unknown_partition, 4)]
        fn = self.rng.choices([m for m, _ in makers], weights=[w for _, w in makers])[0]
        return fn()


@pytest.fixture(scope="module")
def topics(broker):
    suffix = uuid.uuid4().hex[:6]
    data, small = f"fuzz-data-{suffix}", f"fuzz-small-{suffix}"
    with Wire(broker.bootstrap) as w:
        deadline = time.monotonic() + 30
        no_topics = {"topics": [], "allow_auto_topic_creation": False,
                     "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
        while w.request(ApiKey.METADATA, 8, no_topics)["controller_id"] != broker.broker_id:
            assert time.monotonic() < deadline, "no controller"
            time.sleep(0.05)
        resp = w.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": data, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": small, "num_partitions": 1, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "max.message.bytes", "value": str(SMALL_LIMIT)}]}],
            "timeout_ms": 15000, "validate_only": False})
    assert [t["error_code"] for t in resp["topics"]] == [0, 0], resp
    return data, small


def latest_offsets(bootstrap: str, topic: str) -> list[int]:
    resp = request(bootstrap, ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                       for p in (0, 1)]}]})
    return [p["offset"] for p in resp["topics"][0]["partitions"]]


def test_fuzz_ten_thousand_bad_frames(broker, topics) -> None:
    """10,000 seeded malformed frames, each on a fresh connection (4 in parallel): random bytes,
    bad sizes, short headers, unknown keys, unsupported versions, ApiVersions v4+, truncated and
    bit-flipped valid requests, Produce with CRC-bad, too-large and misaddressed batches. Each gets
    Kafka's outcome: CRC -> 2, too large -> 10, unknown topic/partition -> 3, ApiVersions too new
    -> the v0 UNSUPPORTED_VERSION answer, everything unparseable -> connection closed; random and
    garbled frames may be answered (correctly correlated) or closed. Nothing refused is appended:
    afterwards the data topic holds exactly the good batches sent next to bad ones."""
    data_topic, small_topic = topics
    factory = CaseFactory(random.Random(SEED), data_topic, small_topic)
    cases = [factory.make() for _ in range(TOTAL_CASES)]
    started = time.monotonic()
    with ThreadPoolExecutor(POOL) as pool:
        outcomes = list(pool.map(lambda c: run_case(broker.bootstrap, c), cases))
    elapsed = time.monotonic() - started
    per_category = Counter(c.category for c in cases)
    failures = [(c.category, why) for c, why in zip(cases, outcomes) if why is not None]
    print(f"\n{TOTAL_CASES} cases in {elapsed:.1f} s; by category: {dict(per_category)}")
    assert broker.alive, broker.tail()
    assert not failures, f"{len(failures)} wrong outcomes, e.g. {Counter(failures).most_common(10)}"
    assert len(per_category) == 12
    assert latest_offsets(broker.bootstrap, data_topic) == [len(factory.good_values), 0]


def test_normal_clients_still_work_and_no_traceback(broker, topics) -> None:
    """After the fuzzing the broker process is alive, a confluent-kafka producer and consumer
    round-trip 200 records on a new topic, and the broker log holds no Python traceback and no
    'unexpected error' line (every bad frame was handled on a foreseen path)."""
    from confluent_kafka import Consumer, Producer

    topic = f"fuzz-after-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        p.produce(topic, b"after-%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    from confluent_kafka import TopicPartition
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"after-%d" % i for i in range(200)]
    assert broker.alive
    text = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[text.index("Traceback") - 500:text.index("Traceback") + 3000]
    assert "unexpected error" not in text
