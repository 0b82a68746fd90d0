"""The listener's socket options and limits (net/server.py), with Kafka's properties:
TCP_NODELAY and socket.{send,receive}.buffer.bytes on accepted sockets, connections.max.idle.ms,
max.connections, max.connections.per.ip and its overrides. Driven with StringTransport and
task.Clock, no reactor."""
from __future__ import annotations

import socket
import struct
from typing import Any

from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from kafkalite.net.server import (ConnectionQuotas, KafkaConnection, KafkaServerFactory, SocketOptions,
                                  resolve_connection_overrides)


class Echo:
    """Answers every frame at once with its first 4 bytes; ``hold`` parks the next answer."""

    def __init__(self) -> None:
        self.hold: defer.Deferred | None = None

    def dispatch(self, frame: bytearray, conn: KafkaConnection) -> Any:
        payload = [struct.pack(">i", 4) + bytes(frame[:4])]
        if self.hold is not None:
            return self.hold.addCallback(lambda _: payload)
        return payload


class FakeSocket:
    def __init__(self) -> None:
        self.options: dict[tuple[int, int], int] = {}

    def setsockopt(self, level: int, name: int, value: int) -> None:
        self.options[(level, name)] = value


class SocketTransport(StringTransport):
    """A StringTransport whose getHandle() is a socket that records its options."""

    def __init__(self, host: str = "10.0.0.1", port: int = 40000) -> None:
        super().__init__(peerAddress=IPv4Address("TCP", host, port))
        self.sock = FakeSocket()

    def getHandle(self) -> FakeSocket:
        return self.sock


class FakePort:
    """The listening port's accept switch (tcp.Port.stopReading/startReading)."""

    connected = True

    def __init__(self) -> None:
        self.reading = True

    def stopReading(self) -> None:
        self.reading = False

    def startReading(self) -> None:
        self.reading = True


def accept(factory: KafkaServerFactory, host: str = "10.0.0.1", port: int = 40000) -> tuple[Any, SocketTransport]:
    transport = SocketTransport(host, port)
    conn = factory.buildProtocol(IPv4Address("TCP", host, port))
    if conn is not None:
        conn.makeConnection(transport)
    return conn, transport


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_accepted_sockets_get_nodelay_and_the_configured_buffers() -> None:
    """TCP_NODELAY always (Kafka's broker sets it), SO_SNDBUF/SO_RCVBUF from socket.send/receive.
    buffer.bytes; -1 leaves the OS default alone."""
    factory = KafkaServerFactory(Echo(), 1 << 20, 8, socket_options=SocketOptions(4096, 8192))
    _, transport = accept(factory)
    assert transport.sock.options == {(socket.IPPROTO_TCP, socket.TCP_NODELAY): 1,
                                      (socket.SOL_SOCKET, socket.SO_SNDBUF): 4096,
                                      (socket.SOL_SOCKET, socket.SO_RCVBUF): 8192}
    factory = KafkaServerFactory(Echo(), 1 << 20, 8, socket_options=SocketOptions(-1, -1))
    _, transport = accept(factory)
    assert transport.sock.options == {(socket.IPPROTO_TCP, socket.TCP_NODELAY): 1}


