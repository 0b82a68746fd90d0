"""Future replicas (AlterReplicaLogDirs) in the LogManager: a move to another dir creates
``<topic>-<p>.<uuid>-future`` there starting at the current log's start; a restart in the middle
of the copy resumes it (the future log is loaded again, Kafka's behaviour); the swap makes the
future log the partition's log in its dir under the plain name, with the same bytes, and deletes
the old directory; a future without a current log is dropped at start."""
from __future__ import annotations

import os
import shutil

import pytest

from kafkalite.records.batch import scan_valid_prefix
from kafkalite.storage import LogConfig, LogManager
from kafkalite.storage.log import parse_dir_name

from storage_helpers import append, batch, read_all


def copy(src, dst, max_bytes: int) -> None:
    res = src.read(dst.log_end_offset, max_bytes, max_offset=src.log_end_offset, min_one_batch=True)
    infos, end = scan_valid_prefix(res.records)
    dst.append(res.records[:end], infos, leader_epoch=-1, now_ms=0, assign_offsets=False)


def test_move_survives_a_restart_and_swaps_into_place(tmp_path) -> None:
    d1, d2 = str(tmp_path / "a"), str(tmp_path / "b")
    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    current = mgr.get_or_create("t", 0)
    for i in range(20):
        append(current, batch(10, value=b"r%d" % i), epoch=3)
    src = current.log_dir
    dst = d2 if os.path.abspath(src) == os.path.abspath(d1) else d1
    future = mgr.create_future("t", 0, dst)
    assert future is not None and parse_dir_name(os.path.basename(future.directory)) == ("t", 0)
    assert mgr.create_future("t", 0, dst) is future            # asked again: the same move
    copy(current, future, 500)
    copied = future.log_end_offset
    assert 0 < copied < current.log_end_offset
    mgr.close()

    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    future = mgr.future("t", 0)
    assert future is not None and future.log_end_offset == copied and future.log_dir == os.path.abspath(dst)
    current = mgr.get("t", 0)
    while future.log_end_offset < current.log_end_offset:
        copy(current, future, 500)
    append(current, batch(1), epoch=3)          # the current log moves on: the future is behind again
    with pytest.raises(ValueError):
        mgr.replace_current_with_future("t", 0)
    copy(current, future, 1 << 20)
    expected = read_all(current)
    moved = mgr.replace_current_with_future("t", 0)
    assert moved.directory == os.path.join(os.path.abspath(dst), "t-0") and mgr.future("t", 0) is None
    assert mgr.dir_of("t", 0) == os.path.abspath(dst) and mgr.get("t", 0) is moved
    assert read_all(moved) == expected and moved.epochs.latest_epoch == 3
    assert not os.path.exists(os.path.join(src, "t-0"))
    mgr.close()
    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    assert mgr.dir_of("t", 0) == os.path.abspath(dst) and read_all(mgr.get("t", 0)) == expected
    assert not [n for d in (d1, d2) for n in os.listdir(d) if n.endswith("-future")]
    # moving back to where it is: nothing to do
    assert mgr.create_future("t", 0, dst) is None
    mgr.close()


def test_a_future_without_its_current_log_is_dropped_at_start(tmp_path) -> None:
    d1, d2 = str(tmp_path / "a"), str(tmp_path / "b")
    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    current = mgr.get_or_create("t", 0)
    append(current, batch(5))
    other = d2 if os.path.abspath(current.log_dir) == os.path.abspath(d1) else d1
    future = mgr.create_future("t", 0, other)
    path = future.directory
    mgr.close()
    shutil.rmtree(os.path.join(current.log_dir, "t-0"))      # the current log disappears meanwhile
    mgr = LogManager([d1, d2], LogConfig(), clock=lambda: 0)
    assert mgr.future("t", 0) is None and not os.path.exists(path)
    mgr.close()
