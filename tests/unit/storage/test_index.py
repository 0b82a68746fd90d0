"""Offset and time indexes against a sorted-list oracle, plus their sanity checks on load."""
from __future__ import annotations

import bisect
import os
import random

import pytest

from kafkalite.storage.index import CorruptIndexError, OffsetIndex, TimeIndex

pytestmark = pytest.mark.unit


def test_offset_index_lookup_is_greatest_entry_at_or_below_target(tmp_path):
    """lookup(t) returns the greatest (offset, position) with offset <= t, (base, 0) below all,
    also after a reload from the file and after truncation."""
    rng = random.Random(7)
    base = 1000
    idx = OffsetIndex(str(tmp_path / "a.index"), base, 1 << 20)
    offsets, positions = [], []
    off, pos = base + 1, 10
    for _ in range(3000):
        offsets.append(off)
        positions.append(pos)
        idx.append(off, pos)
        off += rng.randint(1, 50)
        pos += rng.randint(1, 5000)

    def check(ix: OffsetIndex, offs: list[int], poss: list[int]) -> None:
        for target in [base - 1, base, *rng.sample(range(base, off + 10), 500)]:
            i = bisect.bisect_right(offs, target) - 1
            assert ix.lookup(target) == ((offs[i], poss[i]) if i >= 0 else (base, 0))

    check(idx, offsets, positions)
    idx.close()
    again = OffsetIndex(str(tmp_path / "a.index"), base, 1 << 20)
    again.load(pos + 1)
    assert os.path.getsize(tmp_path / "a.index") == 8 * 3000
    check(again, offsets, positions)
    cut = offsets[1234]
    again.truncate_to(cut)
    check(again, offsets[:1234], positions[:1234])
    again.close()
    assert os.path.getsize(tmp_path / "a.index") == 8 * 1234


def test_time_index_lookup_and_only_increasing_timestamps(tmp_path):
    """maybe_append keeps only growing timestamps; lookup(ts) is the greatest entry <= ts."""
    rng = random.Random(3)
    idx = TimeIndex(str(tmp_path / "a.timeindex"), 0, 1 << 20)
    oracle: list[tuple[int, int]] = []
    ts, off = 100, 0
    for _ in range(2000):
        ts += rng.randint(-5, 20)
        off += rng.randint(1, 10)
        added = idx.maybe_append(ts, off)
        assert added == (not oracle or ts > oracle[-1][0])
        if added:
            oracle.append((ts, off))
    keys = [t for t, _ in oracle]
    for target in rng.sample(range(0, ts + 100), 400):
        i = bisect.bisect_right(keys, target) - 1
        assert idx.lookup(target) == (oracle[i] if i >= 0 else None)
    idx.close()
    again = TimeIndex(str(tmp_path / "a.timeindex"), 0, 1 << 20)
    again.load()
    assert again.entries() == oracle


@pytest.mark.parametrize("damage", ["odd_size", "not_increasing", "beyond_log"])
def test_offset_index_sanity_check_rejects_damage(tmp_path, damage):
    """A torn size, decreasing entries or a position past the log raise CorruptIndexError and
    leave the index empty, ready to be rebuilt."""
    path = str(tmp_path / "b.index")
    idx = OffsetIndex(path, 0, 1 << 20)
    for i in range(1, 10):
        idx.append(i * 10, i * 100)
    idx.close()
    log_size = 10_000
    if damage == "odd_size":
        with open(path, "ab") as f:
            f.write(b"\x00\x01\x02")
    elif damage == "not_increasing":
        with open(path, "r+b") as f:
            f.seek(8 * 5)
            f.write((1).to_bytes(4, "big") + (50).to_bytes(4, "big"))
    else:
        log_size = 500
    again = OffsetIndex(path, 0, 1 << 20)
    with pytest.raises(CorruptIndexError):
        again.load(log_size)
    assert len(again) == 0 and os.path.getsize(path) == 0


def test_index_full_and_pending_entries_reach_the_file(tmp_path):
    """An index reports full at segment.index.bytes / 8 entries; buffered entries are written by
    write_pending (what roll and flush call)."""
    idx = OffsetIndex(str(tmp_path / "c.index"), 0, 80)
    for i in range(10):
        assert not idx.is_full
        idx.append(i + 1, i * 10 + 1)
    assert idx.is_full
    assert os.path.getsize(tmp_path / "c.index") == 0
    idx.write_pending()
    assert os.path.getsize(tmp_path / "c.index") == 80
    idx.close()
