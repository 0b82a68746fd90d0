"""Leader-epoch cache: which offset each leader epoch started at (Kafka's ``LeaderEpochFileCache``).

It answers OffsetForLeaderEpoch, which followers use to find where their log diverged from the
leader's. Entries are strictly increasing in both epoch and start offset.

Persistence is off the owner thread: every change updates memory at once and asks the
``background`` executor to rewrite ``leader-epoch-checkpoint`` (tmp file, rename; no fsync: only
:meth:`flush` makes it durable, with tmp file, fsync, rename, fsync of the dir). A write takes the entries as they are when it runs and writes are serialised, so an
older state never overwrites a newer one (a race Kafka's own asynchronous epoch-checkpoint writes
had to be fixed for). The file may lag memory; recovery tolerates that because of two rules the
partition log keeps:

* :meth:`flush` (synchronous) runs before the recovery point advances, so the file is complete for
  every offset below the recovery point;
* after an unclean shutdown every segment from the recovery point on is re-read, and the cache is
  cut back to the first re-read offset and re-derived from those batches' headers (as Kafka's
  ``LogSegment.recover`` does), so entries the file lost, or truncations it missed, come back
  from the data itself. Only an epoch that began at the log end and has no batch can be
  forgotten: no follower holds a batch of it, the epoch before it still ends at the same offset,
  and a leader re-assigns its epoch when it takes over.

Thread-safety: changes and queries come from the owner thread; the writer copies the entries
under a small lock, so only the copy, never the fsync, is shared with the owner.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading

from kafkalite.storage import checkpoint
from kafkalite.storage.failure import Background, run_inline

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """epoch -> start offset, persisted in ``<partition dir>/leader-epoch-checkpoint``."""

    def __init__(self, path: str, entries: list[tuple[int, int]] | None = None, *,
                 background: Background = run_inline) -> None:
        """``entries`` are what the file at ``path`` holds (none: the file is absent or ignored)."""
        self.path = path
        self.background = background
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries or ():
            self._epochs.append(epoch)
            self._offsets.append(offset)
        self._lock = threading.Lock()          # entries vs. the writer's copy
        self._write_lock = threading.Lock()    # one file write at a time
        self._version = 0                      # bumped by every change
        self._written = 0                      # the version the file holds (maybe not on disk yet)
        self._synced = 0                       # the version the file holds durably (fsynced)
        self._scheduled = False                # a background write is queued and has not started
        self._closed = False                   # no more writes (log closed, deleted or offline)

    @classmethod
    def load(cls, path: str) -> tuple[LeaderEpochCache, bool]:  # (reads at open: the log is not served yet)
        """Load the checkpoint; returns (cache, found). A malformed file counts as missing."""
        try:
            entries = checkpoint.read_epochs(path)
        except checkpoint.CheckpointError as e:
            log.warning("ignoring leader epoch checkpoint: %s", e)
            entries = None
        if entries is not None:
            for (e1, o1), (e2, o2) in zip(entries, entries[1:]):
                if not (e2 > e1 and o2 >= o1):
                    log.warning("ignoring leader epoch checkpoint %s: entries not increasing", path)
                    entries = None
                    break
        return cls(path, entries), entries is not None

    # --- queries -------------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets))

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= requested, start offset of the next epoch).

        The current (latest) epoch ends at the log end offset; an epoch above everything known or
        an empty cache gives (-1, -1); one below everything known gives the first epoch's start.
        """
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self._epochs[-1]:
            return requested, log_end_offset
        i = bisect.bisect_right(self._epochs, requested)     # first epoch > requested
        if i == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if i == 0:
            return requested, self._offsets[0]
        return self._epochs[i - 1], self._offsets[i]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (-1 before the first entry)."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # --- changes (persisted in the background) ----------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; older or equal epochs are ignored.

        ``persist=False`` (also on the other changes) batches several changes at open; call
        flush() after. Otherwise a background write is queued.
        """
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        with self._lock:
            # An epoch that starts at or before an earlier entry's start supersedes it (no data
            # was written in that earlier epoch after this point).
            while self._offsets and self._offsets[-1] >= start_offset:
                self._epochs.pop()
                self._offsets.pop()
            self._epochs.append(epoch)
            self._offsets.append(start_offset)
            self._version += 1
        if persist:
            self._schedule_write()
        return True

    def truncate_from_end(self, end_offset: int, *, persist: bool = True) -> None:
        """Drop epochs that start at or after ``end_offset`` (log truncated to there)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            with self._lock:
                del self._epochs[i:], self._offsets[i:]
                self._version += 1
            if persist:
                self._schedule_write()

    def truncate_from_start(self, start_offset: int, *, persist: bool = True) -> None:
        """Log start moved to ``start_offset``: the epoch covering it now starts there."""
        i = bisect.bisect_right(self._offsets, start_offset)   # entries [0, i) start <= start_offset
        if i == 0 or (i == 1 and self._offsets[0] == start_offset):
            return
        with self._lock:
            del self._epochs[:i - 1], self._offsets[:i - 1]
            self._offsets[0] = start_offset
            self._version += 1
        if persist:
            self._schedule_write()

    def clear(self, *, persist: bool = True) -> None:
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
            self._version += 1
        if persist:
            self._schedule_write()

    # --- persistence -----------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Memory holds changes the file does not hold durably (yet)."""
        return self._version != self._synced

    def _schedule_write(self) -> None:
        """Owner thread: queue one background write unless one is queued already (it will see
        this change too, since a write copies the entries when it starts)."""
        with self._lock:
            if self._scheduled or self._closed:
                return
            self._scheduled = True
        self.background(self._background_write)

    def _background_write(self) -> None:
        self._write(from_queue=True)

    def flush(self, *, sync: bool = True) -> None:
        """Make the file hold memory's entries durably, now (any thread; raises OSError): written
        and fsynced unless an fsynced write already holds them. The partition log calls it
        before moving its recovery point and at close. ``sync=False`` (a closing log manager
        that makes every file durable with one sync afterwards): write without fsync."""
        self._write(from_queue=False, sync=sync)

    def _write(self, *, from_queue: bool, sync: bool = False) -> None:
        """``from_queue``: a background write after a change, without fsync (see the module
        docstring: the file may lag memory, so it need not be durable before :meth:`flush`;
        a broker taking over thousands of leaderships wrote and fsynced a file and its dir for
        each, and those fsyncs held up everything else on the disk, ZooKeeper's log included)."""
        sync = sync and not from_queue
        with self._write_lock:
            with self._lock:
                if from_queue:
                    self._scheduled = False
                done = self._synced if sync else self._written
                if self._closed or self._version == done:
                    return
                entries = list(zip(self._epochs, self._offsets))
                version = self._version
            try:
                checkpoint.write_epochs(self.path, entries, sync=sync)
            except OSError:
                if self._closed:
                    return        # deleted or taken offline meanwhile: nothing left to keep
                raise
            self._written = version
            if sync:
                self._synced = version

    def close(self) -> None:
        """Stop writing (the log is closed, deleted or its dir offline); a write already running
        finishes. Call :meth:`flush` first to keep the latest state."""
        with self._lock:
            self._closed = True

    def wait_idle(self) -> None:
        """Block until no write is running (before the partition dir is removed)."""
        with self._write_lock:
            pass

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
