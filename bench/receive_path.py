"""The receive path alone: CPU seconds per GB to turn a socket's bytes into request frames.

500 KB frames (scenario 8's Produce requests) go through a socketpair from another thread; the
reading thread's CPU time (``time.thread_time``, the kernel's copy out of the socket included)
is measured for three ways of reading:

* ``recv+feed``: what Twisted's ``tcp.Connection.doRead`` does (``recv(65536)``, a new ``bytes``
  per read) with ``FrameDecoder.feed`` copying into a new ``bytearray`` per frame (every
  plaintext connection before issue 33; TLS connections still);
* ``recv_into``: ``FrameDecoder.get_buffer`` / ``buffer_updated`` as ``net/tcp_receive.py``
  drives them (a big frame's bytes read straight into it);
* ``recv_into+pool``: the same with a ``FramePool``, each frame given back once done with, as an
  acks=1 produce's is.

Run: ``.venv/bin/python -m bench.receive_path [--gb 1] [--runs 5]``; figures in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import threading
import time

from kafkalite.net.tcp_receive import SPARE_BYTES
from kafkalite.protocol.framing import FrameDecoder, FramePool, unshared

FRAME_BYTES = 500_000
MODES = ("recv+feed", "recv_into", "recv_into+pool")


def run(mode: str, frames: int) -> float:
    """CPU seconds per GB of frames read in ``mode``."""
    payload = os.urandom(FRAME_BYTES)
    stream = struct.pack(">i", len(payload)) + payload
    a, b = socket.socketpair()

    def send() -> None:
        for _ in range(frames):
            a.sendall(stream)
        a.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    got = 0
    start = time.thread_time()
    sender.start()
    if mode == "recv+feed":
        decoder = FrameDecoder(2 * FRAME_BYTES)
        while data := b.recv(SPARE_BYTES):
            done = decoder.feed(data)
            got += len(done)
            del done
    else:
        pool = FramePool() if mode == "recv_into+pool" else None
        decoder = FrameDecoder(2 * FRAME_BYTES, pool)
        spare = memoryview(bytearray(SPARE_BYTES))
        while True:
            buf = decoder.get_buffer(spare)
            n = b.recv_into(buf)
            del buf
            if not n:
                break
            done = decoder.buffer_updated(n)
            got += len(done)
            while done:
                frame = done.pop()
                if pool is not None and unshared(frame):
                    pool.give(frame)
                del frame
    elapsed = time.thread_time() - start
    sender.join()
    a.close()
    b.close()
    if got != frames:
        raise RuntimeError(f"{mode}: {got} of {frames} frames")
    return elapsed / (frames * len(stream) / 1e9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0, help="GB per run")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    frames = max(1, int(args.gb * 1e9 / FRAME_BYTES))
    results: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(args.runs):
        for mode in MODES:                  # interleaved, so each mode sees the same machine
            results[mode].append(run(mode, frames))
    for mode, values in results.items():
        print(f"{mode}: {statistics.median(values):.3f} CPU s/GB median ({min(values):.3f}-{max(values):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
