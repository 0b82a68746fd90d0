"""Outbound Kafka connections from a broker (followers fetching from their leader).

One connection per remote broker; requests are pipelined and matched to responses by
correlation id (the remote answers in order anyway). Each request carries its own timeout; a
timeout or a lost connection fails every outstanding request, and the connection is gone: the
caller reconnects. The deadlines share one reactor timer per connection, armed at the earliest
deadline and moved on when it fires (Kafka's NetworkClient checks its in-flight requests'
deadlines in poll): a follower sends a Fetch per replication round trip, and a ``callLater``
plus ``cancel`` per request (a heap push, and the reactor's periodic rebuild of its heap of
cancelled calls) cost more than the rest of sending it. For the same reason a request on a
plaintext connection goes to the socket at once with one ``sendmsg`` when nothing is queued
before it (``tcp_receive.SendNow``, as the server's responses): handed to Twisted, it waited for
the next reactor turn and cost two ``epoll_ctl`` calls (writer on, writer off) around the write.

Security: on an SSL / SASL_SSL inter-broker listener the connection runs over TLS (the trust
store and, for listeners that require one, the broker's own certificate from its
inter-broker listener's ``ssl.*`` properties); on a SASL listener :func:`connect` authenticates
with ``sasl.mechanism.inter.broker.protocol`` and the username/password of that listener's JAAS
entry (SaslHandshake v1 + SaslAuthenticate, KIP-152) before handing the connection out.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IReactorTCP, IReactorTime
from twisted.python.failure import Failure

from kafkalite.net.tcp_receive import connect_tcp
from kafkalite.net.transport import stream_transport
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ProtocolError
from kafkalite.protocol.framing import FrameDecoder
from kafkalite.security import AuthenticationError, scram
from kafkalite.security.plain import encode_token as plain_token


log = logging.getLogger(__name__)


class ConnectionLost(Exception):
    pass


class RequestTimedOut(Exception):
    pass


class KafkaClientProtocol(protocol.Protocol):
    def __init__(self, client_id: str, clock: IReactorTime, max_frame_bytes: int = 104857600) -> None:
        self.client_id = client_id
        self.clock = clock
        self.decoder = FrameDecoder(max_frame_bytes)
        self.correlation = itertools.count(1)
        #: correlation id -> (api key, version, the caller's Deferred, deadline in reactor seconds)
        self.pending: dict[int, tuple[int, int, defer.Deferred, float]] = {}
        self.closed = False
        #: the one timer of the pending deadlines (see the module doc); None when not armed
        self.deadline_timer: Any = None

    def connectionMade(self) -> None:
        # Kafka's clients (the replica fetcher's too) set TCP_NODELAY: with Nagle's algorithm a small
        # Fetch request can wait for the ACK of the previous segment, which the leader delays
        set_no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if set_no_delay is not None:
            set_no_delay(True)

    def request(self, api_key: ApiKey, api_version: int, body: Mapping[str, Any], timeout_s: float) -> defer.Deferred:
        if self.closed:
            return defer.fail(ConnectionLost("connection closed"))
        corr = next(self.correlation)
        d: defer.Deferred = defer.Deferred()
        deadline = self.clock.seconds() + timeout_s
        self.pending[corr] = (api_key, api_version, d, deadline)
        timer = self.deadline_timer
        if timer is None or deadline < timer.getTime():
            self._arm(deadline)
        chunks = codec.encode_request(api_key, api_version, corr, self.client_id, body)
        stream_transport(self).writeSequence([c if type(c) is bytes else bytes(c) for c in chunks])
        return d

    def dataReceived(self, data: bytes) -> None:
        try:
            self._answer(self.decoder.feed(data))
        except ProtocolError as exc:
            self._bad_response(exc)

    # -- net.tcp_receive.BufferedReceiver: plaintext reads go straight into the response frame --
    def get_buffer(self, spare: memoryview) -> memoryview:
        if self.closed:
            return spare
        return self.decoder.get_buffer(spare)

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        try:
            self._answer(self.decoder.buffer_updated(nbytes))
        except ProtocolError as exc:
            self._bad_response(exc)

    def _answer(self, frames: list[bytearray]) -> None:
        for frame in frames:
            corr = int.from_bytes(frame[:4], "big", signed=True)
            entry = self.pending.pop(corr, None)
            if entry is None:
                raise ProtocolError(f"response with unknown correlation id {corr}")
            api_key, version, d, _ = entry
            d.callback(codec.decode_response(api_key, version, frame)[1])

    def _bad_response(self, exc: ProtocolError) -> None:
        log.warning("bad response from %s: %s", stream_transport(self).getPeer(), exc)
        self.closed = True
        stream_transport(self).abortConnection()

    def _arm(self, deadline: float) -> None:
        if self.deadline_timer is not None:
            self.deadline_timer.cancel()
        self.deadline_timer = self.clock.callLater(max(deadline - self.clock.seconds(), 0.0), self._deadline)

    def _deadline(self) -> None:
        """The timer fired: time out what is due (1 ms of float slack), else re-arm for the
        earliest deadline still pending; nothing pending, nothing armed."""
        self.deadline_timer = None
        if not self.pending:
            return
        now = self.clock.seconds() + 0.001
        due = [corr for corr, entry in self.pending.items() if entry[3] <= now]
        for corr in due:
            self._timeout(corr)
        if not due:
            self._arm(min(entry[3] for entry in self.pending.values()))

    def _timeout(self, corr: int) -> None:
        entry = self.pending.pop(corr, None)
        if entry is not None:
            entry[2].errback(RequestTimedOut(f"no response within the timeout (correlation id {corr})"))
            stream_transport(self).abortConnection()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True
        pending, self.pending = self.pending, {}
        timer, self.deadline_timer = self.deadline_timer, None
        if timer is not None and timer.active():
            timer.cancel()
        for _, _, d, _ in pending.values():
            d.errback(ConnectionLost(str(reason.value)))

    def close(self) -> None:
        if not self.closed:
            stream_transport(self).loseConnection()


@dataclass(frozen=True)
class ClientSecurity:
    """How a broker connects to the others: its inter-broker listener's security protocol, TLS
    key material (``kafkalite.net.tls.KeyMaterial``) and SASL identity."""

    protocol: str = "PLAINTEXT"
    tls: Any = None
    verify_hostname: bool = True
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def for_inter_broker(cls, config: Any) -> "ClientSecurity":
        """From the broker config: the inter-broker listener's protocol and settings."""
        from kafkalite.net import tls

        lc = config.listener_config(config.inter_broker_listener)
        proto = lc.security_protocol
        material = tls.key_material(lc) if proto in ("SSL", "SASL_SSL") else None
        mechanism = username = password = None
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = config["sasl.mechanism.inter.broker.protocol"]
            entry = config.jaas_config(lc.listener, mechanism)
            username, password = entry.username, entry.password
        return cls(proto, material, config["ssl.endpoint.identification.algorithm"].lower() == "https",
                   mechanism, username, password)


