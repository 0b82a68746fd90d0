"""Plaintext listeners read with recv_into (``net/tcp_receive.py``): a real listening socket and
real connections on an epoll reactor that the test drives by hand (accept, then ``doRead`` until
the socket is empty), with the real ``KafkaConnection`` and a dispatcher that records frames."""
from __future__ import annotations

import os
import socket
import struct
from typing import Any, Iterator

import pytest
from twisted.internet import main, protocol
from twisted.internet.epollreactor import EPollReactor
from twisted.internet.testing import MemoryReactorClock

from kafkalite.net.server import KafkaServerFactory
from kafkalite.net.tcp_receive import RecvIntoPort, RecvIntoServer, listen_tcp
from kafkalite.protocol.framing import DIRECT_READ_MIN
from tests.support.deferreds import iterate_until
from tests.support.waiting import wait_for

pytestmark = pytest.mark.unit


class Recorder:
    """A dispatcher that keeps each frame and answers nothing (Produce acks=0 style)."""

    def __init__(self) -> None:
        self.frames: list[bytearray] = []

    def dispatch(self, frame: bytearray, conn: Any) -> Any:
        from kafkalite.net.server import NO_RESPONSE
        self.frames.append(frame)
        return NO_RESPONSE


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Listener:
    def __init__(self, reactor: EPollReactor, factory: protocol.ServerFactory) -> None:
        self.reactor = reactor
        self.port = listen_tcp(reactor, 0, factory, "127.0.0.1")
        self.clients: list[socket.socket] = []

    def connect(self) -> tuple[socket.socket, Any]:
        client = socket.create_connection(("127.0.0.1", self.port.getHost().port))
        self.clients.append(client)
        self.port.doRead()                     # accept: builds the protocol and its transport
        server = next(s for s in self.reactor.getReaders() if isinstance(s, RecvIntoServer)
                      and s.getPeer().port == client.getsockname()[1])
        return client, server


def drain(server: Any) -> Any:
    """doRead until the socket is empty (EAGAIN) or closed; the last result."""
    while True:
        why = server.doRead()
        if why is not None:
            return why
        try:
            waiting = server.socket.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        if not waiting:
            return server.doRead()


@pytest.fixture
def listener() -> Iterator[Listener]:
    reactor = EPollReactor()
    recorder = Recorder()
    factory = KafkaServerFactory(recorder, max_frame_bytes=1 << 20, max_queued=1000)
    made = Listener(reactor, factory)
    made.recorder = recorder               # type: ignore[attr-defined]
    yield made
    for selectable in reactor.removeAll():     # the port and the connections (not the waker)
        selectable.socket.close()
    for c in made.clients:
        c.close()
    reactor.waker.connectionLost(None)      # its pipe
    reactor._poller.close()


def test_plaintext_listeners_use_the_recv_into_port(listener: Listener) -> None:
    assert isinstance(listener.port, RecvIntoPort)
    # any other reactor (the in-process tier's in-memory one) keeps its own listenTCP
    memory = MemoryReactorClock()
    listen_tcp(memory, 9, protocol.ServerFactory(), "127.0.0.1")
    assert memory.tcpServers and memory.tcpServers[0][0] == 9


def test_frames_arrive_whole_however_the_peer_sends_them(listener: Listener) -> None:
    client, server = listener.connect()
    payloads = [b"small", os.urandom(3 * DIRECT_READ_MIN), b"", os.urandom(300_000), b"x"]
    stream = b"".join(_framed(p) for p in payloads)
    for cut in (1, 3, 6, 1000, DIRECT_READ_MIN + 17, 200_000):     # pieces of every kind
        piece, stream = stream[:cut], stream[cut:]
        client.sendall(piece)
        assert drain(server) is None
    client.sendall(stream)
    assert drain(server) is None
    assert listener.recorder.frames == payloads                    # type: ignore[attr-defined]


