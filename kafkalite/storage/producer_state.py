"""Producer state of one partition (Kafka's ``ProducerStateManager``): idempotence and transactions.

Per producer id it keeps the current epoch and the metadata of its last 5 batches, enough to answer
a retried batch with its original offsets and to reject sequence gaps and fenced epochs *before*
anything is written (record-batch.md section 6). All of it is derived from batch headers (and the
one record of each control batch), so after a crash or a leader change the state is rebuilt from
the latest snapshot plus a scan of the log after it; leaders and followers apply the same rules.

Transactions (KIP-98): a producer's first transactional data batch opens its transaction at that
batch's offset (``current_txn_first_offset``); its COMMIT/ABORT control batch (records/control.py)
closes it and yields a :class:`CompletedTxn`. A completed transaction stays "unreplicated" until
the high watermark passes its marker. The first unstable offset is the smallest first offset of
an open or unreplicated transaction; the partition's last stable offset (LSO) is the smaller of it
and the high watermark, and read_committed consumers read only below it.

Snapshot file ``<offset, 20 digits>.snapshot`` in the partition dir holds the state of the log up
to (excluding) ``offset``. Format (big-endian; kafkalite's own, Kafka's is not reproduced)::

    magic        4 bytes  b"KLPS"
    version      int16    2 (version 1, read too, lacks the two transaction fields)
    crc          uint32   CRC-32C of every byte after this field
    offset       int64    the snapshot's offset (equals the file name)
    count        int32    number of producers, then per producer:
      producerId     int64
      epoch          int16
      lastTimestamp  int64
      coordinatorEpoch      int32   (v2) epoch of the coordinator that wrote its last marker, -1
      currentTxnFirstOffset int64   (v2) first offset of its open transaction, -1 if none
      batchCount     int8    (<= 5), then per batch, oldest first:
        firstSeq     int32
        lastSeq      int32
        lastOffset   int64
        offsetDelta  int32
        timestamp    int64

A snapshot that is short or fails its CRC is deleted and an older one (or none) is used instead.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from typing import Callable, Iterable, NamedTuple

from kafkalite.errors import (ErrorCode, InvalidProducerEpochError, InvalidTxnStateError, KafkaError,
                              OutOfOrderSequenceError)
from kafkalite.records.batch import NO_SEQUENCE, BatchInfo
from kafkalite.records.control import ControlType, EndTxnMarker
from kafkalite.records.crc import crc32c
from kafkalite.storage.index import _pwrite_all

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
_MAGIC = b"KLPS"
_VERSION = 2
_HEAD = struct.Struct(">4shI")
_BODY_HEAD = struct.Struct(">qi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqiq")


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction a control batch ended: ``last_offset`` is its marker's offset; an aborted one
    goes to the segment's transaction index with ``last_stable_offset`` (txn_index.py)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int


MarkerReader = Callable[[BatchInfo], EndTxnMarker]


class ProducerStateEntry:
    """One producer's epoch, its last few batches and its open transaction."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp", "coordinator_epoch",
                 "current_txn_first_offset")

    def __init__(self, producer_id: int, epoch: int, last_timestamp: int = -1, coordinator_epoch: int = -1,
                 current_txn_first_offset: int = -1) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (their sequences no longer apply)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add(self, epoch: int, meta: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(meta)
        self.last_timestamp = meta.timestamp


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == 0x7FFFFFFF)


