"""Plaintext TCP connections that read with ``recv_into``, straight into the frame.

Why: Twisted's ``tcp.Connection.doRead`` reads with ``socket.recv(65536)``, a new ``bytes`` per
read, which ``protocol.framing.FrameDecoder`` then copies into the frame's own buffer: every
produced byte was copied twice in user space and a 500 KB request cost eight 64 KB allocations.
Kafka's ``NetworkReceive`` allocates the frame's buffer once it knows the size and reads the
socket into it. Here a protocol that has asyncio's ``BufferedProtocol`` pair (``get_buffer`` /
``buffer_updated``, :class:`BufferedReceiver`) is asked where the next read should land: the
frame being filled (one copy, out of the kernel) or a spare buffer the listening port shares
between its connections (small, pipelined frames: one read picks up many, then each is copied
into its own buffer). Only the reactor thread reads, and the protocol copies everything out of
the spare buffer before ``buffer_updated`` returns, so one spare buffer per port is enough.

A server connection also sends a response at once, with one ``sendmsg``, when nothing is queued
before it (asyncio's transports do the same; Twisted buffers every write and sends it on a later
reactor turn, registering and unregistering the socket for writability around it); what the
socket does not take goes to Twisted's buffer. Everything else (pausing, closing, TLS via
``startTLS``, writes behind unsent data) is Twisted's ``tcp.Server``. A
protocol without the pair (any other Twisted protocol) reads through Twisted's ``doRead``. TLS
listeners wrap the connection in Twisted's TLS protocol and keep that path: the bytes must be
decrypted in user space anyway. Reactors that are not Twisted's POSIX ones (the in-memory reactor
of the in-process test tier) keep their own ``listenTCP``. The broker's own outbound connections
(``net/client.py``: followers fetching from their leader) connect with :func:`connect_tcp`, the
same reads on Twisted's ``tcp.Client``.
"""
from __future__ import annotations

import errno
import logging
from typing import Any, Protocol, runtime_checkable

from twisted.internet import main, tcp
from twisted.internet.interfaces import IProtocolFactory
from twisted.internet.posixbase import PosixReactorBase
from twisted.internet.protocol import ClientFactory
from twisted.internet.error import ConnectionDone, ConnectionLost

from kafkalite.net.sendfile import buffered_bytes

log = logging.getLogger(__name__)

#: the spare buffer of a port (Twisted's own read size: ``abstract.FileDescriptor.bufferSize``)
SPARE_BYTES = 64 * 1024


