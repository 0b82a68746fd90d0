"""The broker's own ceiling (issue 18): a load generator that is not the bottleneck.

confluent-kafka's ``produce()`` alone tops out near 1.8M calls/s on this machine, so scenario 1
measures the client as much as the broker. Here each Produce request is encoded once, with a
full batch per partition, and the same bytes are sent again and again (only the correlation id
changes) over several connections from several processes, each keeping a window of requests in
flight. The generator's cost per request is a socket write and the decoding of a small answer,
so the broker's own limit shows.

kafkalite gets Produce v7 with a v2 record batch (what current clients send); Kafka 0.9.0.1
gets Produce v1 with a v0 message set, the newest it understands. Every answer is decoded and
every partition's error code checked: a refused request fails the run.

Run as ``python -m bench.ceiling_load <host> <port> <frames file> <window> <seconds> <out> [<requests>]``
by :func:`run`. With ``requests`` a generator sends exactly that many requests instead of sending for
``seconds`` (a fixed amount, for CPU seconds per GB: ``bench/produce_cpu.py``).
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from bench.procs import wait_all

ROOT = Path(__file__).resolve().parent.parent
PRODUCE = 0
# where the int32 correlation id sits in a request frame: size (4), api key (2), api version (2)
CORRELATION_AT = 8


@dataclass
class CeilingResult:
    seconds: float
    requests: int
    records: int
    payload_bytes: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6


def message_set_v0(values: list[bytes]) -> bytes:
    """Kafka 0.9's message format (magic 0, no key, no compression): offset, size, crc, magic,
    attributes, key, value per message. kafkalite's records package writes only v2 batches."""
    out = bytearray()
    for i, value in enumerate(values):
        body = struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", len(value)) + value
        message = struct.pack(">I", zlib.crc32(body)) + body
        out += struct.pack(">qi", i, len(message)) + message
    return bytes(out)


def produce_frames(api_version: int, topic: str, partitions: int, record_size: int,
                   records_per_request: int) -> list[bytes]:
    """One Produce request frame per partition, acks=1, each carrying one full batch."""
    from kafkalite.protocol.codec import encode_request
    from kafkalite.records.builder import build_batch

    values = [os.urandom(record_size) for _ in range(records_per_request)]
    if api_version >= 3:
        now = int(time.time() * 1000)
        payload = bytes(build_batch([(now, None, v, ()) for v in values], compression=0))
    else:
        payload = message_set_v0(values)
    frames = []
    for p in range(partitions):
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": payload}]}]}
        frames.append(b"".join(bytes(b) for b in encode_request(PRODUCE, api_version, 0, "bench-ceiling", body)))
    return frames


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)


def generator_main(host: str, port: int, frames_path: str, window: int, seconds: float, out: str,
                   requests: int | None = None) -> int:
    """One connection: keep ``window`` requests in flight for ``seconds`` (or until ``requests``
    were sent), then drain."""
    from kafkalite.protocol.codec import decode_response

    meta = json.loads(Path(frames_path + ".json").read_text())
    blob = Path(frames_path).read_bytes()
    frames = []
    pos = 0
    for size in meta["sizes"]:
        frames.append(bytearray(blob[pos:pos + size]))
        pos += size
    version = meta["api_version"]
    sock = socket.create_connection((host, port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = acked = 0

    def send() -> None:
        nonlocal sent
        frame = frames[sent % len(frames)]
        struct.pack_into(">i", frame, CORRELATION_AT, sent)
        sock.sendall(frame)
        sent += 1

    def receive() -> None:
        nonlocal acked
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        frame = struct.pack(">i", size) + _recv_exactly(sock, size)
        correlation, body = decode_response(PRODUCE, version, memoryview(frame)[4:])
        if correlation != acked:
            raise RuntimeError(f"answer {correlation} out of order (expected {acked})")
        for topic in body["responses"]:
            for part in topic["partition_responses"]:
                if part["error_code"] != 0:
                    raise RuntimeError(f"partition {part['index']}: error code {part['error_code']}")
        acked += 1

    def more() -> bool:
        if requests is not None:
            return sent < requests
        return time.perf_counter() - start < seconds

    start = time.perf_counter()
    for _ in range(window if requests is None else min(window, requests)):
        send()
    while more():
        receive()
        send()
    while acked < sent:
        receive()
    elapsed = time.perf_counter() - start
    sock.close()
    Path(out).write_text(json.dumps({"seconds": elapsed, "requests": acked}))
    return 0


def run(host: str, port: int, api_version: int, topic: str, partitions: int, record_size: int,
        records_per_request: int, connections: int, window: int, seconds: float, workdir: Path,
        requests_per_connection: int | None = None) -> CeilingResult:
    """Start ``connections`` generator processes against one broker and sum what they got
    acknowledged; each sends for ``seconds``, or ``requests_per_connection`` requests when given."""
    workdir.mkdir(parents=True, exist_ok=True)
    frames = produce_frames(api_version, topic, partitions, record_size, records_per_request)
    frames_path = workdir / "frames.bin"
    frames_path.write_bytes(b"".join(frames))
    Path(str(frames_path) + ".json").write_text(json.dumps({"api_version": api_version,
                                                            "sizes": [len(f) for f in frames]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = []
    outs = [workdir / f"generator-{i}.json" for i in range(connections)]
    for out in outs:
        out.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "bench.ceiling_load", host, str(port), str(frames_path),
                str(window), str(seconds), str(out)]
        if requests_per_connection is not None:
            argv.append(str(requests_per_connection))
        procs.append(subprocess.Popen(argv, env=env, cwd=ROOT))
    wait_all(procs, seconds + 120, "ceiling generators")
    got = [json.loads(o.read_text()) for o in outs]
    requests = sum(g["requests"] for g in got)
    elapsed = max(g["seconds"] for g in got)
    return CeilingResult(seconds=elapsed, requests=requests, records=requests * records_per_request,
                         payload_bytes=requests * records_per_request * record_size)


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(generator_main(a[0], int(a[1]), a[2], int(a[3]), float(a[4]), a[5], int(a[6]) if len(a) > 6 else None))
