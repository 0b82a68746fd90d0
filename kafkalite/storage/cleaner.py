"""Log compaction: Kafka's ``LogCleaner`` for logs with ``cleanup.policy`` compact or compact,delete.

A pass over one log:

1. **Choose.** Per compacted log, the *dirty* section starts at the cleaner's checkpoint (the end of
   the previous pass; ``cleaner-offset-checkpoint`` in each log dir) and ends at the first
   *uncleanable* segment: the active segment, the segment holding the high watermark, the segment
   holding the first unstable offset (an open or unreplicated transaction: Kafka never cleans past
   it), or the first dirty segment younger than ``min.compaction.lag.ms``; only whole inactive
   segments are ever cleaned. The log with the highest dirty ratio (dirty bytes / total bytes of the cleanable range)
   above ``min.cleanable.dirty.ratio`` goes first; a log whose first dirty record is older than
   ``max.compaction.lag.ms`` goes regardless of its ratio, and so (kafkalite's addition, so that a
   quiet log does not keep expired tombstones for ever) does a log whose earliest tombstone delete
   horizon has passed.
2. **Map.** The dirty section's records are decoded and key -> latest offset is kept in an
   :class:`OffsetMap` bounded by ``log.cleaner.dedupe.buffer.size`` (24 bytes per entry as Kafka's
   ``SkimpyOffsetMap`` counts them); if it fills up, the pass ends after the last mapped batch and
   the next pass continues from there. Records of aborted transactions (the ``.txnindex``
   entries overlapping the range) are not mapped: they are discarded below, so an aborted record
   can never supersede a committed one.
3. **Clean.** Every inactive segment below that end, clean and dirty ones, is rewritten batch by
   batch into ``<base>.log.cleaned`` files, grouping consecutive segments while the group stays
   within ``segment.bytes``, the index size and int32 relative offsets (``groupSegmentsBySize``).
   A record survives unless a later record has the same key, or it has no key (invalid in a
   compacted log), or it is a tombstone (null value) whose batch's delete horizon has passed.
   Tombstones follow KIP-534: a batch that keeps a tombstone and has no horizon yet is rewritten
   with attribute bit 6 and ``baseTimestamp = now + delete.retention.ms``; a later pass after that
   time drops them. A batch whose records all survive (and that needs no horizon) is copied byte
   for byte; otherwise it is rebuilt with its codec, base offset, lastOffsetDelta (so the
   producer's last sequence is unchanged), producer id/epoch/base sequence, leader epoch and
   attributes. A batch left without records is dropped, except the batch holding the last data
   offset of a producer that still has state: it stays as an empty 61-byte header, as Kafka keeps
   it (``BatchRetention.RETAIN_EMPTY``) so that the producer's sequence survives compaction.
   Offsets never change, so the log end offset does not either.

   Transactions (Kafka's ``CleanedTransactionMetadata``): walking the batches in order with the
   aborted transactions overlapping the group, every batch of an aborted transaction is
   discarded whole (an empty header if it is its producer's last data batch). A COMMIT/ABORT
   marker is kept while this pass saw any batch of its transaction (its data still exists, so
   replaying the log must still see the transaction end; a kept ABORT marker keeps its
   ``.txnindex`` entry in the cleaned segment). Once a pass sees none, the marker gets a
   delete horizon like a tombstone (now + ``delete.retention.ms``, attribute bit 6, so
   consumers that read its transaction's data before have time to see it end) and a pass after
   that drops it, unless it is the last entry of a live producer whose epoch it carries (then
   it stays as an empty header; the producer state loader reads that as the epoch alone).
4. **Swap.** Each cleaned segment is fsynced, then handed to the log's owner thread
   (``owner_call``), which swaps it in with :meth:`PartitionLog.replace_segments` (``.cleaned`` ->
   ``.swap``, old segments -> ``.deleted``, ``.swap`` -> final names; the loader completes or undoes
   an interrupted swap). Then the directory is fsynced and the checkpoint moves to the pass's end.

Failures: an OSError anywhere in a pass (reading, writing or fsyncing the ``.cleaned`` files, the
swap, the checkpoint) takes the log's dir offline, as Kafka's cleaner does (failure.py); logs in
offline dirs are never chosen. Any other error makes only that log uncleanable until restart.

Threads: the cleaner runs on worker threads. It reads segments through duplicated fds taken under
the log's lock (:meth:`PartitionLog.cleaning_view`), never through the log's own fds, and the only
mutation, the swap, runs on the owner thread and is refused if the log changed meanwhile
(truncation, retention, deletion), in which case the cleaned files are simply removed.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from kafkalite.errors import KafkaStorageError
from kafkalite.records.batch import (
    CONTROL_MASK, DELETE_HORIZON_MASK, HEADER_SIZE, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, BatchInfo, read_header,
    write_header,
)
from kafkalite.records.builder import BatchBuilder
from kafkalite.records.control import ControlType, read_end_txn_marker
from kafkalite.records.record import decode_batch
from kafkalite.storage import checkpoint
from kafkalite.storage.loader import CLEANED_SUFFIX
from kafkalite.storage.log import CleaningView, PartitionLog, SegmentStats
from kafkalite.storage.segment import MAX_RELATIVE_OFFSET, LogSegment, iter_headers
from kafkalite.storage.txn_index import AbortedTxn
from kafkalite.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafkalite.storage.manager import LogManager

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
BYTES_PER_MAP_ENTRY = 24           # Kafka: 16-byte MD5 of the key + 8-byte offset
MAP_LOAD_FACTOR = 0.9              # log.cleaner.io.buffer.load.factor
WRITE_CHUNK = 1 << 20              # cleaned batches are written in chunks of about this size



class CleanerAborted(Exception):
    """The cleaner is shutting down; the pass stops between batches, leaving the log untouched."""


class OffsetMap:
    """Key -> offset of its latest record in the dirty section, with Kafka's capacity rule."""

    def __init__(self, memory: int) -> None:
        self.slots = max(1, int(memory // BYTES_PER_MAP_ENTRY * MAP_LOAD_FACTOR))
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.slots

    def __len__(self) -> int:
        return len(self._map)


class CleanedTxnMetadata:
    """The transactions a walk over batches (in offset order) is inside of: Kafka's
    ``CleanedTransactionMetadata``. ``aborted`` are the ``.txnindex`` entries overlapping the
    walked range; an aborted transaction becomes current when the walk reaches its first offset
    and ends at its ABORT marker."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)   # pop() = smallest
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}    # pid -> (entry, any batch seen)
        self._committed: set[int] = set()                          # pids with transactional data seen
        self.kept_aborted: list[AbortedTxn] = []                   # index entries of kept ABORT markers

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[-1].first_offset <= offset:
            txn = pending.pop()
            self._aborted.setdefault(txn.producer_id, (txn, False))

    def on_data_batch(self, info: BatchInfo) -> bool:
        """True when the batch belongs to an aborted transaction (all its records go)."""
        self._reach(info.last_offset)
        if not info.attributes & TRANSACTIONAL_MASK:
            return False
        current = self._aborted.get(info.producer_id)
        if current is not None:
            self._aborted[info.producer_id] = (current[0], True)
            return True
        self._committed.add(info.producer_id)
        return False

    def on_control_batch(self, data: bytes | bytearray | memoryview, info: BatchInfo) -> bool:
        """True when the marker's transaction has no batch left in the walked range, so the
        marker may go (after its delete horizon)."""
        self._reach(info.last_offset)
        if not info.records_count:
            return True                           # emptied by an earlier pass: nothing to end
        pid = info.producer_id
        if read_end_txn_marker(data, info).control_type == ControlType.ABORT:
            current = self._aborted.pop(pid, None)
            if current is not None and current[1]:
                self.kept_aborted.append(current[0])
                return False
            return True
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True


class LogToClean(NamedTuple):
    key: TopicPartition
    plog: PartitionLog
    first_dirty: int
    first_uncleanable: int         # a segment base: the cleanable range ends here
    clean_bytes: int
    cleanable_bytes: int
    due: bool                      # max.compaction.lag.ms or an expired tombstone horizon

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@dataclass
class CleanResult:
    """What one pass did (logged, and returned for tests and benchmarks)."""

    topic: str
    partition: int
    first_dirty: int
    end_offset: int                # the new checkpoint: first offset not covered by the offset map
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_emptied: int = 0       # kept as empty headers for producer state
    segments_before: int = 0
    segments_after: int = 0
    swapped: bool = True           # False: the log changed meanwhile and the pass was abandoned
    earliest_horizon: int | None = None


class LogCleaner:
    """Chooses, cleans and checkpoints the compacted logs of a :class:`LogManager`."""

    def __init__(self, logs: LogManager, *, dedupe_buffer_size: int = 134217728, threads: int = 1,
                 owner_call: Callable[[Callable[[], Any]], Any] = lambda fn: fn(),
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        """``owner_call(fn)`` runs ``fn`` on the logs' owner thread and returns its result (the
        broker passes Twisted's blockingCallFromThread; tests call directly)."""
        self.logs = logs
        self.map_memory = dedupe_buffer_size // max(1, threads)
        self.owner_call = owner_call
        self.clock = clock
        self._lock = threading.Lock()
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._horizons: dict[TopicPartition, int] = {}
        self._abort = threading.Event()
        self._checkpoints: dict[TopicPartition, int] = {}
        for d in logs.online_dirs:
            try:
                self._checkpoints.update(checkpoint.read_offsets(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)))
            except checkpoint.CheckpointError as e:
                log.warning("ignoring %s: every compacted log there is dirty again", e)
            except OSError as e:
                logs.failures.report(d, "reading the cleaner checkpoint", e)

    # --- control -----------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Make running passes stop at their next batch (their logs stay as they were)."""
        self._abort.set()

    def checkpoint_of(self, topic: str, partition: int) -> int | None:
        return self._checkpoints.get((topic, partition))

    def _check_abort(self) -> None:
        if self._abort.is_set():
            raise CleanerAborted()

    # --- choosing ----------------------------------------------------------------------------------

    def cleanable(self, now_ms: int) -> list[LogToClean]:
        """Every compacted log with something to clean, filthiest first (due logs before)."""
        out = []
        for key, plog in self.logs.logs().items():
            if key in self._uncleanable or plog.closed or not plog.config.compact_enabled:
                continue
            try:
                view = plog.cleaning_view()
            except Exception:          # closed meanwhile
                continue
            ltc = self._measure(key, plog, view, now_ms)
            if ltc is not None and ltc.cleanable_bytes > 0 and (
                    ltc.due or ltc.ratio > view.config.min_cleanable_dirty_ratio):
                out.append(ltc)
        out.sort(key=lambda t: (not t.due, -t.ratio))
        return out

    def _first_dirty(self, key: TopicPartition, view: CleaningView) -> int:
        cp = self._checkpoints.get(key, view.log_start_offset)
        if view.lowest_truncation is not None and view.lowest_truncation < cp:
            cp = self._checkpoints[key] = view.lowest_truncation
        if cp < view.log_start_offset or cp > view.log_end_offset:
            cp = view.log_start_offset
        return cp

    def _measure(self, key: TopicPartition, plog: PartitionLog, view: CleaningView, now_ms: int) -> LogToClean | None:
        config = view.config
        first_dirty = self._first_dirty(key, view)
        uncleanable = view.active_base_offset
        lag_limit = now_ms - config.min_compaction_lag_ms
        unstable = view.first_unstable_offset
        for st in view.stats:
            if st.next_offset > view.high_watermark or (unstable is not None and st.next_offset > unstable) or (
                    config.min_compaction_lag_ms > 0 and st.next_offset > first_dirty and st.largest_timestamp > lag_limit):
                uncleanable = st.base_offset
                break
        clean = sum(st.size for st in view.stats if st.next_offset <= first_dirty and st.base_offset < uncleanable)
        dirty_stats = [st for st in view.stats if st.next_offset > first_dirty and st.base_offset < uncleanable]
        cleanable = sum(st.size for st in dirty_stats)
        due = bool(dirty_stats) and config.max_compaction_lag_ms < 2**62 and (
            now_ms - dirty_stats[0].first_timestamp > config.max_compaction_lag_ms)
        horizon = self._horizons.get(key)
        if horizon is not None and now_ms >= horizon and uncleanable > view.log_start_offset:
            due = True
            cleanable = max(cleanable, 1)
        return LogToClean(key, plog, first_dirty, uncleanable, clean, cleanable, due)

    def _grab(self, now_ms: int, skip: set[TopicPartition] | frozenset[TopicPartition] = frozenset()) -> LogToClean | None:
        with self._lock:
            for ltc in self.cleanable(now_ms):
                if ltc.key not in self._in_progress and ltc.key not in skip:
                    self._in_progress.add(ltc.key)
                    return ltc
        return None

    # --- running -----------------------------------------------------------------------------------

    def clean_once(self, skip: set[TopicPartition] | frozenset[TopicPartition] = frozenset()) -> CleanResult | None:
        """Clean the filthiest log (not in ``skip``), if any is cleanable; None when there was
        nothing to do."""
        ltc = self._grab(self.clock(), skip)
        if ltc is None:
            return None
        try:
            return self.clean(ltc)
        except CleanerAborted:
            raise
        except (OSError, KafkaStorageError) as e:
            if ltc.plog.closed and not ltc.plog.offline:
                log.info("%s-%d was deleted while it was cleaned: %s", ltc.key[0], ltc.key[1], e)
                return CleanResult(ltc.key[0], ltc.key[1], ltc.first_dirty, ltc.first_dirty, swapped=False)
            # the disk, not the log: its dir goes offline (if the log did not report it already)
            if isinstance(e, OSError):
                self.logs.failures.report(ltc.plog.log_dir, f"cleaning {ltc.key[0]}-{ltc.key[1]}", e)
            log.error("cleaning %s-%d stopped: %s", ltc.key[0], ltc.key[1], e)
            return CleanResult(ltc.key[0], ltc.key[1], ltc.first_dirty, ltc.first_dirty, swapped=False)
        except Exception:
            # Kafka marks the partition uncleanable after an unexpected error and goes on
            log.exception("cleaning %s-%d failed; it is not cleaned again until restart", *ltc.key)
            self._uncleanable.add(ltc.key)
            return CleanResult(ltc.key[0], ltc.key[1], ltc.first_dirty, ltc.first_dirty, swapped=False)
        finally:
            with self._lock:
                self._in_progress.discard(ltc.key)

    def run(self) -> int:
        """One round: clean every cleanable log once, filthiest first; returns how many were
        cleaned. Stops quietly when :meth:`shutdown` is called."""
        done: set[TopicPartition] = set()
        try:
            while True:
                result = self.clean_once(done)
                if result is None:
                    break
                done.add((result.topic, result.partition))
        except CleanerAborted:
            log.info("log cleaner stopped")
        return len(done)

    # --- one pass ----------------------------------------------------------------------------------

    def clean(self, ltc: LogToClean) -> CleanResult:
        plog = ltc.plog
        now = self.clock()
        view = plog.cleaning_view(dup_fds=True)
        try:
            first_dirty = self._first_dirty(ltc.key, view)
            measured = self._measure(ltc.key, plog, view, now)
            upper = measured.first_uncleanable if measured is not None else ltc.first_uncleanable
            segs = [(seg, fd, st) for seg, fd, st in zip(view.segments, view.fds, view.stats) if st.base_offset < upper]
            result = CleanResult(plog.topic, plog.partition, first_dirty, first_dirty, segments_before=len(segs))
            offset_map = OffsetMap(self.map_memory)
            end = self._build_offset_map(segs, first_dirty, upper, offset_map, result,
                                         CleanedTxnMetadata(plog.collect_aborted_txns(first_dirty, upper)))
            result.end_offset = end
            to_clean = [(seg, fd, st) for seg, fd, st in segs if st.base_offset < end]
            horizons: list[int] = []
            for group in _group_segments(to_clean, view.config):
                self._check_abort()
                cleaned = self._clean_group(plog, view, group, offset_map, now, result, horizons)
                old = [seg for seg, _, _ in group]
                try:
                    swapped = self.owner_call(lambda: plog.replace_segments(old, cleaned, view.generation, now))
                except BaseException:
                    cleaned.close_handles()    # whatever the swap left on disk, the loader completes or undoes
                    raise
                if not swapped:
                    cleaned.delete()
                    log.info("%s-%d changed while it was cleaned; abandoning the pass", plog.topic, plog.partition)
                    result.swapped = False
                    return result
                result.segments_after += 1
            checkpoint.fsync_dir(plog.directory)
            with self._lock:
                self._checkpoints[ltc.key] = end
                if horizons:
                    self._horizons[ltc.key] = min(horizons)
                else:
                    self._horizons.pop(ltc.key, None)
            result.earliest_horizon = min(horizons) if horizons else None
            self._write_checkpoint(self.logs.dir_of(plog.topic, plog.partition))
            log.info("cleaned %s-%d [%d, %d): %d -> %d bytes, %d of %d records kept, %d -> %d segments",
                     plog.topic, plog.partition, first_dirty, end, result.bytes_read, result.bytes_written,
                     result.records_retained, result.records_read, result.segments_before, result.segments_after)
            return result
        finally:
            for fd in view.fds:
                os.close(fd)

    def _build_offset_map(self, segs: list[tuple[LogSegment, int, SegmentStats]], first_dirty: int, upper: int,
                          offset_map: OffsetMap, result: CleanResult, txns: CleanedTxnMetadata) -> int:
        """Map the dirty records, except aborted ones; returns the end of the mapped range (a
        batch boundary)."""
        end = first_dirty
        for _, fd, st in segs:
            if st.next_offset <= first_dirty:
                continue
            for info in iter_headers(fd, 0, st.size):
                if info.next_offset <= first_dirty:
                    continue
                self._check_abort()
                if offset_map.full and end > first_dirty:
                    return end
                if info.attributes & CONTROL_MASK:
                    if info.records_count:
                        txns.on_control_batch(os.pread(fd, info.size, info.position), info._replace(position=0))
                elif txns.on_data_batch(info):
                    pass                          # aborted: discarded when cleaned, never the latest
                elif info.records_count:
                    data = os.pread(fd, info.size, info.position)
                    for rec in decode_batch(data, info._replace(position=0)):
                        if rec.key is not None and rec.offset >= first_dirty:
                            offset_map.put(rec.key, rec.offset)
                end = info.next_offset
            end = max(end, st.next_offset)
        return min(max(end, first_dirty), upper)

    def _clean_group(self, plog: PartitionLog, view: CleaningView, group: list[tuple[LogSegment, int, SegmentStats]],
                     offset_map: OffsetMap, now: int, result: CleanResult, horizons: list[int]) -> LogSegment:
        """Write the retained batches of ``group`` into one fsynced ``.cleaned`` segment."""
        config = view.config
        out = LogSegment.create(plog.directory, group[0][2].base_offset, config, now, suffix=CLEANED_SUFFIX)
        # the aborted transactions overlapping the group, from every segment's index at or after
        # it (a marker may lie in a later segment than its data)
        txns = CleanedTxnMetadata(plog.collect_aborted_txns(group[0][2].base_offset, group[-1][2].next_offset))
        try:
            buf = bytearray()
            for _, fd, st in group:
                for info in iter_headers(fd, 0, st.size):
                    self._check_abort()
                    data = os.pread(fd, info.size, info.position)
                    result.bytes_read += info.size
                    kept = self._filter_batch(data, info._replace(position=0), offset_map, view, now, result, txns)
                    if kept is None:
                        continue
                    if kept[1] is not None:
                        horizons.append(kept[1])
                    buf += kept[0]
                    if len(buf) >= WRITE_CHUNK:
                        self._write(out, buf)
                        buf = bytearray()
            if buf:
                self._write(out, buf)
            # an ABORT marker kept because its transaction's data is still here keeps its index
            # entry: read_committed readers still learn which data to skip
            for txn in txns.kept_aborted:
                out.txn_index.append(txn)
            out.on_become_inactive()
            for fd in out.sync_handles():
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            result.bytes_written += out.size
            return out
        except BaseException:
            out.close_handles()
            for path in out.paths():
                try:
                    os.unlink(path)
                except OSError:
                    pass               # the loader removes .cleaned files at start
            raise

    @staticmethod
    def _write(seg: LogSegment, buf: bytearray) -> None:
        infos = []
        pos = 0
        while pos < len(buf):
            info = read_header(buf, pos)
            infos.append(info)
            pos = info.end
        seg.append(memoryview(buf), infos, 0)

    def _filter_batch(self, data: bytes, info: BatchInfo, offset_map: OffsetMap, view: CleaningView, now: int,
                      result: CleanResult, txns: CleanedTxnMetadata) -> tuple[bytes | bytearray, int | None] | None:
        """The batch as it leaves the cleaner (original bytes, rebuilt, or an empty header) and
        its delete horizon if it keeps a tombstone or a marker that may go; None to drop it."""
        has_horizon = bool(info.attributes & DELETE_HORIZON_MASK)
        horizon = info.base_timestamp if has_horizon else None
        if info.attributes & CONTROL_MASK:
            return self._filter_marker(data, info, view, now, result, txns.on_control_batch(data, info), horizon)
        records = decode_batch(data, info)
        result.records_read += len(records)
        if txns.on_data_batch(info):
            return self._emptied(info, view, result)   # an aborted transaction's batch: every record goes
        retain_deletes = horizon is None or now < horizon
        kept = []
        tombstones = False
        for rec in records:
            if rec.key is None:
                continue                          # keyless records are invalid in a compacted log
            latest = offset_map.get(rec.key)
            if latest >= 0 and rec.offset < latest:
                continue                          # a later record has this key
            if rec.value is None:
                if not retain_deletes:
                    continue                      # tombstone past its delete horizon
                tombstones = True
            kept.append(rec)
        result.records_retained += len(kept)
        if not kept:
            return self._emptied(info, view, result)
        if tombstones and horizon is None:
            horizon = now + view.config.delete_retention_ms
        elif len(kept) == len(records):
            return data, horizon if tombstones else None
        builder = BatchBuilder(
            compression=info.compression, producer_id=info.producer_id, producer_epoch=info.producer_epoch,
            base_sequence=info.base_sequence, transactional=bool(info.attributes & TRANSACTIONAL_MASK),
            log_append_time=info.max_timestamp if info.attributes & TIMESTAMP_TYPE_MASK else None,
            base_offset=info.base_offset, partition_leader_epoch=info.partition_leader_epoch,
            delete_horizon_ms=horizon, stored_magic=info.stored_magic)
        base = info.base_offset
        for rec in kept:
            builder.append(rec.timestamp, rec.key, rec.value, rec.headers, offset_delta=rec.offset - base)
        return builder.build(last_offset_delta=info.last_offset_delta), horizon if tombstones else None

    @staticmethod
    def _emptied(info: BatchInfo, view: CleaningView, result: CleanResult) -> tuple[bytearray, None] | None:
        """A data batch without records left: dropped, unless it holds its producer's last
        sequence (Kafka's RETAIN_EMPTY), then an empty header."""
        if info.producer_id >= 0 and view.producer_last_offsets.get(info.producer_id) == info.last_offset:
            result.batches_emptied += 1
            return _empty_batch(info), None
        return None

    @staticmethod
    def _filter_marker(data: bytes, info: BatchInfo, view: CleaningView, now: int, result: CleanResult,
                       can_discard: bool, horizon: int | None) -> tuple[bytes | bytearray, int | None] | None:
        """A COMMIT/ABORT control batch: kept while its transaction has data (``can_discard``
        False); then given a delete horizon, and dropped by a pass after it, unless it is the
        last entry of a live producer (it carries the epoch that fences zombies): an empty header."""
        if not can_discard:
            return data, None
        pid = info.producer_id
        last_entry = view.producer_last_offsets.get(pid, 0) < 0 and view.producer_epochs.get(pid) == info.producer_epoch
        if not info.records_count:                # an empty header an earlier pass kept for its producer
            return (data, None) if last_entry else None
        if horizon is None:
            horizon = now + view.config.delete_retention_ms
            return _with_horizon(data, info, horizon), horizon
        if now < horizon:
            return data, horizon
        if last_entry:
            result.batches_emptied += 1
            return _empty_batch(info), None
        return None

    def _write_checkpoint(self, log_dir: str | None) -> None:
        """Rewrite ``log_dir``'s cleaner-offset-checkpoint (a cleaner thread; fsynced)."""
        if log_dir is None or self.logs.failures.is_offline(log_dir):
            return
        live = {k for k in self.logs.logs() if self.logs.dir_of(*k) == log_dir}
        with self._lock:
            entries = {k: v for k, v in self._checkpoints.items() if k in live}
        checkpoint.write_offsets(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), entries)


