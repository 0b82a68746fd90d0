"""Zero-copy response writing: record bytes go from the segment file to the socket with
``os.sendfile`` (Kafka's ``FileRecords.writeTo`` -> ``FileChannel.transferTo``), the response
header and per-partition framing from Python.

A Fetch response on a plaintext listener is a list of chunks, ``bytes``-like framing and
:class:`~kafkalite.records.file_region.FileRegion` record sets (``protocol/primitives.put_bytes``).
Twisted's TCP transport buffers what it is given and writes it later, so a region cannot simply
be sent behind its back: :class:`RegionSender` waits until the transport's buffer is empty (the
previous responses have left), then writes the chunks itself on the socket, framing with
``sendmsg`` (``MSG_MORE`` when a region follows, so the header and the first records share a
segment) and regions with ``os.sendfile``. When the socket is full (EAGAIN) it waits for
writability through its own duplicate of the socket's descriptor registered with the reactor (the
transport's own registration is keyed by its descriptor and stays untouched) and resumes where it
stopped. The connection starts no other request until the response is out, which is also its
back-pressure: a slow consumer holds at most one response's regions (descriptors, not bytes).

A region whose file shrank under us (a truncation after the read) cannot fill the size the
response already promised: the connection is aborted (Kafka fails the transfer the same way),
never padded or left short. Regions are closed once sent, or when the connection goes.

Everything here runs on the reactor thread: it owns the socket and the transport's buffer, and a
sendfile of page-cache data does not block (the socket is non-blocking).
"""
from __future__ import annotations

import logging
import os
import socket
from collections import deque
from typing import Any, Callable

from twisted.internet.interfaces import IReactorFDSet, IWriteDescriptor
from zope.interface import implementer

from kafkalite.records.file_region import FileRegion, ShortFileError

log = logging.getLogger(__name__)

#: at most this much per sendfile call (Linux sends at most 0x7ffff000 bytes per call anyway)
SENDFILE_MAX = 1 << 30
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
#: framing chunks gathered into one sendmsg (IOV_MAX is 1024 on Linux)
_MAX_IOV = 512
#: A response carrying at most this many record bytes is copied (one ``pread`` per region) and
#: leaves in one ``sendmsg``: a region sent with ``sendfile`` is followed by the response's
#: trailing framing (tagged fields, the next partition) in a write of its own, and for a small
#: answer those were three system calls where one does, and two TCP segments that woke the
#: reader twice (a follower's one-record Fetch answer: the records, then three bytes of tagged
#: fields). Copying 16 KB costs less than one extra reactor turn on each side; larger answers
#: (catching-up followers, consumers) keep the zero-copy path.
SMALL_RESPONSE_COPY = 16 * 1024


def has_regions(chunks: list[Any]) -> bool:
    """Whether an encoded response carries record sets left in their files."""
    for c in chunks:
        if type(c) is FileRegion:
            return True
    return False


def copy_regions(chunks: list[Any]) -> list[Any]:
    """The copying path (a transport without a socket of its own): each region read into Python
    and closed. Raises :class:`ShortFileError` if a file shrank."""
    out: list[Any] = []
    try:
        for c in chunks:
            if type(c) is FileRegion:
                out.append(c.read())
                c.close()
            else:
                out.append(c)
    finally:
        close_regions(chunks)
    return out


def close_regions(chunks: Any) -> None:
    for c in chunks:
        if type(c) is FileRegion:
            c.close()


def buffered_bytes(transport: Any) -> int:
    """Bytes the Twisted transport still holds (``abstract.FileDescriptor``'s write buffer)."""
    return (len(getattr(transport, "dataBuffer", b"")) - getattr(transport, "offset", 0)
            + getattr(transport, "_tempDataLen", 0))


@implementer(IWriteDescriptor)
class _Writability:
    """The socket's writability, through a duplicate descriptor of our own (see module doc)."""

    def __init__(self, fd: int, on_writable: Callable[[], None]) -> None:
        self.fd = fd
        self.on_writable = on_writable

    def fileno(self) -> int:
        return self.fd

    def doWrite(self) -> None:
        self.on_writable()

    def connectionLost(self, reason: Any) -> None:
        pass

    def logPrefix(self) -> str:
        return "RegionSender"


