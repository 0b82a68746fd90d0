"""Log-dir failure policy (Kafka's LogDirFailureChannel) and off-thread file work.

Failures are injected with :class:`FailingDisk` (os functions that fail for one dir and record
every attempt there) or, as root, with a real tmpfs that runs out of space.
"""
from __future__ import annotations

import errno
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from kafkalite.errors import ErrorCode, KafkaStorageError
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogConfig, LogDirInfo, LogManager
from kafkalite.storage import checkpoint
from kafkalite.storage.cleaner import LogCleaner
from kafkalite.storage.leader_epoch import LeaderEpochCache
from storage_helpers import FailingDisk, Jobs, append, batch, open_log, prepared, read_all

pytestmark = pytest.mark.unit


def two_dirs(tmp_path) -> tuple[str, str]:
    return str(tmp_path / "d1"), str(tmp_path / "d2")


def test_an_io_error_takes_the_whole_dir_offline_and_the_other_dir_keeps_serving(tmp_path, monkeypatch):
    """EIO on one append: KAFKA_STORAGE_ERROR for it, the dir is reported once, every log of the
    dir then refuses without touching the disk, the other dir serves, the offline dir's
    partitions are never re-created elsewhere, checkpoints and the clean-shutdown marker skip it,
    and after a restart on a healthy disk its data is back (recovered, since it was not shut
    down cleanly)."""
    d1, d2 = two_dirs(tmp_path)
    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    heard: list[tuple[str, str]] = []
    mgr.add_failure_listener(lambda d, reason: heard.append((d, reason)))
    a, b, c = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1), mgr.get_or_create("u", 0)
    assert [mgr.dir_of("t", 0), mgr.dir_of("t", 1), mgr.dir_of("u", 0)] == [d1, d2, d1]
    append(a, batch(3))
    append(b, batch(3))
    append(c, batch(2))
    before = read_all(a)

    disk = FailingDisk(monkeypatch, d1)
    disk.broken = True
    with pytest.raises(KafkaStorageError) as failed:
        append(a, batch(1))
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR and failed.value.retriable
    assert [d for d, _ in heard] == [d1] and "append of t-0" in heard[0][1]
    assert (mgr.offline_dirs, mgr.online_dirs) == ([d1], [d2])

    disk.attempts.clear()
    refused = [lambda: append(c, batch(1)), lambda: c.read(0, 100), lambda: a.read(0, 100),
               lambda: a.truncate_to(1), lambda: c.flush(), lambda: c.delete_old_segments(0),
               lambda: c.end_offset_for_epoch(0), lambda: c.cleaning_view()]
    for op in refused:
        with pytest.raises(KafkaStorageError):
            op()
    assert disk.attempts == [] and len(heard) == 1

    append(b, batch(2))
    assert b.read(0, 1 << 20).last_offset == 4
    assert mgr.get("t", 0) is None and set(mgr.logs()) == {("t", 1)}
    assert mgr.partitions_in(d1) == mgr.offline_partitions() == [("t", 0), ("u", 0)]
    assert mgr.is_offline("u", 0) and not mgr.is_offline("t", 1)
    with pytest.raises(KafkaStorageError, match="offline log dir"):
        mgr.get_or_create("t", 0)
    with pytest.raises(KafkaStorageError, match="not new"):
        mgr.get_or_create("v", 0, is_new=False)
    v = mgr.get_or_create("v", 0)
    assert mgr.dir_of("v", 0) == d2
    assert mgr.describe_dirs() == [LogDirInfo(d1, ErrorCode.KAFKA_STORAGE_ERROR, {}),
                                   LogDirInfo(d2, ErrorCode.NONE, {("t", 1): b.size, ("v", 0): v.size})]
    mgr.checkpoint()
    assert mgr.flush_dirty(10**13) == 0          # flush.ms is infinite: nothing is due anywhere
    mgr.close()
    assert disk.attempts == []
    assert os.path.exists(os.path.join(d2, ".kafka_cleanshutdown"))

    monkeypatch.undo()                            # the disk works again (say, after a reboot)
    assert not os.path.exists(os.path.join(d1, ".kafka_cleanshutdown"))
    mgr = LogManager([d1, d2], LogConfig())
    assert mgr.offline_dirs == []
    assert [mgr.get(*k).log_end_offset for k in [("t", 0), ("u", 0), ("t", 1)]] == [3, 2, 5]
    assert read_all(mgr.get("t", 0)) == before
    mgr.close()


