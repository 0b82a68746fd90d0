"""The in-memory TCP network of the in-process tier, with kafkalite's own server and client.

A ``KafkaServerFactory`` listens on an :class:`~tests.support.inprocess_net.InProcessReactor`
and ``kafkalite.net.client.connect`` reaches it by host and port, as a follower reaches its
leader: the bytes are the real Kafka framing both ways, and only the clock moves them.
"""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer, error
from twisted.internet.protocol import ReconnectingClientFactory

from kafkalite.net import client as net_client
from kafkalite.net.server import NO_RESPONSE, CloseConnection, KafkaConnection, KafkaServerFactory
from kafkalite.protocol import codec
from tests.support.inprocess_net import InProcessReactor
from tests.support.deferreds import drive

API_VERSIONS = 18


class ApiVersionsOnly:
    """A dispatcher answering ApiVersions from the codec's tables; records what it saw.

    Other keys: 0 is never answered (a parked long poll), 1 closes the connection."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str | None]] = []
        self.parked: list[defer.Deferred[Any]] = []

    def dispatch(self, frame: bytearray, conn: KafkaConnection) -> Any:
        header = codec.read_request_header(frame)
        self.seen.append((header.api_key, header.correlation_id, header.client_id))
        if header.api_key == 0:
            d: defer.Deferred[Any] = defer.Deferred()
            self.parked.append(d)
            return d
        if header.api_key == 1:
            raise CloseConnection("told to close")
        if header.api_key != API_VERSIONS:
            return NO_RESPONSE
        keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in ((k, codec.valid_versions(k)) for k in (0, 1, 3, API_VERSIONS))]
        body = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
        return codec.encode_response(API_VERSIONS, header.api_version, header.correlation_id, body)


def result(reactor: InProcessReactor, d: defer.Deferred[Any]) -> Any:
    return drive(reactor, d, turns=1)


@pytest.fixture
def net() -> tuple[InProcessReactor, ApiVersionsOnly, int]:
    reactor = InProcessReactor()
    dispatcher = ApiVersionsOnly()
    port = reactor.listenTCP(0, KafkaServerFactory(dispatcher, 1 << 20, 16), interface="127.0.0.1")
    return reactor, dispatcher, port.getHost().port


def test_api_versions_round_trip_in_memory(net):
    """connect() by host:port reaches the listening factory; an ApiVersions v3 request is
    framed, dispatched and answered, and the client decodes the broker's version table."""
    reactor, dispatcher, port = net
    assert port >= 30000  # port 0 was given a real number, as a broker advertises it
    conn = result(reactor, net_client.connect(reactor, "127.0.0.1", port, "in-process", 5.0))
    body = {"client_software_name": "kafkalite", "client_software_version": "test"}
    answer = result(reactor, conn.request(API_VERSIONS, 3, body, 5.0))
    assert answer["error_code"] == 0
    versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    assert versions[API_VERSIONS] == codec.valid_versions(API_VERSIONS) and set(versions) == {0, 1, 3, 18}
    assert dispatcher.seen == [(API_VERSIONS, 1, "in-process")]


def test_pipelined_requests_are_answered_in_order(net):
    """Several requests written before the clock runs arrive together and are answered one
    at a time, in order, within one advance(0)."""
    reactor, dispatcher, port = net
    conn = result(reactor, net_client.connect(reactor, "localhost", port, "pipeline", 5.0))
    answers: list[int] = []
    for _ in range(5):
        conn.request(API_VERSIONS, 0, {}, 5.0).addCallback(lambda r: answers.append(len(r["api_keys"])))
    assert answers == []
    reactor.advance(0)
    assert answers == [4] * 5 and [c for _, c, _ in dispatcher.seen] == [1, 2, 3, 4, 5]


def test_nothing_listening_is_connection_refused():
    """A port nobody listens on refuses the connection, as the OS would."""
    reactor = InProcessReactor()
    with pytest.raises(error.ConnectionRefusedError):
        result(reactor, net_client.connect(reactor, "127.0.0.1", 9, "nobody", 5.0))


def test_request_timeout_follows_the_clock_and_closes_both_sides(net):
    """A request the server parks times out on the reactor's clock: the client fails it with
    RequestTimedOut and aborts; the server's connection sees the loss."""
    reactor, dispatcher, port = net
    conn = result(reactor, net_client.connect(reactor, "127.0.0.1", port, "slow", 5.0))
    outcome: list[Any] = []
    conn.request(0, 7, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []},
                 2.0).addBoth(outcome.append)
    reactor.advance(1.9)
    assert outcome == [] and len(dispatcher.parked) == 1
    reactor.advance(0.2)
    assert isinstance(outcome[0].value, net_client.RequestTimedOut)
    assert reactor.connections == [] and conn.closed


def test_server_close_fails_the_clients_outstanding_requests(net):
    """When the server closes the connection (Kafka's close rules), every outstanding request
    on the client fails with ConnectionLost."""
    reactor, dispatcher, port = net
    conn = result(reactor, net_client.connect(reactor, "127.0.0.1", port, "closer", 5.0))
    outcome: list[Any] = []
    conn.request(1, 4, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1,
                        "isolation_level": 0, "topics": []}, 5.0).addBoth(outcome.append)
    conn.request(API_VERSIONS, 0, {}, 5.0).addBoth(outcome.append)
    reactor.advance(0)
    assert [type(o.value) for o in outcome] == [net_client.ConnectionLost] * 2


def test_drop_connections_and_stop_listening(net):
    """drop_connections cuts live connections (both ends see it); after stopListening new
    connections are refused and the port can be bound again."""
    reactor, dispatcher, port = net
    conn = result(reactor, net_client.connect(reactor, "127.0.0.1", port, "cut", 5.0))
    assert reactor.drop_connections(port) == 1
    reactor.advance(0)
    assert conn.closed and reactor.connections == []
    listening = reactor._listener("127.0.0.1", port)
    assert listening is not None
    result(reactor, listening.stopListening())
    with pytest.raises(error.ConnectionRefusedError):
        result(reactor, net_client.connect(reactor, "127.0.0.1", port, "late", 5.0))
    again = reactor.listenTCP(port, KafkaServerFactory(dispatcher, 1 << 20, 16), interface="127.0.0.1")
    assert again.getHost().port == port
    with pytest.raises(error.CannotListenError):
        reactor.listenTCP(port, KafkaServerFactory(dispatcher, 1 << 20, 16))


def test_reconnecting_factory_gets_twisteds_callbacks(net):
    """A ReconnectingClientFactory sees startedConnecting, a lost connection and retries on
    the clock, as against real TCP."""
    reactor, dispatcher, port = net
    built: list[Any] = []

    class Factory(ReconnectingClientFactory):
        initialDelay = 1.0
        maxDelay = 1.0
        jitter = 0

        def buildProtocol(self, addr: Any) -> Any:
            self.resetDelay()
            proto = net_client.KafkaClientProtocol("reconnecting", reactor)
            proto.factory = self
            built.append(proto)
            return proto

    factory = Factory()
    factory.clock = reactor
    reactor.connectTCP("127.0.0.1", port, factory)
    reactor.advance(0)
    assert len(built) == 1
    reactor.drop_connections(port)
    reactor.advance(0)
    assert built[0].closed and len(built) == 1
    reactor.advance(1.0)
    reactor.advance(0)
    assert len(built) == 2 and not built[1].closed
    factory.stopTrying()
