"""One log segment: a ``.log`` file of record batches plus its two sparse indexes.

Files of a segment whose first offset is B (20-digit zero-padded, as Kafka names them)::

    <B>.log        record batches v2 back to back, exactly as appended (see records/batch.py for the
                   61-byte header); batch i+1 starts where batch i ends; base offsets increase.
                   Nothing else: no file header, no padding, no trailer.
    <B>.index      offset index (index.py)
    <B>.timeindex  time index (index.py)
    <B>.txnindex   aborted transactions whose ABORT marker is in this segment (txn_index.py);
                   only created with its first entry, as Kafka does

A segment never rewrites bytes already written; it grows by appends and shrinks only by truncation
(follower divergence, crash recovery). Positions are int32 as in Kafka, so segment.bytes is capped
at 2 GiB - 1.

Thread-safety: a segment is used by its PartitionLog's owner thread; the only cross-thread use is
fsync of duplicated fds (see PartitionLog.flush), which touches no Python state.

The ``.log`` file may be closed while the segment is idle, to keep the process under its
descriptor limit (open_files.py); :attr:`LogSegment.fd` reopens it on the next use.
"""
from __future__ import annotations

import logging
import os
from array import array
from bisect import bisect_left
from typing import Iterator

from kafkalite.records.batch import HEADER_SIZE, BatchInfo, offset_and_length, read_header, scan_valid_prefix
from kafkalite.records.file_region import FileRegion
from kafkalite.storage.config import LogConfig
from kafkalite.storage.index import CorruptIndexError, OffsetIndex, TimeIndex, _pwrite_all
from kafkalite.storage.open_files import SEGMENT_FILES, OpenSegmentFiles, OwnerLock
from kafkalite.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

NO_TIMESTAMP = -1
HEADER_SCAN_CHUNK = 8192          # one pread covers ~index.interval.bytes of small batches
RECOVERY_CHUNK = 8 * 1024 * 1024  # CRC-checked recovery reads this much at a time
MAX_RELATIVE_OFFSET = 2**31 - 1
#: How many of the last appended batches a segment remembers the place of (16 bytes each)
TAIL_BATCHES = 64


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def iter_headers(fd: int, start: int, end: int, chunk: int = HEADER_SCAN_CHUNK) -> Iterator[BatchInfo]:
    """Batch headers in ``[start, end)`` of a log file, read in chunks, with absolute positions.

    No CRC check (the data was checked on append or by recovery). Stops silently at a batch that
    runs past ``end``. After a batch bigger than ``chunk`` the next read takes the header alone:
    a zero-copy fetch finding its range over big batches reads headers, not record payloads.
    """
    pos = start
    buf = b""
    buf_start = start
    big = False
    while end - pos >= HEADER_SIZE:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf = os.pread(fd, HEADER_SIZE if big else min(chunk, end - pos), pos)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        info = read_header(buf, rel)
        if info.size < HEADER_SIZE or pos + info.size > end:
            return
        yield info._replace(position=pos)
        pos += info.size
        big = info.size > chunk


def scan_with_crc(fd: int, start: int, end: int, min_offset: int) -> tuple[list[BatchInfo], int]:
    """CRC-checked walk of ``[start, end)``: the valid batches (absolute positions) and where they end.

    Stops at the first torn, malformed or CRC-bad batch, or one whose base offset goes backwards
    (below ``min_offset`` or the previous batch's next offset), or whose offset span does not fit.
    """
    good: list[BatchInfo] = []
    pos = start
    want = RECOVERY_CHUNK
    next_min = min_offset
    while end - pos >= HEADER_SIZE:
        n = min(max(want, RECOVERY_CHUNK), end - pos)
        chunk = os.pread(fd, n, pos)
        infos, stop = scan_valid_prefix(chunk, 0, verify_crc=True)
        bad = False
        for info in infos:
            # a cleaned batch keeps its lastOffsetDelta but may hold fewer records, even none
            if info.base_offset < next_min or not 0 <= info.records_count <= info.last_offset_delta + 1:
                bad = True
                stop = info.position
                break
            good.append(info._replace(position=pos + info.position))
            next_min = info.next_offset
        pos += stop
        if bad or stop == len(chunk):
            if bad:
                break
            want = RECOVERY_CHUNK
            continue
        # Stopped inside the chunk: a batch crossing the chunk's end is re-read whole; anything
        # else (torn at the end of the file, bad length, bad magic, bad CRC) ends the valid prefix.
        rest = len(chunk) - stop
        chunk_reaches_end = pos - stop + len(chunk) >= end
        if chunk_reaches_end:
            break
        if rest < HEADER_SIZE:
            want = RECOVERY_CHUNK
            if stop == 0:
                break
            continue
        _, size = offset_and_length(chunk, stop)
        if size >= HEADER_SIZE and size > rest and pos + size <= end:
            want = size
            continue
        break
    return good, pos


