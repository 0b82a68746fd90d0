"""One topic-partition's log on disk: segments, offsets, idempotence, epochs, retention, flush.

Directory ``<log.dir>/<topic>-<partition>/`` holds the segments (segment.py, each with its
aborted-transaction index, txn_index.py), producer state snapshots (producer_state.py),
``leader-epoch-checkpoint`` (leader_epoch.py) and, once a batch marked with a v0/v1 stored
format (records/batch.py) was appended, the empty file ``message-format-v0-v1``: readers then
look for marked batches in what they return (:attr:`PartitionLog.holds_old_formats`, carried by each :class:`ReadResult`); a log
without it never holds one, so its fetches pay nothing. Created before the batch is written,
kept until the partition is deleted.

Offsets: ``log_start_offset`` (first readable), ``log_end_offset`` (next to assign),
``recovery_point`` (everything below is fsynced), ``high_watermark`` (owned by the caller —
replication sets it; kept here so retention never deletes above it and the LogManager can
checkpoint it), ``last_stable_offset`` (min of the high watermark and the first offset of an open
or unreplicated transaction: read_committed consumers read below it).

Transactions: every append (leader, follower, recovery replay) feeds producer state the same
way; a control batch ends its producer's transaction and an ABORT adds an entry to the
transaction index of the segment the marker lands in. Recovery empties the transaction index of
every segment it re-reads and rebuilds it by replaying producer state from a snapshot at or below
the first such segment.

The hot paths work per batch, never per record: append stamps offsets into the headers in place,
checks producer state from header fields and writes the whole set with one pwrite; read locates
the batch with the sparse index and a header scan and returns one pread of whole batches.

Thread-safety: every method except :meth:`flush` must be called from one owner thread (the
broker's reactor). :meth:`flush` may run on any other thread at the same time: it holds the log's
lock only to write buffered index entries and duplicate file descriptors, fsyncs those duplicates
without the lock (so appends and reads continue), then advances the recovery point unless a
truncation happened meanwhile. Mutating methods take the same lock, and so does :meth:`read`, so
reads from a worker thread (loading ``__consumer_offsets``) are safe too. The log cleaner
(cleaner.py) reads through :meth:`cleaning_view`'s duplicated fds and swaps its segments in with
:meth:`replace_segments` on the owner thread.

Failures (failure.py): every public operation refuses with KafkaStorageError, without touching
the disk, once the log's dir is offline; an OSError inside one is reported for the dir and
re-raised as KafkaStorageError, so a failed disk never escapes as a raw OSError to the broker.

Blocking file work: the slow part goes to the ``background`` executor (failure.py) and only what
the next operation depends on stays on the owner thread, each with its reason where it happens:

* off the owner thread: unlinking ``*.deleted`` segment files (retention, truncation, the
  cleaner's swap), deleting producer snapshots below a new log start, removing a deleted
  partition dir, writing + fsyncing the leader-epoch checkpoint (leader_epoch.py), fsync (flush);
* on it, by necessity: creating a segment's three files at roll or truncation (the append goes
  there), renames to ``*.deleted``/``-delete`` (the names must be free before a segment or a
  partition of the same name is created), ftruncate of a follower's divergent tail and the
  producer-state rebuild after it (the next append must see the cut log), the page-cache producer
  snapshot at roll (ordered against truncation's snapshot deletion), the cleaner's three renames.
"""
from __future__ import annotations

import bisect
import functools
import logging
import os
import re
import threading
import uuid
from typing import Callable, Concatenate, Iterator, NamedTuple, ParamSpec, TypeVar

from kafkalite.errors import (KafkaStorageError, MessageTooLargeError, OffsetOutOfRangeError,
                              RecordListTooLargeError)
from kafkalite.records.batch import (FORMAT_MAGIC_MASK, BatchInfo, assign_offsets as stamp_offsets, read_header,
                                    set_log_append_time)
from kafkalite.records.control import ControlType, build_end_txn_marker, read_end_txn_marker
from kafkalite.records.file_region import FileRegion
from kafkalite.records.record import decode_batch
from kafkalite.storage import checkpoint
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import LogClosedError, UnexpectedAppendOffsetError
from kafkalite.storage.failure import Background, LogDirFailureChannel, run_inline
from kafkalite.storage.leader_epoch import LeaderEpochCache
from kafkalite.storage.loader import CLEANED_SUFFIX, SWAP_SUFFIX, load_segments
from kafkalite.storage.producer_state import CompletedTxn, MarkerReader, ProducerStateManager
from kafkalite.storage.segment import LogSegment, iter_headers
from kafkalite.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
EMPTY = memoryview(b"")
OLD_FORMATS_MARKER = "message-format-v0-v1"
DELETE_DIR_SUFFIX = "-delete"

_P = ParamSpec("_P")
_R = TypeVar("_R")


class AppendResult(NamedTuple):
    """What an append did; ``duplicate=True`` means nothing was written and the offsets are the
    original ones of the retried batch."""

    first_offset: int
    last_offset: int
    log_append_time: int          # broker time for LogAppendTime topics, else -1
    max_timestamp: int
    offset_of_max_timestamp: int
    log_start_offset: int
    batch_count: int
    bytes: int
    duplicate: bool = False


