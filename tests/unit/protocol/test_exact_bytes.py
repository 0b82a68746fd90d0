"""Byte-exact encodings checked by hand against kafka-protocol.md (§1-§3, §5.1)."""
from __future__ import annotations

import pytest

from kafkalite.protocol import codec, primitives
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.apiversions import unsupported_version_response

pytestmark = pytest.mark.unit


def _hex(parts: list) -> str:
    return b"".join(parts).hex(" ")


def test_api_versions_v0_request() -> None:
    """Header v1: key 18, version 0, correlation 1, client id "abc"; empty body."""
    assert _hex(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "abc", {})) == \
        "00 00 00 0d 00 12 00 00 00 00 00 01 00 03 61 62 63"


def test_api_versions_v3_request_header_v2_keeps_classic_client_id() -> None:
    """Header v2: ClientId has an INT16 length, then an empty tag section; the body uses
    compact strings (length+1) and ends with its own tag section."""
    parts = codec.encode_request(ApiKey.API_VERSIONS, 3, 2, "ab", {"client_software_name": "k",
                                                                   "client_software_version": "1"})
    assert _hex(parts) == ("00 00 00 12 00 12 00 03 00 00 00 02 00 02 61 62 00"
                           " 02 6b 02 31 00")


def test_api_versions_v0_response() -> None:
    """v0 response: correlation id, ErrorCode, INT32 array count, entries of 3 INT16."""
    parts = codec.encode_response(ApiKey.API_VERSIONS, 0, 5, {"error_code": 0, "api_keys": [
        {"api_key": 0, "min_version": 0, "max_version": 8}]})
    assert _hex(parts) == "00 00 00 10 00 00 00 05 00 00 00 00 00 01 00 00 00 00 00 08"


def test_api_versions_v3_response_uses_header_v0() -> None:
    """v3 body is flexible but the header is the bare correlation id (no tag byte)."""
    parts = codec.encode_response(ApiKey.API_VERSIONS, 3, 5, {"error_code": 0, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 3}], "throttle_time_ms": 0})
    assert _hex(parts) == ("00 00 00 13 00 00 00 05 00 00 02 00 12 00 00 00 03 00"
                           " 00 00 00 00 00")


def test_flexible_response_header_v1_has_tag_byte() -> None:
    """A flexible non-ApiVersions response (Heartbeat v4) gets header v1: corr + 00."""
    assert _hex(codec.encode_response(ApiKey.HEARTBEAT, 4, 9, {"throttle_time_ms": 0, "error_code": 27})) == \
        "00 00 00 0c 00 00 00 09 00 00 00 00 00 00 1b 00"


def test_unsupported_version_answer() -> None:
    """§5.1: header v0, ErrorCode 35, one ApiKeys entry (18, min, max), nothing else."""
    assert _hex(unsupported_version_response(0x01020304, 0, 3)) == \
        "00 00 00 10 01 02 03 04 00 23 00 00 00 01 00 12 00 00 00 03"


def test_metadata_v1_request() -> None:
    """Metadata v1 with one topic "foo" and with null topics (= all topics)."""
    assert _hex(codec.encode_request(ApiKey.METADATA, 1, 7, "c", {"topics": [{"name": "foo"}]})) == \
        "00 00 00 14 00 03 00 01 00 00 00 07 00 01 63 00 00 00 01 00 03 66 6f 6f"
    assert _hex(codec.encode_request(ApiKey.METADATA, 1, 7, None, {"topics": None})) == \
        "00 00 00 0e 00 03 00 01 00 00 00 07 ff ff ff ff ff ff"


@pytest.mark.parametrize("value,encoded", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "80 01"), (300, "ac 02"), (16384, "80 80 01"),
    (2**32 - 1, "ff ff ff ff 0f"),
])
def test_unsigned_varint(value: int, encoded: str) -> None:
    """LEB128, least-significant group first (§2); decoding gives the value back."""
    raw = primitives.uvarint(value)
    assert raw.hex(" ") == encoded
    assert primitives.read_uvarint(raw, 0) == (value, len(raw))


@pytest.mark.parametrize("value,encoded", [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (2, "04"), (63, "7e"), (-64, "7f"),
    (64, "80 01"), (300, "d8 04"),
])
def test_zigzag_varint(value: int, encoded: str) -> None:
    """The zigzag table and byte examples of §2."""
    raw = primitives.zigzag_varint(value)
    assert raw.hex(" ") == encoded
    assert primitives.read_zigzag_varint(raw, 0) == (value, len(raw))


def test_header_parse_only() -> None:
    """read_request_header reports where the body starts, for v1 and v2 headers."""
    frame = b"".join(codec.encode_request(ApiKey.API_VERSIONS, 3, 2, "ab", {"client_software_name": "",
                                                                            "client_software_version": ""}))[4:]
    header = codec.read_request_header(frame)
    assert header == codec.RequestHeader(18, 3, 2, "ab", 13)
    frame = b"".join(codec.encode_request(ApiKey.METADATA, 1, 7, None, {"topics": None}))[4:]
    assert codec.read_request_header(frame).body_offset == 10
    assert codec.read_request_header(frame).client_id is None


def test_api_versions_above_max_header_is_v2() -> None:
    """An ApiVersions v99 header parses (as v2) without looking at the body."""
    frame = bytes.fromhex("0012 0063 00000005 0003 616263 00") + b"garbage"
    header = codec.read_request_header(frame)
    assert (header.api_version, header.client_id, header.body_offset) == (99, "abc", 14)