class RegionSender:
    """Writes one connection's responses that carry file regions (see module doc)."""

    def __init__(self, transport: Any, sock: socket.socket, reactor: IReactorFDSet,
                 on_done: Callable[[], None], on_error: Callable[[BaseException], None]) -> None:
        self.transport = transport
        self.sock = sock
        self.reactor = reactor
        self.on_done = on_done
        self.on_error = on_error
        self.pending: deque[Any] = deque()     #: memoryviews and FileRegions still to send
        self.region_sent = 0                   #: bytes of ``pending[0]`` (a region) already sent
        self.watcher: _Writability | None = None
        self.watching = False
        self.closed = False
        #: counters, for tests and metrics: bytes the kernel copied from files / Python sent
        self.file_bytes = 0
        self.framing_bytes = 0

    @classmethod
    def for_transport(cls, transport: Any, on_done: Callable[[], None],
                      on_error: Callable[[BaseException], None]) -> "RegionSender | None":
        """A sender for a plain TCP transport (one with its own socket, and its reactor); None
        otherwise (a TLS or in-memory transport keeps the copying path)."""
        get_handle = getattr(transport, "getHandle", None)
        sock = get_handle() if get_handle is not None else None
        reactor = getattr(transport, "reactor", None)
        if not isinstance(sock, socket.socket) or reactor is None or not hasattr(os, "sendfile"):
            return None
        return cls(transport, sock, reactor, on_done, on_error)

    @property
    def busy(self) -> bool:
        return bool(self.pending)

    def send(self, chunks: list[Any]) -> None:
        """Queue one response (after the transport's buffered data) and start sending it.

        A response whose regions hold at most :data:`SMALL_RESPONSE_COPY` bytes in all is sent
        whole in one ``sendmsg``, its regions read with one ``pread`` each (see the constant)."""
        copy = sum(c.length for c in chunks if type(c) is FileRegion) <= SMALL_RESPONSE_COPY
        for c in chunks:
            if type(c) is FileRegion:
                if copy:
                    try:
                        data = c.read()
                    except OSError as exc:     # the file shrank: as a short sendfile would
                        close_regions(chunks)
                        self.abort()
                        self.on_error(exc)
                        return
                    c.close()
                    if data:
                        self.pending.append(memoryview(data))
                elif c.length:
                    self.pending.append(c)
            else:
                view = c if isinstance(c, memoryview) else memoryview(c)
                if view.format != "B" or view.ndim != 1:
                    view = view.cast("B")
                if view.nbytes:
                    self.pending.append(view)
        self._pump()

    def _pump(self) -> None:
        if self.closed:
            return
        if buffered_bytes(self.transport):
            self._wait()           # earlier responses are still in Twisted's buffer: they go first
            return
        pending = self.pending
        sock = self.sock
        try:
            sock_fd = sock.fileno()
            while pending:
                head = pending[0]
                if type(head) is FileRegion:
                    while self.region_sent < head.length:
                        n = os.sendfile(sock_fd, head.fd, head.position + self.region_sent,
                                        min(head.length - self.region_sent, SENDFILE_MAX))
                        if n == 0:
                            raise ShortFileError(f"{head.path} shrank: {self.region_sent} of {head.length} "
                                                 f"bytes at {head.position} could be sent")
                        self.region_sent += n
                        self.file_bytes += n
                    pending.popleft().close()
                    self.region_sent = 0
                    continue
                bufs: list[memoryview] = []
                for c in pending:
                    if type(c) is FileRegion or len(bufs) >= _MAX_IOV:
                        break
                    bufs.append(c)
                more = _MSG_MORE if len(bufs) < len(pending) else 0
                n = sock.sendmsg(bufs, [], more)
                self.framing_bytes += n
                while n:
                    c = pending[0]
                    if c.nbytes <= n:
                        n -= c.nbytes
                        pending.popleft()
                    else:
                        pending[0] = c[n:]
                        n = 0
        except BlockingIOError:
            self._wait()           # the socket is full: resume when it is writable
            return
        except OSError as exc:     # the peer went away, or a file shrank under us
            self.abort()
            self.on_error(exc)
            return
        self._stop_waiting()
        self.on_done()

    def _wait(self) -> None:
        if self.watching:
            return
        if self.watcher is None:
            self.watcher = _Writability(os.dup(self.sock.fileno()), self._pump)
        self.reactor.addWriter(self.watcher)
        self.watching = True

    def _stop_waiting(self) -> None:
        if self.watching and self.watcher is not None:
            self.reactor.removeWriter(self.watcher)
        self.watching = False

    def abort(self) -> None:
        """The connection is gone: release the queued regions and our descriptor."""
        self.closed = True
        self._stop_waiting()
        close_regions(self.pending)
        self.pending.clear()
        if self.watcher is not None:
            fd, self.watcher.fd = self.watcher.fd, -1
            if fd >= 0:
                os.close(fd)
            self.watcher = None
