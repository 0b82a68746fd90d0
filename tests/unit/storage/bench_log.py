"""Throughput of the broker's produce path (validate_batches + PartitionLog.append) and of
sequential reads; run directly: ``.venv/bin/python tests/unit/storage/bench_log.py``.

Not collected by pytest (no test_ prefix); prints MB/s figures for the storage report.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

from kafkalite.records.batch import validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogConfig, PartitionLog


def make_batch(batch_bytes: int, record_bytes: int = 100) -> bytearray:
    n = max(1, (batch_bytes - 61) // (record_bytes + 12))
    value = b"x" * record_bytes
    return build_batch([(1_700_000_000_000, None, value, ()) for _ in range(n)])


def bench_append(directory: str, batch_bytes: int, total_bytes: int, batches_per_append: int = 1) -> float:
    template = make_batch(batch_bytes) * batches_per_append
    plog = PartitionLog.open(os.path.join(directory, f"bench-{batch_bytes}-{batches_per_append}"),
                             LogConfig(), 0)
    rounds = max(1, total_bytes // len(template))
    bufs = [bytearray(template) for _ in range(min(rounds, 64))]
    t0 = time.perf_counter()
    for i in range(rounds):
        buf = bufs[i % len(bufs)]
        infos = validate_batches(buf, max_batch_bytes=2**31)
        plog.append(buf, infos, leader_epoch=0, now_ms=1_700_000_000_000)
    dt = time.perf_counter() - t0
    plog.close()
    return rounds * len(template) / dt / 1e6, rounds / dt, plog


def bench_read(plog_dir: str, max_bytes: int) -> float:
    plog = PartitionLog.open(plog_dir, LogConfig(), 0, clean_shutdown=True, recovery_point=2**62)
    offset, total = plog.log_start_offset, 0
    t0 = time.perf_counter()
    while offset < plog.log_end_offset:
        r = plog.read(offset, max_bytes)
        total += len(r.records)
        offset = r.last_offset + 1
    dt = time.perf_counter() - t0
    plog.close()
    return total / dt / 1e6


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        size = int(sys.argv[1]) if len(sys.argv) > 1 else 512 * 1024 * 1024
        for batch_bytes, per in ((1024 * 1024, 1), (16 * 1024, 1), (16 * 1024, 16)):
            mbs, calls, plog = bench_append(d, batch_bytes, size, per)
            print(f"append {batch_bytes // 1024} KiB batches x{per}/append: {mbs:8.0f} MB/s  ({calls:.0f} appends/s)")
            print(f"  read back with max_bytes 1 MiB:           {bench_read(plog.directory, 1024 * 1024):8.0f} MB/s")


if __name__ == "__main__":
    main()
