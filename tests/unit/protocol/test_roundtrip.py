"""Round trips of every request, response and data struct at every version in the tables."""
from __future__ import annotations

from pathlib import Path
import pytest

from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.schema import load_tables
from protocol_samples import all_versions, sample_message

pytestmark = pytest.mark.unit

TABLES = load_tables()
PROJECT_DESCRIPTORS = Path(__file__).resolve().parents[3] / "kafkalite" / "protocol" / "descriptors"
CASES = [(spec.name, v, nulls)
         for spec in sorted(TABLES.messages.values(), key=lambda s: s.name)
         for v in all_versions(spec) for nulls in (False, True)]


def _joined(parts: list) -> bytes:
    return b"".join(parts)


@pytest.mark.parametrize("name,version,nulls", CASES)
def test_round_trip(name: str, version: int, nulls: bool) -> None:
    """decode(encode(x)) == x for a dict with every on-wire field set (or null), and the
    size prefix matches the frame length."""
    spec = TABLES.messages[name]
    body = sample_message(spec, version, nulls=nulls, seed=version + 3)
    if spec.kind == "request":
        frame = _joined(codec.encode_request(spec.api_key, version, 1234, "cid-é", body))
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        header, decoded = codec.decode_request(bytearray(frame[4:]))
        assert (header.api_key, header.api_version, header.correlation_id,
                header.client_id) == (spec.api_key, version, 1234, "cid-é")
        assert decoded == body
    elif spec.kind == "response":
        frame = _joined(codec.encode_response(spec.api_key, version, -77, body))
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        corr, decoded = codec.decode_response(spec.api_key, version, frame[4:])
        assert corr == -77
        assert decoded == body
    else:
        encoded = codec.encode_data(name, version, body)
        assert codec.decode_data(name, version, encoded) == body


def test_every_api_and_version_is_covered() -> None:
    """The parametrisation above really spans all APIs (the reference's 21 plus the project's own
    descriptors), both directions, all versions."""
    keys = {TABLES.messages[n].api_key for n, _, _ in CASES if TABLES.messages[n].kind == "request"}
    assert keys == set(codec.API_KEYS)
    assert len(codec.API_KEYS) == 21 + len(list(PROJECT_DESCRIPTORS.glob("*Request.json")))
    total = sum(s.valid[1] - s.valid[0] + 1 for s in TABLES.messages.values())
    assert len(CASES) == 2 * total


def test_missing_fields_take_descriptor_defaults(lenient_codec: None) -> None:
    """Production (non-strict) encoding: an empty dict encodes with the defaults: MaxBytes
    0x7fffffff, ReplicaId -1, IsolationLevel 0 in a Fetch v11 request; decode reports them."""
    frame = _joined(codec.encode_request(ApiKey.FETCH, 11, 1, None, {}))
    _header, body = codec.decode_request(frame[4:])
    assert body["max_bytes"] == 0x7FFFFFFF
    assert body["replica_id"] == -1
    assert body["isolation_level"] == 0
    assert body["topics"] == [] and body["rack_id"] == ""


def test_fields_absent_from_version_decode_to_defaults() -> None:
    """A Metadata v0 request reports AllowAutoTopicCreation as its default (true)."""
    frame = _joined(codec.encode_request(ApiKey.METADATA, 0, 1, "x", {"topics": []}))
    _header, body = codec.decode_request(frame[4:])
    assert body["allow_auto_topic_creation"] is True


def test_records_decode_zero_copy_into_frame() -> None:
    """The Produce records field is a memoryview into the frame: patching it patches the frame."""
    records = bytes(range(64))
    frame = bytearray(_joined(codec.encode_request(ApiKey.PRODUCE, 8, 1, "p", {
        "transactional_id": None, "acks": -1, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}))[4:])
    _header, body = codec.decode_request(frame)
    view = body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(view, memoryview) and view == records
    view[0] = 0xEE
    assert frame[frame.index(records[1:]) - 1] == 0xEE


def test_chunked_records_are_passed_by_reference() -> None:
    """A Fetch v11 response with ten 16 KiB chunks keeps each chunk as its own buffer."""
    chunks = [bytes([i]) * 16384 for i in range(10)]
    parts = codec.encode_response(ApiKey.FETCH, 11, 9, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": chunks}]}]})
    assert [p for p in parts if p in chunks] == chunks
    assert all(any(p is c for p in parts) for c in chunks)
    frame = _joined(parts)
    _corr, body = codec.decode_response(ApiKey.FETCH, 11, frame[4:])
    assert body["responses"][0]["partitions"][0]["records"] == b"".join(chunks)


def test_small_chunks_and_memoryviews_are_accepted() -> None:
    """bytes, bytearray, memoryview and a list of small chunks all encode to the same record bytes."""
    data = bytes(range(100))
    forms = [data, bytearray(data), memoryview(data), [data[:10], memoryview(data)[10:50], bytearray(data[50:])]]
    frames = set()
    for form in forms:
        frames.add(_joined(codec.encode_request(ApiKey.PRODUCE, 8, 1, "p", {
            "transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": form}]}]})))
    assert len(frames) == 1
    _h, body = codec.decode_request(frames.pop()[4:])
    assert body["topic_data"][0]["partition_data"][0]["records"] == data


def test_unknown_tags_are_skipped() -> None:
    """A flexible struct with an unknown tag (99) followed by a known one still decodes."""
    # ApiVersions v3 response body: error 0, 1 api entry (compact 2), entry tags 00,
    # throttle 0, tag section: 2 fields: tag 99 (3 bytes junk), tag 1 FinalizedFeaturesEpoch=5.
    body = (b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x03\x00" + b"\x00\x00\x00\x00"
            + b"\x02" + b"\x63\x03abc" + b"\x01\x08" + (5).to_bytes(8, "big"))
    frame = (7).to_bytes(4, "big") + body
    corr, decoded = codec.decode_response(ApiKey.API_VERSIONS, 3, frame)
    assert corr == 7
    assert decoded["finalized_features_epoch"] == 5
    assert decoded["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 3}]


def test_tagged_fields_written_only_when_not_default() -> None:
    """ApiVersions v3 with default tagged fields ends with an empty tag section (single 00)."""
    frame = _joined(codec.encode_response(ApiKey.API_VERSIONS, 3, 1, {"error_code": 0, "api_keys": [],
                                                                       "throttle_time_ms": 0}))
    assert frame[4:] == (1).to_bytes(4, "big") + b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"


def test_data_struct_round_trip_and_trailing_bytes() -> None:
    """A ConsumerProtocolSubscription v3 decodes also with trailing bytes (a newer writer)."""
    sub = {"topics": ["a", "b"], "user_data": None, "owned_partitions": [{"topic": "a", "partitions": [0, 2]}],
           "generation_id": 4, "rack_id": "r1"}
    raw = codec.encode_data("ConsumerProtocolSubscription", 3, sub)
    assert codec.decode_data("ConsumerProtocolSubscription", 3, raw + b"\x01\x02") == sub
    v0 = codec.decode_data("ConsumerProtocolSubscription", 0, raw)
    assert v0["topics"] == ["a", "b"] and v0["generation_id"] == -1
