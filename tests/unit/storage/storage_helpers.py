"""Shared helpers for the storage tests: build validated batches, open logs, read everything back."""
from __future__ import annotations

import errno
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


class FailingDisk:
    """A disk under ``root`` that breaks on demand: once :attr:`broken` is set, the file
    operations storage uses (``os.open/pwrite/pread/write/fsync/ftruncate/replace/rename/unlink/
    rmdir/mkdir/listdir/scandir``) fail with ``error`` for paths and fds under ``root`` (only
    those in ``ops`` if given). Every operation attempted under ``root`` is recorded in
    :attr:`attempts`, so a test can show that nothing touches a dir after it failed.

    Paths of fds come from /proc/self/fd, so duplicated fds and renamed files count too.
    """

    FD_FUNCS = ("pwrite", "pread", "write", "fsync", "ftruncate")
    PATH_FUNCS = ("open", "unlink", "rmdir", "mkdir", "listdir", "scandir")
    TWO_PATH_FUNCS = ("replace", "rename")

    def __init__(self, monkeypatch, root, error: int = errno.EIO, ops: tuple[str, ...] | None = None) -> None:
        self.root = os.path.abspath(str(root))
        self.error = error
        self.ops = ops
        self.broken = False
        self.attempts: list[tuple[str, str]] = []
        for name in self.FD_FUNCS:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name), self._fd_path))
        for name in self.PATH_FUNCS:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name), self._arg_path))
        for name in self.TWO_PATH_FUNCS:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name), self._arg_path))

    @staticmethod
    def _fd_path(args: tuple) -> str | None:
        try:
            return os.readlink(f"/proc/self/fd/{args[0]}")
        except OSError:
            return None

    @staticmethod
    def _arg_path(args: tuple) -> str | None:
        if not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return None
        path = os.fsdecode(args[0])
        return os.path.abspath(path)

    def under(self, path: str | None) -> bool:
        return path is not None and (path == self.root or path.startswith(self.root + os.sep))

    def _wrap(self, name: str, real, path_of):
        def op(*args, **kwargs):
            path = path_of(args)
            if name in self.TWO_PATH_FUNCS and not self.under(path) and len(args) > 1:
                path = os.path.abspath(os.fsdecode(args[1]))
            if self.under(path):
                self.attempts.append((name, path))
                if self.broken and (self.ops is None or name in self.ops):
                    raise OSError(self.error, os.strerror(self.error), path)
            return real(*args, **kwargs)
        return op


class Jobs:
    """A :data:`~kafkalite.storage.failure.Background` that only queues: tests run the jobs
    when they choose (``run()``), in any order, or never (a crash)."""

    def __init__(self) -> None:
        self.queued: list = []

    def __call__(self, job) -> None:
        self.queued.append(job)

    def run(self, *, reverse: bool = False) -> int:
        jobs, self.queued = self.queued, []
        for job in reversed(jobs) if reverse else jobs:
            job()
        return len(jobs)


def crash(plog: PartitionLog) -> None:
    """Drop a log the way kill -9 does: every file closed, nothing buffered written (index entries
    not yet on disk are lost, as after a real crash)."""
    plog.close_handles()
