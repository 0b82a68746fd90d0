"""Crash recovery: torn tails, flipped CRC bytes, garbage, damaged indexes, missing checkpoints.
Each test asserts the exact offsets that survive."""
from __future__ import annotations

import os

import pytest

from kafkalite.records.batch import scan_valid_prefix
from kafkalite.storage import LogConfig, LogManager, PartitionLog
from kafkalite.storage import segment as segment_mod
from kafkalite.storage.segment import iter_headers
from storage_helpers import append, batch, crash, open_log, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=150, file_delete_delay_ms=0)


def build(tmp_path, n_batches: int = 30, config: LogConfig = CONFIG) -> tuple[str, list[tuple[int, int]]]:
    """A closed log of ``n_batches`` 3-record batches; returns its dir and (base, last) per batch."""
    plog = open_log(tmp_path, config)
    spans = []
    for i in range(n_batches):
        r = append(plog, batch(3, ts=1000 + i, value=b"x" * (20 + i)))
        spans.append((r.first_offset, r.last_offset))
    d = plog.directory
    plog.close()
    return d, spans


def log_files(d: str) -> list[str]:
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def check_intact(plog: PartitionLog, expected_end: int) -> None:
    """The log holds whole CRC-valid batches with contiguous offsets [0, expected_end)."""
    data = read_all(plog)
    infos, end = scan_valid_prefix(data, 0, verify_crc=True)
    assert end == len(data)
    assert [i.base_offset for i in infos] == list(range(0, expected_end, 3))
    assert plog.log_end_offset == expected_end


def test_torn_last_batch_is_cut_and_appends_continue(tmp_path):
    """Cutting the last batch in half: recovery keeps offsets [0, 87) and the next append gets 87."""
    d, spans = build(tmp_path)
    last_log = os.path.join(d, log_files(d)[-1])
    os.truncate(last_log, os.path.getsize(last_log) - 20)
    plog = PartitionLog.open(d, CONFIG, 0)
    check_intact(plog, spans[-1][0])
    assert append(plog, batch(2)).first_offset == spans[-1][0] == 87
    plog.close()


