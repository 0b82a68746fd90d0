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
import sys
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

#: What a :class:`FramePool` keeps by default: a few of the biggest requests producers send
#: (``max.request.size`` is 1 MB), shared by all connections of a listener.
DEFAULT_POOL_BYTES = 16 * 1024 * 1024


def _references(buf: bytearray) -> int:
    return sys.getrefcount(buf)


def _sole_owner_count() -> int:
    probe = bytearray(1)            # held by this one local variable only
    return _references(probe)       # the same call shape as unshared's caller -> unshared


#: what ``sys.getrefcount`` says, one call down, of a buffer only its caller's one local holds
_SOLE_OWNER = _sole_owner_count()


def unshared(buf: bytearray) -> bool:
    """Whether nothing but the caller's one local variable holds ``buf``: no other reference and
    no memoryview (a view holds its buffer's owner), so the bytes may be written over."""
    return sys.getrefcount(buf) == _SOLE_OWNER


class FramePool:
    """Frame buffers whose requests are done, for the next big frames of about their size.

    A new 500 KB ``bytearray`` costs a memset and fresh pages faulted in (py-spy under
    produce load: 3-5 % of the broker's samples in ``FrameDecoder._start``). A connection gives
    a frame back once its request is answered and nothing holds it any more
    (:func:`unshared`); a decoder starting a frame of ``size`` bytes takes a buffer of ``size``
    to ``2 * size`` bytes and cuts it to length (no copy, no new allocation). Only frames of
    :data:`DIRECT_READ_MIN` bytes or more are kept, at most ``max_bytes`` in all, so an idle
    broker holds at most that much. Not thread-safe: one pool per reactor-thread listener.
    """

    __slots__ = ("max_bytes", "free", "bytes")

    def __init__(self, max_bytes: int = DEFAULT_POOL_BYTES) -> None:
        self.max_bytes = max_bytes
        self.free: list[bytearray] = []
        self.bytes = 0

    def take(self, size: int) -> bytearray | None:
        """A buffer of exactly ``size`` bytes holding stale data, or None."""
        free = self.free
        for i in range(len(free) - 1, -1, -1):      # the most recently given first (warm in cache)
            buf = free[i]
            if size <= len(buf) <= 2 * size:
                del free[i]
                self.bytes -= len(buf)
                if len(buf) > size:
                    del buf[size:]                  # a shrink within the allocation: no copy
                return buf
        return None

    def give(self, buf: bytearray) -> None:
        """Keep ``buf`` for a later frame; the caller has checked it is :func:`unshared`."""
        if len(buf) < DIRECT_READ_MIN or self.bytes + len(buf) > self.max_bytes:
            return
        self.free.append(buf)
        self.bytes += len(buf)


class FrameDecoder:
    """Incremental frame splitter for one connection.

    Each complete frame is returned as its own writable ``bytearray`` without the size
    prefix (the broker patches record batches in place). A frame's buffer is allocated once,
    at exactly the declared size, as soon as the size is known and accepted (as Kafka's
    ``NetworkReceive`` does), or taken from the decoder's :class:`FramePool` (big frames), and
    filled as data arrives, so a frame costs one copy and memory per connection is bounded by
    ``max_frame_bytes``. A negative size or one above
    ``max_frame_bytes`` raises :class:`InvalidFrameError`; the decoder then stays failed,
    because the stream position is lost and the connection must be closed.
    """

    __slots__ = ("max_frame_bytes", "pool", "_head", "_frame", "_filled", "_failed", "_spare")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, pool: FramePool | None = None) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self.pool = pool            # big frames' buffers come from here when it has one
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
        frame = self.pool.take(size) if self.pool is not None and size >= DIRECT_READ_MIN else None
        # a pooled buffer holds an earlier request's bytes: a frame is returned only once filled
        self._frame = frame if frame is not None else bytearray(size)
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
