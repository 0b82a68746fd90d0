"""Leader-epoch cache: which offset each leader epoch started at (Kafka's ``LeaderEpochFileCache``).

It answers OffsetForLeaderEpoch, which followers use to find where their log diverged from the
leader's. Entries are strictly increasing in both epoch and start offset. Every change is persisted
to ``leader-epoch-checkpoint`` before the append that caused it is written, so the file is never
behind the log; after a crash the cache is only ever truncated to the recovered log.
"""
from __future__ import annotations

import bisect
import logging
import os

from kafkalite.storage import checkpoint

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """epoch -> start offset, persisted in ``<partition dir>/leader-epoch-checkpoint``."""

    def __init__(self, path: str, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries or ():
            self._epochs.append(epoch)
            self._offsets.append(offset)

    @classmethod
    def load(cls, path: str) -> tuple[LeaderEpochCache, bool]:
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

    # --- changes (each persisted) ----------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; older or equal epochs are ignored.

        ``persist=False`` batches several assignments (rebuilding from the log); call flush() after.
        """
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        # An epoch that starts at or before an earlier entry's start supersedes it (no data was
        # written in that earlier epoch after this point).
        while self._offsets and self._offsets[-1] >= start_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        if persist:
            self._persist()
        return True

    def flush(self) -> None:
        self._persist()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (log truncated to there)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            del self._epochs[i:], self._offsets[i:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: the epoch covering it now starts there."""
        i = bisect.bisect_right(self._offsets, start_offset)   # entries [0, i) start <= start_offset
        if i == 0 or (i == 1 and self._offsets[0] == start_offset):
            return
        del self._epochs[:i - 1], self._offsets[:i - 1]
        self._offsets[0] = start_offset
        self._persist()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._persist()

    def _persist(self) -> None:
        checkpoint.write_epochs(self.path, self.entries())

    def delete_file(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
