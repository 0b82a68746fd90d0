"""PartitionLog features beyond the model: rolls by time, LogAppendTime, follower appends,
timestamp lookup, high-watermark bounded reads, flush and recovery point, DeleteRecords."""
from __future__ import annotations

import os
import threading

import pytest

from kafkalite.errors import MessageTooLargeError, OffsetOutOfRangeError
from kafkalite.records.batch import read_header
from kafkalite.records.record import decode_batch
from kafkalite.storage import LogConfig, LogManager, PartitionLog, UnexpectedAppendOffsetError
from storage_helpers import append, batch, open_log, prepared, read_all

pytestmark = pytest.mark.unit


def test_segment_ms_rolls_on_record_time_and_files_are_named_by_base_offset(tmp_path):
    """A batch whose timestamp is more than segment.ms after the segment's first batch rolls a new
    segment named by its 20-digit base offset, with .index and .timeindex beside it."""
    plog = open_log(tmp_path, LogConfig(segment_ms=1000))
    append(plog, batch(2, ts=10_000))
    append(plog, batch(2, ts=10_900))
    assert len(plog.segments) == 1
    append(plog, batch(2, ts=11_001))
    assert [s.base_offset for s in plog.segments] == [0, 4]
    names = sorted(os.listdir(plog.directory))
    assert {"00000000000000000004.log", "00000000000000000004.index", "00000000000000000004.timeindex",
            "00000000000000000004.snapshot", "leader-epoch-checkpoint"} <= set(names)
    plog.close()


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path):
    """LogAppendTime topics get attribute bit 3 and max timestamp = now, with a valid CRC; the
    append result reports that time."""
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    r = append(plog, batch(3, ts=5), now_ms=77_000)
    assert r.log_append_time == 77_000 and r.max_timestamp == 77_000
    data = plog.read(0, 1 << 20).records
    assert read_header(data).is_log_append_time
    assert [rec.timestamp for rec in decode_batch(data)] == [77_000] * 3   # verifies the CRC too
    plog.close()


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    """assign_offsets=False appends batches as they are (offsets, leader epochs) if they continue
    the log, fills the epoch cache from their headers, and rejects offsets that go back."""
    leader = open_log(tmp_path, name="t-0")
    append(leader, batch(2), epoch=3)
    append(leader, batch(2), epoch=5)
    data = bytearray(leader.read(0, 1 << 20).records)
    follower = open_log(tmp_path, name="t-1")
    buf, infos = prepared(data)
    follower.append(buf, infos, leader_epoch=-1, now_ms=0, assign_offsets=False)
    assert read_all(follower) == bytes(data)
    assert follower.epochs.entries() == [(3, 0), (5, 2)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append(buf, infos, leader_epoch=-1, now_ms=0, assign_offsets=False)
    leader.close()
    follower.close()


def test_offset_for_timestamp_returns_exact_record(tmp_path):
    """The earliest record with timestamp >= target, inside its batch, respecting the log start
    and max_offset; None past the newest timestamp."""
    plog = open_log(tmp_path, LogConfig(segment_bytes=400, index_interval_bytes=50))
    for i in range(20):
        append(plog, batch(5, ts=1000 + 10 * i, ts_step=2))   # records at 1000+10i, +2, ... +8
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1053) == (27, 1054)
    assert plog.offset_for_timestamp(1190) == (95, 1190)
    assert plog.offset_for_timestamp(1199) is None
    assert plog.offset_for_timestamp(1053, max_offset=27) is None
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(31, 0)
    assert plog.offset_for_timestamp(1000) == (31, 1062)
    plog.close()


def test_read_respects_high_watermark_and_max_bytes(tmp_path):
    """Nothing at or beyond max_offset; max_bytes below one batch gives that batch only with
    min_one_batch, nothing without; out-of-range offsets raise."""
    plog = open_log(tmp_path)
    for _ in range(5):
        append(plog, batch(4))
    r = plog.read(0, 1 << 20, max_offset=10)
    assert (r.first_offset, r.last_offset) == (0, 7)            # batch 8-11 straddles the HW
    r = plog.read(5, 10)
    assert (r.first_offset, r.last_offset) == (4, 7)
    assert len(plog.read(5, 10, min_one_batch=False).records) == 0
    assert len(plog.read(20, 100).records) == 0
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(21, 100)
    with pytest.raises(MessageTooLargeError):
        plog.config = LogConfig(max_message_bytes=50)
        append(plog, batch(4))
    plog.close()


