"""Writer process for test_log_crash.py: appends batches forever, acknowledging each one.

``log_crash_writer.py <partition dir> <ack file> <seed>``: opens the log (full crash recovery),
continues the idempotent producer's sequence from the recovered producer state, then loops:
append 1-3 batches, and only after append() returned write one line per batch
``base_offset last_offset sha1`` to the ack file (O_APPEND, unbuffered) — acks=1 semantics, data
in the page cache, no fsync. The test kills it with SIGKILL at random moments.
"""
from __future__ import annotations

import hashlib
import os
import random
import sys

from kafkalite.records.batch import validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.storage import LogConfig, PartitionLog

PRODUCER_ID = 4242
CONFIG = LogConfig(segment_bytes=256 * 1024, index_interval_bytes=1024, segment_index_bytes=4096)


def main() -> None:
    directory, ack_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    plog = PartitionLog.open(directory, CONFIG, 1_000_000)
    entry = plog.producers.producers.get(PRODUCER_ID)
    seq = entry.last_seq + 1 if entry is not None else 0
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # the last writer's kill may have cut its last line short: start on a line of our own, so a
    # torn line never runs into this writer's first ack (the test skips torn lines)
    with open(ack_path, "rb") as written:
        torn = written.seek(0, os.SEEK_END) > 0 and written.seek(-1, os.SEEK_END) >= 0 and written.read(1) != b"\n"
    if torn:
        os.write(ack, b"\n")
    now = 1_000_000
    while True:
        batches = []
        for _ in range(rng.randint(1, 3)):
            n = rng.randint(1, 40)
            value = os.urandom(rng.randint(0, 1500))
            batches.append(build_batch([(now + i, None, value, ()) for i in range(n)],
                                       producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq))
            seq += n
        buf = bytearray(b"".join(batches))
        infos = validate_batches(buf, max_batch_bytes=1 << 20)
        result = plog.append(buf, infos, leader_epoch=seed % 5, now_ms=now)
        assert not result.duplicate
        lines = []
        offset = result.first_offset
        for info in infos:
            digest = hashlib.sha1(buf[info.position:info.end]).hexdigest()
            lines.append(f"{offset} {offset + info.last_offset_delta} {digest}\n")
            offset += info.last_offset_delta + 1
        os.write(ack, "".join(lines).encode())
        now += 1


if __name__ == "__main__":
    main()
