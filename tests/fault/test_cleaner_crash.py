"""kill -9 a process that appends keyed updates and compacts its log over and over, many times;
after each kill the log recovers (interrupted swaps completed or undone) with every key's latest
acknowledged record still there, no older value resurrected, unique increasing offsets and only
CRC-valid batches; the next run appends and cleans on.

Run as a script (``test_cleaner_crash.py writer <log dir> <ack file> <seed>``) this file is the
writer the test kills.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KILLS = 25
KEYS = 60
TOPIC = "crash"


def config():
    from kafkalite.storage import LogConfig
    return LogConfig(cleanup_policy=("compact",), segment_bytes=16 * 1024, index_interval_bytes=512,
                     file_delete_delay_ms=0, min_cleanable_dirty_ratio=0.0, delete_retention_ms=0)


def writer(log_dir: str, ack_path: str, seed: int) -> None:
    """Append 1-3 batches of random keyed updates (10% tombstones), acknowledge each record after
    append() returned (``offset key value`` lines), clean the log, repeat until killed."""
    from kafkalite.records.batch import validate_batches
    from kafkalite.records.builder import build_batch
    from kafkalite.storage import LogManager
    from kafkalite.storage.cleaner import LogCleaner

    rng = random.Random(seed)
    cfg = config()
    lm = LogManager([log_dir], cfg, topic_config=lambda t: cfg)
    plog = lm.get_or_create(TOPIC, 0)
    plog.high_watermark = plog.log_end_offset
    clock = [2_000_000 + seed * 100_000]
    cleaner = LogCleaner(lm, clock=lambda: clock[0])
    drop_torn_ack_line(Path(ack_path))
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    n = 0
    while True:
        for _ in range(rng.randint(5, 20)):
            pairs = []
            for _ in range(rng.randint(1, 10)):
                key = b"k%d" % rng.randrange(KEYS)
                value = None if rng.random() < 0.1 else b"%s=%d-%d" % (key, seed, n) + os.urandom(rng.randint(0, 200))
                pairs.append((key, value))
                n += 1
            buf = build_batch([(clock[0], k, v, ()) for k, v in pairs], compression=rng.choice([0, 0, 1, 4]))
            infos = validate_batches(buf, max_batch_bytes=1 << 20)
            res = plog.append(buf, infos, leader_epoch=0, now_ms=clock[0])
            plog.high_watermark = plog.log_end_offset
            lines = "".join(f"{res.first_offset + i} {k.decode()} {v.hex() if v is not None else '-'}\n"
                            for i, (k, v) in enumerate(pairs))
            os.write(ack, lines.encode())
            clock[0] += 1
        cleaner.clean_once()


def drop_torn_ack_line(path: Path) -> None:
    """A kill can land inside ``os.write`` of the ack lines (a short write): cut the file back to its
    last complete line, so the next writer's lines do not run on from a torn one (a torn line was
    never an acknowledgement)."""
    if path.exists():
        data = path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            os.truncate(path, keep)


def read_acks(path: Path) -> dict[bytes, tuple[int, bytes | None]]:
    """Each key's latest acknowledged (offset, value); complete lines only."""
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    if path.exists():
        for line in path.read_text().split("\n")[:-1]:
            offset, key, value = line.split(" ")
            latest[key.encode()] = (int(offset), None if value == "-" else bytes.fromhex(value))
    return latest


def check_log(log_dir: Path, acked: dict[bytes, tuple[int, bytes | None]]) -> tuple[int, int]:
    """Reopen (recover) and check against the acknowledgements; returns (records, log end)."""
    from kafkalite.records.batch import scan_valid_prefix
    from kafkalite.records.record import decode_batch
    from kafkalite.storage import LogManager

    cfg = config()
    lm = LogManager([str(log_dir)], cfg, topic_config=lambda t: cfg)
    try:
        plog = lm.get(TOPIC, 0)
        leftovers = [n for n in os.listdir(plog.directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert not leftovers, f"recovery left {leftovers}"
        last: dict[bytes, tuple[int, bytes | None]] = {}
        offsets = []
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            r = plog.read(offset, 1 << 20)
            data = bytes(r.records)
            infos, end = scan_valid_prefix(data, 0, verify_crc=True)
            assert end == len(data), "a torn or CRC-bad batch was served"
            for info in infos:
                for rec in decode_batch(data, info):
                    assert rec.key is not None
                    if rec.value is not None:
                        assert rec.value.startswith(rec.key + b"="), "a record's value does not belong to its key"
                    offsets.append(rec.offset)
                    last[rec.key] = (rec.offset, rec.value)
            offset = r.last_offset + 1
        assert offsets == sorted(set(offsets)), "offsets must be unique and increasing"
        for key, (off, value) in acked.items():
            assert off < plog.log_end_offset, f"acknowledged offset {off} lies beyond the log end"
            if key not in last:
                assert value is None, f"{key!r}: its latest acknowledged value at {off} was lost"
                continue
            got_off, got_value = last[key]
            assert got_off >= off, f"{key!r}: an older record ({got_off}) replaced the acknowledged {off}"
            if got_off == off:
                assert got_value == value, f"{key!r} at {off} changed"
        return len(offsets), plog.log_end_offset
    finally:
        lm.close()


@pytest.mark.fault
def test_kill_9_during_cleaning_loses_nothing(tmp_path):
    """25 SIGKILLs at random moments of a process that alternates appends and full cleaning
    passes: after each, recovery leaves no .cleaned/.swap/.deleted file, every key's latest
    acknowledged record (or, for a tombstone, nothing older) is there, offsets are unique, every
    batch is CRC-valid; some kills land mid-pass (leftover .cleaned or .swap files seen)."""
    rng = random.Random(99)
    log_dir = tmp_path / "logs"
    ack_path = tmp_path / "acks"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    interrupted = 0
    deadline = time.monotonic() + 90
    ends = []
    for kill in range(KILLS):
        proc = subprocess.Popen([sys.executable, __file__, "writer", str(log_dir), str(ack_path), str(kill)], env=env)
        # let it start (imports, recovery) and run a little, then kill at a random moment
        start = time.monotonic()
        while not ack_path.exists() and time.monotonic() - start < 30 and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.6))
        assert proc.poll() is None, f"writer exited early with {proc.returncode}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        part = log_dir / f"{TOPIC}-0"
        if any(n.endswith((".cleaned", ".swap")) for n in os.listdir(part)):
            interrupted += 1
        ends.append(check_log(log_dir, read_acks(ack_path)))
        if time.monotonic() > deadline and kill >= 10:
            break
    assert interrupted >= 1, "no kill landed during a cleaning pass"
    records, end = ends[-1]
    assert end > 1000 and records < end, "the log grew and was compacted"
    print(f"\n{len(ends)} kills, {interrupted} mid-pass; final log: {records} records below offset {end}")


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "writer":
    writer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