def test_flush_policy_and_concurrent_flush(tmp_path):
    """flush.messages triggers maybe_flush; flush advances the recovery point; a flush on another
    thread while appends continue never moves the recovery point past what it fsynced."""
    plog = open_log(tmp_path, LogConfig(flush_messages=10, segment_bytes=3000))
    append(plog, batch(4))
    assert not plog.maybe_flush(0) and plog.recovery_point == 0
    append(plog, batch(8))
    assert plog.maybe_flush(0) and plog.recovery_point == 12
    plog.config = LogConfig(flush_ms=100, segment_bytes=3000)
    append(plog, batch(1))
    assert not plog.needs_flush(50) and plog.needs_flush(100)
    stop = threading.Event()
    points = []

    def flusher():
        while not stop.is_set():
            plog.flush()
            points.append(plog.recovery_point)
    t = threading.Thread(target=flusher)
    t.start()
    for _ in range(300):
        append(plog, batch(2, value=b"q" * 50))
    stop.set()
    t.join()
    plog.flush()
    assert plog.recovery_point == plog.log_end_offset == 613
    assert points == sorted(points) and len(plog.segments) > 3
    plog.close()


def test_truncate_fully_and_delete_records(tmp_path):
    """DeleteRecords moves the log start (reads below fail) and retention then drops whole
    segments below it; truncate_fully_and_start_at leaves an empty log at the new offset."""
    plog = open_log(tmp_path, LogConfig(segment_bytes=300, retention_ms=-1, file_delete_delay_ms=0))
    for _ in range(12):
        append(plog, batch(3, value=b"d" * 30))
    plog.high_watermark = 36
    assert plog.delete_records_before(20, 0) == 20
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(19, 100)
    assert plog.read(20, 100).first_offset == 18
    deleted = plog.delete_old_segments(0)
    assert deleted > 0 and plog.segments[0].base_offset <= 20 < plog.segments[0].next_offset
    plog.truncate_fully_and_start_at(100)
    assert (plog.log_start_offset, plog.log_end_offset, len(plog.segments)) == (100, 100, 1)
    assert append(plog, batch(1)).first_offset == 100
    assert sorted(f for f in os.listdir(plog.directory) if f.endswith(".log")) == ["00000000000000000100.log"]
    plog.close()


def test_log_manager_discovery_checkpoints_and_delete(tmp_path):
    """Dirs split on the last '-', logs spread over dirs, checkpoints hold recovery point, log
    start and high watermark, a second manager on the same dir is refused, delete removes."""
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    mgr = LogManager(dirs, LogConfig(), clock=lambda: 0)
    a = mgr.get_or_create("my-topic.v2_x", 0)
    b = mgr.get_or_create("my-topic.v2_x", 1)
    assert {mgr.dir_of("my-topic.v2_x", 0), mgr.dir_of("my-topic.v2_x", 1)} == set(dirs)
    append(a, batch(5))
    a.high_watermark = 5
    from kafkalite.errors import KafkaStorageError
    with pytest.raises(KafkaStorageError):
        LogManager(dirs, LogConfig())
    mgr.close()
    d1 = mgr.dir_of("my-topic.v2_x", 0)
    text = open(os.path.join(d1, "replication-offset-checkpoint")).read()
    assert text == "0\n1\nmy-topic.v2_x 0 5\n"
    assert open(os.path.join(d1, "recovery-point-offset-checkpoint")).read() == "0\n1\nmy-topic.v2_x 0 5\n"
    mgr = LogManager(dirs, LogConfig())
    assert set(mgr.logs()) == {("my-topic.v2_x", 0), ("my-topic.v2_x", 1)}
    assert mgr.high_watermark("my-topic.v2_x", 0) == 5 and mgr.get("my-topic.v2_x", 0).log_end_offset == 5
    assert mgr.delete("my-topic.v2_x", 1) and not os.path.exists(b.directory)
    # the expired active segment is rolled, then deleted: the log keeps an empty segment at 5
    assert mgr.cleanup(10**13) == [("my-topic.v2_x", 0)]
    assert (mgr.get("my-topic.v2_x", 0).log_start_offset, len(mgr.get("my-topic.v2_x", 0).segments)) == (5, 1)
    mgr.close()


