"""Kafka's textual UUID form: URL-safe base64 of the 16 bytes, no padding (22 chars).

Used for the cluster id (``/cluster/id``) and topic ids (``/brokers/topics/<t>``). Kafka 3.x
(``Uuid.randomUuid``) re-draws ids whose text starts with '-' because command-line tools
would read them as options; we do the same so ids stay usable everywhere.
"""
from __future__ import annotations

import base64
import uuid


def encode_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    """Inverse of :func:`encode_uuid`; ``ValueError`` on anything but 22 base64url chars."""
    if len(text) != 22:
        raise ValueError(f"Kafka UUID must be 22 characters, got {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not URL-safe base64: {text!r}") from exc
    if encode_uuid(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"not a canonical Kafka UUID: {text!r}")
    return uuid.UUID(bytes=raw)


def new_kafka_uuid() -> str:
    """A random id in Kafka's text form (never the all-zero id, never a leading '-')."""
    while True:
        text = encode_uuid(uuid.uuid4())
        if not text.startswith("-"):
            return text


def new_cluster_id() -> str:
    """A fresh cluster id for ``/cluster/id``."""
    return new_kafka_uuid()


def new_topic_id() -> str:
    """A fresh topic id for ``/brokers/topics/<t>`` (KIP-516)."""
    return new_kafka_uuid()
