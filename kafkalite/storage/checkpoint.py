"""Kafka's small text checkpoint files, written atomically.

Both kinds share one layout (Kafka's ``CheckpointFile``)::

    0                      <- version
    N                      <- number of entries
    <entry>                <- N lines, fields separated by one space

* offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``; one per log dir): entries ``topic partition offset``;
* ``leader-epoch-checkpoint`` (one per partition dir): entries ``epoch startOffset``.

Writes go to ``<file>.tmp``, are fsynced, then renamed over the file and the directory is fsynced,
so a crash leaves either the old or the new content, never a mix.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable

log = logging.getLogger(__name__)

VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CheckpointError(ValueError):
    """A checkpoint file exists but does not parse; callers fall back to recovery."""


def fsync_dir(path: str) -> None:
    """Make a rename or file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_lines(path: str, entries: Iterable[str], *, sync: bool = True) -> None:
    """Atomically replace ``path`` with the version/count/entries layout."""
    entries = list(entries)
    text = f"{VERSION}\n{len(entries)}\n" + "".join(e + "\n" for e in entries)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


def read_lines(path: str, fields: int) -> list[list[str]] | None:
    """Entries of ``path`` split into ``fields`` parts; None if the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 2:
        raise CheckpointError(f"{path}: shorter than its version and count lines")
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad entry count {lines[1]!r}") from None
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: says {count} entries but has {len(body)}")
    out = []
    for line in body:
        parts = line.split(" ")
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        out.append(parts)
    return out


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    """Write ``topic partition offset`` entries (sorted, so the file is stable)."""
    write_lines(path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """Read an offset checkpoint; a missing file is empty. Raises CheckpointError if malformed."""
    rows = read_lines(path, 3)
    if rows is None:
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in rows}
    except ValueError:
        raise CheckpointError(f"{path}: non-integer partition or offset") from None


def write_epochs(path: str, entries: list[tuple[int, int]], *, sync: bool = True) -> None:
    write_lines(path, (f"{e} {o}" for e, o in entries), sync=sync)


def read_epochs(path: str) -> list[tuple[int, int]] | None:
    """Read a leader-epoch checkpoint; None if missing. Raises CheckpointError if malformed."""
    rows = read_lines(path, 2)
    if rows is None:
        return None
    try:
        return [(int(e), int(o)) for e, o in rows]
    except ValueError:
        raise CheckpointError(f"{path}: non-integer epoch or offset") from None
