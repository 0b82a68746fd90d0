"""Idempotent producer checks on append, and the state surviving clean and crashed reopens."""
from __future__ import annotations

import os

import pytest

from kafkalite.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from kafkalite.storage import LogConfig, PartitionLog
from kafkalite.storage.producer_state import ProducerStateManager
from storage_helpers import append, batch, open_log, read_all

pytestmark = pytest.mark.unit

PID = 1001


def idem(seq: int, n: int = 2, epoch: int = 0, pid: int = PID) -> bytearray:
    return batch(n, pid=pid, epoch=epoch, seq=seq)


def test_duplicate_returns_original_offsets_and_is_not_written(tmp_path):
    """A retry of any of the last 5 batches answers with its first offsets, duplicate=True,
    and the log does not grow; an older (6th) batch is no longer recognised."""
    plog = open_log(tmp_path)
    append(plog, batch(4))                         # offsets 0-3, not idempotent
    firsts = [append(plog, idem(seq)).first_offset for seq in range(0, 12, 2)]   # 6 batches
    end, size = plog.log_end_offset, plog.size
    for k in range(1, 6):
        r = append(plog, idem(2 * k))
        assert r.duplicate and (r.first_offset, r.last_offset) == (firsts[k], firsts[k] + 1)
        assert r.batch_count == 0
    assert (plog.log_end_offset, plog.size) == (end, size)
    with pytest.raises(OutOfOrderSequenceError):   # first batch fell out of the 5 retained
        append(plog, idem(0))
    plog.close()


def test_sequence_gap_is_out_of_order(tmp_path):
    """A batch that skips sequences raises OutOfOrderSequenceError and writes nothing."""
    plog = open_log(tmp_path)
    append(plog, idem(0, n=3))
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, idem(4))
    assert plog.log_end_offset == 3
    assert append(plog, idem(3)).first_offset == 3
    plog.close()


def test_epoch_bump_needs_sequence_zero_and_stale_epoch_is_fenced(tmp_path):
    """A new epoch starting at sequence 0 is accepted; a new epoch at another sequence is out of
    order; the old epoch afterwards gets InvalidProducerEpochError."""
    plog = open_log(tmp_path)
    append(plog, idem(0, epoch=0))
    append(plog, idem(2, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, idem(5, epoch=1))
    assert append(plog, idem(0, epoch=1)).first_offset == 4
    with pytest.raises(InvalidProducerEpochError):
        append(plog, idem(4, epoch=0))
    assert plog.log_end_offset == 6
    plog.close()


def test_unknown_producer_accepts_any_sequence_and_multi_batch_requests_chain(tmp_path):
    """KIP-360: a producer without state may start anywhere; batches of one request are checked
    against each other (a gap inside the request fails the whole request)."""
    plog = open_log(tmp_path)
    assert append(plog, idem(500, pid=7)).first_offset == 0
    r = append(plog, idem(502, pid=7), idem(504, pid=7), idem(9, pid=8))
    assert (r.first_offset, r.last_offset, r.batch_count) == (2, 7, 3)
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, idem(506, pid=7), idem(509, pid=7))
    assert plog.log_end_offset == 8
    plog.close()


def test_state_survives_clean_reopen_via_snapshot(tmp_path):
    """After close() a snapshot at the log end holds the state: duplicates are still detected
    and the sequence continues, without replaying the log."""
    plog = open_log(tmp_path)
    for seq in range(0, 10, 2):
        append(plog, idem(seq))
    d = plog.directory
    plog.close()
    assert os.path.exists(os.path.join(d, f"{10:020d}.snapshot"))
    plog = PartitionLog.open(d, LogConfig(), 0, clean_shutdown=True, recovery_point=10)
    assert append(plog, idem(8)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, idem(12))
    assert append(plog, idem(10)).first_offset == 10
    plog.close()


def test_state_is_rebuilt_from_the_log_after_a_crash(tmp_path):
    """With the snapshot gone or stale (crash), the state comes from batch headers in the log."""
    plog = open_log(tmp_path, LogConfig(segment_bytes=300))
    for seq in range(0, 20, 2):
        append(plog, idem(seq))
    d = plog.directory
    plog.close()
    for name in os.listdir(d):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(d, name))
    plog = PartitionLog.open(d, LogConfig(segment_bytes=300), 0)
    assert append(plog, idem(18)).duplicate
    assert append(plog, idem(14)).first_offset == 14
    with pytest.raises(OutOfOrderSequenceError):
        append(plog, idem(22))
    plog.close()