def test_flipped_crc_byte_in_the_middle_of_the_active_segment(tmp_path):
    """A flipped byte inside a batch of the active segment: that batch and all after it go."""
    d, spans = build(tmp_path)
    active = os.path.join(d, log_files(d)[-1])
    base = int(log_files(d)[-1][:20])
    plog = PartitionLog.open(d, CONFIG, 0, clean_shutdown=True)
    seg = plog.active_segment
    batch_positions = [(h.base_offset, h.position) for h in iter_headers(seg.fd, 0, seg.size)]
    plog.close()
    assert len(batch_positions) >= 3
    victim_offset, victim_pos = batch_positions[len(batch_positions) // 2]
    with open(active, "r+b") as f:
        f.seek(victim_pos + 70)
        byte = f.read(1)
        f.seek(victim_pos + 70)
        f.write(bytes([byte[0] ^ 0xFF]))
    plog = PartitionLog.open(d, CONFIG, 0)
    check_intact(plog, victim_offset)
    assert victim_offset > base
    plog.close()


def test_garbage_after_the_last_batch_is_removed(tmp_path):
    """Random bytes appended to the active segment are truncated; every batch survives."""
    d, spans = build(tmp_path)
    active = os.path.join(d, log_files(d)[-1])
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(os.urandom(500))
    plog = PartitionLog.open(d, CONFIG, 0)
    check_intact(plog, spans[-1][1] + 1)
    assert os.path.getsize(active) == size
    plog.close()


def test_corruption_in_an_early_segment_deletes_later_segments(tmp_path):
    """A bad batch in the second segment cuts the log there; later segments are deleted."""
    d, spans = build(tmp_path)
    files = log_files(d)
    assert len(files) >= 3
    second = os.path.join(d, files[1])
    second_base = int(files[1][:20])
    with open(second, "r+b") as f:
        f.seek(30)                       # inside the first batch's CRC-covered bytes
        b = f.read(1)
        f.seek(30)
        f.write(bytes([b[0] ^ 1]))
    plog = PartitionLog.open(d, CONFIG, 0)
    check_intact(plog, second_base)
    assert log_files(d) == files[:2]
    plog.close()


@pytest.mark.parametrize("damage", ["delete", "truncate_odd", "garbage"])
def test_damaged_indexes_are_rebuilt_on_a_clean_open(tmp_path, damage):
    """Missing, torn or garbage .index/.timeindex files are rebuilt even when the shutdown was
    clean; reads at every offset and timestamp lookups work afterwards."""
    d, spans = build(tmp_path)
    for name in os.listdir(d):
        if name.endswith((".index", ".timeindex")):
            path = os.path.join(d, name)
            if damage == "delete":
                os.unlink(path)
            elif damage == "truncate_odd":
                os.truncate(path, max(0, os.path.getsize(path) - 3))
            else:
                with open(path, "wb") as f:
                    f.write(os.urandom(96))
    plog = PartitionLog.open(d, CONFIG, 0, clean_shutdown=True, recovery_point=10**9)
    end = spans[-1][1] + 1
    check_intact(plog, end)
    for offset in range(end):
        r = plog.read(offset, 1)
        base = offset - offset % 3
        assert r.first_offset == base and r.last_offset == base + 2
    assert plog.offset_for_timestamp(1010) == (30, 1010)
    assert sum(len(s.index) for s in plog.segments) > 0
    plog.close()


def test_missing_recovery_checkpoint_means_full_recovery(tmp_path):
    """Without recovery-point-offset-checkpoint an unclean start CRC-checks every segment: damage
    in the first segment is found and everything after it is cut."""
    mgr = LogManager([str(tmp_path / "logs")], CONFIG)
    plog = mgr.get_or_create("my.topic_x", 0)
    for i in range(30):
        append(plog, batch(3, value=b"y" * 40))
    plog.flush()
    mgr.checkpoint()
    d = plog.directory
    crash(plog)
    mgr._release_locks()
    first = os.path.join(d, log_files(d)[0])
    with open(first, "r+b") as f:          # damage the second batch of the first segment
        size = int.from_bytes(f.read(12)[8:12], "big") + 12
        f.seek(size + 40)
        b = f.read(1)
        f.seek(size + 40)
        f.write(bytes([b[0] ^ 0x80]))
    # with the checkpoint the flushed first segment is trusted (not re-read) ...
    mgr2 = LogManager([str(tmp_path / "logs")], CONFIG)
    assert mgr2.get("my.topic_x", 0).log_end_offset == 90
    p2 = mgr2.get("my.topic_x", 0)
    crash(p2)
    mgr2._release_locks()
    # ... without it, recovery finds the damage
    os.unlink(str(tmp_path / "logs" / "recovery-point-offset-checkpoint"))
    mgr3 = LogManager([str(tmp_path / "logs")], CONFIG)
    p3 = mgr3.get("my.topic_x", 0)
    check_intact(p3, 3)
    mgr3.close()


def test_clean_shutdown_marker_skips_the_crc_scan(tmp_path, monkeypatch):
    """LogManager.close writes .kafka_cleanshutdown; the next start trusts the segments (no
    recover() call) and removes the marker; without the marker every unflushed segment is read."""
    root = tmp_path / "logs"
    mgr = LogManager([str(root)], CONFIG)
    plog = mgr.get_or_create("t", 1)
    for _ in range(20):
        append(plog, batch(3, value=b"z" * 60))
    mgr.close()
    assert (root / ".kafka_cleanshutdown").exists()
    calls = []
    original = segment_mod.LogSegment.recover
    monkeypatch.setattr(segment_mod.LogSegment, "recover", lambda self: calls.append(self) or original(self))
    mgr = LogManager([str(root)], CONFIG)
    assert not (root / ".kafka_cleanshutdown").exists()
    assert calls == [] and mgr.get("t", 1).log_end_offset == 60
    crash(mgr.get("t", 1))
    mgr._release_locks()
    os.unlink(root / "recovery-point-offset-checkpoint")
    mgr = LogManager([str(root)], CONFIG)
    assert len(calls) == len(mgr.get("t", 1).segments) > 1
    mgr.close()