def test_a_read_error_is_a_storage_error_for_the_whole_dir(tmp_path, monkeypatch):
    """EIO on pread: KafkaStorageError instead of a raw OSError (which would close the client's
    connection), and the log refuses from then on without another read."""
    plog = open_log(tmp_path / "d1")
    append(plog, batch(4))
    disk = FailingDisk(monkeypatch, tmp_path / "d1", ops=("pread",))
    disk.broken = True
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1 << 20)
    assert plog.offline and plog.failures.offline_dirs == [str(tmp_path / "d1")]
    reads = len(disk.attempts)
    with pytest.raises(KafkaStorageError):
        plog.read(0, 1 << 20)
    assert len(disk.attempts) == reads
    plog.close()                                  # an offline log only closes its handles
    assert len(disk.attempts) == reads


def test_an_fsync_error_in_a_flush_thread_is_reported_once_and_keeps_the_recovery_point(tmp_path, monkeypatch):
    """The broker flushes off the reactor: the failing fsync is reported from that thread, the
    failed log's recovery point stays (its data is not known to be durable), the other dir's
    log is flushed."""
    d1, d2 = two_dirs(tmp_path)
    mgr = LogManager([d1, d2], LogConfig(flush_messages=1))
    a, b = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1)
    append(a, batch(5))
    append(b, batch(5))
    disk = FailingDisk(monkeypatch, d1, ops=("fsync",))
    disk.broken = True
    heard: list[tuple[str, str]] = []
    mgr.add_failure_listener(lambda d, reason: heard.append((d, threading.current_thread().name)))
    flushed: list[int] = []
    worker = threading.Thread(target=lambda: flushed.append(mgr.flush_dirty(0)), name="flusher")
    worker.start()
    worker.join()
    assert flushed == [1] and heard == [(d1, "flusher")]
    assert (a.recovery_point, b.recovery_point) == (0, 5)
    mgr.close()


def test_checkpoint_write_errors_take_the_dir_offline(tmp_path, monkeypatch):
    """A recovery-point checkpoint that cannot be written means the dir cannot be trusted either."""
    d1, d2 = two_dirs(tmp_path)
    mgr = LogManager([d1, d2], LogConfig())
    a, b = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1)
    append(a, batch(1))
    append(b, batch(1))
    disk = FailingDisk(monkeypatch, d1, error=errno.ENOSPC, ops=("open",))
    disk.broken = True
    mgr.checkpoint()
    assert mgr.offline_dirs == [d1]
    assert "offset checkpoints" in mgr.failures.reason(d1) and "No space left" in mgr.failures.reason(d1)
    with pytest.raises(KafkaStorageError):
        append(a, batch(1))
    assert append(b, batch(1)).first_offset == 1
    mgr.close()


def test_new_partitions_go_to_the_online_dir_with_the_fewest_partitions(tmp_path):
    """Kafka's placement: fewest partitions first (ties: configured order), never an offline dir,
    and nowhere at all when every dir is offline."""
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    mgr = LogManager(dirs, LogConfig())
    for p in range(5):
        mgr.get_or_create("t", p)
    assert [mgr.dir_of("t", p) for p in range(5)] == [dirs[0], dirs[1], dirs[2], dirs[0], dirs[1]]
    assert mgr.delete("t", 0) and mgr.delete("t", 3)
    mgr.get_or_create("t", 5)
    assert mgr.dir_of("t", 5) == dirs[0]
    mgr.failures.report(dirs[0], "test")
    for p in range(6, 10):
        mgr.get_or_create("t", p)
    assert {mgr.dir_of("t", p) for p in range(6, 10)} == {dirs[1], dirs[2]}
    mgr.failures.report(dirs[1], "test")
    mgr.failures.report(dirs[2], "test")
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        mgr.get_or_create("t", 10)
    mgr.close()