def _open_fds() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


def test_a_segment_holds_one_file_descriptor_and_indexes_still_survive_reopen(tmp_path):
    """The open files per replica bound how many partitions fit under ``ulimit -n``: each segment
    keeps its log file open, its indexes are opened only to be written. Entries written that way
    are on disk after close and serve lookups after a reopen."""
    config = LogConfig(segment_bytes=4096, index_interval_bytes=1)
    plog = open_log(tmp_path, config)
    for i in range(40):
        append(plog, batch(3, ts=1000 + i, value=b"x" * 200))
    segments = len(plog.segments)
    assert segments >= 5
    held = {p for p in _open_fds() if p.startswith(plog.directory)}
    assert {os.path.splitext(p)[1] for p in held} == {".log"}, held
    assert len(held) == segments
    plog.flush()
    before = [s.index.entries() for s in plog.segments]
    content = read_all(plog)
    plog.close()
    reopened = open_log(tmp_path, config)
    assert [s.index.entries() for s in reopened.segments] == before
    assert all(len(e) >= 2 for e in before[:-1])
    assert read_all(reopened) == content and len(content) > 8000
    reopened.close()


def test_a_read_at_the_end_of_the_log_finds_its_batch_without_a_header_scan(tmp_path, monkeypatch):
    """The active segment remembers where its last batches start: every offset finds the same
    batch as a scan of the whole file does, also after a follower's truncation, an append of more
    batches than it remembers and a roll; a lookup past the first remembered batch reads one
    header instead of scanning from the last index entry."""
    import random

    from kafkalite.storage import segment as segment_module

    plog = open_log(tmp_path, LogConfig(index_interval_bytes=300))
    rng = random.Random(7)

    def check_every_offset() -> None:
        for seg in plog.segments:
            every = list(segment_module.iter_headers(seg.fd, 0, seg.size))
            for offset in range(seg.base_offset, seg.next_offset + 2):
                want = next((i for i in every if i.last_offset >= offset), None)
                assert seg.find_batch(offset) == want, (seg.base_offset, offset)

    for _ in range(40):
        append(plog, *[batch(rng.randint(1, 4), value=b"x" * rng.randint(1, 80)) for _ in range(rng.randint(1, 3))])
    check_every_offset()
    end = plog.log_end_offset
    real_scan = segment_module.iter_headers
    monkeypatch.setattr(segment_module, "iter_headers", lambda *a, **k: pytest.fail("header scan at the log end"))
    seg = plog.segments[-1]
    assert seg.find_batch(end - 1) is not None and seg.find_batch(end) is None
    assert plog.read(end - 1, 1 << 20).last_offset == end - 1
    monkeypatch.setattr(segment_module, "iter_headers", real_scan)

    plog.truncate_to(end - 5)
    check_every_offset()
    append(plog, *[batch(1) for _ in range(segment_module.TAIL_BATCHES + 3)])
    append(plog, batch(2))
    check_every_offset()
    plog.roll(now_ms=2000)
    append(plog, batch(3))
    check_every_offset()
    plog.close()


def test_unchanged_checkpoints_are_not_rewritten(tmp_path):
    """A checkpoint whose offsets did not change since this manager wrote it is left alone (no
    rewrite, no fsync); a changed offset rewrites only its file."""
    d = str(tmp_path / "d")
    mgr = LogManager([d], LogConfig(), clock=lambda: 0)
    log = mgr.get_or_create("t", 0)
    append(log, batch(3))
    log.high_watermark = 3
    mgr.checkpoint()
    names = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint")
    inodes = {n: os.stat(os.path.join(d, n)).st_ino for n in names}
    mgr.checkpoint()
    assert {n: os.stat(os.path.join(d, n)).st_ino for n in names} == inodes
    append(log, batch(2))
    log.high_watermark = 5
    mgr.checkpoint()
    assert os.stat(os.path.join(d, names[0])).st_ino != inodes[names[0]]
    assert open(os.path.join(d, names[0])).read() == "0\n1\nt 0 5\n"
    assert os.stat(os.path.join(d, names[2])).st_ino == inodes[names[2]]
    mgr.close()
