"""Cross-checks against independent codecs: aiokafka's hand-written structs and kafka-python 3.

Method: encode a populated body with our codec, let the other library decode it with its own
layout and re-encode; the bytes must come back identical (a misplaced, missing or wrongly
typed field would desynchronise the parse). A few messages are also built *by* the other
library and decoded by ours with value checks.
"""
from __future__ import annotations

import importlib
import pkgutil

import pytest

from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.schema import load_tables
from protocol_samples import sample_message

pytestmark = pytest.mark.unit

TABLES = load_tables()
# kafka-protocol.md: aiokafka declares CurrentLeaderEpoch as int64 in ListOffsets v4/v5
# requests (the descriptors and kafka-python say int32); it never sends those versions.
AIOKAFKA_KNOWN_WRONG = {("request", 2, 4), ("request", 2, 5)}


def _our_body(kind: str, api_key: int, version: int, body: dict) -> bytes:
    if kind == "request":
        frame = b"".join(codec.encode_request(api_key, version, 1, "c", body))[4:]
        return frame[codec.read_request_header(frame).body_offset:]
    frame = b"".join(codec.encode_response(api_key, version, 1, body))[4:]
    return frame[codec.response_header_version(api_key, version) * 1 + 4:]


def _aiokafka_classes() -> list[tuple[str, int, int, type]]:
    api = pytest.importorskip("aiokafka.protocol.api")
    import aiokafka.protocol as pkg
    found = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"aiokafka.protocol.{info.name}")
        for obj in vars(mod).values():
            if not isinstance(obj, type) or not hasattr(obj, "SCHEMA"):
                continue
            if issubclass(obj, api.RequestStruct):
                kind = "request"
            elif issubclass(obj, api.Response):
                kind = "response"
            else:
                continue
            key, ver = getattr(obj, "API_KEY", None), getattr(obj, "API_VERSION", None)
            if isinstance(key, int) and isinstance(ver, int):
                found[(kind, key, ver)] = obj
    return [(k, a, v, cls) for (k, a, v), cls in sorted(found.items(), key=lambda i: i[0])]


def _spec_for(kind: str, api_key: int):
    return (TABLES.requests if kind == "request" else TABLES.responses).get(api_key)


def test_aiokafka_parses_and_reencodes_our_bytes() -> None:
    """For every request/response version aiokafka defines that our tables hold (non-flexible),
    aiokafka decodes our encoding and re-encodes the identical bytes."""
    checked = 0
    for kind, api_key, version, cls in _aiokafka_classes():
        spec = _spec_for(kind, api_key)
        if spec is None or not spec.supports(version) or spec.is_flexible(version):
            continue
        if (kind, api_key, version) in AIOKAFKA_KNOWN_WRONG:
            continue
        for nulls in (False, True):
            body = sample_message(spec, version, nulls=nulls, seed=version + 11)
            ours = _our_body(kind, api_key, version, body)
            theirs = cls.decode(ours).encode()
            assert theirs == ours, f"{cls.__name__} nulls={nulls}"
        checked += 1
    assert checked >= 100


def test_we_decode_aiokafka_produce_and_fetch() -> None:
    """Messages built by aiokafka decode to the expected values with our codec."""
    from aiokafka.protocol.fetch import FetchResponse_v11
    from aiokafka.protocol.produce import ProduceRequest_v7

    records = bytes(range(61))
    raw = ProduceRequest_v7(None, -1, 1500, [("topic-a", [(3, records)])]).encode()
    header = codec.RequestHeader(0, 7, 1, None, 0)
    body = codec.decode_request_body(header, raw)
    assert body["acks"] == -1 and body["timeout_ms"] == 1500 and body["transactional_id"] is None
    part = body["topic_data"][0]["partition_data"][0]
    assert body["topic_data"][0]["name"] == "topic-a" and part["index"] == 3
    assert bytes(part["records"]) == records

    raw = FetchResponse_v11(5, 0, 77, [("t", [(2, 0, 100, 90, 10, [(9, 80)], -1, records)])]).encode()
    _corr, body = codec.decode_response(ApiKey.FETCH, 11, b"\x00\x00\x00\x01" + raw)
    assert body["throttle_time_ms"] == 5 and body["session_id"] == 77
    p = body["responses"][0]["partitions"][0]
    assert (p["partition_index"], p["high_watermark"], p["last_stable_offset"],
            p["log_start_offset"], p["preferred_read_replica"]) == (2, 100, 90, 10, -1)
    assert p["aborted_transactions"] == [{"producer_id": 9, "first_offset": 80}]
    assert p["records"] == records


def _kafka_python_classes() -> dict[str, type]:
    pytest.importorskip("kafka.protocol.api_message")
    import kafka.protocol as pkg
    from kafka.protocol.api_message import ApiMessage

    for info in pkgutil.walk_packages(pkg.__path__, "kafka.protocol."):
        if info.name.endswith(("generate_stubs", ".old")) or ".old." in info.name:
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue
    found: dict[str, type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None:
            try:
                found[cls.name] = cls
            except Exception:  # noqa: BLE001 - abstract helpers without a schema
                continue
    return found


def test_kafka_python_parses_and_reencodes_our_bytes_including_flexible() -> None:
    """kafka-python 3's codec decodes our bodies (flexible versions too: compact types and
    tagged fields) and re-encodes identical bytes, for every shared message and version."""
    classes = _kafka_python_classes()
    checked = flexible = 0
    for name, spec in sorted(TABLES.messages.items()):
        cls = classes.get(name)
        if cls is None or spec.kind not in ("request", "response"):
            continue
        lo, hi = max(spec.valid[0], cls.min_version), min(spec.valid[1], cls.max_version)
        for version in range(lo, hi + 1):
            body = sample_message(spec, version, nulls=False, seed=version + 5)
            ours = _our_body(spec.kind, spec.api_key, version, body)
            if name == "ApiVersionsResponse":
                body["error_code"] = 0
                ours = _our_body(spec.kind, spec.api_key, version, body)
            obj = cls.decode(ours, version=version, header=False)
            flex = cls.flexible_version_q(version)
            again = cls._struct.encode(obj, version=version, compact=flex, tagged=flex)
            assert bytes(again) == ours, f"{name} v{version}"
            checked += 1
            flexible += spec.is_flexible(version)
    assert checked >= 150 and flexible >= 30


def test_we_decode_kafka_python_metadata_request() -> None:
    """A kafka-python MetadataRequest v8 (with framing and header) decodes with our codec."""
    from kafka.protocol.metadata import MetadataRequest

    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                          allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                          include_topic_authorized_operations=False, version=8)
    req.with_header(correlation_id=31, client_id="kp")  # sets the header in place
    raw = req.encode(header=True, framed=True)
    header, body = codec.decode_request(raw[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 8, 31, "kp")
    assert body["topics"] == [{"topic_id": body["topics"][0]["topic_id"], "name": "orders"}]
    assert body["allow_auto_topic_creation"] is False
    assert body["include_cluster_authorized_operations"] is True
