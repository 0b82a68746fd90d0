"""Sparse per-segment indexes: ``.index`` (offset -> file position) and ``.timeindex`` (time -> offset).

On-disk formats (big-endian, fixed-size entries, no header; the file length is entries x size)::

    .index      8 bytes/entry   relativeOffset int32 | position int32
    .timeindex 12 bytes/entry   timestamp int64      | relativeOffset int32

``relativeOffset`` is the offset minus the segment's base offset (the 20 digits in the file name).
An entry is added only after ``index.interval.bytes`` of log were appended since the previous one,
so the index stays small and a lookup ends with a short scan of batch headers.

Offset index entries are keyed by a batch's *base* offset and point at the start of that batch.
(Kafka 3.x keys them by the batch's last offset; both satisfy the only rule a lookup needs — the
batch at ``position`` starts at or before the entry's offset — and the base offset lets a fetch at a
batch boundary land on its batch without scanning.) Time index entries hold the segment's largest
timestamp so far and the last offset of the batch that carried it; they are added only when that
timestamp grows, so both columns never decrease.

Entries live in memory in ``array`` columns (binary search in C) and are written to the file in
blocks: appends buffer the encoded entries and :meth:`write_pending` writes them with one pwrite at
roll, flush, close or every 4 KiB. A crash can therefore lose index entries of unflushed data only;
those segments lie after the recovery point, whose indexes recovery rebuilds anyway. A lagging
index is still correct, only sparser.

Not thread-safe by itself: the owning :class:`~kafkalite.storage.log.PartitionLog` serialises use.
"""
from __future__ import annotations

import logging
import os
import struct
import sys
from array import array
from bisect import bisect_right

log = logging.getLogger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_PENDING_WRITE_BYTES = 4096


class CorruptIndexError(Exception):
    """The index file cannot be trusted; the segment rebuilds it from the log."""


class _IndexFile:
    """Common file handling: entries already on disk and encoded entries not yet written.

    No file descriptor is held between uses: the entries live in memory, and the file is only
    written at roll, flush, truncation and every 4 KiB of new entries, so each of those opens it
    for the one call. A replica then costs one descriptor (its log file) instead of three, which
    is what bounds the partitions a broker can hold under ``ulimit -n`` (Kafka gets the same
    from mmapped indexes whose channels it closes)."""

    entry_size = 0

    def __init__(self, path: str, max_index_bytes: int) -> None:
        self.path = path
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self.closed = False
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))   # the file exists from the start, as Kafka's
        self._persisted = 0          # entries in the file
        self._pending = bytearray()  # encoded entries after them

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.path} is closed")

    def _open(self) -> int:
        self._check_open()
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)

    def _read_file(self) -> bytes:
        fd = self._open()
        try:
            size = os.fstat(fd).st_size
            if size % self.entry_size:
                raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {self.entry_size}")
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        if len(data) != size:
            raise CorruptIndexError(f"{self.path}: short read")
        self._persisted = size // self.entry_size
        self._pending.clear()
        return data

    def write_pending(self) -> None:
        """Write buffered entries to the file (no fsync)."""
        if self._pending:
            fd = self._open()
            try:
                _pwrite_all(fd, self._pending, self._persisted * self.entry_size)
            finally:
                os.close(fd)
            self._persisted += len(self._pending) // self.entry_size
            self._pending.clear()

    def sync_handle(self) -> int:
        """A new descriptor of the file, for the caller to fsync and close (a flush does that
        outside the log's lock). Buffered entries are written first."""
        self.write_pending()
        return self._open()

    def _truncate_entries(self, n: int) -> None:
        """Keep the first ``n`` entries in the file and pending buffer."""
        if n < self._persisted:
            self._check_open()
            os.truncate(self.path, n * self.entry_size)
            self._persisted = n
            self._pending.clear()
        else:
            del self._pending[(n - self._persisted) * self.entry_size:]

    def _reset_file(self) -> None:
        self._check_open()
        os.truncate(self.path, 0)
        self._persisted = 0
        self._pending.clear()

    def close(self) -> None:
        if not self.closed:
            self.write_pending()
            self.closed = True

    def close_handle(self) -> None:
        """Forget buffered entries without writing them (the segment is deleted or its dir failed)."""
        self._pending.clear()
        self.closed = True


