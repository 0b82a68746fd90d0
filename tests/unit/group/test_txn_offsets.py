"""Transactional offset commits in the group coordinator (TxnOffsetCommit): written as the
producer's transactional batch, invisible to OffsetFetch until the COMMIT marker reaches the
offsets partition, dropped on ABORT, and kept pending across a reload until their marker."""
from __future__ import annotations


import pytest
from twisted.internet import defer, task

from kafkalite.errors import ErrorCode
from kafkalite.group.coordinator import GroupConfig, GroupCoordinator
from kafkalite.group.state import OffsetAndMetadata
from tests.support.deferreds import fired

pytestmark = pytest.mark.unit


class Store:
    def __init__(self) -> None:
        self.log: list[tuple[int, bytes, bytes | None, tuple[int, int] | None]] = []

    def append(self, partition: int, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> defer.Deferred:
        self.log.extend((partition, k, v, producer) for k, v in entries)
        return defer.succeed(ErrorCode.NONE)


def make() -> tuple[GroupCoordinator, Store]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    store = Store()
    coord = GroupCoordinator(GroupConfig(), clock, store, lambda: 1)
    coord.begin_load(0)
    coord.complete_load(0, [])
    return coord, store


def test_pending_until_commit_marker_dropped_on_abort():
    """Producer 7's offsets are written with its id and epoch and stay invisible until
    complete_txn(commit); producer 8's are dropped by complete_txn(abort)."""
    coord, store = make()
    tp = ("in", 0)
    assert fired(coord.commit_offsets("g", "", None, -1, {tp: OffsetAndMetadata(5)})) == {tp: ErrorCode.NONE}
    assert fired(coord.commit_txn_offsets("g", 7, 2, {tp: OffsetAndMetadata(10)})) == {tp: ErrorCode.NONE}
    assert store.log[-1][3] == (7, 2)
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 5
    coord.complete_txn(7, 0, commit=True)
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 10
    fired(coord.commit_txn_offsets("g", 8, 0, {tp: OffsetAndMetadata(99)}))
    coord.complete_txn(8, 0, commit=False)
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 10
    coord.complete_txn(8, 0, commit=True)               # nothing pending any more
    assert coord.fetch_offsets("g", [tp])[1][tp].offset == 10


def test_reload_keeps_unfinished_transactions_pending():
    """A new coordinator loading the partition with a transaction's offsets but no marker keeps
    them pending; the marker arriving later commits them."""
    coord, store = make()
    tp = ("in", 1)
    fired(coord.commit_txn_offsets("g", 7, 0, {tp: OffsetAndMetadata(42)}))
    other, _ = make()
    other.unload(0)
    other.begin_load(0)
    other.complete_load(0, [], {7: [(k, v) for _, k, v, _ in store.log]})
    assert other.fetch_offsets("g", [tp])[1][tp] is None
    other.complete_txn(7, 0, commit=True)
    assert other.fetch_offsets("g", [tp])[1][tp].offset == 42


def test_loading_resolves_transactional_batches_with_their_markers(tmp_path):
    """Reading __consumer_offsets (OffsetsTopic._read_partition over a real log): a plain commit
    counts in place, producer 1's committed transaction counts at its COMMIT marker, producer 2's
    aborted one is dropped, producer 3's unfinished one comes back as pending."""
    import os
    from types import SimpleNamespace

    from kafkalite.broker.offsets_topic import OffsetsTopic
    from kafkalite.records.batch import validate_batches
    from kafkalite.records.builder import build_batch
    from kafkalite.records.control import ControlType
    from kafkalite.storage import LogConfig, PartitionLog

    plog = PartitionLog.open(os.path.join(str(tmp_path), "__consumer_offsets-0"), LogConfig(), 0)

    def write(key: bytes, pid: int = -1) -> None:
        raw = build_batch([(1, key, b"v", ())], producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                          base_sequence=0 if pid >= 0 else -1, transactional=pid >= 0)
        plog.append(raw, validate_batches(raw, max_batch_bytes=1 << 20), leader_epoch=0, now_ms=1, client=False)

    def marker(pid: int, commit: bool) -> None:
        plog.append_end_txn_marker(ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
                                   producer_epoch=0, coordinator_epoch=0, leader_epoch=0, now_ms=1)
    write(b"plain-1")
    write(b"txn-1", 1)
    write(b"txn-2", 2)
    write(b"txn-3", 3)
    write(b"plain-2")
    marker(1, True)
    marker(2, False)
    fake = SimpleNamespace(config={"offsets.load.buffer.size": 100})     # small reads: several chunks
    entries, pending = OffsetsTopic._read_partition(fake, plog, plog.log_end_offset)  # type: ignore[arg-type]
    assert [k for k, _ in entries] == [b"plain-1", b"plain-2", b"txn-1"]
    assert {pid: [k for k, _ in e] for pid, e in pending.items() if e} == {3: [b"txn-3"]}
    plog.close()