def _check(producer_id: int, epoch: int, base_seq: int, cur_epoch: int, cur_last_seq: int) -> None:
    """Epoch fencing then sequence continuity (Kafka's checkProducerEpoch/checkSequence)."""
    if epoch < cur_epoch:
        raise InvalidProducerEpochError(
            f"producer {producer_id} epoch {epoch} is older than the current epoch {cur_epoch}")
    if epoch > cur_epoch:
        if base_seq != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} bumped its epoch to {epoch} but starts at sequence {base_seq}, not 0")
    elif cur_last_seq != NO_SEQUENCE and not _in_sequence(cur_last_seq, base_seq):
        raise OutOfOrderSequenceError(
            f"producer {producer_id} epoch {epoch}: sequence {base_seq} does not follow {cur_last_seq}")


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition, with snapshots on disk."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        #: producer id -> first offset of its open transaction; insertion order is offset order
        #: (transactions open at the log end, and a rebuilt map is sorted)
        self.ongoing: dict[int, int] = {}
        #: ended transactions whose marker the high watermark has not passed yet, in marker order
        self.unreplicated: list[CompletedTxn] = []

    # --- append path -----------------------------------------------------------------------------

    def check(self, infos: list[BatchInfo], *, client: bool = True) -> BatchMetadata | None:
        """Validate a client append before it is written.

        Returns the retained metadata of the first batch that duplicates one already in the log
        (the whole append is then skipped, as Kafka does); raises InvalidProducerEpochError or
        OutOfOrderSequenceError; returns None when everything may be written. Producers without
        state accept any sequence (KIP-360). ``client=False``: the group coordinator's own
        transactional offset commits (Kafka's AppendOrigin.Coordinator), which carry the
        producer's id and epoch but no sequence of their own: only the epoch is fenced.
        """
        pending: dict[int, tuple[int, int, bool]] | None = None
        for info in infos:
            pid = info.producer_id
            if pid < 0 or info.is_control:         # markers: check_marker, before they are built
                continue
            epoch = info.producer_epoch
            base_seq = info.base_sequence
            if pending is not None and pid in pending:
                cur_epoch, cur_last, in_txn = pending[pid]
                if client:
                    _check(pid, epoch, base_seq, cur_epoch, cur_last)
            else:
                entry = self.producers.get(pid)
                in_txn = False
                if entry is not None:
                    if not client:
                        if epoch < entry.epoch:
                            raise InvalidProducerEpochError(
                                f"producer {pid} epoch {epoch} is older than the current epoch {entry.epoch}")
                    else:
                        dup = entry.find_duplicate(epoch, base_seq, info.last_sequence)
                        if dup is not None:
                            return dup
                        _check(pid, epoch, base_seq, entry.epoch, entry.last_seq)
                    in_txn = entry.current_txn_first_offset >= 0
            if in_txn and not info.is_transactional:
                raise InvalidTxnStateError(
                    f"producer {pid} wrote a non-transactional batch while its transaction is open")
            if pending is None:
                pending = {}
            pending[pid] = (epoch, info.last_sequence, in_txn or info.is_transactional)
        return None

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a COMMIT/ABORT marker the coordinator asks the leader to write (Kafka's
        ``appendEndTxnMarker`` checks): an older producer epoch is INVALID_PRODUCER_EPOCH, an
        older coordinator epoch TRANSACTION_COORDINATOR_FENCED."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} has epoch {producer_epoch}, older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                             f"older than {entry.coordinator_epoch}", ErrorCode.TRANSACTION_COORDINATOR_FENCED)

    def update(self, infos: Iterable[BatchInfo], markers: MarkerReader | None = None) -> list[CompletedTxn]:
        """Record written batches (their final offsets and timestamps); also the replay path and
        the follower's. ``markers`` reads the marker of a control batch (needed only when
        ``infos`` holds one). Returns the transactions the control batches ended, in order."""
        producers = self.producers
        completed: list[CompletedTxn] = []
        for info in infos:
            pid = info.producer_id
            if pid < 0:
                continue
            entry = producers.get(pid)
            if entry is None:
                entry = producers[pid] = ProducerStateEntry(pid, info.producer_epoch)
            if info.is_control:
                if not info.records_count:
                    # a marker the cleaner emptied (its transaction's data is gone) kept only as
                    # the producer's last entry: it carries the epoch, nothing else to replay
                    entry.set_epoch(info.producer_epoch)
                    entry.last_timestamp = info.max_timestamp
                    continue
                if markers is None:
                    raise ValueError("a control batch needs a marker reader")
                completed.append(self._end_txn(entry, info, markers(info)))
                continue
            entry.add(info.producer_epoch, BatchMetadata(
                info.base_sequence, info.last_sequence, info.base_offset + info.last_offset_delta,
                info.last_offset_delta, info.max_timestamp))
            if info.is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = info.base_offset
                self.ongoing[pid] = info.base_offset
        return completed

    def _end_txn(self, entry: ProducerStateEntry, info: BatchInfo, marker: EndTxnMarker) -> CompletedTxn:
        pid = entry.producer_id
        entry.set_epoch(info.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = info.max_timestamp
        marker_offset = info.base_offset
        # a partition added to a transaction but never written: the transaction is just the marker
        first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else marker_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(pid, None)
        lso = next(iter(self.ongoing.values()), marker_offset + 1)
        done = CompletedTxn(pid, first, marker_offset, marker.control_type == ControlType.ABORT,
                            min(lso, marker_offset + 1))
        self.unreplicated.append(done)
        return done

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an open or not yet replicated transaction (None: none)."""
        first = next(iter(self.ongoing.values()), None)
        for txn in self.unreplicated:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def on_high_watermark(self, high_watermark: int) -> None:
        """Ended transactions whose marker lies below the high watermark are stable."""
        unrep = self.unreplicated
        if unrep and unrep[0].last_offset < high_watermark:
            self.unreplicated = [t for t in unrep if t.last_offset >= high_watermark]

    def truncate_head(self, log_start_offset: int, *, keep_without_data: bool = False) -> None:
        """Forget producers whose last batch lies below the log start (their data is gone).
        ``keep_without_data`` (loading): a producer known only from a marker that bumped its
        epoch has no batch, and keeps it, as Kafka's load path does (the fencing epoch)."""
        gone = [pid for pid, e in self.producers.items() if e.last_data_offset < log_start_offset
                and not (keep_without_data and not e.batches)]
        for pid in gone:
            del self.producers[pid]
            self.ongoing.pop(pid, None)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's removeExpiredProducers: drop producers whose last batch's timestamp is
        ``expiration_ms`` (producer.id.expiration.ms) or more before ``now_ms``; never one with an
        open transaction (its first offset holds the LSO until the coordinator ends it)."""
        gone = [pid for pid, e in self.producers.items()
                if now_ms - e.last_timestamp >= expiration_ms and e.current_txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated = []

    def _set_producers(self, producers: dict[int, ProducerStateEntry]) -> None:
        self.producers = producers
        open_txns = sorted((e.current_txn_first_offset, pid) for pid, e in producers.items()
                           if e.current_txn_first_offset >= 0)
        self.ongoing = {pid: first for first, pid in open_txns}
        self.unreplicated = []

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.directory):
            m = _SNAPSHOT_RE.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def encode(self, offset: int) -> bytes:
        body = bytearray(_BODY_HEAD.pack(offset, len(self.producers)))
        for pid, e in self.producers.items():
            body += _PRODUCER.pack(pid, e.epoch, e.last_timestamp, e.coordinator_epoch,
                                   e.current_txn_first_offset, len(e.batches))
            for m in e.batches:
                body += _BATCH.pack(*m)
        return _HEAD.pack(_MAGIC, _VERSION, crc32c(body)) + body

    def take_snapshot(self, offset: int, *, sync: bool = False) -> str:
        """Write the state as of ``offset`` (tmp file + rename; fsync only if ``sync``)."""
        path = self.snapshot_path(offset)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _pwrite_all(fd, self.encode(offset), 0)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path

    @staticmethod
    def decode(data: bytes) -> tuple[int, dict[int, ProducerStateEntry]]:
        """Parse a snapshot; raises ValueError if it is not one or fails its CRC."""
        if len(data) < _HEAD.size + _BODY_HEAD.size:
            raise ValueError("snapshot too short")
        magic, version, crc = _HEAD.unpack_from(data, 0)
        if magic != _MAGIC or version not in (1, _VERSION):
            raise ValueError(f"not a version 1 or {_VERSION} producer snapshot")
        body = memoryview(data)[_HEAD.size:]
        if crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        offset, count = _BODY_HEAD.unpack_from(body, 0)
        pos = _BODY_HEAD.size
        producers: dict[int, ProducerStateEntry] = {}
        try:
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_ts, n = _PRODUCER_V1.unpack_from(body, pos)
                    coordinator_epoch, txn_first = -1, -1
                    pos += _PRODUCER_V1.size
                else:
                    pid, epoch, last_ts, coordinator_epoch, txn_first, n = _PRODUCER.unpack_from(body, pos)
                    pos += _PRODUCER.size
                entry = ProducerStateEntry(pid, epoch, last_ts, coordinator_epoch, txn_first)
                for _ in range(n):
                    entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                    pos += _BATCH.size
                producers[pid] = entry
        except struct.error:
            raise ValueError("snapshot body truncated") from None
        if pos != len(body):
            raise ValueError("snapshot has trailing bytes")
        return offset, producers

    def load_latest(self, max_offset: int, *, keep_newer: bool = False) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; delete newer (unless
        ``keep_newer``: they still describe the log) or broken ones.

        Returns the snapshot's offset (replay the log from there) or None (replay everything).
        """
        self._set_producers({})
        for offset in reversed(self.snapshot_offsets()):
            path = self.snapshot_path(offset)
            if offset > max_offset:
                if not keep_newer:
                    os.unlink(path)
                continue
            try:
                with open(path, "rb") as f:
                    stored, producers = self.decode(f.read())
                if stored != offset:
                    raise ValueError(f"holds offset {stored}")
            except (OSError, ValueError) as e:
                log.warning("deleting unusable producer snapshot %s: %s", path, e)
                os.unlink(path)
                continue
            self._set_producers(producers)
            return offset
        return None

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Delete snapshots with offset < ``below`` and/or > ``above`` (both None: all of them)."""
        for offset in self.snapshot_offsets():
            if (below is None and above is None) or (below is not None and offset < below) \
                    or (above is not None and offset > above):
                try:
                    os.unlink(self.snapshot_path(offset))
                except FileNotFoundError:
                    pass