class OffsetIndex(_IndexFile):
    """Sparse offset index of one segment: greatest entry <= target gives where to start scanning."""

    entry_size = 8

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, max_index_bytes)
        self.base_offset = base_offset
        self.rel = array("i")
        self.pos = array("i")

    def load(self, log_size: int) -> None:
        """Read and sanity-check the file; raises CorruptIndexError (entries then cleared)."""
        try:
            data = self._read_file()
            flat = array("i")
            flat.frombytes(data)
            if sys.byteorder == "little":
                flat.byteswap()
            rel, pos = flat[0::2], flat[1::2]
            if rel and (rel[0] < 0 or pos[0] < 0):
                raise CorruptIndexError(f"{self.path}: negative first entry")
            if any(b <= a for a, b in zip(rel, rel[1:])) or any(b <= a for a, b in zip(pos, pos[1:])):
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            if pos and pos[-1] >= log_size:
                raise CorruptIndexError(f"{self.path}: entry points at {pos[-1]} beyond the log's {log_size} bytes")
            self.rel, self.pos = rel, pos
        except CorruptIndexError:
            self.reset()
            raise

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.rel = array("i")
        self.pos = array("i")
        self._reset_file()

    def __len__(self) -> int:
        return len(self.rel)

    @property
    def is_full(self) -> bool:
        return len(self.rel) >= self.max_entries

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel and (rel <= self.rel[-1] or position <= self.pos[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self.rel.append(rel)
        self.pos.append(position)
        self._pending += _OFFSET_ENTRY.pack(rel, position)
        if len(self._pending) >= _PENDING_WRITE_BYTES:
            self.write_pending()

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry <= ``offset``; (base, 0) when there is none."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel[i], self.pos[i]

    def floor_position(self, position: int) -> int:
        """The greatest indexed batch position <= ``position`` (0 when there is none)."""
        i = bisect_right(self.pos, position) - 1
        return self.pos[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove entries for batches at or after ``offset``."""
        n = bisect_right(self.rel, offset - self.base_offset - 1)
        del self.rel[n:], self.pos[n:]
        self._truncate_entries(n)

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self.rel, self.pos)]


class TimeIndex(_IndexFile):
    """Sparse time index of one segment: (largest timestamp so far, offset where it occurred)."""

    entry_size = 12

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, max_index_bytes)
        self.base_offset = base_offset
        self.ts = array("q")
        self.rel = array("i")

    def load(self) -> None:
        """Read and sanity-check the file; raises CorruptIndexError (entries then cleared)."""
        try:
            data = self._read_file()
            ts = array("q")
            rel = array("i")
            for t, r in _TIME_ENTRY.iter_unpack(data):
                ts.append(t)
                rel.append(r)
            if rel and rel[0] < 0:
                raise CorruptIndexError(f"{self.path}: negative relative offset")
            if any(b <= a for a, b in zip(ts, ts[1:])) or any(b < a for a, b in zip(rel, rel[1:])):
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            self.ts, self.rel = ts, rel
        except CorruptIndexError:
            self.reset()
            raise

    def reset(self) -> None:
        self.ts = array("q")
        self.rel = array("i")
        self._reset_file()

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def is_full(self) -> bool:
        return len(self.ts) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not self.ts:
            return None
        return self.ts[-1], self.base_offset + self.rel[-1]

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append if ``timestamp`` is above the last entry (and the index has room)."""
        if self.ts and timestamp <= self.ts[-1]:
            return False
        if not skip_full_check and self.is_full:
            return False
        rel = offset - self.base_offset
        if self.rel and rel < self.rel[-1]:
            raise ValueError(f"time index offset {offset} goes backwards")
        self.ts.append(timestamp)
        self.rel.append(rel)
        self._pending += _TIME_ENTRY.pack(timestamp, rel)
        if len(self._pending) >= _PENDING_WRITE_BYTES:
            self.write_pending()
        return True

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the entry with the greatest timestamp <= ``timestamp``."""
        i = bisect_right(self.ts, timestamp) - 1
        if i < 0:
            return None
        return self.ts[i], self.base_offset + self.rel[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is at or after ``offset``."""
        n = bisect_right(self.rel, offset - self.base_offset - 1)
        del self.ts[n:], self.rel[n:]
        self._truncate_entries(n)

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self.ts, self.rel)]


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    """pwrite until everything is written (regular files rarely write short, but may)."""
    mv = memoryview(data)
    while mv:
        n = os.pwrite(fd, mv, position)
        if n <= 0:
            raise OSError(f"pwrite wrote {n} bytes")
        mv = mv[n:]
        position += n