def test_corrupt_snapshot_is_ignored_and_truncation_restores_older_state(tmp_path):
    """A snapshot failing its CRC is deleted and the log replayed; truncate_to rewinds producer
    state so the truncated batch's sequence is accepted again."""
    plog = open_log(tmp_path)
    for seq in range(0, 6, 2):
        append(plog, idem(seq))
    d = plog.directory
    plog.close()
    snap = os.path.join(d, f"{6:020d}.snapshot")
    with open(snap, "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    plog = PartitionLog.open(d, LogConfig(), 0, clean_shutdown=True, recovery_point=6)
    assert plog.producers.producers[PID].last_seq == 5
    plog.truncate_to(4)
    assert plog.producers.producers[PID].last_seq == 3
    assert append(plog, idem(4)).first_offset == 4 and not read_all(plog) == b""
    plog.close()


def test_snapshot_round_trip_keeps_five_batches():
    """encode/decode keep epoch, last timestamp and all retained batches; a bad CRC is refused."""
    mgr = ProducerStateManager(".")
    from storage_helpers import prepared
    from kafkalite.records.batch import assign_offsets
    for seq in range(0, 14, 2):
        buf, infos = prepared(idem(seq, epoch=3))
        mgr.update(assign_offsets(buf, infos, seq, 0))
    data = mgr.encode(14)
    offset, producers = ProducerStateManager.decode(data)
    assert offset == 14 and producers[PID].epoch == 3
    assert list(producers[PID].batches) == list(mgr.producers[PID].batches) and len(producers[PID].batches) == 5
    with pytest.raises(ValueError):
        ProducerStateManager.decode(data[:-1] + bytes([data[-1] ^ 1]))


def test_producer_ids_expire_after_producer_id_expiration_ms(tmp_path):
    """Kafka's removeExpiredProducers: a producer whose last batch's timestamp is
    producer.id.expiration.ms old is forgotten (so its next batch is accepted as from a new
    producer, at any sequence); a younger one keeps being checked. The LogManager applies its
    configured expiry to every log, and drops producers that expired while the broker was down
    when it loads the logs (Kafka's loadFromSnapshot)."""
    from kafkalite.storage import LogManager

    dirs = [str(tmp_path / "d")]
    mgr = LogManager(dirs, LogConfig(), clock=lambda: 0, producer_id_expiration_ms=5000)
    old, young = mgr.get_or_create("t", 0), mgr.get_or_create("t", 1)
    append(old, batch(2, pid=PID, epoch=0, seq=0, ts=1000))
    append(young, batch(2, pid=PID, epoch=0, seq=0, ts=3000))
    assert mgr.remove_expired_producers(5999) == 0                 # 4999 ms after the last batch
    assert mgr.remove_expired_producers(6000) == 1                 # exactly 5000 ms: expired (>=)
    assert PID not in old.producers.producers and PID in young.producers.producers
    assert append(old, idem(7)).first_offset == 2                   # unknown again: any sequence
    with pytest.raises(OutOfOrderSequenceError):
        append(young, idem(7))                                      # still known: the gap is refused
    mgr.close()
    kept = LogManager(dirs, LogConfig(), clock=lambda: 7999, producer_id_expiration_ms=5000)
    assert PID in kept.get("t", 1).producers.producers
    kept.close()
    reopened = LogManager(dirs, LogConfig(), clock=lambda: 8000, producer_id_expiration_ms=5000)
    assert PID not in reopened.get("t", 1).producers.producers     # 3000 + 5000 <= 8000 at load
    reopened.close()


def test_producer_id_expiration_follows_the_broker_property():
    """The LogManager's default expiry is producer.id.expiration.ms's default (1 day, KIP-854),
    not transactional.id.expiration.ms's 7 days."""
    from kafkalite.config import BROKER_KEYS
    from kafkalite.storage.manager import PRODUCER_ID_EXPIRATION_MS

    assert PRODUCER_ID_EXPIRATION_MS == BROKER_KEYS["producer.id.expiration.ms"].default == 86400000
