"""Model test: random appends, reads, rolls, retention, truncation and reopen (clean and crashed)
checked against a plain list of (base offset, last offset, max timestamp, bytes) per batch."""
from __future__ import annotations

import bisect
import os
import random

import pytest

from kafkalite.errors import OffsetOutOfRangeError, RecordListTooLargeError
from kafkalite.storage import LogConfig, PartitionLog
from storage_helpers import batch, crash, prepared

pytestmark = pytest.mark.unit



class Model:
    def __init__(self, rng: random.Random, path: str, config: LogConfig) -> None:
        self.rng, self.path, self.config = rng, path, config
        self.now = 1_000_000
        self.plog = PartitionLog.open(path, config, self.now)
        self.batches: list[tuple[int, int, int, bytes]] = []   # base, last, max ts, bytes
        self.epoch = 0
        self.deleted = 0
        self.nonempty_reads = 0

    # --- operations ---
    def append(self) -> None:
        rng = self.rng
        bufs = []
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(1, 12)
            bufs.append(batch(n, ts=self.now - rng.randint(0, 500), ts_step=rng.randint(0, 3),
                              value=os.urandom(rng.randint(0, 120))))
        buf, infos = prepared(*bufs)
        if rng.random() < 0.05:
            self.epoch += 1
        expected_first = self.plog.log_end_offset
        if len(buf) > self.config.segment_bytes:
            with pytest.raises(RecordListTooLargeError):
                self.plog.append(buf, infos, leader_epoch=self.epoch, now_ms=self.now)
            assert self.plog.log_end_offset == expected_first
            return
        r = self.plog.append(buf, infos, leader_epoch=self.epoch, now_ms=self.now)
        assert r.first_offset == expected_first and not r.duplicate
        offset = expected_first
        for info in infos:
            raw = bytes(buf[info.position:info.end])
            assert int.from_bytes(raw[:8], "big") == offset
            self.batches.append((offset, offset + info.last_offset_delta, info.max_timestamp, raw))
            offset += info.last_offset_delta + 1
        assert r.last_offset == offset - 1 == self.plog.log_end_offset - 1
        self.now += rng.randint(0, 50)

    def expected_read(self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> bytes:
        bases = [s.base_offset for s in self.plog.segments]
        seg_i = bisect.bisect_right(bases, offset) - 1
        i = next((k for k, b in enumerate(self.batches) if b[1] >= offset), None)
        if i is None:
            return b""
        # a read never crosses into the next segment unless the first holds nothing at/after offset
        while seg_i + 1 < len(bases) and self.batches[i][0] >= bases[seg_i + 1]:
            seg_i += 1
        seg_end = bases[seg_i + 1] if seg_i + 1 < len(bases) else 2**63
        limit = self.plog.log_end_offset if max_offset is None else max_offset
        out = bytearray()
        for base, last, _, raw in self.batches[i:]:
            if last >= limit or base >= seg_end:
                break
            if len(out) + len(raw) > max_bytes and not (min_one and not out):
                break
            out += raw
        return bytes(out)

    def read(self) -> None:
        rng, plog = self.rng, self.plog
        lo, hi = plog.log_start_offset, plog.log_end_offset
        offset = rng.randint(max(0, lo - 2), hi + 2)
        max_bytes = rng.choice([1, 70, 200, 1000, 5000, 1 << 20])
        max_offset = rng.choice([None, rng.randint(lo, hi + 1)])
        min_one = rng.random() < 0.8
        if offset < lo or offset > hi:
            with pytest.raises(OffsetOutOfRangeError):
                plog.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
            return
        r = plog.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
        expected = self.expected_read(offset, max_bytes, max_offset, min_one)
        assert bytes(r.records) == expected, (offset, max_bytes, max_offset, min_one)
        if expected:
            self.nonempty_reads += 1
            assert r.first_offset <= offset <= r.last_offset

    def expected_start_after_retention(self, retention_ms: int, retention_bytes: int) -> int:
        """Kafka's rules computed from the oracle: leading segments whose newest batch is older
        than retention.ms, then leading segments while the rest stays >= retention.bytes; never an
        empty active segment; everything is below the high watermark here."""
        bases = [s.base_offset for s in self.plog.segments]
        segs = []
        for k, base in enumerate(bases):
            upper = bases[k + 1] if k + 1 < len(bases) else 2**63
            segs.append([b for b in self.batches if base <= b[0] < upper])
        n = 0
        if retention_ms >= 0:
            while n < len(segs) and segs[n] and self.now - max(b[2] for b in segs[n]) > retention_ms:
                n += 1
        if retention_bytes >= 0:
            excess = sum(len(b[3]) for seg in segs[n:] for b in seg) - retention_bytes
            while n < len(segs) and segs[n] and excess - sum(len(b[3]) for b in segs[n]) >= 0:
                excess -= sum(len(b[3]) for b in segs[n])
                n += 1
        if n == 0:
            return self.plog.log_start_offset
        return bases[n] if n < len(bases) else self.plog.log_end_offset

    def retention(self) -> None:
        rng, plog = self.rng, self.plog
        self.now += rng.randint(0, 3000)
        plog.high_watermark = plog.log_end_offset
        retention_ms = rng.choice([-1, 500, 2000])
        retention_bytes = rng.choice([-1, 600, 3000])
        plog.config = LogConfig(**{**self.config.__dict__, "retention_ms": retention_ms,
                                   "retention_bytes": retention_bytes})
        expected_start = self.expected_start_after_retention(retention_ms, retention_bytes)
        self.deleted += plog.delete_old_segments(self.now)
        assert plog.log_start_offset == expected_start
        assert plog.segments[0].base_offset == expected_start
        self.batches = [b for b in self.batches if b[1] >= expected_start]
        plog.config = self.config

    def truncate(self) -> None:
        plog = self.plog
        target = self.rng.randint(plog.log_start_offset, plog.log_end_offset)
        plog.truncate_to(target)
        self.batches = [b for b in self.batches if b[1] < target]
        end = self.batches[-1][1] + 1 if self.batches else plog.log_start_offset
        assert plog.log_end_offset == max(end, plog.segments[-1].base_offset)

    def reopen(self, clean: bool) -> None:
        plog = self.plog
        start = plog.log_start_offset
        if clean:
            plog.flush()
            rp = plog.recovery_point
            plog.close()
            self.plog = PartitionLog.open(self.path, self.config, self.now, recovery_point=rp,
                                          log_start_offset=start, clean_shutdown=True)
        else:
            crash(plog)
            self.plog = PartitionLog.open(self.path, self.config, self.now, log_start_offset=start)
        assert self.plog.log_start_offset == start

    def check_all(self) -> None:
        plog = self.plog
        expected_end = self.batches[-1][1] + 1 if self.batches else plog.log_end_offset
        assert plog.log_end_offset == expected_end
        offset, out = plog.log_start_offset, bytearray()
        while offset < plog.log_end_offset:
            r = plog.read(offset, 1 << 20)
            out += r.records
            offset = r.last_offset + 1
        assert bytes(out) == b"".join(b[3] for b in self.batches)


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_match_the_list_oracle(tmp_path, seed):
    """Every read returns exactly the oracle's whole batches from the one containing the offset,
    through rolls (tiny segments), retention, truncation and clean and crashed reopens."""
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.choice([700, 1500, 4000]), index_interval_bytes=rng.choice([0, 100, 400]),
                       segment_index_bytes=rng.choice([24, 240, 4096]), retention_ms=-1, file_delete_delay_ms=0)
    m = Model(rng, os.path.join(str(tmp_path), "model.topic-3"), config)
    ops = [(m.append, 40), (m.read, 35), (m.retention, 4), (m.truncate, 4),
           (lambda: m.reopen(True), 3), (lambda: m.reopen(False), 3)]
    funcs, weights = zip(*ops)
    for step in range(600):
        rng.choices(funcs, weights)[0]()
        if step % 50 == 0:
            m.check_all()
    m.check_all()
    # the run really exercised rolling, retention and reads
    assert m.deleted > 0 and m.nonempty_reads > 30
    m.plog.close()