def test_socket_options_take_effect_on_a_real_socket() -> None:
    """The same options on a real TCP socket: the kernel reports TCP_NODELAY set and buffers at
    least the size asked for (Linux doubles it for its bookkeeping)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        default_snd = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        wanted = default_snd * 2
        SocketOptions(wanted, 65536).apply(sock)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= wanted
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= 65536


def test_idle_connections_are_closed_by_one_sweep() -> None:
    """connections.max.idle.ms: a connection with no traffic for that long is closed by the
    listener's periodic sweep; traffic restarts the clock; a connection whose request is still in
    progress (a parked long poll) is not idle; negative disables the sweep."""
    clock = task.Clock()
    echo = Echo()
    factory = KafkaServerFactory(echo, 1 << 20, 8, max_idle_ms=1000, clock=clock)
    factory.doStart()
    quiet, quiet_t = accept(factory, port=1)
    chatty, chatty_t = accept(factory, port=2)
    waiting, waiting_t = accept(factory, port=3)
    clock.advance(0.6)
    chatty.dataReceived(frame(b"\x00\x01\x00\x00"))          # answered at once: activity at 0.6
    assert chatty_t.value()
    echo.hold = defer.Deferred()
    waiting.dataReceived(frame(b"\x00\x02\x00\x00"))         # parked: a request in progress
    for _ in range(5):
        clock.advance(0.1)                                    # t = 1.1
    assert quiet_t.disconnecting and not chatty_t.disconnecting and not waiting_t.disconnecting
    for _ in range(6):
        clock.advance(0.1)                                    # t = 1.7: chatty idle 1.1 s
    assert chatty_t.disconnecting and not waiting_t.disconnecting
    held, echo.hold = echo.hold, None
    held.callback(None)                                       # answered at 1.7: idle from now on
    for _ in range(9):
        clock.advance(0.1)
    assert not waiting_t.disconnecting
    for _ in range(3):
        clock.advance(0.1)
    assert waiting_t.disconnecting
    factory.doStop()
    assert not clock.getDelayedCalls()

    never = KafkaServerFactory(Echo(), 1 << 20, 8, max_idle_ms=-1, clock=clock)
    never.doStart()
    _, t = accept(never)
    clock.advance(3600)
    assert not t.disconnecting and not clock.getDelayedCalls()


def test_connections_per_ip_and_overrides() -> None:
    """max.connections.per.ip: one more connection from an address at its limit is closed at once
    (buildProtocol returns None, so Twisted closes the socket); an override raises (or lowers) one
    address's limit; a closed connection frees its slot."""
    quotas = ConnectionQuotas(max_per_ip=2, per_ip_overrides={"10.0.0.9": 3, "10.0.0.8": 0})
    factory = KafkaServerFactory(Echo(), 1 << 20, 8, quotas=quotas)
    first, _ = accept(factory, "10.0.0.1", 1)
    assert first is not None and accept(factory, "10.0.0.1", 2)[0] is not None
    assert accept(factory, "10.0.0.1", 3)[0] is None
    assert accept(factory, "10.0.0.2", 1)[0] is not None               # another address
    assert all(accept(factory, "10.0.0.9", p)[0] is not None for p in (1, 2, 3))
    assert accept(factory, "10.0.0.9", 4)[0] is None
    assert accept(factory, "10.0.0.8", 1)[0] is None
    first.connectionLost()
    assert quotas.counts["10.0.0.1"] == 1 and accept(factory, "10.0.0.1", 4)[0] is not None
    assert quotas.total == len(factory.connections) == 6


def test_max_connections_stops_accepting_except_on_the_inter_broker_listener() -> None:
    """max.connections: at the limit the listeners stop accepting (new connections wait in the
    backlog, as behind Kafka's blocked acceptor) and one slipping through is closed; the
    inter-broker listener, when there are several, still accepts (and counts); closing brings
    the total back under the limit and accepting resumes."""
    quotas = ConnectionQuotas(max_connections=2, protected_listener="INTERNAL")
    external = KafkaServerFactory(Echo(), 1 << 20, 8, listener="EXTERNAL", quotas=quotas)
    internal = KafkaServerFactory(Echo(), 1 << 20, 8, listener="INTERNAL", quotas=quotas)
    external.port, internal.port = FakePort(), FakePort()
    a, _ = accept(external, "10.0.0.1", 1)
    assert external.port.reading
    accept(external, "10.0.0.2", 1)
    assert not external.port.reading and internal.port.reading
    assert accept(external, "10.0.0.3", 1)[0] is None
    replica, _ = accept(internal, "10.0.0.4", 1)
    assert replica is not None and quotas.total == 3
    a.connectionLost()
    assert not external.port.reading                          # 2 left: still at the limit
    replica.connectionLost()
    assert external.port.reading and accept(external, "10.0.0.3", 2)[0] is not None


def test_override_host_names_are_resolved() -> None:
    """Overrides may name hosts (Kafka resolves them at start-up): localhost counts for 127.0.0.1."""
    assert resolve_connection_overrides({"localhost": 5}).get("127.0.0.1") == 5
    assert resolve_connection_overrides({"10.1.2.3": 0}) == {"10.1.2.3": 0}


def test_outbound_broker_connections_set_nodelay() -> None:
    """The replica fetcher's connections (net/client.py) set TCP_NODELAY too, as Kafka's clients do."""
    from kafkalite.net.client import KafkaClientProtocol

    class TCPTransport(StringTransport):
        no_delay = False

        def setTcpNoDelay(self, enabled: bool) -> None:
            self.no_delay = enabled

    transport = TCPTransport()
    KafkaClientProtocol("broker-1-fetcher-0", task.Clock()).makeConnection(transport)
    assert transport.no_delay
