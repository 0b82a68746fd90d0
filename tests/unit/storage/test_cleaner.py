"""The log cleaner against a model: latest value per key, offsets unchanged, tombstones kept for
delete.retention.ms then dropped (injected clock), codecs, idempotent batches, cleaned reads and
index lookups, checkpoints, lag and ratio rules, a refused swap, and crashes at every swap step."""
from __future__ import annotations

import os
import random

import pytest

from kafkalite.errors import OutOfOrderSequenceError
from kafkalite.records.batch import DELETE_HORIZON_MASK, read_header, scan_valid_prefix, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.record import decode_batch
from kafkalite.storage import LogConfig, LogManager, PartitionLog
from kafkalite.storage import cleaner as cleaner_mod
from kafkalite.storage import segment as segment_mod
from kafkalite.storage.cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner

pytestmark = pytest.mark.unit

BIG = 2**31 - 1
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=4096, index_interval_bytes=256,
                    file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.01, delete_retention_ms=10_000)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_manager(tmp_path, config: LogConfig = COMPACT) -> LogManager:
    return LogManager([str(tmp_path / "logs")], config, topic_config=lambda t: config)


def keyed(records, **options) -> bytearray:
    """One batch of (key, value) pairs, timestamps 1000, 1001, ..."""
    return build_batch([(1000 + i, k, v, ()) for i, (k, v) in enumerate(records)], **options)


def produce(plog: PartitionLog, *batches: bytearray, now_ms: int = 1000):
    buf = bytearray(b"".join(batches))
    infos = validate_batches(buf, max_batch_bytes=BIG)
    res = plog.append(buf, infos, leader_epoch=0, now_ms=now_ms)
    plog.high_watermark = plog.log_end_offset
    return res


def all_batches(plog: PartitionLog) -> list[tuple]:
    """Every batch header and its records, read through PartitionLog.read from the log start."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        r = plog.read(offset, 1 << 20)
        if r.first_offset == -1:
            break
        data = bytes(r.records)
        infos, end = scan_valid_prefix(data, 0, verify_crc=True)
        assert end == len(data), "a served batch is torn or fails its CRC"
        for info in infos:
            out.append((info, decode_batch(data, info)))
        offset = r.last_offset + 1
    return out


def all_records(plog: PartitionLog):
    return [rec for _, recs in all_batches(plog) for rec in recs]


class Model:
    """Everything appended: offset -> (key, value), and each key's latest offset."""

    def __init__(self) -> None:
        self.at: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.latest: dict[bytes, int] = {}

    def produce(self, plog: PartitionLog, pairs: list[tuple[bytes, bytes | None]], **options) -> None:
        res = produce(plog, keyed(pairs, **options))
        for i, (k, v) in enumerate(pairs):
            self.at[res.first_offset + i] = (k, v)
            self.latest[k] = res.first_offset + i

    def check(self, plog: PartitionLog, cleaned_below: int) -> list:
        """Offsets unchanged and increasing, every record as appended, the latest record of every
        key present (a tombstone may have expired), and below ``cleaned_below`` at most one record
        per key: the latest one."""
        recs = all_records(plog)
        offsets = [r.offset for r in recs]
        assert offsets == sorted(set(offsets)), "offsets must be unique and increasing"
        for r in recs:
            assert self.at[r.offset] == (r.key, r.value), f"record at {r.offset} changed"
        present = {r.offset for r in recs}
        for key, off in self.latest.items():
            if self.at[off][1] is not None:
                assert off in present, f"latest value of {key!r} at {off} lost"
        latest_below: dict[bytes | None, int] = {}
        for off, (k, _) in self.at.items():
            if off < cleaned_below:
                latest_below[k] = max(off, latest_below.get(k, -1))
        for r in recs:
            if r.offset < cleaned_below:
                assert r.offset == latest_below[r.key], f"{r.key!r} at {r.offset} is not its latest record"
        return recs


