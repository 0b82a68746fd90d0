"""Opening a partition directory after a clean or unclean shutdown (Kafka's ``LogLoader``).

What a crash (kill -9, power loss) can leave behind, and what happens to it:

* a torn or CRC-bad batch at the end of a segment, garbage after the last batch, offsets that go
  backwards: every segment from the one holding the recovery point onward is re-read batch by batch
  with CRC checks; the first bad batch and everything after it is cut off and every later segment
  is deleted, so no torn batch is ever served and nothing after a hole survives;
* indexes that lag, are torn, corrupt or missing: rebuilt from the log (always for recovered
  segments; for trusted segments when the sanity check fails);
* ``*.deleted`` (retention/truncation that was not finished), ``*.tmp`` (checkpoint or snapshot
  being written): removed;
* a compaction interrupted mid-swap (cleaner.py, Kafka's protocol): ``*.cleaned`` files (the swap
  had not begun) are removed, and so is any ``.swap`` at or above the lowest ``.cleaned`` base; a
  ``<base>.log.swap`` left otherwise had fully replaced the segments it covers: those old segments
  are deleted, the swap file becomes ``<base>.log`` and its indexes are rebuilt;
* index files without a ``.log``: removed.

After a clean shutdown (the caller says so, from the log dir's ``.kafka_cleanshutdown`` marker)
segments are trusted and only their indexes are sanity-checked.
"""
from __future__ import annotations

import logging
import os
import re
from typing import NamedTuple

from kafkalite.storage.config import LogConfig
from kafkalite.storage.segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from kafkalite.storage.txn_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)

_SEGMENT_FILE_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")
_STRAY_SUFFIXES = (DELETED_SUFFIX, ".tmp")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_TEMP_SEGMENT_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)(\.cleaned|\.swap)$")


class LoadedSegments(NamedTuple):
    segments: list[LogSegment]
    recovered: bool          # some segment was re-read with CRC checks (fsync it before trusting it)
    truncated_bytes: int     # bytes cut off by recovery, including deleted later segments
    first_recovered: int | None = None   # base offset of the first re-read segment


def remove_stray_files(directory: str) -> None:
    for name in os.listdir(directory):
        if name.endswith(_STRAY_SUFFIXES):
            log.info("removing leftover %s", os.path.join(directory, name))
            os.unlink(os.path.join(directory, name))


def complete_interrupted_swaps(directory: str, config: LogConfig, now_ms: int) -> None:
    """Finish or undo a cleaner swap that a crash interrupted (see the module docstring)."""
    cleaned: list[int] = []
    swaps: list[int] = []
    for name in os.listdir(directory):
        m = _TEMP_SEGMENT_RE.match(name)
        if not m:
            continue
        base, kind, suffix = int(m.group(1)), m.group(2), m.group(3)
        if suffix == CLEANED_SUFFIX:
            cleaned.append(base)
            os.unlink(os.path.join(directory, name))
        elif kind == LOG_SUFFIX:
            swaps.append(base)
        else:                                   # index files of a swap are rebuilt from its log
            os.unlink(os.path.join(directory, name))
    if not swaps:
        return
    lowest_cleaned = min(cleaned, default=None)
    live = sorted(int(n[:20]) for n in os.listdir(directory) if _SEGMENT_FILE_RE.match(n) and n.endswith(LOG_SUFFIX))
    for base in sorted(swaps):
        swap_path = os.path.join(directory, f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}")
        if lowest_cleaned is not None and base >= lowest_cleaned:
            log.info("removing %s: its swap had not completed", swap_path)
            os.unlink(swap_path)
            continue
        seg = LogSegment(directory, base, config, now_ms, SWAP_SUFFIX)
        seg.recover()
        end = seg.next_offset
        index_paths = [seg.index.path, seg.time_index.path]
        if os.path.exists(seg.txn_index.path):
            index_paths.append(seg.txn_index.path)
        seg.close()
        for path in index_paths:                # rebuilt when the renamed segment is loaded
            os.unlink(path)
        for old in live:
            if base <= old < max(end, base + 1):
                log.info("interrupted swap: deleting segment %d of %s, replaced by %s", old, directory, swap_path)
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    try:
                        os.unlink(os.path.join(directory, f"{old:020d}{suffix}"))
                    except FileNotFoundError:
                        pass
        os.replace(swap_path, os.path.join(directory, f"{base:020d}{LOG_SUFFIX}"))
        log.info("completed the interrupted swap of %s", swap_path)


def load_segments(directory: str, config: LogConfig, now_ms: int, *, recovery_point: int,
                  clean_shutdown: bool) -> LoadedSegments:
    """Open every segment of ``directory``, recovering those at or after ``recovery_point``.

    Returns the surviving segments in offset order (possibly none).
    """
    remove_stray_files(directory)
    complete_interrupted_swaps(directory, config, now_ms)
    by_base: dict[int, set[str]] = {}
    for name in os.listdir(directory):
        m = _SEGMENT_FILE_RE.match(name)
        if m:
            by_base.setdefault(int(m.group(1)), set()).add(m.group(2))
    bases = []
    for base, suffixes in sorted(by_base.items()):
        if LOG_SUFFIX in suffixes:
            bases.append(base)
            continue
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if suffix in suffixes:       # an index whose log is gone
                os.unlink(os.path.join(directory, f"{base:020d}{suffix}"))

    # the segment holding the recovery point is the first one that may hold unflushed data
    first_unflushed = len(bases)
    if not clean_shutdown:
        first_unflushed = 0
        for i, base in enumerate(bases):
            if base <= recovery_point:
                first_unflushed = i

    segments: list[LogSegment] = []
    recovered = False
    first_recovered: int | None = None
    truncated = 0
    for i, base in enumerate(bases):
        if segments and segments[-1].next_offset > base:
            log.warning("segment %d of %s overlaps the previous one; dropping it and later ones",
                        base, directory)
            truncated += _delete_from(directory, bases[i:], config, now_ms)
            break
        if i >= first_unflushed:
            seg = LogSegment(directory, base, config, now_ms)
            cut = seg.recover()
            if not recovered:
                recovered, first_recovered = True, base
        else:
            seg = LogSegment.load(directory, base, config, now_ms)
            cut = seg.truncated_on_load
        segments.append(seg)
        if cut:
            truncated += cut
            later = bases[i + 1:]
            if later:
                log.warning("recovery of %s stopped at offset %d: deleting %d later segments",
                            directory, seg.next_offset, len(later))
                truncated += _delete_from(directory, later, config, now_ms)
            break
    return LoadedSegments(segments, recovered, truncated, first_recovered)


def _delete_from(directory: str, bases: list[int], config: LogConfig, now_ms: int) -> int:
    removed = 0
    for base in bases:
        seg = LogSegment(directory, base, config, now_ms)
        removed += seg.size
        seg.delete()
    return removed
