"""An in-memory TCP network on a MemoryReactorClock, for brokers and clients in one process.

:class:`InProcessReactor` is Twisted's ``MemoryReactorClock`` whose ``listenTCP`` binds a port
in memory (port 0 gets a fresh number, read back with ``getHost()`` as a broker does to
advertise it) and whose ``connectTCP`` reaches the factory listening there: both protocols get
``twisted.test.iosim`` fake transports joined by an ``IOPump``. Bytes move, connections open
and close, only when the clock runs: every write schedules one ``callLater(0)`` pump, so
``reactor.advance(0)`` delivers everything that is due (and what the answers write in turn),
the same way the in-memory ZooKeeper is driven. A ClientFactory sees Twisted's usual calls
(``startedConnecting``, ``clientConnectionFailed`` with ConnectionRefusedError when nothing
listens, ``clientConnectionLost``), so ``ClientCreator`` and reconnecting factories work.

Differences from real TCP, on purpose: no partial reads beyond what one pump delivers, no
flow control (``pauseProducing`` on these transports is a no-op, as in iosim), and an abort
still delivers what was written before it. :meth:`InProcessReactor.drop_connections` cuts
every connection to a port at once (both sides see the connection lost), for fault tests.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IConnector, IListeningPort
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport, IOPump
from zope.interface import implementer

_ANY = ("", "0.0.0.0")
#: A pump that keeps moving bytes this many rounds is a protocol loop, not a conversation.
_MAX_ROUNDS = 100_000
_LOCAL = {"localhost": "127.0.0.1"}


class _Transport(FakeTransport):
    """iosim's transport that asks the network for a pump whenever it has something to move."""

    def __init__(self, reactor: InProcessReactor, protocol: Any, is_server: bool,
                 host: IPv4Address, peer: IPv4Address,
                 on_lost: Callable[[Failure], None] | None = None) -> None:
        super().__init__(protocol, is_server, hostAddress=host, peerAddress=peer)
        self._reactor = reactor
        self._on_lost = on_lost

    def write(self, data: bytes) -> None:
        super().write(data)
        self._reactor._kick()

    def loseConnection(self) -> None:
        super().loseConnection()
        self._reactor._kick()

    def abortConnection(self) -> None:
        self.disconnectReason = error.ConnectionAborted()  # type: ignore[assignment]
        super().abortConnection()
        self._reactor._kick()

    def reportDisconnect(self) -> None:
        super().reportDisconnect()
        if self._on_lost is not None:
            self._on_lost(Failure(self.disconnectReason))


@implementer(IListeningPort)
class ListeningPort:
    """A bound in-memory port; ``stopListening`` refuses new connections, keeps open ones."""

    def __init__(self, reactor: InProcessReactor, factory: Any, address: IPv4Address) -> None:
        self._reactor = reactor
        self.factory = factory
        self.address = address
        self.listening = True

    def startListening(self) -> None:
        if not self.listening:
            raise error.CannotListenError(self.address.host, self.address.port, "stopped port")

    def stopListening(self) -> defer.Deferred[None]:
        if self.listening:
            self.listening = False
            del self._reactor._ports[(self.address.host, self.address.port)]
            self.factory.doStop()
        return defer.succeed(None)

    def getHost(self) -> IPv4Address:
        return self.address


@dataclass(eq=False)
class Connection:
    """One established in-memory connection (for inspection and fault injection)."""

    client: Any   # the two IProtocol providers
    server: Any
    client_transport: _Transport
    server_transport: _Transport
    listener: ListeningPort
    pump: IOPump

    @property
    def closed(self) -> bool:
        return bool(self.client_transport.disconnected and self.server_transport.disconnected)