def random_updates(model: Model, plog: PartitionLog, rng: random.Random, n_batches: int, keys: int = 40,
                   tombstones: bool = True, **options) -> None:
    for _ in range(n_batches):
        pairs = []
        for _ in range(rng.randint(1, 8)):
            k = f"key-{rng.randrange(keys)}".encode()
            v = None if tombstones and rng.random() < 0.1 else os.urandom(rng.randint(1, 60))
            pairs.append((k, v))
        model.produce(plog, pairs, **options)


def test_compaction_keeps_the_latest_record_per_key_with_offsets_unchanged(tmp_path):
    """600 random batches over 40 keys across many segments: after one pass every inactive
    segment holds each key at most once, every kept record is byte-for-byte what was appended at
    that offset, every key's latest value is there, the log end does not move, the active
    segment is untouched, and small cleaned segments are merged."""
    clock = Clock()
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    model = Model()
    random_updates(model, plog, random.Random(1), 600)
    end, active = plog.log_end_offset, plog.active_segment
    active_bytes = active.read(0, active.size)
    segments_before = len(plog.segments)
    size_before = plog.size
    cleaner = LogCleaner(lm, clock=clock)
    result = cleaner.clean_once()
    assert result is not None and result.swapped
    assert result.end_offset == active.base_offset
    assert plog.log_end_offset == end
    assert plog.active_segment is active and active.read(0, active.size) == active_bytes
    assert plog.size < size_before / 10
    model.check(plog, cleaned_below=active.base_offset)
    # nothing dirty remains below the active segment, so there is nothing more to clean
    assert cleaner.cleanable(clock()) == []
    assert cleaner.checkpoint_of("t", 0) == active.base_offset
    # groups are formed from the sizes before cleaning (Kafka's rule): the next pass merges the
    # segments the first one shrank
    random_updates(model, plog, random.Random(2), 100)
    assert cleaner.clean_once().swapped
    assert len(plog.segments) < segments_before / 4
    model.check(plog, cleaned_below=plog.active_segment.base_offset)


def test_repeated_passes_keep_the_model_and_the_log_reopens_identically(tmp_path):
    """Updates and cleaning interleaved 8 times; after each pass the model holds; the log then
    reopens (with full recovery) to the same records."""
    clock = Clock()
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    model = Model()
    rng = random.Random(7)
    cleaner = LogCleaner(lm, clock=clock)
    for _ in range(8):
        random_updates(model, plog, rng, 80)
        assert cleaner.run() == 1
        model.check(plog, cleaned_below=plog.active_segment.base_offset)
        clock.now += 1000
    before = [(r.offset, r.key, r.value) for r in all_records(plog)]
    lm._release_locks()
    reopened = PartitionLog.open(plog.directory, COMPACT, 0)
    reopened.high_watermark = reopened.log_end_offset
    assert [(r.offset, r.key, r.value) for r in all_records(reopened)] == before
    assert reopened.log_end_offset == plog.log_end_offset