@defer.inlineCallbacks
def authenticate(conn: KafkaClientProtocol, security: ClientSecurity, timeout_s: float) -> Any:
    """The client side of Kafka's SASL exchange (handshake v1, then SaslAuthenticate tokens)."""
    mechanism = security.mechanism or ""
    resp = yield conn.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}, timeout_s)
    if resp["error_code"] != 0:
        raise AuthenticationError(f"SASL mechanism {mechanism} refused (error {resp['error_code']}); "
                                  f"enabled: {resp['mechanisms']}")

    @defer.inlineCallbacks
    def step(token: bytes) -> Any:
        answer = yield conn.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token}, timeout_s)
        if answer["error_code"] != 0:
            raise AuthenticationError(answer["error_message"] or f"SASL authentication failed "
                                      f"(error {answer['error_code']})")
        return bytes(answer["auth_bytes"])

    if mechanism == "PLAIN":
        yield step(plain_token(security.username or "", security.password or ""))
        return conn
    client = scram.ScramClient(mechanism, security.username or "", security.password or "")
    server_first = yield step(client.first_message())
    server_final = yield step(client.final_message(server_first))
    client.verify_server_final(server_final)
    return conn


class _ConnectOnce(protocol.ClientFactory):
    """One connection attempt for an already built protocol; ``connected`` fires with it once it
    is connected, or fails with why the attempt failed (``protocol.ClientCreator``'s contract)."""

    def __init__(self, proto: KafkaClientProtocol, connected: defer.Deferred, clock: IReactorTime) -> None:
        self.proto = proto
        self.connected = connected
        self.clock = clock

    def buildProtocol(self, addr: Any) -> KafkaClientProtocol:
        # fired on the next reactor turn, after makeConnection (as ClientCreator does)
        self.clock.callLater(0, self.connected.callback, self.proto)
        return self.proto

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.connected.errback(reason)


@defer.inlineCallbacks
def connect(reactor: IReactorTCP, host: str, port: int, client_id: str, timeout_s: float,
            security: ClientSecurity | None = None) -> Any:
    """Deferred KafkaClientProtocol connected to host:port (over TLS and authenticated as
    ``security`` says)."""
    creator = protocol.ClientCreator(reactor, KafkaClientProtocol, client_id, reactor)
    if security is None or not security.uses_tls:
        # plaintext: reads with recv_into, a Fetch response's bytes straight into its frame
        connected: defer.Deferred[KafkaClientProtocol] = defer.Deferred()
        clock = cast(IReactorTime, reactor)         # Twisted's reactors are their own clock
        connect_tcp(reactor, host, port, _ConnectOnce(KafkaClientProtocol(client_id, clock), connected, clock),
                    timeout=timeout_s)
        conn = yield connected
    else:
        from kafkalite.net import tls

        options = tls.client_options(security.tls, host, security.verify_hostname)
        conn = yield creator.connectSSL(host, port, options, timeout=timeout_s)
    if security is not None and security.uses_sasl:
        try:
            yield authenticate(conn, security, timeout_s)
        except Exception:
            conn.close()
            raise
    return conn