@runtime_checkable
class BufferedReceiver(Protocol):
    """A protocol that tells its transport where to read (asyncio's ``BufferedProtocol``)."""

    def get_buffer(self, spare: memoryview) -> memoryview:
        """A non-empty writable buffer for the next read; may be ``spare``, which the protocol
        must be done with when :meth:`buffer_updated` returns."""

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` (at least 1) were read into the buffer :meth:`get_buffer` returned."""


def read_into(transport: tcp.Connection, receiver: BufferedReceiver,
              spare: memoryview) -> ConnectionLost | ConnectionDone | None:
    """One read of ``transport``'s socket into the buffer ``receiver`` names: Twisted's
    ``doRead`` contract (None, or why the connection ends)."""
    buf = receiver.get_buffer(spare)
    try:
        nbytes = transport.socket.recv_into(buf)
    except OSError as exc:
        if exc.args[0] == tcp.EWOULDBLOCK:
            return None
        return main.CONNECTION_LOST
    finally:
        del buf          # drop the view of the frame at once (it pins the frame's buffer)
    if not nbytes:
        return main.CONNECTION_DONE
    receiver.buffer_updated(nbytes)
    return None


#: a response of more chunks than this is left to Twisted's buffer (``sendmsg``'s iovec limit is 1024)
MAX_SEND_CHUNKS = 256




class SendNow(tcp.Connection):
    """A plaintext connection that sends a write at once when nothing is queued before it
    (:meth:`writeSequence`): the broker's server connections (responses) and its connections to
    the others (a follower's Fetch request each replication round trip)."""

    def writeSequence(self, iovec: Any) -> None:
        """Send the chunks now with one ``sendmsg`` when Twisted holds nothing unsent for this
        connection (asyncio's transports do the same); what the socket does not take, and every
        write behind unsent data, goes to Twisted's buffer as before, so the order holds.

        Why: Twisted only buffers a write and registers the socket for writability; the bytes go
        out on a later turn of the reactor (``doWrite``), and the registration is undone after
        (``perf stat`` under scenario 8's load: 4.2 ``epoll_ctl`` per MB, two per response). Sent at
        once, a response costs one system call and no trip through the reactor. TLS (bytes go
        through the TLS layer), a closing connection and any error keep Twisted's path (its
        ``doWrite`` meets the error and ends the connection as before)."""
        chunks = iovec if isinstance(iovec, list) else list(iovec)
        if (self.TLS or not self.connected or self._writeDisconnected or self.disconnecting
                or not chunks or len(chunks) > MAX_SEND_CHUNKS or buffered_bytes(self)
                or not all(type(c) is bytes for c in chunks)):
            super().writeSequence(chunks)
            return
        try:
            sent = self.socket.sendmsg(chunks)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ENOBUFS):
                super().writeSequence(chunks)     # doWrite meets the error: connection lost
                return
            sent = 0
        if sent == sum(len(c) for c in chunks):
            return
        rest: list[bytes] = []
        for chunk in chunks:
            if sent >= len(chunk):
                sent -= len(chunk)
                continue
            rest.append(chunk[sent:] if sent else chunk)
            sent = 0
        super().writeSequence(rest)

    def write(self, data: bytes) -> None:
        """:meth:`writeSequence` of one chunk."""
        if self.TLS:
            super().write(data)
        elif data:
            self.writeSequence([data])


class RecvIntoServer(SendNow, tcp.Server):
    """A server-side TCP connection that reads into the buffer its protocol names, and sends a
    response at once when nothing is queued before it (:meth:`writeSequence`)."""

    def __init__(self, sock: Any, protocol: Any, client: tuple[object, ...], server: tcp.Port, sessionno: int,
                 reactor: Any) -> None:
        super().__init__(sock, protocol, client, server, sessionno, reactor)
        spare = getattr(server, "spare", None)
        self.spare: memoryview = spare if isinstance(spare, memoryview) else memoryview(bytearray(SPARE_BYTES))
        self.receiver: BufferedReceiver | None = protocol if isinstance(protocol, BufferedReceiver) else None

    def doRead(self) -> ConnectionLost | ConnectionDone | None:
        receiver = self.receiver
        if receiver is None or self.protocol is not receiver:   # e.g. replaced by startTLS
            return super().doRead()
        return read_into(self, receiver, self.spare)


class RecvIntoClient(SendNow, tcp.Client):
    """A client-side TCP connection that reads into the buffer its protocol names (the broker's
    connections to the others: a follower's Fetch responses carry the leader's batches), and
    sends a request at once when nothing is queued before it (:class:`SendNow`). Its spare
    buffer is its own: a process may run client connections on more than one thread."""

    spare: memoryview | None = None
    #: the protocol last found to be a BufferedReceiver: a runtime-checkable Protocol's
    #: isinstance walks its members, a few microseconds on every read of a follower's answers
    receiver: BufferedReceiver | None = None

    def doRead(self) -> ConnectionLost | ConnectionDone | None:
        receiver = self.receiver
        if receiver is None or self.protocol is not receiver:
            protocol = self.protocol
            if not isinstance(protocol, BufferedReceiver):
                return super().doRead()
            self.receiver = receiver = protocol
        if self.spare is None:
            self.spare = memoryview(bytearray(SPARE_BYTES))
        return read_into(self, receiver, self.spare)


class RecvIntoConnector(tcp.Connector):
    """``reactor.connectTCP``'s connector, making :class:`RecvIntoClient` transports."""

    def _makeTransport(self) -> RecvIntoClient:
        return RecvIntoClient(self.host, self.port, self.bindAddress, self, self.reactor)


def connect_tcp(reactor: Any, host: str, port: int, factory: ClientFactory, timeout: float = 30.0) -> Any:
    """``reactor.connectTCP`` with :class:`RecvIntoConnector` on Twisted's POSIX reactors; any
    other reactor's own ``connectTCP`` (in-memory test reactors)."""
    if not isinstance(reactor, PosixReactorBase):
        return reactor.connectTCP(host, port, factory, timeout=timeout)
    connector = RecvIntoConnector(host, port, factory, timeout, None, reactor)
    connector.connect()
    return connector


class RecvIntoPort(tcp.Port):
    """A listening port whose connections are :class:`RecvIntoServer`; owns their spare buffer."""

    transport = RecvIntoServer

    def __init__(self, port: int, factory: IProtocolFactory, backlog: int = 50, interface: str = "",
                 reactor: Any = None) -> None:
        super().__init__(port, factory, backlog, interface, reactor)
        self.spare = memoryview(bytearray(SPARE_BYTES))


def listen_tcp(reactor: Any, port: int, factory: IProtocolFactory, interface: str = "") -> Any:
    """``reactor.listenTCP`` with :class:`RecvIntoPort` on Twisted's POSIX reactors; any other
    reactor's own ``listenTCP`` (in-memory test reactors)."""
    if not isinstance(reactor, PosixReactorBase):
        return reactor.listenTCP(port, factory, interface=interface)
    listening = RecvIntoPort(port, factory, 50, interface, reactor)
    listening.startListening()
    return listening
