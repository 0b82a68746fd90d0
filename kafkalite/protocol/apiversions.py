"""The ApiVersions answer for a version the broker does not know (kafka-protocol.md §5.1).

Kafka does not parse such a request's body and answers in the **v0** layout with error 35
and a single ApiKeys entry (key 18, the broker's ApiVersions range), so that every client can
read it and retry with a version it finds there. Built with the generic codec at v0.
"""
from __future__ import annotations

from .api_keys import ApiKey
from .codec import encode_response

UNSUPPORTED_VERSION = 35


def unsupported_version_response(correlation_id: int, min_version: int, max_version: int) -> list:
    """Frame buffers (size first) of the v0 UNSUPPORTED_VERSION ApiVersions response."""
    body = {
        "error_code": UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": min_version,
                      "max_version": max_version}],
    }
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
