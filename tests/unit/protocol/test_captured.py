"""Request frames captured from kcat, confluent-kafka and kafka-python decode fully."""
from __future__ import annotations

from pathlib import Path

import pytest

from kafkalite.protocol import codec
from kafkalite.records.batch import validate_batches

pytestmark = pytest.mark.unit

CAPTURED = Path(__file__).resolve().parents[2] / "data" / "captured"
FILES = sorted(CAPTURED.glob("*.bin"))
CLIENT_IDS = {"kcat-L": "rdkafka", "kcat-P": "rdkafka", "confluent": "capture-ck",
              "kafka-python": "capture-kp"}


def _parse_name(path: Path) -> tuple[str, str, int]:
    stem = path.stem
    label, _, rest = stem.rpartition("-v")
    client, _nn, api = label.rsplit("-", 2)
    return client, api, int(rest)


def test_capture_set_is_complete() -> None:
    """All four client runs are present, including a Produce from each producer."""
    names = {p.name for p in FILES}
    assert "kcat-P-03-Produce-v7.bin" in names
    assert "confluent-04-Produce-v8.bin" in names
    assert "kafka-python-06-Produce-v8.bin" in names
    assert "kafka-python-01-ApiVersions-v4.bin" in names
    assert len(FILES) >= 16


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_captured_frame_decodes(path: Path) -> None:
    """Header and body decode; api key, version and client id match the capture."""
    client, api, version = _parse_name(path)
    frame = bytearray(path.read_bytes())
    header = codec.read_request_header(frame)
    assert codec.API_KEYS[header.api_key] == api and header.api_version == version
    assert header.client_id == CLIENT_IDS[client]
    if header.api_version > codec.valid_versions(header.api_key)[1]:
        return
    body = codec.decode_request_body(header, frame)
    assert isinstance(body, dict)
    if api == "Metadata" and body["topics"]:
        assert {t["name"] for t in body["topics"]} <= {"captured-topic"}


def test_librdkafka_api_versions_v3_body() -> None:
    """librdkafka's flexible ApiVersions v3 carries its software name and version."""
    header, body = codec.decode_request(bytearray((CAPTURED / "confluent-01-ApiVersions-v3.bin").read_bytes()))
    assert header.api_version == 3
    assert body["client_software_name"] == "confluent-kafka-python"
    assert body["client_software_version"].startswith("2.")


def test_kafka_python_api_versions_v4_above_range() -> None:
    """kafka-python opens with ApiVersions v4 (above the advertised 3): the header parses."""
    header = codec.read_request_header((CAPTURED / "kafka-python-01-ApiVersions-v4.bin").read_bytes())
    assert (header.api_key, header.api_version, header.client_id) == (18, 4, "capture-kp")


@pytest.mark.parametrize("name,acks,value", [
    ("kcat-P-03-Produce-v7.bin", -1, b"hello-kcat"),
    ("confluent-04-Produce-v8.bin", -1, b"hello-confluent"),
    ("kafka-python-06-Produce-v8.bin", -1, b"hello-kafka-python"),
])
def test_captured_produce_records_are_v2_batches(name: str, acks: int, value: bytes) -> None:
    """The Produce records field is a zero-copy view holding valid magic-2 batches with the
    message the client sent, for topic captured-topic partition 0."""
    frame = bytearray((CAPTURED / name).read_bytes())
    _header, body = codec.decode_request(frame)
    assert body["acks"] == acks and body["transactional_id"] is None
    (topic,) = body["topic_data"]
    assert topic["name"] == "captured-topic"
    (part,) = topic["partition_data"]
    assert part["index"] == 0
    records = part["records"]
    assert isinstance(records, memoryview) and records.obj is frame
    infos = validate_batches(records, max_batch_bytes=1 << 20)
    assert infos and all(i.magic == 2 for i in infos)
    assert sum(i.records_count for i in infos) == 1
    if infos[0].attributes & 0x07 == 0:   # uncompressed: the value bytes are visible
        assert value in bytes(records)