def test_tombstones_are_kept_for_delete_retention_ms_then_dropped(tmp_path):
    """A tombstone survives the first pass with a KIP-534 delete horizon (attribute bit 6) of now
    + delete.retention.ms, survives passes before that time, and is dropped by the first pass
    after it; the key's older value is gone from the first pass on."""
    clock = Clock(5_000_000)
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    produce(plog, keyed([(b"a", b"1"), (b"b", b"1")]))
    produce(plog, keyed([(b"a", None), (b"c", b"1")]))
    plog.roll(0)
    produce(plog, keyed([(b"d", b"1")]))
    cleaner = LogCleaner(lm, clock=clock)
    assert cleaner.clean_once().earliest_horizon == 5_000_000 + 10_000
    batches = all_batches(plog)
    recs = [(r.key, r.value) for _, rs in batches for r in rs]
    assert recs == [(b"b", b"1"), (b"a", None), (b"c", b"1"), (b"d", b"1")]
    tomb_batch = next(info for info, rs in batches if any(r.value is None for r in rs))
    assert tomb_batch.attributes & DELETE_HORIZON_MASK and tomb_batch.base_timestamp == 5_010_000
    assert [r.timestamp for _, rs in batches for r in rs][:3] == [1001, 1000, 1001], "timestamps unchanged"

    clock.now = 5_009_999                                  # before the horizon: not due, still there
    assert cleaner.cleanable(clock()) == []
    clock.now = 5_010_000
    assert cleaner.clean_once() is not None                # due: the horizon passed
    assert [(r.key, r.value) for r in all_records(plog)] == [(b"b", b"1"), (b"c", b"1"), (b"d", b"1")]
    assert [r.offset for r in all_records(plog)] == [1, 3, 4]
    assert cleaner.cleanable(clock()) == []


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_rewritten_batches_keep_their_codec(tmp_path, codec):
    """A compressed batch that loses records is recompressed with its own codec."""
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    produce(plog, keyed([(b"x", b"old" * 50), (b"y", b"keep" * 50)], compression=codec))
    produce(plog, keyed([(b"x", b"new" * 50)], compression=codec))
    plog.roll(0)
    produce(plog, keyed([(b"z", b"1")]))
    LogCleaner(lm, clock=Clock()).clean_once()
    batches = all_batches(plog)
    assert [(r.offset, r.key) for _, rs in batches for r in rs] == [(1, b"y"), (2, b"x"), (3, b"z")]
    first = batches[0][0]
    assert first.compression == codec and first.base_offset == 0 and first.last_offset_delta == 1
    assert first.records_count == 1


def test_idempotent_batches_keep_producer_fields_and_the_last_batch_of_a_producer(tmp_path):
    """Rewritten idempotent batches keep producer id, epoch, base sequence and lastOffsetDelta;
    the producer's last batch stays as an empty header when all its records are overwritten, so
    after a reopen the producer continues its sequence without an out-of-order error."""
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    produce(plog, keyed([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], producer_id=7, producer_epoch=0, base_sequence=0))
    produce(plog, keyed([(b"a", b"2"), (b"d", b"2")], producer_id=7, producer_epoch=0, base_sequence=3))
    produce(plog, keyed([(b"a", b"3"), (b"d", b"3")]))          # another writer overwrites a and d
    plog.roll(0)
    produce(plog, keyed([(b"e", b"1")]))
    r = LogCleaner(lm, clock=Clock()).clean_once()
    assert r.batches_emptied == 1
    headers = [info for info, _ in all_batches(plog)]
    first, empty = headers[0], headers[1]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 0, 0)
    assert (first.base_offset, first.last_offset_delta, first.records_count) == (0, 2, 2)
    assert (empty.base_offset, empty.last_offset_delta, empty.records_count, empty.size) == (3, 1, 0, 61)
    assert (empty.producer_id, empty.base_sequence, empty.last_sequence) == (7, 3, 4)
    lm._release_locks()
    reopened = PartitionLog.open(plog.directory, COMPACT, 0)
    assert reopened.producers.producers[7].last_seq == 4
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, keyed([(b"f", b"1")], producer_id=7, producer_epoch=0, base_sequence=7))
    res = produce(reopened, keyed([(b"f", b"1")], producer_id=7, producer_epoch=0, base_sequence=5))
    assert not res.duplicate


