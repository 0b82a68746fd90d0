"""The ``[{"topic":"t","partition":0},...]`` list shared by several admin/notification nodes."""
from __future__ import annotations

from typing import Any, Iterable

from zk_schema._json import req_int, req_list, req_str
from zk_schema.errors import ZkDataError


def encode_partitions(partitions: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in partitions]


def decode_partitions(znode: str, obj: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    result = []
    for entry in req_list(znode, obj, "partitions"):
        if not isinstance(entry, dict):
            raise ZkDataError(znode, f"partition entry must be an object, got {entry!r}")
        result.append((req_str(znode, entry, "topic"), req_int(znode, entry, "partition")))
    return tuple(result)