def _group_segments(segs: list[tuple[LogSegment, int, SegmentStats]], config: Any) -> list[list[tuple[LogSegment, int, SegmentStats]]]:
    """Consecutive segments whose sizes, index sizes and offset span fit one segment (Kafka's
    ``groupSegmentsBySize``), so the many small segments compaction leaves are merged."""
    groups = []
    i = 0
    max_index = config.segment_index_bytes
    while i < len(segs):
        group = [segs[i]]
        first = segs[i][2]
        size, index, tindex = first.size, first.index_entries * 8, first.time_index_entries * 12
        i += 1
        while i < len(segs):
            st = segs[i][2]
            if (size + st.size > config.segment_bytes or index + st.index_entries * 8 > max_index
                    or tindex + st.time_index_entries * 12 > max_index
                    or st.next_offset - 1 - first.base_offset > MAX_RELATIVE_OFFSET):
                break
            group.append(segs[i])
            size += st.size
            index += st.index_entries * 8
            tindex += st.time_index_entries * 12
            i += 1
        groups.append(group)
    return groups


def _with_horizon(data: bytes, info: BatchInfo, horizon: int) -> bytearray:
    """The control batch rebuilt with a KIP-534 delete horizon (attribute bit 6, baseTimestamp =
    the horizon), its records, offsets and producer fields unchanged."""
    builder = BatchBuilder(
        producer_id=info.producer_id, producer_epoch=info.producer_epoch, base_sequence=info.base_sequence,
        transactional=bool(info.attributes & TRANSACTIONAL_MASK), control=True,
        log_append_time=info.max_timestamp if info.attributes & TIMESTAMP_TYPE_MASK else None,
        base_offset=info.base_offset, partition_leader_epoch=info.partition_leader_epoch, delete_horizon_ms=horizon)
    for rec in decode_batch(data, info):
        builder.append(rec.timestamp, rec.key, rec.value, rec.headers, offset_delta=rec.offset - info.base_offset)
    return builder.build(last_offset_delta=info.last_offset_delta)


def _empty_batch(info: BatchInfo) -> bytearray:
    """Kafka's ``DefaultRecordBatch.writeEmptyHeader``: the header alone, no records, uncompressed,
    keeping base offset, lastOffsetDelta, producer fields and leader epoch."""
    attributes = info.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    buf = bytearray(HEADER_SIZE)
    write_header(buf, base_offset=info.base_offset, partition_leader_epoch=info.partition_leader_epoch,
                 attributes=attributes, last_offset_delta=info.last_offset_delta,
                 base_timestamp=info.max_timestamp, max_timestamp=info.max_timestamp, producer_id=info.producer_id,
                 producer_epoch=info.producer_epoch, base_sequence=info.base_sequence, records_count=0)
    return buf
