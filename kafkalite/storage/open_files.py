"""How many segment log files a broker process keeps open at once.

Kafka keeps every segment's file open and asks operators for a descriptor limit of 100,000 or
more. Where the hard limit is lower and cannot be raised (no CAP_SYS_RESOURCE), 30,000 replicas
would need more descriptors than the process may hold. :class:`OpenSegmentFiles` therefore keeps
at most ``limit`` segment ``.log`` files open and closes the least recently used of the others;
a closed one is reopened by path on its next use (``LogSegment.fd``). Idle partitions, which are
most of them at that scale, then cost no descriptor.

Which one goes: a second-chance ring (the clock algorithm). A use only sets a flag on the segment,
so the hot path pays one attribute store; the ring moves only when a file is opened.

Threads: only the owner thread (the reactor's, which is the main thread in a broker) closes
files; another thread that opens one (the cleaner's ``.cleaned`` segments, or a cleaning view
reopening a segment to duplicate its fd) only adds to the count, and the owner's next open brings
it back under the limit. A segment becomes evictable once its log adopts it
(:meth:`OpenSegmentFiles.adopt`, with the log's lock); the owner closes it only while holding that
lock, taken without blocking, so a thread that reads it under the lock never loses its fd midway.
The owner itself never holds one segment's fd across the opening of another's (reads and scans
take ``seg.fd`` at the call), so closing on its own thread is safe.
"""
from __future__ import annotations

import logging
import os
import resource
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkalite.storage.segment import LogSegment

log = logging.getLogger(__name__)

#: never fewer than this many, whatever the descriptor limit says
MIN_OPEN_SEGMENT_FILES = 128


class OwnerLock(Protocol):
    """The lock of the log a segment belongs to (an RLock)."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


def default_limit() -> int:
    """Three quarters of the soft descriptor limit (at least 1,024 descriptors left over for
    sockets, index writes, checkpoints and ZooKeeper), and never below
    :data:`MIN_OPEN_SEGMENT_FILES`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    return max(MIN_OPEN_SEGMENT_FILES, soft - max(1024, soft // 4))


class OpenSegmentFiles:
    """The open segment files of one process, and the limit on how many."""

    def __init__(self, limit: int | None = None, owner: int | None = None) -> None:
        self.limit = default_limit() if limit is None else max(2, limit)
        #: the thread that may close files (default: the main thread)
        self.owner = threading.main_thread().ident if owner is None else owner
        self._ring: OrderedDict[LogSegment, None] = OrderedDict()   # open segments, oldest first
        self._guard = threading.Lock()
        self.opens = 0        # files opened, the first time or again
        self.reopens = 0      # of which opened again after being closed here
        self.evictions = 0    # files closed to stay under the limit

    def __len__(self) -> int:
        return len(self._ring)

    def opened(self, seg: LogSegment, *, again: bool = False) -> None:
        """``seg``'s file was just opened; on the owner thread, close others beyond the limit."""
        with self._guard:
            self._ring[seg] = None
            self.opens += 1
            if again:
                self.reopens += 1
            over = len(self._ring) - self.limit
        if over > 0 and threading.get_ident() == self.owner:
            self._evict(over, keep=seg)

    def closed(self, seg: LogSegment) -> None:
        """``seg``'s file was closed by its owner (close, delete, a failed dir)."""
        with self._guard:
            self._ring.pop(seg, None)

    def _evict(self, count: int, keep: LogSegment) -> None:
        victims: list[LogSegment] = []
        with self._guard:
            ring = self._ring
            for _ in range(2 * len(ring)):       # two passes: one clears every flag at most
                if len(victims) >= count or not ring:
                    break
                seg = next(iter(ring))
                ring.move_to_end(seg)
                if seg is keep or seg.owner_lock is None:
                    continue
                if seg.used:
                    seg.used = False             # a second chance
                    continue
                del ring[seg]
                victims.append(seg)
        if victims and not self.evictions:
            log.info("more than %d segment files open: closing idle ones, reopened on use", self.limit)
        for seg in victims:
            if not self._close_idle(seg):
                with self._guard:
                    self._ring[seg] = None        # busy on another thread: still open

    def _close_idle(self, seg: LogSegment) -> bool:
        lock = seg.owner_lock
        if lock is None or not lock.acquire(blocking=False):
            return False
        try:
            fd = seg.detach_fd()
            if fd >= 0:
                os.close(fd)
                self.evictions += 1
        finally:
            lock.release()
        return True


#: the broker process's one set of open segment files (the descriptor limit is per process)
SEGMENT_FILES = OpenSegmentFiles()
