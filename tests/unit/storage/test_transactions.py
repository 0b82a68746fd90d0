"""Transactions in the partition log: open transactions, the last stable offset, control batches,
the aborted-transaction index, recovery and followers, checked against a list of batches."""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest

from kafkalite.errors import ErrorCode, InvalidProducerEpochError, InvalidTxnStateError, KafkaError
from kafkalite.records.batch import read_header, validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.control import AbortedTransactionFilter, ControlType
from kafkalite.records.record import decode_batch
from kafkalite.storage import LogConfig, PartitionLog
from kafkalite.storage.producer_state import ProducerStateEntry, ProducerStateManager
from kafkalite.storage.txn_index import AbortedTxn
from storage_helpers import BIG, crash, open_log

pytestmark = pytest.mark.unit

NON_TXN_PID = 50


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = True) -> bytearray:
    return build_batch([(1000, None, v, ()) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=transactional)


def append(plog: PartitionLog, raw: bytearray) -> int:
    infos = validate_batches(raw, max_batch_bytes=BIG)
    return plog.append(raw, infos, leader_epoch=0, now_ms=1000).first_offset


def marker(plog: PartitionLog, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> int:
    return plog.append_end_txn_marker(ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
                                      producer_epoch=epoch, coordinator_epoch=coordinator_epoch,
                                      leader_epoch=0, now_ms=1000).first_offset



def all_entries(plog: PartitionLog) -> list[AbortedTxn]:
    return [t for seg in plog.segments for t in seg.txn_index.entries]


def read_committed(plog: PartitionLog, start: int) -> list[bytes]:
    """A read_committed consumer (the Java consumer's rule): batches below the LSO plus the
    aborted transactions of that range; an aborted producer's transactional batches are skipped
    from its transaction's first offset until its ABORT marker; control batches never show."""
    lso = plog.last_stable_offset
    aborted = sorted(plog.collect_aborted_txns(start, lso), key=lambda t: t.first_offset)
    skipping: set[int] = set()
    out: list[bytes] = []
    offset = start
    while offset < lso:
        r = plog.read(offset, 1 << 20, max_offset=lso)
        if r.first_offset < 0:
            break
        buf = bytes(r.records)
        pos = 0
        while pos < len(buf):
            info = read_header(buf, pos)
            if info.producer_id >= 0:
                while aborted and aborted[0].first_offset <= info.last_offset:
                    skipping.add(aborted.pop(0).producer_id)
                if info.is_control:
                    records = decode_batch(buf, info, verify_crc=False)
                    if records[0].key is not None and records[0].key[3] == ControlType.ABORT:
                        skipping.discard(info.producer_id)
                    pos = info.end
                    continue
                if info.is_transactional and info.producer_id in skipping:
                    pos = info.end
                    continue
            out.extend(bytes(rec.value) for rec in decode_batch(buf, info, verify_crc=False))
            pos = info.end
        offset = r.last_offset + 1
    return out


def read_committed_by_fetches(plog: PartitionLog, start: int, max_bytes: int) -> list[bytes]:
    """The same view as the broker serves it and clients consume it: fetches of ``max_bytes``
    below the LSO, each with the aborted transactions overlapping what it returned (the Fetch
    handler's bound), filtered by records.control.AbortedTransactionFilter (what kafkalite's
    client and Spark reader use)."""
    lso = plog.last_stable_offset
    out: list[bytes] = []
    offset = start
    while offset < lso:
        r = plog.read(offset, max_bytes, max_offset=lso)
        if r.first_offset < 0:
            break
        skipper = AbortedTransactionFilter(
            [(t.producer_id, t.first_offset) for t in plog.collect_aborted_txns(offset, r.last_offset + 1)])
        buf = bytes(r.records)
        pos = 0
        while pos < len(buf):
            info = read_header(buf, pos)
            if not skipper.skip(buf, info):
                out.extend(bytes(rec.value) for rec in decode_batch(buf, info, verify_crc=False)
                           if rec.offset >= offset)
            pos = info.end
        offset = r.last_offset + 1
    return out


@dataclass
class Batch:
    base: int
    last: int
    pid: int
    epoch: int
    seq_last: int
    txn: bool
    control: ControlType | None
    values: list[bytes] = field(default_factory=list)


class Oracle:
    """What the log must say, derived from the list of batches by a plain scan. An ended
    transaction keeps the LSO at its first offset while its marker is at or above the high
    watermark (through reopens and truncations too)."""

    def __init__(self, batches: list[Batch], hw: int) -> None:
        open_first: dict[int, int] = {}
        self.txns: list[tuple[int, int, int | None, bool]] = []   # pid, first, marker offset, aborted
        self.aborted: list[AbortedTxn] = []
        unreplicated: list[int] = []
        for i, b in enumerate(batches):
            if b.control is not None:
                first = open_first.pop(b.pid, b.base)
                others = sorted(open_first.values())
                lso = min(others[0], b.base + 1) if others else b.base + 1
                aborted = b.control == ControlType.ABORT
                self.txns.append((b.pid, first, b.base, aborted))
                if b.base >= hw:
                    unreplicated.append(first)
                if aborted:
                    self.aborted.append(AbortedTxn(b.pid, first, b.base, lso))
            elif b.txn and b.pid not in open_first:
                open_first[b.pid] = b.base
        for pid, first in open_first.items():
            self.txns.append((pid, first, None, False))
        unstable = [first for _, first, end, _ in self.txns if end is None] + unreplicated
        self.lso = min([hw] + unstable)
        self.open = dict(open_first)
        aborted_ranges = [(pid, first, end) for pid, first, end, ab in self.txns if ab]
        self.committed_values = []
        for b in batches:
            if b.control is not None or b.last >= self.lso:
                continue
            if b.txn and any(pid == b.pid and first <= b.base < end for pid, first, end in aborted_ranges):
                continue
            self.committed_values.extend(b.values)


class Model:
    def __init__(self, rng: random.Random, tmp_path, config: LogConfig) -> None:
        self.rng, self.config = rng, config
        self.path = os.path.join(str(tmp_path), "txn.topic-0")
        self.fpath = os.path.join(str(tmp_path), "txn.topic-1")
        self.plog = PartitionLog.open(self.path, config, 0)
        self.follower = PartitionLog.open(self.fpath, config, 0)
        self.batches: list[Batch] = []
        self.hw = 0
        self.counter = 0
        self.epochs = {pid: 0 for pid in (1, 2, 3, NON_TXN_PID)}

    def _producer(self, pid: int) -> tuple[int, int, bool]:
        """(epoch, next sequence, in transaction) of ``pid`` per the batch list."""
        epoch, seq, in_txn = self.epochs[pid], 0, False
        for b in self.batches:
            if b.pid != pid:
                continue
            if b.control is not None:
                in_txn = False
                if b.epoch != epoch:
                    epoch, seq = b.epoch, 0
                continue
            if b.epoch != epoch:
                epoch = b.epoch
            seq = b.seq_last + 1
            in_txn = in_txn or b.txn
        return epoch, seq, in_txn

    def produce(self) -> None:
        rng = self.rng
        pid = rng.choice([1, 2, 3, NON_TXN_PID, -1])
        values = [b"v%d" % (self.counter + i) for i in range(rng.randint(1, 4))]
        self.counter += len(values)
        if pid < 0:
            raw = build_batch([(1000, None, v, ()) for v in values])
            epoch, seq, txn = -1, -1, False
        else:
            epoch, seq, _ = self._producer(pid)
            txn = pid != NON_TXN_PID
            raw = txn_batch(pid, epoch, seq, values, transactional=txn)
        base = append(self.plog, raw)
        self.batches.append(Batch(base, base + len(values) - 1, pid, epoch, seq + len(values) - 1, txn, None, values))

    def end_txn(self) -> None:
        rng = self.rng
        pid = rng.choice([1, 2, 3])
        epoch, _, _ = self._producer(pid)
        commit = rng.random() < 0.5
        if not commit and rng.random() < 0.2:
            epoch += 1                         # the coordinator fences the producer with its abort
        base = marker(self.plog, pid, epoch, commit)
        self.batches.append(Batch(base, base, pid, epoch, -1, True, ControlType.COMMIT if commit else ControlType.ABORT))

    def advance_hw(self) -> None:
        self.hw = self.rng.randint(self.hw, self.plog.log_end_offset)
        self.plog.high_watermark = self.hw

    def roll(self) -> None:
        self.plog.roll(1000)

    def truncate(self) -> None:
        # a follower cuts at a batch boundary at or above the high watermark
        target = self.rng.choice([b.base for b in self.batches if b.base >= self.hw] + [self.plog.log_end_offset])
        self.plog.truncate_to(target)
        self.batches = [b for b in self.batches if b.last < target]
        if self.follower.log_end_offset > self.plog.log_end_offset:
            self.follower.truncate_to(self.plog.log_end_offset)

    def reopen(self, clean: bool) -> None:
        if clean:
            self.plog.flush()
            rp = self.plog.recovery_point
            self.plog.close()
            self.plog = PartitionLog.open(self.path, self.config, 0, recovery_point=rp,
                                          high_watermark=self.hw, clean_shutdown=True)
        else:
            crash(self.plog)
            self.plog = PartitionLog.open(self.path, self.config, 0, high_watermark=self.hw)

    def replicate(self) -> None:
        """The follower appends the leader's batches as they are (the follower path)."""
        f = self.follower
        while f.log_end_offset < self.plog.log_end_offset:
            r = self.plog.read(f.log_end_offset, 1 << 16)
            buf = bytearray(r.records)
            infos = _follower_infos(buf)
            f.append(buf, infos, leader_epoch=0, now_ms=1000, assign_offsets=False)
        f.high_watermark = min(self.hw, f.log_end_offset)

    def check(self) -> None:
        o = Oracle(self.batches, self.hw)
        plog = self.plog
        assert plog.last_stable_offset == o.lso
        assert all_entries(plog) == o.aborted
        assert {pid: e.current_txn_first_offset for pid, e in plog.producers.producers.items()
                if e.current_txn_first_offset >= 0} == o.open
        assert read_committed(plog, plog.log_start_offset) == o.committed_values
        assert read_committed_by_fetches(plog, plog.log_start_offset, self.rng.choice([1, 300, 1 << 20])) == \
            o.committed_values
        for _ in range(3):
            lo = self.rng.randint(0, plog.log_end_offset)
            hi = self.rng.randint(lo, plog.log_end_offset + 1)
            assert plog.collect_aborted_txns(lo, hi) == [
                t for t in o.aborted if t.last_offset >= lo and t.first_offset < hi]
        self.replicate()
        f = self.follower
        assert f.log_end_offset == plog.log_end_offset
        assert all_entries(f) == o.aborted
        assert f.producers.ongoing == plog.producers.ongoing
        assert f.last_stable_offset == o.lso


def _follower_infos(buf: bytearray):
    """Headers of the leader's batches as a follower sees them (control batches included,
    which a client's produce may not carry)."""
    infos, pos = [], 0
    while pos < len(buf):
        info = read_header(buf, pos)
        infos.append(info)
        pos = info.end
    return infos


@pytest.mark.parametrize("seed", range(4))
def test_random_transactions_match_the_oracle(tmp_path, seed):
    """Through random transactional and plain appends, commits, aborts (some fencing the
    producer's epoch), high-watermark moves, rolls (tiny segments), truncation and clean and
    crashed reopens: the LSO, the open transactions, every segment's aborted index, collect()
    and a read_committed consumer's view equal the oracle's, and a follower copying the leader's
    batches derives the same index and LSO."""
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.choice([600, 1500]), index_interval_bytes=rng.choice([0, 200]),
                       retention_ms=-1, file_delete_delay_ms=0)
    m = Model(rng, tmp_path, config)
    ops = [(m.produce, 40), (m.end_txn, 15), (m.advance_hw, 15), (m.roll, 3), (m.truncate, 3),
           (lambda: m.reopen(True), 3), (lambda: m.reopen(False), 3)]
    funcs, weights = zip(*ops)
    for step in range(300):
        rng.choices(funcs, weights)[0]()
        if step % 10 == 0:
            m.check()
    m.hw = m.plog.high_watermark = m.plog.log_end_offset
    m.check()
    # the run exercised what it claims: aborts, index entries across several segments
    assert len(all_entries(m.plog)) >= 3 and len(m.plog.segments) > 3
    m.plog.close()
    m.follower.close()


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path):
    """An open transaction holds the LSO at its first offset; after its COMMIT the LSO stays there
    until the high watermark passes the marker, then reaches the high watermark."""
    plog = open_log(tmp_path)
    append(plog, build_batch([(1000, None, b"a", ())]))
    first = append(plog, txn_batch(7, 0, 0, [b"x", b"y"]))
    append(plog, build_batch([(1000, None, b"b", ())]))
    plog.high_watermark = plog.log_end_offset
    assert (first, plog.last_stable_offset) == (1, 1)
    m = marker(plog, 7, 0, commit=True)
    plog.high_watermark = m                     # marker not yet replicated
    assert plog.last_stable_offset == 1
    plog.high_watermark = m + 1
    assert plog.last_stable_offset == m + 1
    plog.close()


