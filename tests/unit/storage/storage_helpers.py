"""Shared helpers for the storage tests: build validated batches, open logs, read everything back."""
from __future__ import annotations

import os

from kafkalite.records.batch import BatchInfo, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogConfig, PartitionLog

BIG = 2**31 - 1


def batch(n: int = 1, *, ts: int = 1000, value: bytes = b"v", pid: int = -1, epoch: int = -1,
          seq: int = -1, ts_step: int = 0) -> bytearray:
    """One batch of ``n`` records (timestamps ts, ts+ts_step, ...), optionally idempotent."""
    return build_batch([(ts + i * ts_step, None, value, ()) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def prepared(*batches: bytearray) -> tuple[bytearray, list[BatchInfo]]:
    """Concatenate batches as one produce request's records and validate them like the broker."""
    buf = bytearray(b"".join(batches))
    return buf, validate_batches(buf, max_batch_bytes=BIG)


def append(plog: PartitionLog, *batches: bytearray, epoch: int = 0, now_ms: int = 1000):
    buf, infos = prepared(*batches)
    return plog.append(buf, infos, leader_epoch=epoch, now_ms=now_ms)


def open_log(tmp_path, config: LogConfig | None = None, name: str = "topic-0", now_ms: int = 0,
             **kwargs) -> PartitionLog:
    return PartitionLog.open(os.path.join(str(tmp_path), name), config or LogConfig(), now_ms, **kwargs)


def read_all(plog: PartitionLog, start: int | None = None) -> bytes:
    """Every byte from ``start`` (default log start) to the log end, via read()."""
    offset = plog.log_start_offset if start is None else start
    out = bytearray()
    while offset < plog.log_end_offset:
        r = plog.read(offset, 1 << 20)
        assert r.first_offset != -1
        out += r.records
        offset = r.last_offset + 1
    return bytes(out)
