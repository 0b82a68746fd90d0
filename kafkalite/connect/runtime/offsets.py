"""Source offsets: the backing stores and the per-connector reader and writer (Kafka's
``OffsetBackingStore``, ``OffsetStorageReaderImpl``, ``OffsetStorageWriter``).

A source partition's offset is stored under the key ``["<connector>", {partition}]`` with the
offset map as the value, both JSON (Kafka's internal converter: a JsonConverter without schemas),
so the offsets topic of a distributed cluster holds exactly what Kafka's workers write. Keys are
compared by their JSON value, not their bytes, so the order of a partition's fields does not
matter. A ``null`` value is a tombstone (the offset was reset).

Stores: :class:`MemoryOffsetStore` (the cache every store keeps), :class:`FileOffsetStore`
(standalone's ``offset.storage.file.filename``: a JSON document of hex-encoded key/value pairs,
rewritten atomically on each flush) and ``kafka_stores.KafkaOffsetStore`` (distributed).
"""
from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Mapping, Protocol

log = logging.getLogger(__name__)


def _canonical(data: bytes) -> bytes:
    try:
        return json.dumps(json.loads(data), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        return bytes(data)


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    return json.dumps([connector, dict(partition)], separators=(",", ":")).encode()


def parse_key(key: bytes) -> tuple[str, dict[str, Any]] | None:
    """(connector, partition) of a stored key; None for a key that is not Connect's."""
    try:
        value = json.loads(key)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict):
        return value[0], value[1]
    return None


class OffsetStore(Protocol):
    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]: ...

    def set(self, values: Mapping[bytes, bytes | None]) -> None: ...

    def keys_of(self, connector: str) -> list[bytes]: ...


class MemoryOffsetStore:
    """Offsets in memory (keys canonicalised); subclasses persist them."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._lock = threading.Lock()

    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        with self._lock:
            return {k: self._data.get(_canonical(k)) for k in keys}

    def set(self, values: Mapping[bytes, bytes | None]) -> None:
        with self._lock:
            self._apply(values)
        self._persist()

    def _apply(self, values: Mapping[bytes, bytes | None]) -> None:
        for k, v in values.items():
            if v is None:
                self._data.pop(_canonical(k), None)
            else:
                self._data[_canonical(k)] = bytes(v)

    def keys_of(self, connector: str) -> list[bytes]:
        with self._lock:
            return [k for k in self._data if (parse_key(k) or ("", {}))[0] == connector]

    def _persist(self) -> None:
        pass


class FileOffsetStore(MemoryOffsetStore):
    """Standalone's offsets file: loaded at start, rewritten (temp file + rename) at each flush."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
                self._apply({bytes.fromhex(k): bytes.fromhex(v) for k, v in doc.get("offsets", {}).items()})
            except (OSError, ValueError, AttributeError) as exc:
                raise OSError(f"cannot read the offsets file {path}: {exc}") from None

    def _persist(self) -> None:
        with self._lock:
            doc = {"version": 1, "offsets": {k.hex(): v.hex() for k, v in self._data.items()}}
        tmp = self.path + ".tmp"
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class OffsetStorageReader:
    """What a source task's context hands out: the last committed offsets of its connector."""

    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store = store
        self.connector = connector

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition]).get(_freeze(partition))

    def offsets(self, partitions: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        """Keyed by ``tuple(sorted(partition.items()))`` (Python dicts are not hashable), as the
        connector API says; :meth:`offset` is the usual entry point."""
        keys = {offset_key(self.connector, p): p for p in partitions}
        found = self.store.get(list(keys))
        out: dict[Any, dict[str, Any] | None] = {}
        for k, p in keys.items():
            raw = found.get(k)
            try:
                out[_freeze(p)] = json.loads(raw) if raw is not None else None
            except ValueError:
                log.error("unreadable offset for %s %s: %r", self.connector, p, raw[:100] if raw else raw)
                out[_freeze(p)] = None
        return out


def _freeze(partition: Mapping[str, Any]) -> Any:
    """The connector API's hashable form of a partition: its items, sorted (a value that is not
    hashable itself, a list or a map, stands as its JSON text)."""
    out = []
    for k, v in sorted(partition.items()):
        try:
            hash(v)
        except TypeError:
            v = json.dumps(v, sort_keys=True)
        out.append((k, v))
    return tuple(out)


class OffsetStorageWriter:
    """Offsets staged by a source task as its records are sent; flushed as one batch once every
    record sent before the flush began is acknowledged."""

    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store = store
        self.connector = connector
        self._staged: dict[bytes, bytes | None] = {}
        # staged as copies of the maps, keyed by their frozen partition, and serialized once per
        # flush in take() (as Kafka's writer does), not once per record sent
        self._pending: dict[Any, tuple[dict[str, Any], dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    def offset(self, partition: Mapping[str, Any] | None, offset: Mapping[str, Any] | None) -> None:
        if partition is None:
            return
        staged = (dict(partition), None if offset is None else dict(offset))
        key = _freeze(partition)
        with self._lock:
            self._pending[key] = staged

    def _serialize_pending(self) -> None:
        """Move the pending maps into ``_staged`` as bytes (under the lock)."""
        for partition, offset in self._pending.values():
            key = offset_key(self.connector, partition)
            self._staged[key] = None if offset is None else json.dumps(offset, separators=(",", ":")).encode()
        self._pending = {}

    def take(self) -> dict[bytes, bytes | None]:
        """The staged offsets, cleared (a failed flush puts them back with :meth:`restore`)."""
        with self._lock:
            self._serialize_pending()
            out, self._staged = self._staged, {}
            return out

    def restore(self, offsets: Mapping[bytes, bytes | None]) -> None:
        with self._lock:
            self._serialize_pending()
            merged = dict(offsets)
            merged.update(self._staged)
            self._staged = merged

    def flush(self, offsets: Mapping[bytes, bytes | None]) -> None:
        if offsets:
            self.store.set(offsets)