def test_marker_and_data_checks(tmp_path):
    """A marker with an older producer epoch is INVALID_PRODUCER_EPOCH, one from an older
    coordinator epoch TRANSACTION_COORDINATOR_FENCED; a plain batch while the producer's
    transaction is open is INVALID_TXN_STATE; none of them is written."""
    plog = open_log(tmp_path)
    append(plog, txn_batch(7, 3, 0, [b"x"]))
    marker(plog, 7, 3, commit=False, coordinator_epoch=5)
    end = plog.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        marker(plog, 7, 2, commit=True, coordinator_epoch=5)
    with pytest.raises(KafkaError) as exc:
        marker(plog, 7, 3, commit=True, coordinator_epoch=4)
    assert exc.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    append(plog, txn_batch(7, 3, 1, [b"y"]))
    with pytest.raises(InvalidTxnStateError):
        append(plog, txn_batch(7, 3, 2, [b"z"], transactional=False))
    assert plog.log_end_offset == end + 1
    plog.close()


def test_crash_with_an_open_transaction_and_a_lost_txn_index(tmp_path):
    """kill -9 with one transaction aborted and one still open, and the .txnindex file deleted
    too: recovery rebuilds the aborted entry and the open transaction, so the LSO and the
    read_committed view are what they were."""
    plog = open_log(tmp_path, LogConfig(segment_bytes=400))
    for i in range(6):
        append(plog, build_batch([(1000, None, b"p%d" % i, ())]))
    append(plog, txn_batch(1, 0, 0, [b"a1"]))
    append(plog, txn_batch(2, 0, 0, [b"b1"]))
    marker(plog, 1, 0, commit=False)
    append(plog, build_batch([(1000, None, b"q", ())]))
    plog.high_watermark = plog.log_end_offset
    before = (plog.last_stable_offset, all_entries(plog), read_committed(plog, 0))
    assert before[1] and before[0] < plog.log_end_offset
    paths = [seg.txn_index.path for seg in plog.segments]
    hw = plog.high_watermark
    crash(plog)
    for p in paths:
        if os.path.exists(p):
            os.unlink(p)
    plog = open_log(tmp_path, LogConfig(segment_bytes=400), high_watermark=hw)
    assert (plog.last_stable_offset, all_entries(plog), read_committed(plog, 0)) == before
    assert b"a1" not in before[2] and b"p0" in before[2]
    plog.close()


