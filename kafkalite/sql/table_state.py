"""A table's latest row per key, kept by a query across its micro-batches (Kafka Streams' KTable
source store): each micro-batch applies only the table topic's records it has not applied yet,
so its cost follows the table's changes, not its size. Pure bookkeeping over decoded rows (the
engine reads the records through Spark); no I/O here.

``GroupIndex`` is the other half of ksqlDB's KGroupedTable aggregate: which group each key's row
is in, so a changed row names the groups to aggregate again (the one it leaves and the one it
joins) and only those groups' rows are aggregated.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

Key = tuple[Any, ...]
#: a key's row before and after a micro-batch (None: no row)
Change = tuple["dict[str, Any] | None", "dict[str, Any] | None"]


class TableState:
    """``key -> row`` of a table's topic applied up to ``positions`` (partition -> the next offset
    to apply): a record below its partition's position was applied already and is skipped, so a
    range read twice (a restore that overlaps the stream) changes nothing."""

    def __init__(self, key_names: list[str], windowed: bool) -> None:
        self.key_names = key_names
        self.windowed = windowed
        self.rows: dict[Key, dict[str, Any]] = {}
        self.positions: dict[int, int] = {}
        self.reads: list[int] = []            # records handed to each apply(): what a micro-batch read

    def key_of(self, row: Mapping[str, Any]) -> Key:
        key = tuple(_hashable(row.get(k)) for k in self.key_names)
        return key + (row.get("WINDOWSTART"), row.get("WINDOWEND")) if self.windowed else key

    def apply(self, records: Iterable[Mapping[str, Any]]) -> dict[Key, Change]:
        """The records (decoded, with ROWPARTITION, ROWOFFSET and ``__tombstone``) applied in offset
        order per partition: a record replaces its key's row, a tombstone deletes it. Returns each
        changed key's row before the first and after the last of its records."""
        batch = sorted(records, key=lambda r: (r["ROWPARTITION"], r["ROWOFFSET"]))
        self.reads.append(len(batch))
        changes: dict[Key, Change] = {}
        for r in batch:
            partition, offset = r["ROWPARTITION"], r["ROWOFFSET"]
            if offset < self.positions.get(partition, 0):
                continue
            self.positions[partition] = offset + 1
            key = self.key_of(r)
            before = changes[key][0] if key in changes else self.rows.get(key)
            if r.get("__tombstone"):
                self.rows.pop(key, None)
            else:
                self.rows[key] = dict(r)
            changes[key] = (before, self.rows.get(key))
        return {k: c for k, c in changes.items() if c[0] is not None or c[1] is not None}

    def starting_offsets(self, topic: str, partitions: Iterable[int]) -> str:
        """The kafkalite source's ``startingOffsets`` JSON for what is not applied yet: each
        partition's position, ``-2`` (earliest) for a partition with nothing applied."""
        return json.dumps({topic: {str(p): self.positions.get(p, -2) for p in sorted(partitions)}})


class GroupIndex:
    """Which group of an aggregate each key's row is in, and the keys of each group."""

    def __init__(self) -> None:
        self.group_of: dict[Key, Key] = {}
        self.members: dict[Key, set[Key]] = {}

    def move(self, key: Key, group: Key | None) -> Key | None:
        """``key``'s row now in ``group`` (None: the row is gone); returns the group it left."""
        old = self.group_of.pop(key, None)
        if old is not None:
            keys = self.members[old]
            keys.discard(key)
            if not keys:
                del self.members[old]
        if group is not None:
            self.group_of[key] = group
            self.members.setdefault(group, set()).add(key)
        return old

    def keys_in(self, groups: Iterable[Key]) -> list[Key]:
        return [k for g in groups for k in sorted(self.members.get(g, ()), key=repr)]


def _hashable(v: Any) -> Any:
    """A column value usable in a dict key (ARRAY, MAP and STRUCT values come as list/dict/Row)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def group_key(values: Iterable[Any]) -> Key:
    return tuple(_hashable(v) for v in values)
