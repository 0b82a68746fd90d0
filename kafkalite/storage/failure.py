"""Log-dir failure handling (Kafka's ``LogDirFailureChannel``) and the background-work hook.

An ``OSError`` from any file operation on a log dir (EIO from a dying disk, ENOSPC on a full one,
EROFS after the kernel remounted it read-only, a vanished mount) means the dir can no longer be
trusted, so, as Kafka does, the whole dir goes offline at once rather than one partition:

* the error is turned into :class:`~kafkalite.errors.KafkaStorageError` (KAFKA_STORAGE_ERROR, 56,
  which clients retry after refreshing metadata) and reported here once per dir;
* every log in the dir refuses every later operation with KafkaStorageError without touching the
  disk again, background jobs for the dir are dropped, checkpoints skip it and no new partition
  is placed on it (``manager.py``);
* listeners (the broker) hear of it once, so the controller can move leadership to replicas on
  other brokers while this broker keeps serving its other dirs.

A dir stays offline until the process restarts (Kafka's rule too: the operator replaces the disk
and restarts the broker).

Background work. Storage must not block its owner thread (the broker's reactor) on slow file
work such as unlinking deleted segments, removing deleted partition dirs or fsyncing checkpoint
files. Such work is handed to a :data:`Background` callable, ``background(job)``, which runs
``job()`` somewhere else later; the broker passes a thread pool, tests and tools the default
:func:`run_inline`. Storage never imports Twisted.

Thread-safety: :meth:`LogDirFailureChannel.report` may be called from any thread (the reactor, a
flush or cleaner thread, a background job); listeners run in the reporting thread, so a listener
that must act on the reactor hops there itself. ``is_offline`` is a lock-free set lookup.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

from kafkalite.errors import KafkaStorageError

log = logging.getLogger(__name__)

#: ``background(job)`` runs ``job()`` off the owner thread (or inline); jobs never raise OSError
#: to it (they report it here) and must not assume an order relative to each other.
Background = Callable[[Callable[[], None]], None]

#: ``listener(log_dir, reason)``, called once per failed dir.
FailureListener = Callable[[str, str], None]


def run_inline(job: Callable[[], None]) -> None:
    """The default :data:`Background`: run the job now, on the calling thread."""
    job()


class LogDirFailureChannel:
    """Which log dirs have failed, why, and who wants to know."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}          # dir -> the first reason, insertion ordered
        self._listeners: list[FailureListener] = []

    def add_listener(self, listener: FailureListener) -> None:
        """Call ``listener(log_dir, reason)`` for every dir that fails from now on."""
        with self._lock:
            self._listeners.append(listener)

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self._offline

    @property
    def offline_dirs(self) -> list[str]:
        """The failed dirs in the order they failed."""
        return list(self._offline)

    def reason(self, log_dir: str) -> str | None:
        return self._offline.get(log_dir)

    def report(self, log_dir: str, what: str, error: BaseException | None = None) -> bool:
        """Mark ``log_dir`` offline because ``what`` failed with ``error``; True the first time
        (listeners are then called), False if it was offline already."""
        reason = f"{what}: {error}" if error is not None else what
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = reason
            listeners = list(self._listeners)
        log.error("log dir %s is now offline (%s); its partitions answer KAFKA_STORAGE_ERROR", log_dir, reason)
        for listener in listeners:
            try:
                listener(log_dir, reason)
            except Exception:
                log.exception("log dir failure listener %r failed", listener)
        return True

    def fail(self, log_dir: str, what: str, error: OSError) -> KafkaStorageError:
        """Report ``error`` and return the KafkaStorageError the caller raises in its place."""
        self.report(log_dir, what, error)
        return KafkaStorageError(f"{what} failed in log dir {log_dir}: {error}")

    def check_online(self, log_dir: str, what: str) -> None:
        """Raise KafkaStorageError (without any I/O) if ``log_dir`` is offline."""
        if log_dir in self._offline:
            raise KafkaStorageError(f"cannot {what}: log dir {log_dir} is offline ({self._offline[log_dir]})")

    def guarded(self, log_dir: str, what: str, job: Callable[[], None]) -> Callable[[], None]:
        """``job`` wrapped for a :data:`Background`: skipped once ``log_dir`` is offline, and an
        OSError it raises is reported here instead of escaping into the executor."""
        def run() -> None:
            if log_dir in self._offline:
                return
            try:
                job()
            except OSError as e:
                self.report(log_dir, what, e)
        return run
