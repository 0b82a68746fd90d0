"""The log cleaner on transactional data, as Kafka's cleaner treats it: aborted records are
discarded (never the latest value of a key), the segment holding the first unstable offset is
never cleaned, COMMIT/ABORT markers stay while their transaction has data and go after
delete.retention.ms once it has none, and producer state (sequences, a marker's epoch) survives."""
from __future__ import annotations

import glob
import os
import random

import pytest

from kafkalite.errors import InvalidProducerEpochError
from kafkalite.records.batch import DELETE_HORIZON_MASK, read_header, scan_valid_prefix, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.control import AbortedTransactionFilter, ControlType
from kafkalite.records.record import decode_batch
from kafkalite.storage import LogConfig, LogManager, PartitionLog
from kafkalite.storage.cleaner import LogCleaner

pytestmark = pytest.mark.unit

BIG = 2**31 - 1
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=4096, index_interval_bytes=256,
                    file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.01, delete_retention_ms=10_000)
T0 = 5_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Writer:
    """Appends to one log as the broker would (the high watermark follows the log end) and keeps
    per transactional producer its epoch and next sequence."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.seq: dict[int, int] = {}

    def _append(self, raw: bytearray) -> int:
        infos = validate_batches(raw, max_batch_bytes=BIG)
        first = self.plog.append(raw, infos, leader_epoch=0, now_ms=1000).first_offset
        self.plog.high_watermark = self.plog.log_end_offset
        return first

    def plain(self, pairs: list[tuple[bytes, bytes | None]]) -> int:
        return self._append(build_batch([(1000, k, v, ()) for k, v in pairs]))

    def txn(self, pid: int, epoch: int, pairs: list[tuple[bytes, bytes | None]]) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(pairs)
        return self._append(build_batch([(1000, k, v, ()) for k, v in pairs], producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, transactional=True))

    def end(self, pid: int, epoch: int, commit: bool) -> int:
        first = self.plog.append_end_txn_marker(ControlType.COMMIT if commit else ControlType.ABORT,
                                                producer_id=pid, producer_epoch=epoch, coordinator_epoch=0,
                                                leader_epoch=0, now_ms=1000).first_offset
        self.plog.high_watermark = self.plog.log_end_offset
        return first

    def roll(self) -> None:
        self.plog.roll(0)


def open_log(tmp_path) -> tuple[LogManager, PartitionLog]:
    lm = LogManager([str(tmp_path / "logs")], COMPACT, topic_config=lambda t: COMPACT)
    return lm, lm.get_or_create("t", 0)


def batches(plog: PartitionLog) -> list[tuple]:
    """(header, records) of every batch from the log start, read through PartitionLog.read."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        r = plog.read(offset, 1 << 20)
        if r.first_offset == -1:
            break
        data = bytes(r.records)
        infos, end = scan_valid_prefix(data, 0, verify_crc=True)
        assert end == len(data), "a served batch is torn or fails its CRC"
        out.extend((info, decode_batch(data, info)) for info in infos)
        offset = r.last_offset + 1
    return out


def data_records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """What read_uncommitted shows: every data record (offset, key, value)."""
    return [(r.offset, r.key, r.value) for info, rs in batches(plog) if not info.is_control for r in rs]


def markers(plog: PartitionLog) -> list[tuple[int, int, int]]:
    """(offset, producer id, record count) of every control batch."""
    return [(info.base_offset, info.producer_id, info.records_count) for info, _ in batches(plog) if info.is_control]


