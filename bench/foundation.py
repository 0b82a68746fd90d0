"""Micro-benchmarks of the broker's foundation: codec, CRC-32C, log append and log read.

Run: ``scripts/bench foundation`` (or ``.venv/bin/python -m bench.foundation``).
Options: ``--repeat N`` (runs per figure, median reported, default 5), ``--append-mb M`` (MiB
appended per append run, default 256), ``--json PATH`` (also write the rows as JSON lines),
``--codec-only`` (just the Produce decode and Fetch encode figures, for codec changes).

Every figure is the median of ``--repeat`` runs; the machine is shared, so expect noise.
Temp dirs live under /tmp (page cache) and are removed on exit, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable

from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.codec import (decode_request_body, encode_request, encode_response,
                                      read_request_header)
from kafkalite.records.batch import ATTRIBUTES_OFFSET, validate_batches
from kafkalite.records.builder import BatchBuilder
from kafkalite.records.crc import IMPLEMENTATION, crc32c, crc32c_crcmod
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import PartitionLog

KiB = 1024
MiB = 1024 * 1024
RECORD_VALUE = 100
MAX_MESSAGE_BYTES = LogConfig().max_message_bytes      # 1048588: a 1 MiB batch fits
SEGMENT_BYTES = 2 ** 31 - 1                            # no roll inside a run
TARGETS_MBS = {16 * KiB: 300.0, 1 * MiB: 1000.0}      # append targets (MB/s, 10**6 bytes)


def build_full_batch(target_bytes: int) -> bytearray:
    """One uncompressed batch of 100-byte values, as close to ``target_bytes`` as fits."""
    b = BatchBuilder()
    value = bytes(range(256))[:RECORD_VALUE]
    ts = int(time.time() * 1000)
    bound = BatchBuilder.record_size_upper_bound(None, value)
    while b.size_in_bytes + bound <= target_bytes:
        b.append(ts, None, value)
    return b.build()


def timed(fn: Callable[[], int], min_seconds: float) -> tuple[float, int]:
    """Call ``fn`` (returns units done) until ``min_seconds`` pass; (seconds, units)."""
    units = 0
    start = time.perf_counter()
    deadline = start + min_seconds
    while True:
        units += fn()
        now = time.perf_counter()
        if now >= deadline:
            return now - start, units


def median_rate(fn: Callable[[], int], repeat: int, min_seconds: float) -> float:
    rates = []
    for _ in range(repeat):
        secs, units = timed(fn, min_seconds)
        rates.append(units / secs)
    return statistics.median(rates)


def produce_frame(batch: bytearray) -> bytes:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
            "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}]}
    return b"".join(bytes(p) for p in encode_request(ApiKey.PRODUCE, 8, 1, "bench", body))[4:]


def fetch_body(batch: bytearray) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "bench", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 1000, "last_stable_offset": 1000,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": memoryview(batch)}]}]}


class Bench:
    def __init__(self, repeat: int, append_mb: int, min_seconds: float, tmp: str,
                 codec_only: bool = False) -> None:
        self.repeat = repeat
        self.codec_only = codec_only
        self.append_bytes = append_mb * MiB
        self.min_seconds = min_seconds
        self.tmp = tmp
        self.rows: list[dict] = []

    def add(self, size_label: str, what: str, value: float, unit: str, note: str = "") -> None:
        row = {"batch": size_label, "what": what, "value": value, "unit": unit, "note": note}
        self.rows.append(row)
        print(f"  {size_label:>7}  {what:<44} {value:>12,.1f} {unit:<10} {note}", flush=True)

    def run_size(self, target: int) -> None:
        label = f"{target // KiB} KiB" if target < MiB else f"{target // MiB} MiB"
        batch = build_full_batch(target)
        size = len(batch)
        n_records = int.from_bytes(batch[57:61], "big")
        mb = size / 1e6
        rep, secs = self.repeat, self.min_seconds

        # codec: Produce v8 request decode
        frame = produce_frame(batch)

        def decode() -> int:
            h = read_request_header(frame)
            decode_request_body(h, frame)
            return 1
        r = median_rate(decode, rep, secs)
        self.add(label, "Produce v8 request decode", r, "req/s", f"{r * len(frame) / 1e6:,.0f} MB/s")

        # codec: Fetch v11 response encode (records passed by reference)
        body = fetch_body(batch)

        def encode() -> int:
            encode_response(ApiKey.FETCH, 11, 1, body)
            return 1
        r = median_rate(encode, rep, secs)
        self.add(label, "Fetch v11 response encode", r, "resp/s", f"{r * size / 1e6:,.0f} MB/s of records")
        if self.codec_only:
            return

        # batch validation and raw CRC
        def validate() -> int:
            validate_batches(batch, max_batch_bytes=MAX_MESSAGE_BYTES)
            return size
        r = median_rate(validate, rep, secs) / 1e6
        self.add(label, f"validate_batches (crc32c = {IMPLEMENTATION})", r, "MB/s")
        covered = memoryview(batch)[ATTRIBUTES_OFFSET:]

        def crc_google() -> int:
            crc32c(covered)
            return size
        r = median_rate(crc_google, rep, secs) / 1e6
        self.add(label, f"crc32c [{IMPLEMENTATION}] over batch[21:]", r, "MB/s")

        def crc_crcmod() -> int:
            crc32c_crcmod(covered)
            return size
        r = median_rate(crc_crcmod, rep, secs) / 1e6
        self.add(label, "crc32c_crcmod over batch[21:]", r, "MB/s")

        # log append (validate + append) with and without the per-request copy, then read back
        for with_copy in (True, False):
            rates, read_rates = [], []
            for i in range(rep):
                d = os.path.join(self.tmp, f"run-{target}-{int(with_copy)}-{i}", "bench-0")
                plog = PartitionLog.open(d, LogConfig(segment_bytes=SEGMENT_BYTES), int(time.time() * 1000))
                try:
                    count = max(1, self.append_bytes // size)
                    now = int(time.time() * 1000)
                    start = time.perf_counter()
                    if with_copy:
                        for _ in range(count):
                            buf = bytearray(batch)
                            infos = validate_batches(buf, max_batch_bytes=MAX_MESSAGE_BYTES)
                            plog.append(buf, infos, leader_epoch=0, now_ms=now)
                    else:
                        buf = batch
                        for _ in range(count):
                            infos = validate_batches(buf, max_batch_bytes=MAX_MESSAGE_BYTES)
                            plog.append(buf, infos, leader_epoch=0, now_ms=now)
                    rates.append(count * size / (time.perf_counter() - start) / 1e6)
                    if with_copy:
                        end = plog.log_end_offset
                        offset, total = 0, 0
                        start = time.perf_counter()
                        while offset < end:
                            res = plog.read(offset, MiB)
                            total += len(res.records)
                            offset = res.last_offset + 1
                        read_rates.append(total / (time.perf_counter() - start) / 1e6)
                finally:
                    plog.close()
                    shutil.rmtree(os.path.dirname(d), ignore_errors=True)
            r = statistics.median(rates)
            if with_copy:
                goal = TARGETS_MBS[target]
                verdict = "MEETS" if r >= goal else "BELOW"
                self.add(label, "log append (copy + validate + append)", r, "MB/s",
                         f"target >= {goal:,.0f} MB/s: {verdict}")
                self.add(label, "log read (PartitionLog.read, max 1 MiB)", statistics.median(read_rates), "MB/s")
            else:
                self.add(label, "log append (validate + append, no copy)", r, "MB/s")
        self.add(label, "  (batch bytes / records per batch)", size, "bytes", f"{n_records} records")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/bench foundation", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--append-mb", type=int, default=256)
    ap.add_argument("--min-seconds", type=float, default=0.3, help="minimum duration of one timed loop")
    ap.add_argument("--json", help="write the rows as JSON lines here")
    ap.add_argument("--codec-only", action="store_true", help="only the codec figures (no CRC, no log)")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="kafkalite-bench-foundation-", dir="/tmp")
    try:
        b = Bench(args.repeat, args.append_mb, args.min_seconds, tmp, args.codec_only)
        print(f"kafkalite foundation bench: 100-byte records, median of {args.repeat} runs, "
              f"python {sys.version.split()[0]}, crc32c={IMPLEMENTATION}, tmp={tmp}")
        print("  MB = 10**6 bytes. Targets: append 1 MiB batches >= 1 GB/s, 16 KiB batches >= 300 MB/s")
        print(f"  {'batch':>7}  {'measurement':<44} {'value':>12} {'unit':<10} note")
        for target in (16 * KiB, 1 * MiB):
            b.run_size(target)
        if args.json:
            with open(args.json, "a") as f:
                for row in b.rows:
                    f.write(json.dumps({"bench": "foundation", **row}) + "\n")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