class ReadResult(NamedTuple):
    """Whole batches from ``first_offset`` to ``last_offset`` (both -1 when ``records`` is empty)."""

    #: a FileRegion only when the caller asked for one (``PartitionLog.read(as_region=True)``)
    records: "memoryview | FileRegion"
    first_offset: int
    last_offset: int
    log_start_offset: int
    log_end_offset: int
    #: read_committed reads only (set by :meth:`PartitionLog.collect_aborted_txns`'s caller)
    aborted_transactions: list[AbortedTxn] | None = None
    #: the log holds batches in message format v0/v1 (:attr:`PartitionLog.holds_old_formats`)
    old_formats: bool = False


class SegmentStats(NamedTuple):
    """What the cleaner needs to know of one inactive segment to choose and group."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    first_timestamp: int          # first batch's timestamp (creation time if unknown): max.compaction.lag.ms
    index_entries: int
    time_index_entries: int


class CleaningView(NamedTuple):
    """The log as :meth:`PartitionLog.cleaning_view` saw it (inactive segments only)."""

    segments: list[LogSegment]
    fds: list[int]                # duplicated log fds, parallel to ``segments`` (empty unless asked)
    stats: list[SegmentStats]
    active_base_offset: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    generation: int
    producer_last_offsets: dict[int, int]   # producer id -> offset of its last data batch (-1: none)
    lowest_truncation: int | None
    config: LogConfig
    producer_epochs: dict[int, int]         # producer id -> its current epoch (a marker may be its last entry)
    first_unstable_offset: int | None       # the cleaner never cleans a segment reaching it


def _storage_op(fn: Callable[Concatenate[PartitionLog, _P], _R]) -> Callable[Concatenate[PartitionLog, _P], _R]:
    """A public log operation: refused once the dir is offline; an OSError becomes a reported
    KafkaStorageError (Kafka's ``maybeHandleIOException``)."""
    what = fn.__name__

    @functools.wraps(fn)
    def op(self: PartitionLog, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        failures = self.failures
        if failures.is_offline(self.log_dir):
            raise KafkaStorageError(f"{self.topic}-{self.partition}: log dir {self.log_dir} is offline")
        try:
            return fn(self, *args, **kwargs)
        except OSError as e:
            raise failures.fail(self.log_dir, f"{what} of {self.topic}-{self.partition}", e) from e
    return op


FUTURE_DIR_SUFFIX = "-future"
_FUTURE_DIR = re.compile(r"^(.+)\.[0-9a-f]{32}" + FUTURE_DIR_SUFFIX + "$")


def future_dir_name(topic: str, partition: int, unique: str) -> str:
    """Kafka's ``<topic>-<partition>.<uuid>-future``: a replica being moved into this log dir."""
    return f"{topic}-{partition}.{unique}{FUTURE_DIR_SUFFIX}"


def parse_dir_name(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` (or a future replica's ``<topic>-<partition>.<uuid>-future``) ->
    (topic, partition), splitting on the last '-'; ValueError if not."""
    future = _FUTURE_DIR.match(name)
    if future is not None:
        name = future.group(1)
    topic, sep, part = name.rpartition("-")
    if not sep or not TOPIC_RE.match(topic) or topic in (".", "..") or not part.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(part)


class PartitionLog:
    """The log of one topic-partition. Create with :meth:`open`."""

    def __init__(self, directory: str, config: LogConfig, segments: list[LogSegment], *,
                 log_start_offset: int, recovery_point: int, high_watermark: int,
                 epochs: LeaderEpochCache, producers: ProducerStateManager, now_ms: int,
                 failures: LogDirFailureChannel | None = None, background: Background = run_inline) -> None:
        self.directory = directory
        self.log_dir = os.path.dirname(os.path.normpath(directory))
        self.topic, self.partition = parse_dir_name(os.path.basename(directory))
        self.failures = failures if failures is not None else LogDirFailureChannel()
        self.background = background
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._next_offset = segments[-1].next_offset
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.producers = producers
        self._high_watermark = 0
        self.high_watermark = high_watermark
        self.epochs = epochs
        epochs.background = lambda job: self._in_background("leader epoch checkpoint", job)
        self._lock = threading.RLock()
        for seg in segments:
            self._adopt(seg)
        self._generation = 0                 # bumped by truncation: an in-flight flush must not advance
        self._dir_dirty = False              # a segment file was created since the last flush
        self._last_flush_ms = now_ms
        self._pending_deletes: list[tuple[int, list[str]]] = []
        self._closed = False
        self.lowest_truncation: int | None = None   # for the cleaner's checkpoint (cleaner.py)
        #: some batch was appended in message format v0/v1 (see the module docstring)
        self.holds_old_formats = os.path.exists(os.path.join(directory, OLD_FORMATS_MARKER))

    # --- opening -----------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str, config: LogConfig, now_ms: int, *, recovery_point: int = 0,
             log_start_offset: int = 0, high_watermark: int = 0, clean_shutdown: bool = False,
             failures: LogDirFailureChannel | None = None, background: Background = run_inline) -> PartitionLog:
        """Open (creating if needed) the log in ``directory``.

        Without ``clean_shutdown`` every segment from the one holding ``recovery_point`` on is
        CRC-checked and cut at the first bad batch (see loader.py); the defaults therefore recover
        the whole log, which is what a caller without checkpoints must do. ``failures`` is the
        log dir's failure channel (an OSError while opening is reported there and raised as
        KafkaStorageError); ``background`` runs the log's deferred file work.

        Synchronous on purpose: the partition must exist before it can lead or follow (Kafka
        creates logs inside LeaderAndIsr handling too); a new log is a mkdir and three empty files.
        """
        parse_dir_name(os.path.basename(os.path.normpath(directory)))
        failures = failures if failures is not None else LogDirFailureChannel()
        log_dir = os.path.dirname(os.path.normpath(directory))
        failures.check_online(log_dir, f"open {directory}")
        try:
            return cls._open(directory, config, now_ms, recovery_point, log_start_offset, high_watermark,
                             clean_shutdown, failures, background)
        except OSError as e:
            raise failures.fail(log_dir, f"opening {directory}", e) from e

    @classmethod
    def _open(cls, directory: str, config: LogConfig, now_ms: int, recovery_point: int, log_start_offset: int,
              high_watermark: int, clean_shutdown: bool, failures: LogDirFailureChannel,
              background: Background) -> PartitionLog:
        os.makedirs(directory, exist_ok=True)
        loaded = load_segments(directory, config, now_ms, recovery_point=recovery_point,
                               clean_shutdown=clean_shutdown)
        segments = loaded.segments
        if not segments:
            segments = [LogSegment.create(directory, max(0, log_start_offset), config, now_ms)]
        end = segments[-1].next_offset
        start = min(max(log_start_offset, segments[0].base_offset), end)
        epochs, found = LeaderEpochCache.load(os.path.join(directory, checkpoint.LEADER_EPOCH_CHECKPOINT))
        producers = ProducerStateManager(directory)
        plog = cls(directory, config, segments, log_start_offset=start,
                   recovery_point=min(recovery_point, end),
                   high_watermark=min(max(high_watermark, start), end), epochs=epochs,
                   producers=producers, now_ms=now_ms, failures=failures, background=background)
        if not found and end > start:
            plog._rebuild_epochs()
        elif loaded.first_recovered is not None:
            plog._rederive_epochs(loaded.first_recovered)
        epochs.truncate_from_end(end, persist=False)
        epochs.truncate_from_start(start, persist=False)
        reset = [seg.base_offset for seg in segments if seg.txn_index_reset]
        plog._load_producer_state(rebuild_txn_index_from=min(reset) if reset else None)
        if loaded.recovered:
            # recovered data is only trusted once it is on disk (flush writes the epochs first)
            plog._flush()
        if epochs.dirty:
            epochs.flush()           # opening is synchronous anyway (see open)
        log.info("opened %s: offsets [%d, %d), %d segments%s", directory, start, end, len(segments),
                 f", recovery cut {loaded.truncated_bytes} bytes" if loaded.truncated_bytes else "")
        return plog

    def _rebuild_epochs(self) -> None:
        """No usable leader-epoch checkpoint: derive it from the epochs stamped in batch headers."""
        log.warning("%s: rebuilding the leader epoch cache from the log", self.directory)
        self.epochs.clear(persist=False)
        for info in self._iter_headers_from(self.log_start_offset):
            self.epochs.assign(info.partition_leader_epoch, info.base_offset, persist=False)

    def _rederive_epochs(self, first_recovered: int) -> None:
        """After recovery from ``first_recovered`` on, the batches there are the truth: drop the
        entries the (possibly lagging) checkpoint has from there and take them from the headers
        recovery read (Kafka's ``LogSegment.recover`` assigns epochs the same way)."""
        epochs = self.epochs
        epochs.truncate_from_end(first_recovered, persist=False)
        for seg in self._segments:
            if seg.base_offset >= first_recovered:
                for epoch, offset in seg.recovered_epochs:
                    epochs.assign(epoch, offset, persist=False)

    def _load_producer_state(self, rebuild_txn_index_from: int | None = None) -> None:
        """Latest snapshot at or below the high watermark, then replay batches after it.

        Starting at or below the high watermark replays every marker the high watermark has not
        passed, so those transactions are known to be unreplicated again (they hold the LSO);
        newer snapshots are kept (they still describe the log), those past the log end deleted.
        ``rebuild_txn_index_from``: the transaction indexes of the segments from that base offset
        on were emptied by recovery; replay starts at or below it and re-adds their ABORT entries.
        """
        end = self._next_offset
        producers = self.producers
        producers.delete_snapshots(above=end)
        limit = min(end, self._high_watermark)
        if rebuild_txn_index_from is not None:
            limit = min(limit, rebuild_txn_index_from)
        snap = producers.load_latest(limit, keep_newer=True)
        replay_from = self.log_start_offset if snap is None else max(snap, self.log_start_offset)
        replayed = 0
        if replay_from < end:
            for seg, info in self._iter_batches_from(replay_from):
                done = producers.update((info,), self._file_marker_reader(seg))
                if done and rebuild_txn_index_from is not None and seg.txn_index_reset:
                    self._index_aborted(seg, done)
                replayed += 1
        if rebuild_txn_index_from is not None:
            for seg in self._segments:
                seg.txn_index_reset = False
        producers.truncate_head(self.log_start_offset, keep_without_data=True)
        producers.on_high_watermark(self._high_watermark)
        if replayed:
            producers.take_snapshot(end)

    @staticmethod
    def _file_marker_reader(seg: LogSegment) -> MarkerReader:
        return lambda info: read_end_txn_marker(seg.read(info.position, info.size), info._replace(position=0))

    @staticmethod
    def _index_aborted(seg: LogSegment, completed: list[CompletedTxn]) -> None:
        for txn in completed:
            if txn.aborted:
                seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                txn.last_stable_offset))

    def _iter_batches_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchInfo]]:
        """(segment, header) of every batch whose last offset >= ``offset``, across segments."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            start = seg.position_of(offset) if seg.base_offset < offset else 0
            for info in iter_headers(seg.fd, start, seg.size):
                yield seg, info

    def _iter_headers_from(self, offset: int) -> Iterator[BatchInfo]:
        """Headers of every batch whose last offset >= ``offset``, across segments."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            start = seg.position_of(offset) if seg.base_offset < offset else 0
            yield from iter_headers(seg.fd, start, seg.size)

    # --- offsets -----------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        """Set by replication; ended transactions whose markers it passes become stable."""
        self._high_watermark = value
        self.producers.on_high_watermark(value)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open (or not yet replicated) transaction, None if none."""
        return self.producers.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: read_committed consumers read only below it."""
        first = self.producers.first_unstable_offset()
        hw = self._high_watermark
        return hw if first is None or first >= hw else first

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.directory} is closed")

    @property
    def offline(self) -> bool:
        """The log's dir failed: every operation raises KafkaStorageError."""
        return self.failures.is_offline(self.log_dir)

    def _in_background(self, what: str, job: Callable[[], None]) -> None:
        """Hand slow file work to the executor; skipped if the dir fails first, and an OSError
        it meets is reported for the dir (it has no caller to raise to)."""
        self.background(self.failures.guarded(self.log_dir, f"{what} of {self.topic}-{self.partition}", job))

    # --- append ------------------------------------------------------------------------------------

    @_storage_op
    def append(self, buf: bytearray | memoryview, infos: list[BatchInfo], *, leader_epoch: int, now_ms: int,
               assign_offsets: bool = True, client: bool = True) -> AppendResult:
        """Append validated batches (``infos`` from validate_batches, back to back in ``buf``).

        Leader path (``assign_offsets=True``): producer state is checked first (duplicate ->
        original offsets with ``duplicate=True``, nothing written; fenced epoch ->
        InvalidProducerEpochError; gap -> OutOfOrderSequenceError), then offsets and
        ``leader_epoch`` are stamped into the headers in place and, for LogAppendTime topics, the
        timestamp (``client=False``: the broker's own coordinator writes, whose sequences are not
        checked, see ProducerStateManager.check). Follower path: the batches keep their offsets and epochs, which must continue
        the log without going back (else UnexpectedAppendOffsetError); gaps, which a compacted
        leader's log has, are kept. Either way the bytes go to the active segment (rolled first
        when needed) with one write.
        """
        if not infos:
            raise ValueError("append needs at least one batch")
        with self._lock:
            self._check_open()
            return self._append(buf, infos, leader_epoch, now_ms, assign_offsets, client)

    def _append(self, buf: bytearray | memoryview, infos: list[BatchInfo], leader_epoch: int, now_ms: int,
                assign_offsets: bool, client: bool = True) -> AppendResult:
        config = self.config
        start = infos[0].position
        end = start
        for info in infos:
            if info.position != end:
                raise ValueError("batches must lie back to back in the buffer")
            end += info.size
        total = end - start
        if total > config.segment_bytes:
            raise RecordListTooLargeError(
                f"append of {total} bytes exceeds segment.bytes {config.segment_bytes}")
        if assign_offsets:
            limit = config.max_message_bytes
            for info in infos:
                if info.size > limit:
                    raise MessageTooLargeError(
                        f"record batch of {info.size} bytes exceeds max.message.bytes {limit}")
            dup = self.producers.check(infos, client=client)
            if dup is not None:
                ts = dup.timestamp if config.log_append_time else -1
                return AppendResult(dup.first_offset, dup.last_offset, ts, dup.timestamp, dup.last_offset,
                                    self.log_start_offset, 0, 0, True)
            first = self._next_offset
            infos = stamp_offsets(buf, infos, first, leader_epoch)
            append_time = -1
            if config.log_append_time:
                append_time = now_ms
                infos = [set_log_append_time(buf, info, now_ms) for info in infos]
        else:
            first = infos[0].base_offset
            expected = self._next_offset
            for info in infos:
                # offsets may jump (a compacted leader's batches have gaps), never go back
                if info.base_offset < expected:
                    raise UnexpectedAppendOffsetError(
                        f"follower append at offset {info.base_offset}, log expects {expected}")
                expected = info.base_offset + info.last_offset_delta + 1
            append_time = -1
        max_ts, max_ts_offset = -1, first
        for info in infos:
            if info.max_timestamp > max_ts:
                max_ts, max_ts_offset = info.max_timestamp, info.base_offset + info.last_offset_delta
        last = infos[-1].base_offset + infos[-1].last_offset_delta

        seg = self._segments[-1]
        if seg.should_roll(total, max_ts, last, config, now_ms):
            seg = self._roll(now_ms)
        # a new epoch is recorded in memory before its data is written; the checkpoint file
        # follows in the background (leader_epoch.py says why that is safe)
        epochs = self.epochs
        if assign_offsets:
            if leader_epoch > epochs.latest_epoch:
                epochs.assign(leader_epoch, first)
        else:
            for info in infos:
                if info.partition_leader_epoch > epochs.latest_epoch:
                    epochs.assign(info.partition_leader_epoch, info.base_offset)
        # an inline executor may just have found the dir failing: write nothing more there
        self.failures.check_online(self.log_dir, f"append to {self.topic}-{self.partition}")
        if not self.holds_old_formats and any(info.attributes & FORMAT_MAGIC_MASK for info in infos):
            self._note_old_formats()
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        # the write itself stays here: the offsets it assigns are answered from it (page cache, no fsync)
        seg.append(mv[start:end], infos, start)
        done = self.producers.update(infos, lambda info: read_end_txn_marker(mv, info))
        if done:
            self._index_aborted(seg, done)
        self._next_offset = last + 1
        return AppendResult(first, last, append_time, max_ts, max_ts_offset, self.log_start_offset,
                            len(infos), total)

    def _note_old_formats(self) -> None:
        """The first batch in format v0/v1: the marker file goes first (the next flush fsyncs the
        directory with the data), so a log holding such a batch always has it."""
        with open(os.path.join(self.directory, OLD_FORMATS_MARKER), "wb"):
            pass
        self._dir_dirty = True
        self.holds_old_formats = True
        log.info("%s: holds batches in message format v0/v1 from now on", self.directory)

    @_storage_op
    def append_end_txn_marker(self, control_type: ControlType, *, producer_id: int, producer_epoch: int,
                              coordinator_epoch: int, leader_epoch: int, now_ms: int) -> AppendResult:
        """Leader: write the COMMIT/ABORT control batch that ends ``producer_id``'s transaction
        (WriteTxnMarkers). Refused with INVALID_PRODUCER_EPOCH for an older producer epoch and
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch than the last marker's."""
        with self._lock:
            self._check_open()
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            buf = build_end_txn_marker(control_type, producer_id=producer_id, producer_epoch=producer_epoch,
                                       coordinator_epoch=coordinator_epoch, timestamp=now_ms)
            return self._append(buf, [read_header(buf, 0)], leader_epoch, now_ms, True, False)

    @_storage_op
    def collect_aborted_txns(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[fetch_offset, upper_offset)`` (read_committed
        Fetch): from the segment holding ``fetch_offset`` on, until an entry's LSO proves the
        rest cannot overlap (Kafka's ``Log.collectAbortedTransactions``)."""
        with self._lock:
            self._check_open()
            out: list[AbortedTxn] = []
            i = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
            for seg in self._segments[i:]:
                found, complete = seg.txn_index.collect(fetch_offset, upper_offset)
                out.extend(found)
                if complete:
                    break
            return out

    @_storage_op
    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty)."""
        with self._lock:
            self._check_open()
            return self._roll(now_ms)

    def _roll(self, now_ms: int) -> LogSegment:
        old = self._segments[-1]
        if old.size == 0:
            return old
        old.on_become_inactive()
        # Synchronous on purpose: the append that rolls writes into the new segment's files, so
        # they must exist now (three creates, metadata only; no preallocation, no mmap to resize).
        new = self._adopt(LogSegment.create(self.directory, self._next_offset, self.config, now_ms))
        self._segments.append(new)
        self._bases.append(new.base_offset)
        # page-cache write, no fsync; kept in order with truncation's deletion of later snapshots
        self.producers.take_snapshot(new.base_offset)
        self._dir_dirty = True
        log.debug("%s: rolled new segment at offset %d", self.directory, new.base_offset)
        return new

    # --- read --------------------------------------------------------------------------------------

    @_storage_op
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, as_region: bool = False) -> ReadResult:
        """Whole batches starting with the one containing ``offset``.

        At most ``max_bytes`` unless the first batch alone is bigger and ``min_one_batch``; never a
        batch whose last offset reaches ``max_offset`` (exclusive, usually the high watermark);
        one segment per call. Raises OffsetOutOfRangeError outside [log start, log end]. The bytes
        are one pread of one contiguous range, returned as a memoryview; with ``as_region`` they
        are not read at all: ``records`` is a :class:`~kafkalite.records.file_region.FileRegion`
        of the segment file (only batch headers were read to find the range), for a zero-copy
        Fetch that sends it with ``os.sendfile``.
        """
        # The lock (uncontended on the reactor: an RLock acquire) makes reads from other threads
        # safe against the cleaner's segment swap and retention closing segment files.
        with self._lock:
            self._check_open()         # a closed segment's fd is gone: never mistake that for a disk error
            return self._read(offset, max_bytes, max_offset, min_one_batch, as_region)

    def _read(self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
              as_region: bool = False) -> ReadResult:
        log_end = self._next_offset
        log_start = self.log_start_offset
        if offset < log_start or offset > log_end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{log_start}, {log_end}] of {self.topic}-{self.partition}")
        limit_offset = log_end if max_offset is None else min(max_offset, log_end)
        if offset >= limit_offset:
            return ReadResult(EMPTY, -1, -1, log_start, log_end)
        segments = self._segments
        i = bisect.bisect_right(self._bases, offset) - 1
        while i < len(segments):
            seg = segments[i]
            info = seg.find_batch(offset)
            if info is None:           # offset lies at this segment's end: the next one holds it
                i += 1
                continue
            if info.base_offset + info.last_offset_delta >= limit_offset:
                break
            pos = info.position
            if limit_offset >= seg.next_offset:
                limit_pos, limit_last = seg.size, seg.next_offset - 1
            else:
                limit_info = seg.find_batch(limit_offset)
                assert limit_info is not None  # limit_offset < seg.next_offset: its last batch reaches it
                limit_pos, limit_last = limit_info.position, limit_info.base_offset - 1
            if info.size > max_bytes:
                if not min_one_batch:
                    break
                length, last = info.size, info.base_offset + info.last_offset_delta
            elif limit_pos - pos <= max_bytes:
                length, last = limit_pos - pos, limit_last
            else:
                end, last = seg.last_whole_batch_end(pos, pos + max_bytes)
                length = end - pos
            records: memoryview | FileRegion
            if as_region:
                # no read: the socket takes the bytes from the page cache (os.sendfile)
                records = seg.region(pos, length)
            else:
                # one pread, on the calling thread like the append's pwrite: page-cache data for the
                # response being built; a thread hop per fetch would cost more than the read
                records = memoryview(seg.read(pos, length))
            return ReadResult(records, info.base_offset, last, log_start, log_end,
                              old_formats=self.holds_old_formats)
        return ReadResult(EMPTY, -1, -1, log_start, log_end)

    @_storage_op
    def offset_for_timestamp(self, timestamp: int, *, max_offset: int | None = None) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= ``timestamp`` (ListOffsets).

        Like Kafka's fetchOffsetByTimestamp: the first segment whose largest timestamp reaches the
        target, its time index, then batch headers (max timestamps), then the records of the one
        batch found. Records below the log start or at/after ``max_offset`` are never returned;
        None when there is no such record.
        """
        self._check_open()
        start_offset = self.log_start_offset
        for seg in self._segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= start_offset:
                continue
            entry = seg.time_index.lookup(timestamp)
            from_offset = max(start_offset, entry[1] if entry else seg.base_offset)
            _, pos = seg.index.lookup(from_offset)
            for info in iter_headers(seg.fd, pos, seg.size):
                if info.max_timestamp < timestamp or info.base_offset + info.last_offset_delta < start_offset:
                    continue
                data = seg.read(info.position, info.size)
                for record in decode_batch(data, verify_crc=False):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        if max_offset is not None and record.offset >= max_offset:
                            return None
                        return record.offset, record.timestamp
        return None

    @_storage_op
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) per the leader-epoch cache; (-1, -1) if unknown."""
        return self.epochs.end_offset_for(epoch, self._next_offset)

    @_storage_op
    def assign_epoch(self, epoch: int, start_offset: int) -> bool:
        """A leader's new ``epoch`` starts at ``start_offset`` (become-leader, KIP-101); memory
        now, the checkpoint file in the background. False if ``epoch`` is not newer."""
        with self._lock:
            self._check_open()
            return self.epochs.assign(epoch, start_offset)

    # --- truncation --------------------------------------------------------------------------------

    @_storage_op
    def truncate_to(self, offset: int, now_ms: int = 0) -> bool:
        """Remove every batch at or after ``offset`` (the batch containing it too); returns whether
        anything was removed. The new log end is ``log_end_offset`` (<= ``offset``).

        Synchronous on purpose: the follower's next append must land after the cut, and the
        producer state must already be the cut log's; only unlinking the dropped segment files is
        deferred (the epoch checkpoint is rewritten in the background, see leader_epoch.py).
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            if offset >= self._next_offset:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully(offset, now_ms)
                return True
            i = bisect.bisect_right(self._bases, offset) - 1
            doomed = self._segments[i + 1:]
            del self._segments[i + 1:], self._bases[i + 1:]
            self._schedule_delete(doomed, now_ms)
            self._segments[-1].truncate_to(offset)
            end = self._segments[-1].next_offset
            self._generation += 1
            self._note_truncation(end)
            self._next_offset = end
            self.log_start_offset = min(self.log_start_offset, end)
            self.recovery_point = min(self.recovery_point, end)
            self.high_watermark = min(self.high_watermark, end)
            self.epochs.truncate_from_end(end)
            self._load_producer_state()
            log.info("%s: truncated to offset %d", self.directory, end)
            return True

    @_storage_op
    def truncate_fully_and_start_at(self, offset: int, now_ms: int = 0) -> None:
        """Drop the whole log and continue empty at ``offset`` (a follower far behind the leader)."""
        if offset < 0:
            raise ValueError(f"cannot start at negative offset {offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully(offset, now_ms)

    def _truncate_fully(self, offset: int, now_ms: int) -> None:
        doomed = self._segments
        self._segments, self._bases = [], []
        self._schedule_delete(doomed, now_ms)
        seg = self._adopt(LogSegment.create(self.directory, offset, self.config, now_ms))
        self._segments, self._bases = [seg], [offset]
        self._generation += 1
        self._note_truncation(0)
        self._dir_dirty = True
        self._next_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.epochs.clear()
        self.producers.clear()
        # synchronous: a stale snapshot must not outlive the data it describes (the log may grow
        # back past its offset, and a restart would then trust it)
        self.producers.delete_snapshots()
        log.info("%s: truncated fully, now starts at offset %d", self.directory, offset)

    def _note_truncation(self, offset: int) -> None:
        if self.lowest_truncation is None or offset < self.lowest_truncation:
            self.lowest_truncation = offset

    # --- compaction (the cleaner thread's two entry points; see cleaner.py) -------------------------

    @_storage_op
    def cleaning_view(self, *, dup_fds: bool = False) -> CleaningView:
        """A consistent picture of the log for the cleaner, taken under the lock, from any thread.

        With ``dup_fds`` every inactive segment's log fd is duplicated, so the cleaner can read it
        without the lock while the owner thread appends, reads, deletes or closes (the caller
        closes the duplicates). ``lowest_truncation`` is handed over and reset.
        """
        with self._lock:
            self._check_open()
            segs = self._segments[:-1]
            fds: list[int] = []
            try:
                if dup_fds:
                    fds = [os.dup(seg.fd) for seg in segs]
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
            truncated, self.lowest_truncation = self.lowest_truncation, None
            stats = [SegmentStats(seg.base_offset, seg.next_offset, seg.size, seg.largest_timestamp,
                                  seg.first_batch_timestamp if seg.first_batch_timestamp >= 0 else seg.created_ms,
                                  len(seg.index), len(seg.time_index)) for seg in segs]
            producers = self.producers.producers
            last_data = {pid: e.last_data_offset for pid, e in producers.items()}
            epochs = {pid: e.epoch for pid, e in producers.items()}
            return CleaningView(segs, fds, stats, self._segments[-1].base_offset, self.log_start_offset,
                                self._next_offset, self.high_watermark, self._generation, last_data, truncated,
                                self.config, epochs, self.producers.first_unstable_offset())

    @_storage_op
    def replace_segments(self, old: list[LogSegment], new: LogSegment, generation: int, now_ms: int) -> bool:
        """Owner thread: swap the cleaner's ``new`` (a fsynced ``.cleaned`` segment) in for ``old``.

        Kafka's crash-safe order: the cleaned files become ``.swap``; the old segments are renamed
        to ``.deleted``; the swap files take the final names. A crash at any point is completed or
        undone by the loader (loader.py). Refused (False; the caller deletes ``new``) when the log
        changed under the cleaner: closed, truncated, or the old segments are no longer an inactive
        run of the log (retention, deletion).
        """
        with self._lock:
            if self._closed or generation != self._generation or not old:
                return False
            segs = self._segments
            i = next((k for k, seg in enumerate(segs) if seg is old[0]), -1)
            n = len(old)
            if i < 0 or i + n >= len(segs) or any(a is not b for a, b in zip(segs[i:i + n], old)):
                return False
            # three renames on the owner thread: the segment list and the files change together
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
            self._schedule_delete(old, now_ms)
            new.change_suffix(SWAP_SUFFIX, "")
            segs[i:i + n] = [self._adopt(new)]
            self._bases[i:i + n] = [new.base_offset]
            self._dir_dirty = True
            return True

    # --- retention ---------------------------------------------------------------------------------

    @_storage_op
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete whole segments past retention.ms / retention.bytes or below the log
        start (after DeleteRecords); only below the high watermark; returns how many went.

        If every segment qualifies, the (non-empty) active segment is rolled first so the log keeps
        an empty active segment at its end offset.
        """
        with self._lock:
            self._check_open()
            self._purge_deleted(now_ms)
            config = self.config
            deleted = 0
            if config.delete_enabled:
                if config.retention_ms >= 0:
                    deleted += self._delete_while(
                        lambda seg, nxt: now_ms - seg.largest_timestamp > config.retention_ms, now_ms)
                if config.retention_bytes >= 0:
                    excess = [self.size - config.retention_bytes]

                    def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                        if excess[0] - seg.size >= 0:
                            excess[0] -= seg.size
                            return True
                        return False
                    deleted += self._delete_while(over_size, now_ms)
            deleted += self._delete_while(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, now_ms)
            return deleted

    def _delete_while(self, predicate: Callable[[LogSegment, LogSegment | None], bool], now_ms: int) -> int:
        segs = self._segments
        n = 0
        while n < len(segs):
            seg = segs[n]
            nxt = segs[n + 1] if n + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._next_offset
            if nxt is None and seg.size == 0:
                break
            if self.high_watermark < upper or not predicate(seg, nxt):
                break
            n += 1
        if not n:
            return 0
        if n == len(segs):
            self._roll(now_ms)
        doomed = self._segments[:n]
        del self._segments[:n], self._bases[:n]
        self._schedule_delete(doomed, now_ms)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.producers.truncate_head(self.log_start_offset)
        below = self._segments[0].base_offset

        def delete_old_snapshots() -> None:
            # a snapshot below the log start that survives a crash is only replayed from the log start
            try:
                self.producers.delete_snapshots(below=below)
            except FileNotFoundError:
                if not self._closed:
                    raise            # else the log was deleted meanwhile
        self._in_background("deleting old producer snapshots", delete_old_snapshots)
        log.info("%s: deleted %d segments, log start now %d", self.directory, n, self.log_start_offset)
        return n

    @_storage_op
    def delete_records_before(self, offset: int, now_ms: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (<= high watermark); returns the new start.

        Whole segments below it go at the next :meth:`delete_old_segments`.
        """
        with self._lock:
            self._check_open()
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: above the high watermark {self.high_watermark}")
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.epochs.truncate_from_start(offset)
                self.producers.truncate_head(offset)
            return self.log_start_offset

    def _adopt(self, seg: LogSegment) -> LogSegment:
        """Every segment this log holds goes through here: giving it the log's lock is what lets
        the open-file ring close its idle file (open_files.py), so no path may skip it."""
        seg.owner_lock = self._lock
        return seg

    def _schedule_delete(self, segments: list[LogSegment], now_ms: int) -> None:
        """Rename to ``*.deleted`` now, unlink in the background after file.delete.delay.ms
        (Kafka's asyncDelete). The renames stay here: a segment of the same base offset may be
        created right after (truncation, the cleaner's swap); the loader removes leftovers."""
        doomed: list[str] = []
        for seg in segments:
            paths = seg.rename_to_deleted()
            if self.config.file_delete_delay_ms == 0:
                doomed.extend(paths)
            else:
                self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, paths))
        if doomed:
            self._in_background("deleting segment files", lambda: _unlink_all(doomed))

    def _purge_deleted(self, now_ms: int) -> None:
        due_now: list[str] = []
        keep = []
        for due, paths in self._pending_deletes:
            if due <= now_ms:
                due_now.extend(paths)
            else:
                keep.append((due, paths))
        self._pending_deletes = keep
        if due_now:
            self._in_background("deleting segment files", lambda: _unlink_all(due_now))

    @_storage_op
    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose last batch is ``expiration_ms`` old (producer.id.expiration.ms)."""
        with self._lock:
            return self.producers.remove_expired(now_ms, expiration_ms)

    # --- flush -------------------------------------------------------------------------------------

    def needs_flush(self, now_ms: int) -> bool:
        """Whether flush.messages or flush.ms call for an fsync now (the broker may then run
        :meth:`flush` off its reactor thread)."""
        if self._closed or self.offline:
            return False
        unflushed = self._next_offset - self.recovery_point
        return unflushed > 0 and (unflushed >= self.config.flush_messages
                                  or now_ms - self._last_flush_ms >= self.config.flush_ms)

    @_storage_op
    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if :meth:`needs_flush`; the log counts unflushed records itself (log end minus
        recovery point, as Kafka does), so the caller only passes the time."""
        if not self.needs_flush(now_ms):
            return False
        self._flush()
        self._last_flush_ms = now_ms
        return True

    @_storage_op
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, ``up_to_offset``) and advance the
        recovery point. Safe to call from another thread than the owner (see module docstring).
        The leader-epoch checkpoint is written first if it lags, so it is complete below the
        recovery point."""
        self._flush(up_to_offset)

    def _flush(self, up_to_offset: int | None = None) -> None:
        fds: list[int] = []
        with self._lock:
            if self._closed:
                return
            target = self._next_offset if up_to_offset is None else min(up_to_offset, self._next_offset)
            if target <= self.recovery_point and not self._dir_dirty:
                return
            generation = self._generation
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            try:
                for seg in self._segments:
                    if seg.base_offset >= target:
                        break
                    if seg.next_offset > self.recovery_point:
                        fds.extend(seg.sync_handles())
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
        try:
            for fd in fds:
                os.fsync(fd)
            if dir_dirty:
                checkpoint.fsync_dir(self.directory)
            self.epochs.flush()
        except FileNotFoundError:
            if self._closed:
                return               # deleted while this thread fsynced: nothing left to keep
            raise
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            if generation == self._generation and target > self.recovery_point:
                self.recovery_point = target

    # --- lifecycle ---------------------------------------------------------------------------------

    def close(self, *, sync: bool = True) -> None:
        """Write buffered index entries, the leader-epoch checkpoint and a producer snapshot at
        the log end; close the files. Does not fsync the segments: the LogManager flushes before
        it marks a clean shutdown. Runs at shutdown, so the writes stay on the calling thread.
        A log whose dir is offline only closes its file handles (no I/O on a failed disk).
        ``sync=False``: the checkpoint and snapshot are written without fsync; the caller makes
        them durable (LogManager.close: one sync for every log before the clean-shutdown mark)."""
        with self._lock:
            if self._closed:
                return
            if self.offline:
                self.close_handles()
                return
            try:
                self.epochs.flush(sync=sync)
                self.epochs.close()
                self.producers.take_snapshot(self._next_offset, sync=sync)
                for seg in self._segments:
                    seg.close()
                # shutdown: nothing is served any more, so the pending unlinks run here
                for _, paths in self._pending_deletes:
                    _unlink_all(paths)
                self._pending_deletes = []
            except OSError as e:
                self.close_handles()
                raise self.failures.fail(self.log_dir, f"closing {self.topic}-{self.partition}", e) from e
            self._closed = True

    def close_handles(self) -> None:
        """Close every file without writing anything (Kafka's ``closeHandlers``): the log's dir
        failed, or the log is being deleted. Later operations raise."""
        with self._lock:
            self.epochs.close()
            for seg in self._segments:
                try:
                    seg.close_handles()
                except OSError as e:           # close(2) reporting a deferred write error
                    log.warning("%s: closing a segment: %s", self.directory, e)
            self._pending_deletes = []
            self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory with everything in it (Kafka's
        ``asyncDelete``): renamed to ``<dir>.<uuid>-delete`` now, so the name is free for a
        partition re-created at once and a crash leaves nothing that looks like a live log;
        removed in the background (the loader removes leftovers at start). A log whose dir is
        offline is only closed."""
        with self._lock:
            self.close_handles()
            if self.offline:
                return
            doomed = f"{self.directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            try:
                os.replace(self.directory, doomed)
            except OSError as e:
                raise self.failures.fail(self.log_dir, f"deleting {self.topic}-{self.partition}", e) from e
        epochs = self.epochs

        def remove() -> None:
            epochs.wait_idle()             # a checkpoint write that started before the rename
            remove_tree(doomed)
        self._in_background("removing deleted log", remove)

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self._next_offset}, segments={len(self._segments)})")


def _unlink_all(paths: list[str]) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def remove_tree(path: str) -> None:
    """``rm -r path``: entries already gone are fine, any other OSError is raised (a failing disk
    must be reported, not ignored)."""
    def unreadable(e: OSError) -> None:
        if not isinstance(e, FileNotFoundError):
            raise e
    for root, dirs, files in os.walk(path, topdown=False, onerror=unreadable):
        for name in files:
            try:
                os.unlink(os.path.join(root, name))
            except FileNotFoundError:
                pass
        for name in dirs:
            try:
                os.rmdir(os.path.join(root, name))
            except FileNotFoundError:
                pass
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
