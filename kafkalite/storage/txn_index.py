"""The aborted-transaction index of one segment (Kafka's ``TransactionIndex``, ``<B>.txnindex``).

A read_committed consumer needs, for the range it fetches, the aborted transactions that overlap
it: the producer id and the first offset of each, so it can drop that producer's records from
there up to the ABORT marker. The log keeps one entry per ABORT marker, in the segment that holds
the marker; Kafka's file format, entries back to back, no header (big-endian)::

    version           int16   0
    producerId        int64
    firstOffset       int64   first offset of the aborted transaction (may lie in an earlier segment)
    lastOffset        int64   offset of the ABORT marker
    lastStableOffset  int64   the partition's LSO once this transaction ended

Entries are appended in marker order (lastOffset increases), written through at once (markers are
rare: one per aborted transaction per partition) and fsynced with the segment. Kafka creates the
file only with its first entry; so does this class. A file whose size is not a multiple of 34
bytes or whose versions or order are wrong is corrupt: the loader then rebuilds it by replaying
the segment's batches (log.py).
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kafkalite.storage.index import CorruptIndexError, _pwrite_all

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size          # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    """The aborted transactions whose ABORT marker is in one segment, in memory and on disk."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.entries: list[AbortedTxn] = []

    def load(self) -> None:
        """Read the file if there is one; CorruptIndexError when it cannot be trusted."""
        self.entries = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: {len(data)} bytes is not a whole number of entries")
        last = -1
        for pos in range(0, len(data), ENTRY_SIZE):
            version, pid, first, last_offset, lso = _ENTRY.unpack_from(data, pos)
            if version != _VERSION or last_offset <= last or first > last_offset:
                raise CorruptIndexError(f"{self.path}: entry at byte {pos} is invalid or out of order")
            last = last_offset
            self.entries.append(AbortedTxn(pid, first, last_offset, lso))

    def _open(self) -> int:
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self.fd

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of an ABORT marker (written through: page cache, fsynced with the segment)."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction at {txn.last_offset} is not after "
                             f"{self.entries[-1].last_offset}")
        _pwrite_all(self._open(), txn.encode(), len(self.entries) * ENTRY_SIZE)
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (the log was cut there)."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        os.ftruncate(self._open(), keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Empty the index (recovery rebuilds it from the segment's markers)."""
        self.entries = []
        if self.fd >= 0 or os.path.exists(self.path):
            os.ftruncate(self._open(), 0)

    def collect(self, fetch_offset: int, upper_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_offset)`` and whether the search may stop here:
        an entry whose LSO reaches ``upper_offset`` proves no later marker belongs to a transaction
        that began below it (Kafka's ``TxnIndexSearchResult.isComplete``)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_offset:
                return out, True
        return out, False

    def close_handle(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    close = close_handle          # written through: nothing buffered to write at close

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path
