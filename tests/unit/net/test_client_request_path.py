"""What sending a request costs on an outbound connection (``net/client.py``, a follower's Fetch
each replication round trip): one reactor timer per connection, armed at the earliest pending
deadline, instead of a ``callLater`` and a ``cancel`` per request (every request still times out
at its own deadline, on the reactor's clock); and on plaintext TCP the request goes to the socket
at once, not through Twisted's buffer and a writer registration."""
from __future__ import annotations

import socket
import struct
from typing import Any

from twisted.internet import task
from twisted.internet.epollreactor import EPollReactor
from twisted.internet.testing import StringTransport

from kafkalite.net.client import ConnectionLost, KafkaClientProtocol, RequestTimedOut
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from tests.support.deferreds import iterate_until


class CountingClock(task.Clock):
    def __init__(self) -> None:
        super().__init__()
        self.scheduled = 0

    def callLater(self, delay: float, f: Any, *args: Any, **kw: Any) -> Any:
        self.scheduled += 1
        return super().callLater(delay, f, *args, **kw)


def connected() -> tuple[KafkaClientProtocol, StringTransport, CountingClock]:
    clock = CountingClock()
    conn = KafkaClientProtocol("follower", clock)
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport, clock


def answer(conn: KafkaClientProtocol, corr: int) -> None:
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    conn.dataReceived(b"".join(bytes(c) for c in codec.encode_response(ApiKey.API_VERSIONS, 1, corr, body)))


def ask(conn: KafkaClientProtocol, timeout_s: float, out: list[Any]) -> None:
    conn.request(ApiKey.API_VERSIONS, 1, {}, timeout_s).addBoth(out.append)


def test_a_request_per_round_trip_schedules_no_timer_per_request() -> None:
    conn, _, clock = connected()
    out: list[Any] = []
    for corr in range(1, 101):                 # a follower's loop: ask, answered, ask again
        ask(conn, 30.0, out)
        clock.advance(0.01)
        answer(conn, corr)
    assert len(out) == 100 and all(isinstance(r, dict) for r in out)
    assert clock.scheduled == 1                # one timer for the connection, armed once
    assert len(clock.getDelayedCalls()) == 1
    ask(conn, 30.0, out)
    clock.advance(29.0)                        # the first deadline passes: re-armed, nothing fails
    assert len(out) == 100 and not conn.closed and clock.scheduled == 2
    clock.advance(0.99)
    assert len(out) == 100 and not conn.closed
    clock.advance(0.02)                        # the 101st request's own deadline
    assert isinstance(out[-1].value, RequestTimedOut) and transport_aborted(conn)


def transport_aborted(conn: KafkaClientProtocol) -> bool:
    transport = conn.transport
    assert isinstance(transport, StringTransport)
    return bool(getattr(transport, "disconnecting", False) or getattr(transport, "disconnected", False))


def test_a_later_request_with_a_shorter_timeout_times_out_at_its_own_deadline() -> None:
    conn, _, clock = connected()
    slow: list[Any] = []
    quick: list[Any] = []
    ask(conn, 30.0, slow)
    ask(conn, 2.0, quick)
    clock.advance(1.9)
    assert slow == [] and quick == []
    clock.advance(0.2)
    assert isinstance(quick[0].value, RequestTimedOut)
    conn.connectionLost()                      # the abort's consequence: the rest fail, no timer left
    assert isinstance(slow[0].value, ConnectionLost)
    assert clock.getDelayedCalls() == []


def test_an_idle_connection_keeps_no_timer_armed() -> None:
    conn, _, clock = connected()
    out: list[Any] = []
    ask(conn, 5.0, out)
    answer(conn, 1)
    clock.advance(5.0)                         # fires once, finds nothing pending
    assert clock.getDelayedCalls() == [] and not conn.closed
    ask(conn, 5.0, out)
    clock.advance(5.01)
    assert isinstance(out[-1].value, RequestTimedOut)


def test_a_plaintext_request_goes_to_the_socket_without_a_reactor_turn(monkeypatch: Any) -> None:
    """A real connection on a hand-iterated epoll reactor: the request is on the wire when
    ``request`` returns (no writer registered, nothing in Twisted's buffer); when the socket takes
    only part of it, the rest follows through Twisted's buffer, in order."""
    from kafkalite.net.client import connect
    from kafkalite.net.tcp_receive import RecvIntoClient

    reactor = EPollReactor()
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    peer = None

    def settle(d: Any) -> Any:
        return iterate_until(reactor, d)

    def read_request() -> tuple[int, bytes]:
        assert peer is not None
        size = struct.unpack(">i", peer.recv(4, socket.MSG_WAITALL))[0]
        frame = peer.recv(size, socket.MSG_WAITALL)
        return struct.unpack(">hhi", frame[:8])[2], frame

    try:
        conn = settle(connect(reactor, "127.0.0.1", server.getsockname()[1], "test", 10.0))
        transport = conn.transport
        assert isinstance(transport, RecvIntoClient)
        peer, _ = server.accept()
        answered = conn.request(ApiKey.API_VERSIONS, 1, {}, 10.0)
        assert transport not in reactor.getWriters() and not transport.dataBuffer
        corr, _ = read_request()                            # there without any reactor turn
        peer.sendall(b"".join(bytes(c) for c in codec.encode_response(
            ApiKey.API_VERSIONS, 1, corr, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})))
        assert settle(answered)["error_code"] == 0

        real = transport.socket

        class Partial:                                       # a socket that takes 10 bytes
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def sendmsg(self, bufs: list[bytes]) -> int:
                return real.send(b"".join(bufs)[:10])
        monkeypatch.setattr(transport, "socket", Partial())
        conn.request(ApiKey.API_VERSIONS, 1, {}, 10.0)
        assert transport in reactor.getWriters()             # the rest waits in Twisted's buffer
        monkeypatch.setattr(transport, "socket", real)
        reactor.iterate(0)
        corr2, frame = read_request()
        assert corr2 == corr + 1 and frame[:2] == struct.pack(">h", ApiKey.API_VERSIONS)
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