class LogSegment:
    """A ``.log`` file with its offset and time index; appends, reads, recovery and truncation."""

    #: the process's open segment files and their limit (tests substitute their own)
    files: OpenSegmentFiles = SEGMENT_FILES

    def __init__(self, directory: str, base_offset: int, config: LogConfig, now_ms: int, suffix: str = "") -> None:
        """``suffix`` names a segment that is not (yet) part of the log: ``.cleaned`` while the
        cleaner writes it, ``.swap`` while it replaces old segments (cleaner.py)."""
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix
        stem = os.path.join(directory, file_stem(base_offset))
        self.indexes_existed = (os.path.exists(stem + INDEX_SUFFIX + suffix)
                                and os.path.exists(stem + TIME_INDEX_SUFFIX + suffix))
        self.log_path = stem + LOG_SUFFIX + suffix
        self.closed = False
        #: used since the open-file ring last passed it (open_files.py: a second chance)
        self.used = True
        #: the lock of the log that adopted the segment; None while it may not be closed when idle
        self.owner_lock: OwnerLock | None = None
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.index = OffsetIndex(stem + INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
            self.time_index = TimeIndex(stem + TIME_INDEX_SUFFIX + suffix, base_offset, config.segment_index_bytes)
            self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX + suffix)
        except BaseException:
            os.close(self._fd)
            raise
        self.files.opened(self)
        #: recover() emptied the transaction index: the log rebuilds it by replaying producer state
        self.txn_index_reset = False
        self.index_interval = config.index_interval_bytes
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = NO_TIMESTAMP   # what segment.ms rolling is measured from
        self.created_ms = now_ms
        self.bytes_since_index_entry = 0
        self.truncated_on_load = 0                  # bytes cut by a recovery that load() fell back to
        self.recovered_epochs: list[tuple[int, int]] = []   # (epoch, base offset) where recovery saw it begin
        #: file positions and last offsets of the last appended batches, contiguous up to ``size``
        #: (at most TAIL_BATCHES, only while active): a reader at the end of the log (a caught-up
        #: follower or consumer: nearly every fetch at low rates) finds its batch with one header
        #: read instead of a header scan from the last index entry
        self._tail_pos = array("q")
        self._tail_last = array("q")

    # --- opening -----------------------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The ``.log`` file's descriptor, reopened if it was closed while idle; -1 once closed."""
        fd = self._fd
        if fd < 0:
            return -1 if self.closed else self._reopen()
        self.used = True
        return fd

    def _reopen(self) -> int:
        fd = os.open(self.log_path, os.O_RDWR)   # no O_CREAT: a vanished file is a disk error
        self._fd = fd
        self.used = True
        self.files.opened(self, again=True)
        return fd

    def detach_fd(self) -> int:
        """Give up the descriptor (the caller closes it); the next :attr:`fd` reopens the file."""
        fd, self._fd = self._fd, -1
        return fd

    @classmethod
    def create(cls, directory: str, base_offset: int, config: LogConfig, now_ms: int,
               suffix: str = "") -> LogSegment:
        """A new empty segment; stale files of the same name are emptied."""
        seg = cls(directory, base_offset, config, now_ms, suffix)
        if seg.size:
            os.ftruncate(seg.fd, 0)
            seg.size = 0
        seg.index.reset()
        seg.time_index.reset()
        seg.txn_index.reset()
        return seg

    @classmethod
    def load(cls, directory: str, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """Open an existing segment trusting its data; rebuilds indexes that fail their sanity check."""
        seg = cls(directory, base_offset, config, now_ms)
        try:
            if not seg.indexes_existed and seg.size:
                raise CorruptIndexError("index files are missing")
            seg.index.load(seg.size)
            seg.time_index.load()
            seg.txn_index.load()
        except CorruptIndexError as e:
            log.warning("rebuilding indexes of %s: %s", seg.log_path, e)
            seg.truncated_on_load = seg.recover()
            return seg
        if not seg._load_tail():
            log.warning("%s does not match its indexes or ends with a torn batch; recovering it", seg.log_path)
            seg.truncated_on_load = seg.recover()
        return seg

    def _load_tail(self) -> bool:
        """Find next offset and max timestamp from the last index entries plus a short header scan.

        Returns False when the file does not end on a batch boundary.
        """
        start = self.index.pos[-1] if len(self.index) else 0
        last = self.time_index.last_entry
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        pos = start
        first = True
        for info in iter_headers(self.fd, start, self.size):
            if first:
                if len(self.index) and info.base_offset != self.base_offset + self.index.rel[-1]:
                    return False        # the last index entry does not point at its batch
                if start == 0:
                    self.first_batch_timestamp = info.max_timestamp
            first = False
            self.next_offset = info.next_offset
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = info.max_timestamp, info.last_offset
            pos = info.end
        self.bytes_since_index_entry = pos - start
        if self.size and self.first_batch_timestamp == NO_TIMESTAMP:
            self.first_batch_timestamp = read_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        if last is not None and last[1] >= self.next_offset:
            return False
        return pos == self.size

    def recover(self) -> int:
        """Re-read the whole segment with CRC checks, rebuild both indexes, cut a bad tail.

        Returns the number of bytes truncated (0 when the segment was intact).
        """
        self._forget_tail()
        self.index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.txn_index_reset = True
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = NO_TIMESTAMP
        self.bytes_since_index_entry = 0
        infos, valid_end = scan_with_crc(self.fd, 0, self.size, self.base_offset)
        if infos and infos[-1].last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            # offsets that do not fit the index; keep the batches that do
            keep = [i for i in infos if i.last_offset - self.base_offset <= MAX_RELATIVE_OFFSET]
            infos, valid_end = keep, (keep[-1].end if keep else 0)
        self._index_batches(infos, 0)
        epochs: list[tuple[int, int]] = []
        for info in infos:
            if info.partition_leader_epoch > (epochs[-1][0] if epochs else -1):
                epochs.append((info.partition_leader_epoch, info.base_offset))
        self.recovered_epochs = epochs
        if infos:
            self.next_offset = infos[-1].next_offset
            self.first_batch_timestamp = infos[0].max_timestamp
        truncated = self.size - valid_end
        if truncated:
            log.warning("truncating %d invalid bytes at position %d of %s", truncated, valid_end, self.log_path)
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        return truncated

    # --- appending ---------------------------------------------------------------------------------

    def _index_batches(self, infos: list[BatchInfo], file_delta: int) -> None:
        """Per batch (never per record): track the max timestamp, add sparse index entries.

        ``file_delta`` turns a batch's buffer position into its file position.
        """
        since = self.bytes_since_index_entry
        interval = self.index_interval
        max_ts = self.max_timestamp
        max_ts_offset = self.offset_of_max_timestamp
        index = self.index
        for info in infos:
            if info.max_timestamp > max_ts:
                max_ts, max_ts_offset = info.max_timestamp, info.base_offset + info.last_offset_delta
            if since > interval and not index.is_full:
                index.append(info.base_offset, info.position + file_delta)
                self.time_index.maybe_append(max_ts, max_ts_offset)
                since = 0
            since += info.size
        self.bytes_since_index_entry = since
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_ts_offset

    def append(self, data: memoryview, infos: list[BatchInfo], buf_start: int) -> None:
        """Write ``data`` (the batches ``infos``, which sit at ``buf_start`` in their buffer) in one pwrite."""
        position = self.size
        _pwrite_all(self.fd, data, position)
        if not self.size:
            self.first_batch_timestamp = infos[0].max_timestamp
        self.size = position + len(data)
        self._index_batches(infos, position - buf_start)
        self.next_offset = infos[-1].next_offset
        self._remember_tail(infos, position - buf_start)

    def _remember_tail(self, infos: list[BatchInfo], file_delta: int) -> None:
        tail_pos, tail_last = self._tail_pos, self._tail_last
        if len(infos) >= TAIL_BATCHES:
            del tail_pos[:], tail_last[:]
            infos = infos[-(TAIL_BATCHES // 2):]
        for info in infos:
            tail_pos.append(info.position + file_delta)
            tail_last.append(info.base_offset + info.last_offset_delta)
        if len(tail_pos) > TAIL_BATCHES:
            del tail_pos[:TAIL_BATCHES // 2], tail_last[:TAIL_BATCHES // 2]

    def _forget_tail(self) -> None:
        del self._tail_pos[:], self._tail_last[:]

    def should_roll(self, incoming_bytes: int, incoming_max_ts: int, last_offset: int,
                    config: LogConfig, now_ms: int) -> bool:
        """Kafka's roll rules: size, age (segment.ms), full index, relative offset overflow."""
        if self.size == 0:
            return False
        if self.size > config.segment_bytes - incoming_bytes:
            return True
        if self.first_batch_timestamp >= 0 and incoming_max_ts >= 0:
            waited = incoming_max_ts - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        if waited > config.segment_ms:
            return True
        return (self.index.is_full or self.time_index.is_full
                or last_offset - self.base_offset > MAX_RELATIVE_OFFSET)

    def on_become_inactive(self) -> None:
        """Called at roll: record the final max timestamp and write buffered index entries."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.write_pending()
        self._forget_tail()

    def write_pending(self) -> None:
        self.index.write_pending()
        self.time_index.write_pending()

    # --- reading -----------------------------------------------------------------------------------

    def find_batch(self, offset: int) -> BatchInfo | None:
        """Header of the first batch whose last offset >= ``offset`` (index lookup + header scan)."""
        tail_last = self._tail_last
        if tail_last and offset > tail_last[0]:
            # past the first remembered batch: the batch is one of the others, or there is none
            i = bisect_left(tail_last, offset)
            if i == len(tail_last):
                return None
            position = self._tail_pos[i]
            return read_header(os.pread(self.fd, HEADER_SIZE, position), 0, position)
        _, start = self.index.lookup(offset)
        for info in iter_headers(self.fd, start, self.size):
            if info.base_offset + info.last_offset_delta >= offset:
                return info
        return None

    def position_of(self, offset: int) -> int:
        """File position of the first batch whose last offset >= ``offset``; ``size`` if none."""
        info = self.find_batch(offset)
        return self.size if info is None else info.position

    def last_whole_batch_end(self, start: int, limit: int) -> tuple[int, int]:
        """(end position, last offset) of the longest run of whole batches in ``[start, limit]``.

        Starts from the greatest indexed batch position <= ``limit`` so the scan covers at most
        one index interval of headers. Returns (start, -1) if not even one batch fits.
        """
        scan_from = max(start, self.index.floor_position(limit))
        end, last = start, -1
        for info in iter_headers(self.fd, scan_from, limit):
            end, last = info.end, info.base_offset + info.last_offset_delta
        if end == start and scan_from > start:
            # the indexed batch itself does not fit: walk from the start instead
            for info in iter_headers(self.fd, start, limit):
                end, last = info.end, info.base_offset + info.last_offset_delta
        return end, last

    def read(self, position: int, length: int) -> bytes:
        """``length`` bytes at ``position`` with one pread (the only copy: page cache -> bytes)."""
        data = os.pread(self.fd, length, position)
        if len(data) != length:
            raise OSError(f"short read of {self.log_path}: {len(data)} of {length} bytes at {position}")
        return data

    def region(self, position: int, length: int) -> FileRegion:
        """``length`` bytes at ``position`` as a :class:`FileRegion` (a duplicated descriptor, no
        read): a zero-copy Fetch sends it with ``os.sendfile`` after this segment may be gone."""
        return FileRegion(self.fd, position, length, self.log_path)

    @property
    def largest_timestamp(self) -> int:
        """Retention clock of the segment: its max timestamp, else the file's mtime (as Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        # a closed (idle) file is not reopened for this: retention asks every segment
        stat = os.fstat(self._fd) if self._fd >= 0 else os.stat(self.log_path)
        return int(stat.st_mtime * 1000)

    # --- truncation and lifecycle ------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop the batch containing ``offset`` and everything after it; returns bytes removed."""
        info = self.find_batch(offset)
        if info is None:
            return 0
        cut = info.position
        self._forget_tail()
        self.index.truncate_to(info.base_offset)
        self.time_index.truncate_to(info.base_offset)
        self.txn_index.truncate_to(info.base_offset)
        removed = self.size - cut
        os.ftruncate(self.fd, cut)
        self.size = cut
        self.next_offset = info.base_offset
        self.bytes_since_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        if cut == 0:
            self.first_batch_timestamp = NO_TIMESTAMP
        # recompute the max timestamp: last remaining time index entry, then the batches after it
        last = self.time_index.last_entry
        start = 0
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
            start = self.index.lookup(last[1])[1]
        for h in iter_headers(self.fd, start, cut):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        if len(self.index):
            self.bytes_since_index_entry = cut - self.index.pos[-1]
        else:
            self.bytes_since_index_entry = cut
        return removed

    def sync_handles(self) -> list[int]:
        """New descriptors of the segment's files (buffered index entries written first), which
        the caller fsyncs and closes; taken under the log's lock, synced outside it."""
        fds = [os.dup(self.fd)]
        try:
            fds.append(self.index.sync_handle())
            fds.append(self.time_index.sync_handle())
            if self.txn_index.fd >= 0:
                fds.append(os.dup(self.txn_index.fd))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def close_handles(self) -> None:
        """Close the files without writing anything (buffered index entries are dropped):
        for segments about to be deleted and for logs whose dir failed (Kafka's closeHandlers)."""
        if self.closed:
            return
        self.index.close_handle()
        self.time_index.close_handle()
        self.txn_index.close_handle()
        self._close_log_file()

    def close(self) -> None:
        if self.closed:
            return
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.index.close()
        self.time_index.close()
        self.txn_index.close()
        self._close_log_file()

    def _close_log_file(self) -> None:
        self.closed = True
        fd = self.detach_fd()
        self.files.closed(self)
        if fd >= 0:
            os.close(fd)

    def paths(self) -> list[str]:
        return [self.log_path, self.index.path, self.time_index.path, self.txn_index.path]

    def delete(self) -> None:
        self.close()
        for p in self.paths():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the three files from suffix ``old`` to ``new`` (the cleaner's .cleaned -> .swap ->
        "" steps); the log file last, so a ``.log.swap`` implies its indexes were renamed too."""
        if self.suffix != old:
            raise ValueError(f"{self.log_path} does not end with {old!r}")
        for f in (self.index, self.time_index):
            target = f.path[:len(f.path) - len(old)] + new
            os.replace(f.path, target)
            f.path = target
        path = self.txn_index.path
        self.txn_index.rename(path[:len(path) - len(old)] + new)
        target = self.log_path[:len(self.log_path) - len(old)] + new
        os.replace(self.log_path, target)
        self.log_path = target
        self.suffix = new

    def rename_to_deleted(self) -> list[str]:
        """Close and rename the files to ``*.deleted`` (removed later); returns the new paths.

        Renames only (metadata, no data written): the segment's base-offset names must be free
        before the caller may create a segment at the same offset.
        """
        self.close_handles()
        out = []
        for p in self.paths():
            try:
                os.replace(p, p + DELETED_SUFFIX)
                out.append(p + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return out

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, next={self.next_offset})"