@implementer(IConnector)
class Connector:
    """``connectTCP``'s handle; the attempt happens in the next reactor turn."""

    def __init__(self, reactor: InProcessReactor, host: str, port: int, factory: Any,
                 timeout: float) -> None:
        self._reactor = reactor
        self.host = host
        self.port = port
        self.factory = factory
        self.timeout = timeout
        self.state = "disconnected"
        self.transport: _Transport | None = None

    def connect(self) -> None:
        self.state = "connecting"
        self.factory.doStart()
        self.factory.startedConnecting(self)
        self._reactor.callLater(0, self._attempt)

    def stopConnecting(self) -> None:
        if self.state != "connecting":
            raise error.NotConnectingError()
        self.state = "disconnected"
        self._failed(error.UserError())

    def disconnect(self) -> None:
        if self.state == "connecting":
            self.stopConnecting()
        elif self.transport is not None:
            self.transport.loseConnection()

    def getDestination(self) -> IPv4Address:
        return IPv4Address("TCP", self.host, self.port)

    def _failed(self, reason: Exception) -> None:
        self.factory.clientConnectionFailed(self, Failure(reason))
        self.factory.doStop()

    def _lost(self, reason: Failure) -> None:
        self.state = "disconnected"
        self.transport = None
        self.factory.clientConnectionLost(self, reason)
        self.factory.doStop()

    def _attempt(self) -> None:
        if self.state != "connecting":
            return
        listener = self._reactor._listener(self.host, self.port)
        if listener is None:
            self.state = "disconnected"
            self._failed(error.ConnectionRefusedError(f"nothing listens on {self.host}:{self.port}"))
            return
        client_addr = IPv4Address("TCP", "127.0.0.1", next(self._reactor._client_ports))
        server_addr = IPv4Address("TCP", listener.address.host if listener.address.host not in _ANY
                                  else "127.0.0.1", listener.address.port)
        server = listener.factory.buildProtocol(client_addr)
        if server is None:
            self.state = "disconnected"
            self._failed(error.ConnectionLost("the server refused the connection"))
            return
        client = self.factory.buildProtocol(server_addr)
        if client is None:
            self.state = "disconnected"
            self._failed(error.ConnectionLost("the client factory built no protocol"))
            return
        self.state = "connected"
        self.transport = _Transport(self._reactor, client, False, client_addr, server_addr,
                                    on_lost=self._lost)
        server_transport = _Transport(self._reactor, server, True, server_addr, client_addr)
        server.makeConnection(server_transport)
        client.makeConnection(self.transport)
        pump = IOPump(client, server, self.transport, server_transport, False, clock=self._reactor)
        self._reactor.connections.append(
            Connection(client, server, self.transport, server_transport, listener, pump))
        self._reactor._kick()


class InProcessReactor(MemoryReactorClock):
    """A MemoryReactorClock whose TCP listens and connects in memory (see the module doc)."""

    def __init__(self, first_port: int = 30000) -> None:
        super().__init__()
        self._ports: dict[tuple[str, int], ListeningPort] = {}
        self._port_numbers = itertools.count(first_port)
        self._client_ports = itertools.count(50000)
        self.connections: list[Connection] = []
        self._pump_scheduled = False

    def listenTCP(self, port: int, factory: Any, backlog: int = 50,  # noqa: N802 - Twisted's name
                  interface: str = "") -> ListeningPort:
        host = _LOCAL.get(interface, interface) or "0.0.0.0"
        if port == 0:
            port = next(n for n in self._port_numbers if not self._port_in_use(n))
        if self._port_in_use(port, host):
            raise error.CannotListenError(host, port, OSError("address already in use"))
        listening = ListeningPort(self, factory, IPv4Address("TCP", host, port))
        self._ports[(host, port)] = listening
        self.tcpServers.append((port, factory, backlog, interface))
        factory.doStart()
        return listening

    def connectTCP(self, host: str, port: int, factory: Any,  # noqa: N802
                   timeout: float = 30, bindAddress: Any = None) -> Connector:  # noqa: N803
        connector = Connector(self, _LOCAL.get(host, host), port, factory, timeout)
        self.tcpClients.append((host, port, factory, int(timeout), bindAddress))
        self.connectors.append(connector)
        connector.connect()
        return connector

    def drop_connections(self, port: int) -> int:
        """Cut every open connection to ``port`` (both sides lose it); returns how many."""
        cut = 0
        for conn in self.connections:
            if conn.listener.address.port == port and not conn.closed:
                conn.server_transport.abortConnection()
                cut += 1
        return cut

    def _port_in_use(self, port: int, host: str | None = None) -> bool:
        for bound_host, bound_port in self._ports:
            if bound_port == port and (host is None or host in _ANY or bound_host in _ANY
                                       or bound_host == host):
                return True
        return False

    def _listener(self, host: str, port: int) -> ListeningPort | None:
        return self._ports.get((host, port)) or self._ports.get(("0.0.0.0", port))

    def _kick(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.callLater(0, self._pump)

    def _pump(self) -> None:
        """Move bytes and closes on every connection until nothing moves (answers written
        while receiving move too); Deferreds and timers scheduled meanwhile run later in the
        same ``advance``."""
        self._pump_scheduled = False
        for conn in list(self.connections):
            for _ in range(_MAX_ROUNDS):
                if not conn.pump.pump(advanceClock=False):
                    break
            else:
                raise RuntimeError(f"{conn.client!r} and {conn.server!r} never stop talking")
        self.connections = [c for c in self.connections if not c.closed]


__all__ = ["InProcessReactor", "ListeningPort", "Connector", "Connection"]
