"""A process keeps at most a set number of segment files open (storage/open_files.py): idle
segments are closed and reopened by path on their next use, without changing what a log holds."""
from __future__ import annotations

import os
import threading

import pytest

from kafkalite.storage import LogConfig, LogManager
from kafkalite.storage.open_files import MIN_OPEN_SEGMENT_FILES, OpenSegmentFiles, default_limit
from kafkalite.storage.segment import LogSegment

from storage_helpers import append, batch, open_log, read_all


@pytest.fixture
def files(monkeypatch) -> OpenSegmentFiles:
    """A limit of 3 for the segments this test opens."""
    mine = OpenSegmentFiles(limit=3)
    monkeypatch.setattr(LogSegment, "files", mine)
    return mine


def _open_logs_under(root) -> set[str]:
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith(str(root)) and target.endswith(".log"):
            out.add(target)
    return out


def test_ten_logs_hold_three_files_and_read_append_and_reload_as_before(tmp_path, files):
    config = LogConfig(segment_bytes=2048)
    logs = [open_log(tmp_path, config, name=f"t-{i}") for i in range(10)]
    for rnd in range(6):
        for i, plog in enumerate(logs):
            append(plog, batch(2, ts=1000 + rnd, value=f"{i}-{rnd}".encode() * 200))
    assert sum(len(p.segments) for p in logs) > 20          # several segments per log
    assert len(_open_logs_under(tmp_path)) <= 3 and len(files) <= 3
    assert files.evictions > 0 and files.reopens > 0
    contents = [read_all(p) for p in logs]                  # every segment, most of them reopened
    assert all(f"{i}-5".encode() in c and f"{i}-0".encode() in c for i, c in enumerate(contents))
    assert len(_open_logs_under(tmp_path)) <= 3
    for plog in logs:                                        # appends after eviction land at the end
        append(plog, batch(1, ts=2000, value=b"last"))
    for plog in logs:
        plog.close()
    assert not _open_logs_under(tmp_path) and len(files) == 0
    reopened = [open_log(tmp_path, config, name=f"t-{i}") for i in range(10)]
    for plog, before in zip(reopened, contents):
        after = read_all(plog)
        assert after.startswith(before) and b"last" in after[len(before):] and plog.log_end_offset == 13
        plog.close()


def test_a_used_segment_gets_a_second_chance(tmp_path, files):
    logs = [open_log(tmp_path, name=f"t-{i}") for i in range(3)]
    a, b, c = (p.active_segment for p in logs)
    d_log = open_log(tmp_path, name="t-3")                   # all three were used: the oldest goes
    assert a._fd < 0 and b._fd >= 0 and c._fd >= 0
    assert b.fd >= 0                                         # b used again since the ring passed it
    e_log = open_log(tmp_path, name="t-4")
    assert b._fd >= 0 and c._fd < 0                          # c, unused since, goes instead of b
    for plog in [*logs, d_log, e_log]:
        plog.close()


def test_a_segment_read_under_its_lock_on_another_thread_is_not_closed(tmp_path, files):
    logs = [open_log(tmp_path, name=f"t-{i}") for i in range(3)]
    held, release = threading.Event(), threading.Event()

    def reader() -> None:
        with logs[0]._lock:             # as PartitionLog.read holds it on another thread
            held.set()
            release.wait(10)

    t = threading.Thread(target=reader)
    t.start()
    try:
        assert held.wait(10)
        extra = [open_log(tmp_path, name=f"u-{i}") for i in range(2)]
        assert logs[0].active_segment._fd >= 0               # busy elsewhere: left open
        assert len(files) <= 4
    finally:
        release.set()
        t.join(10)
    more = open_log(tmp_path, name="u-2")                    # free again: it may go now
    assert logs[0].active_segment._fd < 0
    for plog in [*logs, *extra, more]:
        plog.close()


def test_only_the_owner_thread_closes_files(tmp_path, files):
    opened: list = []
    t = threading.Thread(target=lambda: opened.extend(open_log(tmp_path, name=f"t-{i}") for i in range(5)))
    t.start()
    t.join(10)
    assert len(opened) == 5 and len(files) == 5               # over the limit, nothing closed
    assert all(p.active_segment._fd >= 0 for p in opened)
    last = open_log(tmp_path, name="t-5")                    # the owner's next open restores it
    assert len(files) == 3 and last.active_segment._fd >= 0
    for plog in [*opened, last]:
        plog.close()


def test_closed_segments_stay_closed_and_retention_does_not_reopen_idle_ones(tmp_path, files):
    logs = [open_log(tmp_path, name=f"t-{i}") for i in range(5)]
    idle = logs[0].active_segment
    assert idle._fd < 0 and idle.max_timestamp < 0
    reopens = files.reopens
    assert idle.largest_timestamp == int(os.stat(idle.log_path).st_mtime * 1000)   # the file's mtime
    assert files.reopens == reopens and idle._fd < 0
    logs[0].close()
    assert idle.closed and idle.fd == -1 and files.reopens == reopens
    for plog in logs[1:]:
        plog.close()


def test_a_log_manager_with_a_small_limit_serves_every_partition(tmp_path, files):
    mgr = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=1024), clock=lambda: 1000)
    for p in range(8):
        mgr.get_or_create("many", p)
    for rnd in range(4):
        for p in range(8):
            append(mgr.get("many", p), batch(1, value=f"{p}/{rnd}".encode() * 60))
    assert len(files) <= 3
    for p in range(8):
        assert read_all(mgr.get("many", p)).count(f"{p}/".encode()) == 4 * 60
    mgr.close()
    reloaded = LogManager([str(tmp_path / "d")], LogConfig(segment_bytes=1024), clock=lambda: 1000)
    assert all(reloaded.get("many", p).log_end_offset == 4 for p in range(8))
    reloaded.close()


def test_the_default_limit_leaves_room_for_sockets(monkeypatch):
    import resource
    monkeypatch.setattr(resource, "getrlimit", lambda _: (20000, 20000))
    assert default_limit() == 15000
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert default_limit() == MIN_OPEN_SEGMENT_FILES
