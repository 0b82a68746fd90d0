"""The ``_schemas`` topic's record formats (Confluent's): JSON keys and values, pure.

Keys carry ``keytype`` and a ``magic`` (1 for SCHEMA, 0 otherwise), in Confluent's field order::

    {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    {"keytype":"CONFIG","subject":"s"|null,"magic":0}        null subject = the global config
    {"keytype":"MODE","subject":"s"|null,"magic":0}
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    {"keytype":"NOOP","magic":0}

Values: SCHEMA ``{"subject","version","id","schemaType"?,"references"?,"schema","deleted"}``
(``schemaType`` omitted for AVRO, ``references`` when empty); CONFIG ``{"compatibilityLevel"}``
(+ ``normalize`` when set); MODE ``{"mode"}``; DELETE_SUBJECT ``{"subject","version"}`` (every
version up to it is deleted). A null value is a tombstone: a permanently deleted version, or a
removed subject config/mode. Compaction keeps the latest record per key, which is the state.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, NOOP = "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, NOOP)


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype == SCHEMA:
            doc: dict[str, Any] = {"keytype": SCHEMA, "subject": self.subject, "version": self.version, "magic": 1}
        elif self.keytype == NOOP:
            doc = {"keytype": NOOP, "magic": 0}
        else:
            doc = {"keytype": self.keytype, "subject": self.subject, "magic": 0}
        return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Record:
    """One write to ``_schemas``: a key and a JSON value (None = tombstone)."""

    key: Key
    value: dict[str, Any] | None

    def encode(self) -> tuple[bytes, bytes | None]:
        value = None if self.value is None else json.dumps(self.value, separators=(",", ":")).encode()
        return self.key.encode(), value


class RecordError(ValueError):
    """A record of ``_schemas`` this registry cannot read (skipped with a warning on replay)."""


def decode_key(data: bytes | None) -> Key:
    if not data:
        raise RecordError("record without a key")
    try:
        doc = json.loads(bytes(data))
    except ValueError as exc:
        raise RecordError(f"key is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("keytype") not in KEY_TYPES:
        raise RecordError(f"unknown key {doc!r}")
    keytype = doc["keytype"]
    subject = doc.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise RecordError(f"bad subject in key {doc!r}")
    if keytype == SCHEMA:
        version = doc.get("version")
        if not isinstance(subject, str) or not isinstance(version, int):
            raise RecordError(f"bad SCHEMA key {doc!r}")
        return Key(SCHEMA, subject, version)
    if keytype == DELETE_SUBJECT and not isinstance(subject, str):
        raise RecordError(f"bad DELETE_SUBJECT key {doc!r}")
    return Key(keytype, subject if keytype != NOOP else None)


def decode_value(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        doc = json.loads(bytes(data))
    except ValueError as exc:
        raise RecordError(f"value is not JSON: {exc}") from None
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise RecordError(f"value is not an object: {doc!r}")
    return doc


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict[str, Any]], deleted: bool) -> dict[str, Any]:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    value["schema"] = schema
    value["deleted"] = deleted
    return value