def test_a_dir_unusable_at_start_is_offline_and_only_no_usable_dir_is_fatal(tmp_path, monkeypatch):
    """At start a dir that cannot be created, or whose logs cannot be read, is offline (its
    known partitions refuse); the broker starts on the others. A dir locked by another process
    and no usable dir at all still stop it."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    d1, d2 = two_dirs(tmp_path)
    mgr = LogManager([str(not_a_dir), d2], LogConfig())
    assert mgr.offline_dirs == [str(not_a_dir)] and mgr.online_dirs == [d2]
    mgr.close()
    with pytest.raises(KafkaStorageError, match="no log dir is usable"):
        LogManager([str(not_a_dir)], LogConfig())

    mgr = LogManager([d1, d2], LogConfig())
    append(mgr.get_or_create("t", 0), batch(3))
    mgr.close()
    disk = FailingDisk(monkeypatch, d1, ops=("pread",))
    disk.broken = True
    mgr = LogManager([d1, d2], LogConfig())
    assert mgr.offline_dirs == [d1] and mgr.partitions_in(d1) == [("t", 0)]
    with pytest.raises(KafkaStorageError):
        mgr.get_or_create("t", 0)
    with pytest.raises(KafkaStorageError, match="in use"):
        LogManager([d2], LogConfig())
    mgr.close()


def test_slow_file_work_is_handed_to_the_background_executor(tmp_path):
    """Segment unlinks (retention, truncation), old producer snapshots, the removal of a deleted
    partition dir and leader-epoch checkpoint writes wait for the executor; what the next
    operation depends on (renames, the new segment) is done at once; flush writes the epoch
    checkpoint itself before the recovery point moves."""
    jobs = Jobs()
    d = str(tmp_path / "d")
    mgr = LogManager([d], LogConfig(segment_bytes=300, file_delete_delay_ms=0), background=jobs)
    plog = mgr.get_or_create("t", 0)
    epoch_file = os.path.join(plog.directory, checkpoint.LEADER_EPOCH_CHECKPOINT)
    for i in range(8):
        append(plog, batch(3, value=b"x" * 40, pid=7, epoch=0, seq=3 * i), epoch=2)
    assert plog.epochs.entries() == [(2, 0)] and not os.path.exists(epoch_file)
    assert len(jobs.queued) == 1                       # one queued write, however many changes
    jobs.run()
    assert checkpoint.read_epochs(epoch_file) == [(2, 0)]

    def names(suffix: str) -> list[str]:
        return sorted(n for n in os.listdir(plog.directory) if n.endswith(suffix))
    segments = len(plog.segments)
    assert segments > 3 and names(".snapshot")
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(9, 0)
    assert plog.delete_old_segments(0) > 0
    assert names(".deleted") and len(jobs.queued) >= 2     # unlinks + old snapshots + epoch file
    first_base = plog.segments[0].base_offset
    jobs.run()
    assert names(".deleted") == []
    assert all(int(n[:20]) >= first_base for n in names(".snapshot"))
    assert checkpoint.read_epochs(epoch_file) == [(2, plog.log_start_offset)]

    plog.truncate_to(plog.segments[1].base_offset + 1)
    assert names(".deleted") and plog.log_end_offset <= plog.segments[1].next_offset
    append(plog, batch(1), epoch=4)
    assert checkpoint.read_epochs(epoch_file) == [(2, plog.log_start_offset)]     # not yet
    plog.flush()
    assert checkpoint.read_epochs(epoch_file) == plog.epochs.entries() and plog.recovery_point == plog.log_end_offset
    jobs.run()
    assert names(".deleted") == []

    directory = plog.directory
    assert mgr.delete("t", 0)
    doomed = [n for n in os.listdir(d) if n.endswith("-delete")]
    assert not os.path.exists(directory) and len(doomed) == 1
    mgr.get_or_create("t", 0)                          # the name is free at once
    jobs.run()
    assert [n for n in os.listdir(d) if n.endswith("-delete")] == []
    mgr.close()


def test_jobs_left_over_from_a_deleted_log_are_not_disk_failures(tmp_path):
    """Retention and epoch jobs still queued when the partition is deleted find its dir gone
    (renamed to -delete and removed): that is no reason to take the log dir offline."""
    jobs = Jobs()
    d = str(tmp_path / "d")
    mgr = LogManager([d], LogConfig(segment_bytes=200, file_delete_delay_ms=0), background=jobs)
    plog = mgr.get_or_create("t", 0)
    for i in range(6):
        append(plog, batch(2, value=b"y" * 40, pid=3, epoch=0, seq=2 * i), epoch=1)
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(6, 0)
    plog.delete_old_segments(0)
    leftover = list(jobs.queued)
    jobs.queued = []
    assert mgr.delete("t", 0)
    jobs.run()                              # removes the -delete dir
    for job in leftover:
        job()
    assert mgr.offline_dirs == [] and os.listdir(d) != [] and not any(n.startswith("t-0") for n in os.listdir(d))
    mgr.close()


def test_background_jobs_report_their_io_errors_and_skip_an_offline_dir(tmp_path, monkeypatch):
    """A queued unlink that meets EIO takes the dir offline (it has no caller to raise to); jobs
    for a dir already offline are dropped without touching it."""
    jobs = Jobs()
    d1, d2 = two_dirs(tmp_path)
    mgr = LogManager([d1, d2], LogConfig(segment_bytes=200, file_delete_delay_ms=0), background=jobs)
    plog = mgr.get_or_create("t", 0)
    for _ in range(6):
        append(plog, batch(2, value=b"y" * 40))
    jobs.run()
    plog.high_watermark = plog.log_end_offset
    plog.delete_records_before(4, 0)
    plog.delete_old_segments(0)
    queued_first = len(jobs.queued)
    plog.delete_records_before(8, 0)
    plog.delete_old_segments(0)
    assert len(jobs.queued) > queued_first
    disk = FailingDisk(monkeypatch, d1, ops=("unlink",))
    disk.broken = True
    queued, jobs.queued = jobs.queued, []
    while queued and not mgr.offline_dirs:
        queued.pop(0)()                  # the queue's jobs one by one until one meets the disk
    assert mgr.offline_dirs == [d1] and "deleting segment files of t-0" in mgr.failures.reason(d1)
    assert queued, "the jobs after the failing one"
    attempts = len(disk.attempts)
    for job in queued:
        job()
    assert len(disk.attempts) == attempts
    mgr.close()


def test_lost_epoch_checkpoint_writes_are_rederived_from_the_log_after_a_crash(tmp_path):
    """The epoch checkpoint lags memory while its write is queued. A crash then leaves a stale
    file (here: an epoch 9 a truncation removed, and no epoch 8 the follower then appended);
    reopening without a clean shutdown re-derives the entries from the recovered batches, so the
    cache equals what the live log had."""
    jobs = Jobs()
    plog = open_log(tmp_path, name="t-0", background=jobs)
    append(plog, batch(2), epoch=0)
    append(plog, batch(2), epoch=9)
    jobs.run()
    path = os.path.join(plog.directory, checkpoint.LEADER_EPOCH_CHECKPOINT)
    assert checkpoint.read_epochs(path) == [(0, 0), (9, 2)]
    plog.truncate_to(2)
    follower_batch = build_batch([(1000, None, b"f", ()), (1001, None, b"g", ())], base_offset=2,
                                 partition_leader_epoch=8)
    buf, infos = prepared(follower_batch)
    plog.append(buf, infos, leader_epoch=-1, now_ms=0, assign_offsets=False)
    assert plog.epochs.entries() == [(0, 0), (8, 2)]
    assert checkpoint.read_epochs(path) == [(0, 0), (9, 2)]          # queued, never written: crash
    reopened = open_log(tmp_path, name="t-0")                         # no clean shutdown
    assert reopened.epochs.entries() == [(0, 0), (8, 2)]
    assert reopened.end_offset_for_epoch(8) == (8, 4) and reopened.end_offset_for_epoch(9) == (-1, -1)
    assert checkpoint.read_epochs(path) == [(0, 0), (8, 2)]
    reopened.close()
    plog.close_handles()


def test_epoch_checkpoint_writes_from_a_thread_pool_end_equal_to_memory(tmp_path):
    """Many changes while a thread pool writes: writes are serialised and each takes the state
    when it runs, so the last one leaves the file equal to memory (never an older state)."""
    path = str(tmp_path / "leader-epoch-checkpoint")
    with ThreadPoolExecutor(4) as pool:
        cache = LeaderEpochCache(path, background=lambda job: pool.submit(job))
        offset = 0
        for epoch in range(1, 400):
            cache.assign(epoch, offset)
            offset += 3
            if epoch % 7 == 0:
                offset -= 2
                cache.truncate_from_end(offset)
            if epoch % 11 == 0:
                cache.truncate_from_start(cache.entries()[1][1] if len(cache.entries()) > 1 else 0)
    # equal to memory, but written without fsync: not durable until flush()
    assert checkpoint.read_epochs(path) == cache.entries() and cache.dirty
    cache.flush()
    assert checkpoint.read_epochs(path) == cache.entries() and not cache.dirty


def test_epoch_checkpoint_background_writes_skip_fsync_and_flush_makes_them_durable(tmp_path, monkeypatch):
    """A leadership change rewrites the file without fsync (thousands of them in a failover held
    up the disk); flush(), which runs before the recovery point moves and at close, fsyncs the
    file and its dir, once, even when the background write already holds the entries."""
    path = str(tmp_path / "leader-epoch-checkpoint")
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    cache = LeaderEpochCache(path)                     # background runs inline
    cache.assign(1, 0)
    cache.assign(2, 5)
    assert checkpoint.read_epochs(path) == [(1, 0), (2, 5)]
    assert synced == [] and cache.dirty
    cache.flush()
    assert len(synced) == 2 and not cache.dirty        # the file, then its directory
    cache.flush()
    assert len(synced) == 2                            # nothing new: no write
    cache.assign(3, 9)
    assert len(synced) == 2 and cache.dirty


def test_a_cleaner_io_error_takes_the_dir_offline_instead_of_marking_the_log_uncleanable(tmp_path, monkeypatch):
    """Kafka's cleaner hands an IOException to the log-dir failure channel: the dir goes offline
    (the log is not merely skipped), and the pass stops without swapping anything."""
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=600, file_delete_delay_ms=0,
                       min_cleanable_dirty_ratio=0.01)
    d = str(tmp_path / "d")
    mgr = LogManager([d], config, topic_config=lambda t: config)
    plog = mgr.get_or_create("c", 0, config)
    for i in range(30):
        buf, infos = prepared(build_batch([(1000 + i, b"k%d" % (i % 3), b"v" * 30, ())]))
        plog.append(buf, infos, leader_epoch=0, now_ms=1000)
    plog.high_watermark = plog.log_end_offset
    before = [s.base_offset for s in plog.segments]
    disk = FailingDisk(monkeypatch, d, ops=("fsync",))
    disk.broken = True
    result = LogCleaner(mgr, clock=lambda: 10_000).clean_once()
    assert result is not None and not result.swapped
    assert mgr.offline_dirs == [d] and "cleaning c-0" in mgr.failures.reason(d)
    assert [s.base_offset for s in plog.segments] == before
    monkeypatch.undo()
    mgr.close()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs (root only): a real disk that fills up and answers ENOSPC."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_takes_its_dir_offline_and_the_broker_keeps_the_other(small_tmpfs, tmp_path):
    """A real ENOSPC: appends to the full tmpfs dir end in KAFKA_STORAGE_ERROR, the dir goes
    offline, the other dir still takes appends, and close marks only the healthy dir clean."""
    d2 = str(tmp_path / "d2")
    mgr = LogManager([small_tmpfs, d2], LogConfig())
    full, fine = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1)
    assert mgr.dir_of("t", 0) == small_tmpfs
    with pytest.raises(KafkaStorageError) as failed:
        for _ in range(100):
            append(full, batch(4, value=b"z" * 4000))
    assert isinstance(failed.value.__cause__, OSError) and failed.value.__cause__.errno == errno.ENOSPC
    assert mgr.offline_dirs == [small_tmpfs]
    assert append(fine, batch(4, value=b"z" * 4000)).last_offset == 3
    mgr.close()
    assert os.path.exists(os.path.join(d2, ".kafka_cleanshutdown"))
    assert not os.path.exists(os.path.join(small_tmpfs, ".kafka_cleanshutdown"))


def test_closing_makes_every_log_durable_with_one_sync_before_the_clean_shutdown_mark(tmp_path, monkeypatch):
    """At close each log's leader-epoch checkpoint and producer snapshot are written without an
    fsync each; one sync makes them all durable, then the checkpoints and the marker follow (a
    controlled shutdown at 3,000 partitions spent 16 s in three fsyncs per log)."""
    d = str(tmp_path / "d")
    os.makedirs(d)
    mgr = LogManager([d], LogConfig())
    for p in range(20):
        plog = mgr.get_or_create("t", p)
        append(plog, batch(1), epoch=3)
        plog.flush()
    events: list[str] = []
    real_fsync, real_sync = os.fsync, os.sync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "sync", lambda: (events.append("sync"), real_sync())[1])
    for p in range(20):
        mgr.get("t", p).assign_epoch(4, 1)               # a leadership since the last flush
    mgr.close()
    assert events.count("sync") == 1
    before = events[:events.index("sync")]
    assert before == [], f"{len(before)} fsyncs before the one sync"
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    for p in range(20):
        assert checkpoint.read_epochs(os.path.join(d, f"t-{p}", "leader-epoch-checkpoint"))[-1] == (4, 1)
        assert any(n.endswith(".snapshot") for n in os.listdir(os.path.join(d, f"t-{p}")))
