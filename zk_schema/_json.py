"""Strict JSON helpers shared by the znode classes.

Kafka writes znode JSON with Jackson (compact, key order not significant) and reads it
leniently: unknown keys are ignored, so newer writers stay readable. We do the same, but a
missing or mistyped *known* field raises :class:`ZkDataError` naming the znode, because a
silently defaulted leader or ISR would corrupt cluster state.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

from zk_schema.errors import ZkDataError


def dumps(obj: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON, the shape Jackson produces."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads_object(znode: str, data: bytes | None) -> dict[str, Any]:
    """Parse ``data`` as a JSON object or raise :class:`ZkDataError`."""
    if data is None or len(data) == 0:
        raise ZkDataError(znode, "empty data")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(znode, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ZkDataError(znode, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def req_int(znode: str, obj: dict[str, Any], key: str) -> int:
    if key not in obj:
        raise ZkDataError(znode, f"missing field {key!r}")
    value = obj[key]
    if not _is_int(value):
        raise ZkDataError(znode, f"field {key!r} must be an integer, got {value!r}")
    return value


def req_str(znode: str, obj: dict[str, Any], key: str) -> str:
    if key not in obj:
        raise ZkDataError(znode, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, str):
        raise ZkDataError(znode, f"field {key!r} must be a string, got {value!r}")
    return value


def opt_str(znode: str, obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ZkDataError(znode, f"field {key!r} must be a string or null, got {value!r}")
    return value


def req_long_string(znode: str, obj: dict[str, Any], key: str) -> int:
    """A Java long that Kafka writes as a JSON *string* (timestamps, producer-id bounds)."""
    text = req_str(znode, obj, key)
    try:
        return int(text, 10)
    except ValueError:
        raise ZkDataError(znode, f"field {key!r} must be a decimal string, got {text!r}") from None


def req_version(znode: str, obj: dict[str, Any], allowed: Iterable[int]) -> int:
    version = req_int(znode, obj, "version")
    allowed = tuple(allowed)
    if version not in allowed:
        raise ZkDataError(znode, f"unsupported version {version} (supported: {allowed})")
    return version


def int_list(znode: str, value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise ZkDataError(znode, f"{what} must be a list of integers, got {value!r}")
    return list(value)


def req_object(znode: str, obj: dict[str, Any], key: str) -> dict[str, Any]:
    if key not in obj:
        raise ZkDataError(znode, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, dict):
        raise ZkDataError(znode, f"field {key!r} must be an object, got {value!r}")
    return value


def req_list(znode: str, obj: dict[str, Any], key: str) -> list[Any]:
    if key not in obj:
        raise ZkDataError(znode, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, list):
        raise ZkDataError(znode, f"field {key!r} must be a list, got {value!r}")
    return value


def partition_key(znode: str, key: str) -> int:
    """Partition numbers are JSON object keys, i.e. decimal strings."""
    if not re.fullmatch(r"0|[1-9][0-9]*", key):
        raise ZkDataError(znode, f"partition key must be a non-negative decimal, got {key!r}")
    return int(key)