def test_reads_and_index_lookups_across_cleaned_segments(tmp_path):
    """After cleaning, a read at every kept offset returns the batch holding it, a read at a
    removed offset returns the next kept batch, index entries point at batches starting at their
    offset, and timestamp lookups still work."""
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    model = Model()
    random_updates(model, plog, random.Random(3), 400, keys=900, tombstones=False)
    cleaner = LogCleaner(lm, clock=Clock())
    cleaner.clean_once()
    random_updates(model, plog, random.Random(4), 100, keys=900, tombstones=False)
    cleaner.clean_once()                                  # merges the shrunk segments
    kept = [r.offset for r in all_records(plog)]
    assert len(kept) < len(model.at)
    for offset in range(0, plog.log_end_offset, 3):
        # a consumer at ``offset``: skips records below it, continues after each batch's last offset
        want = next((o for o in kept if o >= offset), None)
        got, pos = None, offset
        while got is None and pos < plog.log_end_offset:
            r = plog.read(pos, 1)
            assert r.last_offset >= pos, "a batch entirely below the fetch offset was served"
            got = next((x.offset for x in decode_batch(bytes(r.records)) if x.offset >= offset), None)
            pos = r.last_offset + 1
        assert got == want
    indexed = [seg for seg in plog.segments[:-1] if seg.size > 4 * COMPACT.index_interval_bytes]
    assert indexed
    for seg in indexed:
        assert len(seg.index) > 0
        for rel, pos in zip(seg.index.rel, seg.index.pos):
            assert read_header(seg.read(pos, 61)).base_offset == seg.base_offset + rel
    found = plog.offset_for_timestamp(1000)
    assert found is not None and found[0] == kept[0]


def test_checkpoint_survives_a_restart_and_only_new_data_is_dirty(tmp_path):
    clock = Clock()
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    model = Model()
    random_updates(model, plog, random.Random(5), 200)
    LogCleaner(lm, clock=clock).clean_once()
    cleaned_to = plog.active_segment.base_offset
    lm.close()
    path = tmp_path / "logs" / CLEANER_OFFSET_CHECKPOINT
    assert path.read_text().splitlines() == ["0", "1", f"t 0 {cleaned_to}"]
    lm2 = open_manager(tmp_path)
    plog2 = lm2.get_or_create("t", 0)
    plog2.high_watermark = plog2.log_end_offset
    cleaner = LogCleaner(lm2, clock=clock)
    assert cleaner.checkpoint_of("t", 0) == cleaned_to
    assert cleaner.cleanable(clock()) == []
    random_updates(model, plog2, random.Random(6), 100)
    (ltc,) = cleaner.cleanable(clock())
    assert ltc.first_dirty == cleaned_to
    cleaner.clean_once()
    model.check(plog2, cleaned_below=plog2.active_segment.base_offset)


def test_min_compaction_lag_and_dirty_ratio_decide_when(tmp_path):
    """Segments younger than min.compaction.lag.ms are not cleaned; a log whose dirty ratio is
    not above min.cleanable.dirty.ratio is not chosen; delete-only logs never are."""
    clock = Clock(10_000)
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=4096, file_delete_delay_ms=0,
                       min_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.5)
    lm = open_manager(tmp_path, config)
    plog = lm.get_or_create("t", 0)
    delete_only = lm.get_or_create("d", 0, LogConfig(segment_bytes=4096))
    model = Model()
    random_updates(model, plog, random.Random(2), 100)      # record timestamps ~1000
    for _ in range(50):
        produce(delete_only, keyed([(b"k", b"v" * 50)]))
    cleaner = LogCleaner(lm, clock=clock)
    assert cleaner.cleanable(clock()) == []                 # 1000 > 10_000 - 60_000: too young
    clock.now = 61_008                                     # 1007 (largest) <= 61_008 - 60_000
    (ltc,) = cleaner.cleanable(clock())
    assert ltc.key == ("t", 0) and ltc.ratio == 1.0
    cleaner.clean_once()
    random_updates(model, plog, random.Random(4), 3)        # a little dirty data: ratio below 0.5
    assert cleaner.cleanable(clock()) == []