def test_big_frames_are_read_into_their_own_buffer(listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
    """After its first read, a big frame's bytes go straight into the frame: the spare buffer
    sees at most one read of it plus a short tail."""
    client, server = listener.connect()
    seen: list[int] = []
    original = server.protocol.buffer_updated
    spare = server.spare

    def spy(nbytes: int) -> None:
        if server.protocol.decoder._spare is spare:
            seen.append(nbytes)
        original(nbytes)

    monkeypatch.setattr(server.protocol, "buffer_updated", spy)
    payload = os.urandom(1_000_000)
    client.sendall(_framed(payload))
    while not listener.recorder.frames:                             # type: ignore[attr-defined]
        assert drain(server) is None
    assert listener.recorder.frames == [payload]                   # type: ignore[attr-defined]
    assert sum(seen) <= len(spare) + DIRECT_READ_MIN


def test_an_oversized_frame_closes_the_connection(listener: Listener) -> None:
    client, server = listener.connect()
    client.sendall(struct.pack(">i", (1 << 20) + 1) + b"x" * 100)
    server.doRead()
    assert server.protocol.closed and server._aborting
    assert listener.recorder.frames == []                          # type: ignore[attr-defined]


def test_a_peer_closing_mid_frame_ends_the_connection_without_a_frame(listener: Listener) -> None:
    client, server = listener.connect()
    client.sendall(_framed(b"whole") + _framed(os.urandom(100_000))[:50_000])
    client.close()
    why = drain(server)
    assert why is main.CONNECTION_DONE
    assert listener.recorder.frames == [b"whole"]                  # type: ignore[attr-defined]


def test_a_protocol_without_buffers_reads_through_twisted(listener: Listener) -> None:
    got: list[bytes] = []

    class Plain(protocol.Protocol):
        def dataReceived(self, data: bytes) -> None:
            got.append(data)

    listener.port.factory = protocol.Factory.forProtocol(Plain)
    client, server = listener.connect()
    client.sendall(b"hello")
    assert drain(server) is None
    assert b"".join(got) == b"hello"


class Keeper:
    """Answers at once; keeps a view of each frame when told to (as a handler that parks its
    request would)."""

    def __init__(self, keep_views: bool) -> None:
        self.keep_views = keep_views
        self.seen: list[tuple[int, bytes]] = []
        self.views: list[memoryview] = []

    def dispatch(self, frame: bytearray, conn: Any) -> Any:
        from kafkalite.net.server import NO_RESPONSE
        self.seen.append((id(frame), bytes(frame)))
        if self.keep_views:
            self.views.append(memoryview(frame))
        return NO_RESPONSE


@pytest.mark.parametrize("keep_views", [False, True])
def test_a_frame_nobody_holds_is_reused_for_the_next_big_frame(listener: Listener, keep_views: bool) -> None:
    keeper = Keeper(keep_views)
    factory = KafkaServerFactory(keeper, max_frame_bytes=1 << 20, max_queued=1000)
    listener.port.factory = factory
    pool = factory.frame_pool
    client, server = listener.connect()
    first, second = os.urandom(200_000), os.urandom(200_000)

    def request(payload: bytes, count: int) -> None:
        client.sendall(_framed(payload))
        while len(keeper.seen) < count:
            assert drain(server) is None

    request(first, 1)
    if keep_views:
        assert pool.free == []                          # a view still holds the frame: not reused
        request(second, 2)
        assert [bytes(v) for v in keeper.views] == [first, second]
        return
    assert len(pool.free) == 1 and pool.bytes == 200_000    # answered, held by nobody: pooled
    pooled = pool.free[0]
    request(second, 2)
    assert keeper.seen[1] == (id(pooled), second)       # the pooled buffer, filled with the new frame
    assert keeper.seen[0][1] == first and pool.free == []   # (``pooled`` holds it now: not given back)


class Answerer:
    """Answers each frame at once with the response chunks it is given, in turn."""

    def __init__(self, *responses: list[bytes]) -> None:
        self.responses = list(responses)

    def dispatch(self, frame: bytearray, conn: Any) -> Any:
        return self.responses.pop(0)


def _recv_now(client: socket.socket) -> bytes:
    """What the client can read without waiting."""
    got = b""
    while True:
        try:
            chunk = client.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return got
        if not chunk:
            return got
        got += chunk


def test_a_response_is_sent_at_once_without_waiting_for_writability(listener: Listener) -> None:
    """Twisted would buffer the response and register the socket for writing (two epoll_ctl and
    a later reactor turn per response); with nothing queued before it, it goes out in the read
    that completed its request."""
    listener.port.factory = KafkaServerFactory(Answerer([b"\x00\x00\x00\x03", b"abc"]), max_frame_bytes=1 << 20,
                                               max_queued=1000)
    client, server = listener.connect()
    client.sendall(_framed(b"request"))
    assert drain(server) is None
    assert server not in listener.reactor.getWriters() and server.dataBuffer == b"" and not server._tempDataBuffer
    got = bytearray()
    wait_for(lambda: got.extend(_recv_now(client)) or len(got) >= 7, timeout=30, what="the response",
             interval=0.001)                       # the server is not touched again meanwhile
    assert got == b"\x00\x00\x00\x03abc"


def test_a_response_the_socket_cannot_take_whole_keeps_its_order_with_the_next(listener: Listener) -> None:
    """The part the socket does not take goes to Twisted's buffer; a response behind it waits
    there too, so the bytes arrive in order."""
    big, small = os.urandom(8 << 20), b"next"
    listener.port.factory = KafkaServerFactory(Answerer([big[:5], big[5:]], [small]), max_frame_bytes=1 << 20,
                                               max_queued=1000)
    client, server = listener.connect()
    client.sendall(_framed(b"first"))
    assert drain(server) is None
    assert server in listener.reactor.getWriters()        # 8 MB: more than the socket took
    client.sendall(_framed(b"second"))
    got = bytearray()

    def pump() -> bool:
        got.extend(_recv_now(client))
        server.doRead()
        if server in listener.reactor.getWriters():
            server.doWrite()
        return len(got) >= len(big) + len(small)

    wait_for(pump, timeout=60, what="both responses", interval=0.001)
    assert got == big + small


# -- the broker's outbound connections (net/client.py: followers fetching from their leader) ----


def test_outbound_connections_read_responses_into_their_frames() -> None:
    """``net.client.connect`` on a real (hand-iterated) epoll reactor: a RecvIntoClient transport,
    and a 60 KB response sent in pieces arrives whole, its tail read straight into the frame."""
    from kafkalite.net.client import connect
    from kafkalite.net.tcp_receive import RecvIntoClient
    from kafkalite.protocol import codec
    from kafkalite.protocol.api_keys import ApiKey

    reactor = EPollReactor()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    peer = None

    def settle(d: Any) -> Any:
        return iterate_until(reactor, d)

    try:
        conn = settle(connect(reactor, "127.0.0.1", server.getsockname()[1], "test", 10.0))
        assert isinstance(conn.transport, RecvIntoClient)
        peer, _ = server.accept()
        answer = conn.request(ApiKey.API_VERSIONS, 0, {}, 10.0)
        reactor.iterate(0)                                      # writes the request
        size = struct.unpack(">i", peer.recv(4, socket.MSG_WAITALL))[0]
        correlation = struct.unpack(">hhi", peer.recv(size, socket.MSG_WAITALL)[:8])[2]
        body = {"error_code": 0, "api_keys": [{"api_key": i, "min_version": 0, "max_version": 3}
                                             for i in range(10_000)]}
        response = b"".join(bytes(c) for c in codec.encode_response(ApiKey.API_VERSIONS, 0, correlation, body))
        assert len(response) > 2 * DIRECT_READ_MIN
        spare_reads: list[int] = []
        original = conn.buffer_updated

        def spy(nbytes: int) -> None:
            if conn.decoder._spare is not None:
                spare_reads.append(nbytes)
            original(nbytes)

        conn.buffer_updated = spy
        for piece in (response[:3], response[3:5000], response[5000:]):
            peer.sendall(piece)
            reactor.iterate(0.01)
        got = settle(answer)
        assert got["api_keys"] == body["api_keys"]
        assert sum(spare_reads) < 5000 + DIRECT_READ_MIN        # the rest went straight into the frame
        conn.close()
        reactor.iterate(0.01)
    finally:
        if peer is not None:
            peer.close()
        server.close()
        for selectable in reactor.removeAll():
            selectable.socket.close()
        reactor.waker.connectionLost(None)
        reactor._poller.close()


class IntoBuffer:
    """A BufferedReceiver that records what was read into the buffers it handed out."""

    def __init__(self) -> None:
        self.buf = bytearray(64)
        self.got = bytearray()

    def get_buffer(self, spare: memoryview) -> memoryview:
        return memoryview(self.buf)

    def buffer_updated(self, nbytes: int) -> None:
        self.got += self.buf[:nbytes]


class Plain(protocol.Protocol):
    """A protocol that reads the Twisted way (as one wrapped by startTLS does)."""

    def __init__(self) -> None:
        self.got = bytearray()

    def dataReceived(self, data: bytes) -> None:
        self.got += data


def test_an_outbound_connection_reads_into_its_protocols_buffer_until_the_protocol_is_replaced() -> None:
    """RecvIntoClient checks once whether its protocol is a BufferedReceiver (the Protocol check
    walks its members, microseconds on every read); a protocol put in its place (startTLS) is
    checked again and read the Twisted way, and the first one, put back, reads into its buffer
    again."""
    from kafkalite.net.tcp_receive import RecvIntoClient

    ours, peer = socket.socketpair()
    try:
        ours.setblocking(False)
        conn = RecvIntoClient.__new__(RecvIntoClient)      # no reactor: doRead on a socket pair
        conn.socket = ours
        receiver, plain = IntoBuffer(), Plain()
        conn.protocol = receiver
        peer.sendall(b"first")
        assert conn.doRead() is None and receiver.got == b"first"
        conn.protocol = plain
        peer.sendall(b"second")
        assert conn.doRead() is None and plain.got == b"second" and receiver.got == b"first"
        conn.protocol = receiver
        peer.sendall(b"third")
        assert conn.doRead() is None and receiver.got == b"firstthird" and plain.got == b"second"
        peer.close()
        assert conn.doRead() is main.CONNECTION_DONE
    finally:
        ours.close()
        peer.close()
