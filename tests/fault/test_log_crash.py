"""kill -9 a process appending to a PartitionLog, many times; after each kill the log recovers
with every acknowledged batch intact, contiguous offsets, no torn batch, and appends continue."""
from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalite.records.batch import scan_valid_prefix
from kafkalite.storage import PartitionLog

pytestmark = pytest.mark.fault

WRITER = Path(__file__).with_name("log_crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]
KILLS = 30


def read_acks(path: Path) -> list[tuple[int, int, str]]:
    """Complete ack lines only. The writer may die in the middle of one: a SIGKILL can cut a
    write() to a regular file short (the kernel stops between pages), and the next writer
    starts on a line of its own (log_crash_writer.py), so a torn line stands alone and is
    skipped here: whole acks have three fields and a 40-digit SHA-1."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().split("\n"):
        fields = line.split(" ")
        if len(fields) == 3 and len(fields[2]) == 40 and fields[0].isdigit() and fields[1].isdigit():
            out.append((int(fields[0]), int(fields[1]), fields[2]))
    return out


def check_log(directory: Path, acks: list[tuple[int, int, str]]) -> int:
    """Open (recover) the log and check it against the acknowledgements; returns its end offset."""
    from log_crash_writer import CONFIG   # same config as the writer
    plog = PartitionLog.open(str(directory), CONFIG, 1_000_000)
    try:
        data = bytearray()
        offset = 0
        while offset < plog.log_end_offset:
            r = plog.read(offset, 1 << 20)
            assert r.first_offset == offset, "offsets must be contiguous from 0"
            data += r.records
            offset = r.last_offset + 1
        infos, end = scan_valid_prefix(data, 0, verify_crc=True)
        assert end == len(data), "a torn or CRC-bad batch was served"
        by_base = {}
        expected = 0
        for info in infos:
            assert info.base_offset == expected
            expected = info.next_offset
            by_base[info.base_offset] = (info.last_offset, hashlib.sha1(data[info.position:info.end]).hexdigest())
        assert expected == plog.log_end_offset
        for base, last, digest in acks:
            assert by_base.get(base) == (last, digest), f"acknowledged batch at {base} lost or changed"
        # producer state was rebuilt: the next sequence continues the last batch in the log
        if infos:
            assert plog.producers.producers[4242].last_seq == infos[-1].last_sequence
        return plog.log_end_offset
    finally:
        plog.close()


def test_kill_9_during_appends_loses_no_acknowledged_batch(tmp_path):
    """30 SIGKILLs at random moments of a writer appending to the page cache (acks=1): each time,
    every acknowledged batch survives byte-identical, offsets are contiguous from 0, nothing torn
    is served, and the next writer run appends where recovery left the log."""
    sys.path.insert(0, str(WRITER.parent))
    rng = random.Random(2024)
    directory = tmp_path / "crash.test-0"
    ack_path = tmp_path / "acks"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    deadline = time.monotonic() + 50
    ends = []
    for kill in range(KILLS):
        proc = subprocess.Popen([sys.executable, str(WRITER), str(directory), str(ack_path), str(kill)],
                                env=env, stderr=subprocess.PIPE)
        time.sleep(0.35 + rng.random() * 0.35)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        acks = read_acks(ack_path)
        ends.append(check_log(directory, acks))
        # acknowledgements never run ahead of the recovered log
        assert not acks or acks[-1][1] < ends[-1]
        if time.monotonic() > deadline:
            break
    assert kill + 1 >= 20, "too few kills fit in the time box"
    assert ends[-1] > ends[0] > 0, "appends continued after each recovery"
    assert len(read_acks(ack_path)) > 100
