"""Opening a partition directory after a clean or unclean shutdown (Kafka's ``LogLoader``).

What a crash (kill -9, power loss) can leave behind, and what happens to it:

* a torn or CRC-bad batch at the end of a segment, garbage after the last batch, offsets that go
  backwards: every segment from the one holding the recovery point onward is re-read batch by batch
  with CRC checks; the first bad batch and everything after it is cut off and every later segment
  is deleted, so no torn batch is ever served and nothing after a hole survives;
* indexes that lag, are torn, corrupt or missing: rebuilt from the log (always for recovered
  segments; for trusted segments when the sanity check fails);
* ``*.deleted`` (retention/truncation that was not finished), ``*.tmp`` (checkpoint or snapshot
  being written), ``*.cleaned``/``*.swap`` (a compaction in progress): removed;
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

log = logging.getLogger(__name__)

_SEGMENT_FILE_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex)$")
_STRAY_SUFFIXES = (DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")


class LoadedSegments(NamedTuple):
    segments: list[LogSegment]
    recovered: bool          # some segment was re-read with CRC checks (fsync it before trusting it)
    truncated_bytes: int     # bytes cut off by recovery, including deleted later segments


def remove_stray_files(directory: str) -> None:
    for name in os.listdir(directory):
        if name.endswith(_STRAY_SUFFIXES):
            log.info("removing leftover %s", os.path.join(directory, name))
            os.unlink(os.path.join(directory, name))


def load_segments(directory: str, config: LogConfig, now_ms: int, *, recovery_point: int,
                  clean_shutdown: bool) -> LoadedSegments:
    """Open every segment of ``directory``, recovering those at or after ``recovery_point``.

    Returns the surviving segments in offset order (possibly none).
    """
    remove_stray_files(directory)
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
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
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
            recovered = True
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
    return LoadedSegments(segments, recovered, truncated)


def _delete_from(directory: str, bases: list[int], config: LogConfig, now_ms: int) -> int:
    removed = 0
    for base in bases:
        seg = LogSegment(directory, base, config, now_ms)
        removed += seg.size
        seg.delete()
    return removed
