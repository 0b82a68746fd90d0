"""Batches appended under message format v0/v1 (records/batch.py, bits 8-9) in the log: the first
one, on the leader's or a follower's path, leaves ``message-format-v0-v1`` in the partition dir
before it is written, so the log says it holds such batches across a restart; plain v2 logs never
get it; the cleaner keeps a rebuilt batch's mark."""
from __future__ import annotations

import os

import pytest

from kafkalite.records.batch import read_header, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.legacy import to_stored_format
from kafkalite.storage import LogConfig, LogManager
from kafkalite.storage.cleaner import LogCleaner
from kafkalite.storage.log import OLD_FORMATS_MARKER
from tests.unit.storage.storage_helpers import BIG, append, batch, open_log, read_all

pytestmark = pytest.mark.unit


def marked(magic: int, records=((1000, None, b"v", ()),)) -> tuple[bytearray, list]:
    buf = build_batch(list(records))
    out, infos = to_stored_format(buf, validate_batches(buf, max_batch_bytes=BIG), magic)
    return bytearray(out), infos


def test_plain_v2_logs_never_get_the_marker(tmp_path) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(3), batch(2))
    assert not plog.holds_old_formats and not plog.read(0, 1 << 20).old_formats
    assert not os.path.exists(os.path.join(plog.directory, OLD_FORMATS_MARKER))


@pytest.mark.parametrize("magic", [0, 1])
def test_the_first_marked_batch_leaves_the_marker_and_a_reopened_log_knows(tmp_path, magic: int) -> None:
    plog = open_log(tmp_path)
    append(plog, batch(2))
    buf, infos = marked(magic)
    plog.append(buf, infos, leader_epoch=0, now_ms=1000)
    assert plog.holds_old_formats and os.path.exists(os.path.join(plog.directory, OLD_FORMATS_MARKER))
    assert read_header(read_all(plog, 2)).stored_magic == magic
    assert plog.read(0, 1 << 20).old_formats               # what the Fetch path looks at
    plog.close()
    reopened = open_log(tmp_path)
    assert reopened.holds_old_formats and reopened.read(0, 1 << 20).old_formats


def test_a_follower_copying_a_marked_batch_gets_the_marker_too(tmp_path) -> None:
    leader = open_log(tmp_path, name="t-0")
    buf, infos = marked(1)
    leader.append(buf, infos, leader_epoch=3, now_ms=1000)
    data = bytearray(read_all(leader))
    follower = open_log(tmp_path / "f", name="t-0")
    follower.append(data, validate_batches(data, max_batch_bytes=BIG), leader_epoch=3, now_ms=1000,
                    assign_offsets=False)
    assert follower.holds_old_formats and read_all(follower) == bytes(data)


def test_the_cleaner_keeps_the_mark_of_a_batch_it_rebuilds(tmp_path) -> None:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=4096, file_delete_delay_ms=0,
                       min_cleanable_dirty_ratio=0.01)
    lm = LogManager([str(tmp_path / "logs")], config, topic_config=lambda t: config)
    plog = lm.get_or_create("t", 0)
    buf, infos = marked(1, [(1000, b"x", b"old", ()), (1001, b"y", b"keep", ())])
    plog.append(buf, infos, leader_epoch=0, now_ms=1000)
    newer = build_batch([(1002, b"x", b"new", ())])
    plog.append(newer, validate_batches(newer, max_batch_bytes=BIG), leader_epoch=0, now_ms=1000)
    plog.high_watermark = plog.log_end_offset
    plog.roll(0)
    LogCleaner(lm, clock=lambda: 1_000_000).clean_once()
    first = read_header(read_all(plog))
    assert (first.records_count, first.stored_magic) == (1, 1)     # rebuilt: "x" went, the mark stayed
