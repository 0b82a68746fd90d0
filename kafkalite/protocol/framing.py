"""Splitting a byte stream into Kafka frames (int32 size, then that many bytes).

No I/O. Two ways in, one state: :meth:`FrameDecoder.feed` takes whatever bytes a transport got
(``dataReceived``: TLS, in-memory transports), and :meth:`FrameDecoder.get_buffer` /
:meth:`FrameDecoder.buffer_updated` let a transport that reads with ``recv_into``
(``net/tcp_receive.py``, plaintext listeners) put a big frame's bytes straight into that frame's
own buffer, as Kafka's ``NetworkReceive`` reads into the buffer it allocated for the frame.
"""
from __future__ import annotations

import logging
import struct
from typing import Iterable

from .errors import InvalidFrameError

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

#: Kafka's default ``socket.request.max.bytes``.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024

#: A frame that still needs at least this many bytes is read straight into its own buffer; below
#: that, one read into the caller's spare buffer also picks up the (small, pipelined) frames that
#: follow, and the tail is copied once more (at most this many bytes per frame).
DIRECT_READ_MIN = 16 * 1024


class FrameDecoder:
    """Incremental frame splitter for one connection.

    Each complete frame is returned as its own writable ``bytearray`` without the size
    prefix (the broker patches record batches in place). A frame's buffer is allocated once,
    at exactly the declared size, as soon as the size is known and accepted (as Kafka's
    ``NetworkReceive`` does), and filled as data arrives, so a frame costs one copy and
    memory per connection is bounded by ``max_frame_bytes``. A negative size or one above
    ``max_frame_bytes`` raises :class:`InvalidFrameError`; the decoder then stays failed,
    because the stream position is lost and the connection must be closed.
    """

    __slots__ = ("max_frame_bytes", "_head", "_frame", "_filled", "_failed", "_spare")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._head = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
        self._failed: InvalidFrameError | None = None
        self._spare: memoryview | None = None    # what get_buffer handed out, when not the frame

    @property
    def buffered(self) -> int:
        """Bytes held for the frame in progress (size prefix included)."""
        if self._frame is None:
            return len(self._head)
        return 4 + self._filled

    def _start(self, size: int) -> None:
        if size < 0 or size > self.max_frame_bytes:
            self._failed = InvalidFrameError(
                f"frame size {size} outside 0..{self.max_frame_bytes}")
            raise self._failed
        self._frame = bytearray(size)
        self._filled = 0

    def get_buffer(self, spare: memoryview) -> memoryview:
        """Where the next read from the socket should land (asyncio's ``BufferedProtocol`` pair):
        the unfilled rest of the frame in progress when it needs at least
        :data:`DIRECT_READ_MIN` bytes, so the read is that data's only copy; else ``spare``, a
        scratch buffer the caller owns and may share between connections, because
        :meth:`buffer_updated` copies everything out of it before it returns. Never empty when
        ``spare`` is not (an empty ``recv_into`` target would read as end of stream)."""
        if self._failed is not None:
            raise self._failed
        frame = self._frame
        if frame is not None and len(frame) - self._filled >= DIRECT_READ_MIN:
            self._spare = None
            return memoryview(frame)[self._filled:]
        self._spare = spare
        return spare

    def buffer_updated(self, nbytes: int) -> list[bytearray]:
        """``nbytes`` were read into the buffer :meth:`get_buffer` returned; the frames that
        completed, in order."""
        spare = self._spare
        if spare is not None:
            self._spare = None
            with spare[:nbytes] as got:
                return self.feed(got)
        frame = self._frame
        assert frame is not None, "buffer_updated without get_buffer"
        self._filled += nbytes
        if self._filled < len(frame):
            return []
        self._frame = None
        self._filled = 0
        return [frame]

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytearray]:
        """Consume ``data``; return the frames it completed, in order. Keeps no reference to
        ``data`` (partial frames are copied into their own buffers)."""
        if self._failed is not None:
            raise self._failed
        view = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else memoryview(data)
        frames: list[bytearray] = []
        pos, end = 0, len(view)
        while pos < end:
            frame = self._frame
            if frame is None:
                if not self._head and end - pos >= 4:
                    (size,) = _SIZE.unpack_from(view, pos)
                    pos += 4
                else:
                    take = min(4 - len(self._head), end - pos)
                    self._head += view[pos:pos + take]
                    pos += take
                    if len(self._head) < 4:
                        break
                    (size,) = _SIZE.unpack_from(self._head, 0)
                    self._head.clear()
                self._start(size)
                frame = self._frame
                assert frame is not None
                if size == 0:
                    frames.append(frame)
                    self._frame = None
                    continue
            need = len(frame) - self._filled
            take = min(need, end - pos)
            frame[self._filled:self._filled + take] = view[pos:pos + take]
            self._filled += take
            pos += take
            if take == need:
                frames.append(frame)
                self._frame = None
                self._filled = 0
        return frames


def frame(payload_chunks: Iterable[bytes | bytearray | memoryview]) -> list:
    """Prefix payload chunks with their total int32 size; returns ``[size, *chunks]``."""
    chunks = list(payload_chunks)
    total = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks)
    if total > 0x7FFFFFFF:
        raise InvalidFrameError(f"payload of {total} bytes exceeds the int32 size field")
    return [_SIZE.pack(total), *chunks]