def test_snapshot_keeps_open_transactions_and_reads_version_1(tmp_path):
    """Snapshot version 2 carries each producer's open transaction and coordinator epoch; a
    version-1 snapshot (before transactions) still loads, with no transaction open."""
    psm = ProducerStateManager(str(tmp_path))
    entry = ProducerStateEntry(9, 2, 1234, coordinator_epoch=4, current_txn_first_offset=17)
    psm.producers = {9: entry}
    data = psm.encode(30)
    _, loaded = ProducerStateManager.decode(data)
    assert (loaded[9].current_txn_first_offset, loaded[9].coordinator_epoch) == (17, 4)
    import struct
    from kafkalite.records.crc import crc32c
    body = struct.pack(">qi", 30, 1) + struct.pack(">qhqb", 9, 2, 1234, 0)
    v1 = struct.pack(">4shI", b"KLPS", 1, crc32c(body)) + body
    offset, old = ProducerStateManager.decode(v1)
    assert offset == 30 and old[9].epoch == 2 and old[9].current_txn_first_offset == -1


def test_expiry_spares_producers_with_open_transactions(tmp_path):
    """producer.id.expiration.ms never drops a producer whose transaction is open: its first
    offset holds the LSO until the coordinator ends it."""
    plog = open_log(tmp_path)
    append(plog, txn_batch(1, 0, 0, [b"a"]))
    append(plog, txn_batch(2, 0, 0, [b"b"], transactional=False))
    assert plog.remove_expired_producers(10**9, 1000) == 1
    assert set(plog.producers.producers) == {1}
    plog.close()
