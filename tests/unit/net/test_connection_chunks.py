"""Response chunks reach the transport as bytes, without copying a record read twice."""
from __future__ import annotations

import struct
from typing import Any

from kafkalite.net.server import KafkaConnection


class Transport:
    """Keeps the exact objects passed to writeSequence (StringTransport joins them)."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        pass

    def getPeer(self) -> Any:
        return None

    def writeSequence(self, chunks: list[Any]) -> None:
        self.chunks.extend(chunks)


class Answer:
    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks

    def dispatch(self, frame: bytearray, conn: KafkaConnection) -> Any:
        return self.chunks


def run(chunks: list[Any]) -> list[Any]:
    transport = Transport()
    conn = KafkaConnection(Answer(chunks), max_frame_bytes=1 << 20, max_queued=4)
    conn.makeConnection(transport)
    body = struct.pack(">hhih", 18, 0, 1, -1)
    conn.dataReceived(struct.pack(">i", len(body)) + body)
    return transport.chunks


def test_whole_log_read_is_passed_on_without_a_copy() -> None:
    records = bytes(range(256)) * 4096                # one pread's result
    sent = run([b"header", memoryview(records)])
    assert sent[0] == b"header"
    assert sent[1] is records                         # the same object: no copy
    assert all(type(c) is bytes for c in sent)


def test_partial_views_and_mutable_buffers_are_copied() -> None:
    base = bytes(range(100))
    mutable = bytearray(b"abc")
    sent = run([memoryview(base)[10:20], mutable, memoryview(mutable)])
    assert sent == [base[10:20], b"abc", b"abc"]
    assert all(type(c) is bytes for c in sent)
    mutable[0] = ord("z")                             # later changes do not reach queued data
    assert sent[1] == b"abc" and sent[2] == b"abc"