def read_committed(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer sees: fetches below the LSO with the aborted transactions
    overlapping each, filtered by records.control.AbortedTransactionFilter."""
    lso = plog.last_stable_offset
    out = []
    offset = plog.log_start_offset
    while offset < lso:
        r = plog.read(offset, 1 << 20, max_offset=lso)
        if r.first_offset < 0:
            break
        buf = bytes(r.records)
        aborted = [(t.producer_id, t.first_offset) for t in plog.collect_aborted_txns(offset, r.last_offset + 1)]
        keep = AbortedTransactionFilter(aborted)
        pos = 0
        while pos < len(buf):
            info = read_header(buf, pos)
            if not keep.skip(buf, info):
                out.extend((rec.offset, rec.key, rec.value) for rec in decode_batch(buf, info))
            pos = info.end
        offset = r.last_offset + 1
    return out


def latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for _, k, v in records:
        out[k] = v
    return {k: v for k, v in out.items() if v is not None}


def test_an_aborted_record_never_wins_compaction_and_its_marker_goes_after_the_retention(tmp_path):
    """A committed value followed by an aborted one of the same key: cleaning keeps the committed
    value (the aborted batch is discarded, not mapped), read_committed and read_uncommitted then
    agree. The ABORT marker and its .txnindex entry stay in the pass that removed the data; the
    next pass gives the marker a delete horizon and drops the index entry; a pass after
    delete.retention.ms removes it. The COMMIT marker of data still in the log stays."""
    clock = Clock()
    lm, plog = open_log(tmp_path)
    w = Writer(plog)
    w.txn(1, 0, [(b"a", b"committed")])                          # 0
    w.end(1, 0, commit=True)                                     # 1
    w.txn(2, 0, [(b"a", b"aborted"), (b"b", b"aborted")])        # 2-3
    abort_at = w.end(2, 0, commit=False)                         # 4
    w.txn(2, 0, [(b"c", b"later")])                              # 5: producer 2 goes on
    w.end(2, 0, commit=True)                                     # 6
    w.roll()
    w.plain([(b"z", b"1")])                                      # 7, active
    before = read_committed(plog)
    assert latest(before) == {b"a": b"committed", b"c": b"later", b"z": b"1"}

    cleaner = LogCleaner(lm, clock=clock)
    assert cleaner.clean_once() is not None
    assert data_records(plog) == [(0, b"a", b"committed"), (5, b"c", b"later"), (7, b"z", b"1")]
    assert read_committed(plog) == data_records(plog)
    assert [m[0] for m in markers(plog)] == [1, abort_at, 6]
    assert [(t.producer_id, t.first_offset, t.last_offset) for seg in plog.segments
            for t in seg.txn_index.entries] == [(2, 2, abort_at)]

    w.plain([(b"y", b"1")])
    w.roll()
    clock.now = T0 + 1
    r = cleaner.clean_once()
    assert r is not None and r.earliest_horizon == T0 + 1 + 10_000
    abort_batch = next(info for info, _ in batches(plog) if info.base_offset == abort_at)
    assert abort_batch.attributes & DELETE_HORIZON_MASK and abort_batch.base_timestamp == T0 + 1 + 10_000
    assert [t for seg in plog.segments for t in seg.txn_index.entries] == []
    assert [m[0] for m in markers(plog)] == [1, abort_at, 6]

    clock.now = T0 + 1 + 9_999
    assert cleaner.cleanable(clock()) == []
    clock.now = T0 + 1 + 10_000
    assert cleaner.clean_once() is not None                     # due: the marker's horizon passed
    assert [m[0] for m in markers(plog)] == [1, 6]
    assert latest(read_committed(plog)) == {b"a": b"committed", b"c": b"later", b"z": b"1", b"y": b"1"}
    assert plog.last_stable_offset == plog.high_watermark


def test_the_segment_holding_an_open_transaction_is_not_cleaned(tmp_path):
    """An open transaction's first offset is the first unstable offset: its segment is
    uncleanable, so a later plain write of the same key cannot remove the open record yet. Once
    the transaction aborts, cleaning removes it and the later value stays."""
    clock = Clock()
    lm, plog = open_log(tmp_path)
    w = Writer(plog)
    w.plain([(b"k", b"first")])                                  # 0
    w.txn(3, 0, [(b"k", b"open")])                               # 1
    w.plain([(b"k", b"plain")])                                  # 2
    w.roll()
    w.plain([(b"m", b"1")])                                      # 3
    w.roll()
    w.plain([(b"q", b"1")])                                      # 4, active
    assert plog.first_unstable_offset == 1
    cleaner = LogCleaner(lm, clock=clock)
    assert cleaner.clean_once() is None
    assert [o for o, _, _ in data_records(plog)] == [0, 1, 2, 3, 4]

    w.end(3, 0, commit=False)                                    # 5
    w.roll()
    w.plain([(b"r", b"1")])
    assert cleaner.clean_once() is not None
    assert data_records(plog)[:3] == [(2, b"k", b"plain"), (3, b"m", b"1"), (4, b"q", b"1")]
    assert latest(read_committed(plog))[b"k"] == b"plain"


def test_a_bumped_epoch_survives_as_an_empty_marker_and_fences_after_a_reload(tmp_path):
    """A timed-out transaction aborted with a bumped epoch (KIP-360): its data goes, its marker
    (the producer's last entry, carrying epoch 1) outlives delete.retention.ms as an empty
    61-byte header, and a log reloaded without producer snapshots still fences epoch 0."""
    clock = Clock()
    lm, plog = open_log(tmp_path)
    w = Writer(plog)
    w.txn(5, 0, [(b"a", b"zombie")])                             # 0
    w.end(5, 1, commit=False)                                    # 1, epoch bumped
    w.roll()
    w.plain([(b"z", b"1")])                                      # 2
    w.roll()
    w.plain([(b"w", b"1")])                                      # 3, active
    cleaner = LogCleaner(lm, clock=clock)
    assert cleaner.clean_once() is not None
    assert [o for o, _, _ in data_records(plog)] == [2, 3]
    assert markers(plog) == [(1, 5, 1)]
    w.roll()
    w.plain([(b"v", b"1")])
    assert cleaner.clean_once().earliest_horizon == T0 + 10_000
    clock.now = T0 + 10_000
    assert cleaner.clean_once() is not None
    (info, recs), = [(i, rs) for i, rs in batches(plog) if i.is_control]
    assert (info.base_offset, info.producer_id, info.producer_epoch, info.records_count, info.size) == (1, 5, 1, 0, 61)
    w.roll()
    w.plain([(b"u", b"1")])
    clock.now += 1
    assert cleaner.clean_once() is not None
    assert markers(plog) == [(1, 5, 0)], "the producer's last entry stays while the producer lives"

    lm._release_locks()
    plog.close()
    for snap in glob.glob(os.path.join(plog.directory, "*.snapshot")):
        os.unlink(snap)
    reopened = PartitionLog.open(plog.directory, COMPACT, 0)
    try:
        assert reopened.producers.producers[5].epoch == 1
        raw = build_batch([(1000, b"a", b"again", ())], producer_id=5, producer_epoch=0, base_sequence=1,
                          transactional=True)
        with pytest.raises(InvalidProducerEpochError):
            reopened.append(raw, validate_batches(raw, max_batch_bytes=BIG), leader_epoch=0, now_ms=1000)
        assert reopened.last_stable_offset == reopened.high_watermark or reopened.first_unstable_offset is None
    finally:
        reopened.close()


def test_an_aborted_batch_that_holds_its_producers_last_sequence_stays_as_an_empty_header(tmp_path):
    """An aborted batch is discarded, but when it is its producer's last data batch it stays as an
    empty header (sequence kept), and its ABORT marker with it; the producer continues its
    sequence after a reload."""
    lm, plog = open_log(tmp_path)
    w = Writer(plog)
    w.txn(9, 0, [(b"a", b"x"), (b"b", b"x")])                    # 0-1
    w.end(9, 0, commit=False)                                    # 2
    w.roll()
    w.plain([(b"z", b"1")])                                      # 3
    r = LogCleaner(lm, clock=Clock()).clean_once()
    assert r.batches_emptied == 1
    hdrs = [info for info, _ in batches(plog)]
    assert (hdrs[0].base_offset, hdrs[0].records_count, hdrs[0].last_sequence, hdrs[0].size) == (0, 0, 1, 61)
    assert markers(plog) == [(2, 9, 1)]
    assert data_records(plog) == [(3, b"z", b"1")]
    lm._release_locks()
    plog.close()
    reopened = PartitionLog.open(plog.directory, COMPACT, 0)
    try:
        assert reopened.producers.producers[9].last_seq == 1
    finally:
        reopened.close()


def test_random_transactions_read_committed_is_unchanged_by_repeated_cleaning(tmp_path):
    """Three transactional producers committing or aborting and a plain writer, over many
    segments and cleaning passes (clock moving past delete.retention.ms): after every pass the
    latest value per key a read_committed consumer sees equals the model's latest committed
    value, read_uncommitted shows no aborted record below the cleaned end, and the LSO equals
    the high watermark; a reload without snapshots gives the same view."""
    rng = random.Random(14)
    clock = Clock()
    lm, plog = open_log(tmp_path)
    w = Writer(plog)
    committed: dict[bytes, bytes | None] = {}
    aborted_values: set[bytes] = set()
    cleaner = LogCleaner(lm, clock=clock)
    n = 0
    for round_ in range(12):
        for _ in range(rng.randint(3, 8)):
            if rng.random() < 0.3:
                pairs = [(f"k{rng.randrange(12)}".encode(), f"p{n}".encode())]
                n += 1
                w.plain(pairs)
                committed.update(pairs)
                continue
            pid = rng.choice([21, 22, 23])
            pairs = []
            for _ in range(rng.randint(1, 3)):
                pairs.append((f"k{rng.randrange(12)}".encode(), f"t{n}".encode()))
                n += 1
            w.txn(pid, 0, pairs)
            if rng.random() < 0.4:
                w.end(pid, 0, commit=False)
                aborted_values.update(v for _, v in pairs)
            else:
                w.end(pid, 0, commit=True)
                committed.update(pairs)
        w.roll()
        w.plain([(b"tick", f"{round_}".encode())])
        committed[b"tick"] = f"{round_}".encode()
        w.roll()
        cleaner.clean_once()
        clock.now += 4_000
        view = read_committed(plog)
        assert latest(view) == {k: v for k, v in committed.items() if v is not None}
        assert plog.last_stable_offset == plog.high_watermark
        cp = cleaner.checkpoint_of("t", 0) or 0
        assert not [r for r in data_records(plog) if r[0] < cp and r[2] in aborted_values]
    final = read_committed(plog)
    lm._release_locks()
    plog.close()
    for snap in glob.glob(os.path.join(plog.directory, "*.snapshot")):
        os.unlink(snap)
    reopened = PartitionLog.open(plog.directory, COMPACT, 0)
    try:
        reopened.high_watermark = reopened.log_end_offset
        assert read_committed(reopened) == final
        assert reopened.last_stable_offset == reopened.high_watermark
    finally:
        reopened.close()