def test_a_swap_is_refused_when_the_log_was_truncated_meanwhile(tmp_path):
    """The owner thread truncates the log before the swap: the pass is abandoned, its .cleaned
    files are removed and the log is exactly as the truncation left it."""
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    model = Model()
    random_updates(model, plog, random.Random(8), 200)

    def owner_call(fn):
        plog.truncate_to(plog.segments[1].base_offset + 1)
        return fn()

    before_end = plog.segments[1].base_offset + 1
    result = LogCleaner(lm, clock=Clock(), owner_call=owner_call).clean_once()
    assert result is not None and not result.swapped
    assert not [n for n in os.listdir(plog.directory) if n.endswith((".cleaned", ".swap"))]
    assert plog.log_end_offset <= before_end
    assert [r.offset for r in all_records(plog)] == list(range(plog.log_end_offset))


def test_keyless_records_are_dropped_by_the_cleaner(tmp_path):
    lm = open_manager(tmp_path)
    plog = lm.get_or_create("t", 0)
    produce(plog, keyed([(None, b"orphan"), (b"a", b"1")]))
    plog.roll(0)
    produce(plog, keyed([(b"b", b"1")]))
    LogCleaner(lm, clock=Clock()).clean_once()
    assert [(r.offset, r.key) for r in all_records(plog)] == [(1, b"a"), (2, b"b")]


def test_a_crash_at_every_step_of_the_swap_loses_nothing(tmp_path, monkeypatch):
    """Fail the n-th file rename of the swap for every n (a crash at that point: the process
    leaves its files as they are), then reopen with recovery: no .cleaned/.swap file is left,
    every key's latest value is there, offsets are unique, and cleaning then completes."""
    real_replace = os.replace
    n = 0
    while True:
        d = tmp_path / f"run{n}"
        lm = open_manager(d)
        plog = lm.get_or_create("t", 0)
        model = Model()
        random_updates(model, plog, random.Random(n), 150, keys=15)
        calls = [0]

        def failing_replace(src, dst, _limit=n, _calls=calls):
            if _calls[0] >= _limit:
                raise OSError("simulated crash")
            _calls[0] += 1
            real_replace(src, dst)

        monkeypatch.setattr(segment_mod.os, "replace", failing_replace)
        result = LogCleaner(lm, clock=Clock()).clean_once()
        monkeypatch.setattr(segment_mod.os, "replace", real_replace)
        finished = result is not None and result.swapped
        lm._release_locks()            # the "crashed" process's files stay as they are
        lm2 = open_manager(d)
        plog2 = lm2.get("t", 0)
        assert not [x for x in os.listdir(plog2.directory) if x.endswith((".cleaned", ".swap", ".deleted"))]
        plog2.high_watermark = plog2.log_end_offset
        model.check(plog2, cleaned_below=0)
        assert plog2.log_end_offset == plog.log_end_offset
        LogCleaner(lm2, clock=Clock()).clean_once()
        model.check(plog2, cleaned_below=plog2.active_segment.base_offset)
        lm2.close()
        if finished:
            break
        n += 1
    assert n >= 6, "every rename of a multi-group swap was exercised"


def test_a_follower_replicates_a_compacted_log_with_its_offset_gaps(tmp_path):
    """A follower fetching a cleaned leader log from offset 0 (batches with gaps between them,
    rewritten and empty batches) appends it unchanged and ends at the same log end offset."""
    lm = open_manager(tmp_path)
    leader = lm.get_or_create("t", 0)
    produce(leader, keyed([(b"a", b"1"), (b"b", b"1")], producer_id=3, producer_epoch=0, base_sequence=0))
    model = Model()
    random_updates(model, leader, random.Random(11), 150, keys=10)
    LogCleaner(lm, clock=Clock()).clean_once()
    follower = lm.get_or_create("t", 1)
    offset = 0
    while offset < leader.log_end_offset:
        r = leader.read(offset, 4096)
        buf = bytearray(r.records)
        infos, _ = scan_valid_prefix(buf, 0, verify_crc=True)
        follower.append(buf, infos, leader_epoch=-1, now_ms=0, assign_offsets=False)
        offset = r.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset
    follower.high_watermark = follower.log_end_offset
    assert [(r.offset, r.key, r.value) for r in all_records(follower)] == \
        [(r.offset, r.key, r.value) for r in all_records(leader)]
