"""The broker's listening socket and per-connection request pipeline.

Kafka's rule per connection: one request is processed at a time and responses leave in request
order (the Java broker mutes a socket until its response is queued). Clients depend on it:
kafka-python pairs each response with its oldest in-flight request. So a connection keeps a FIFO
of complete frames and hands the next one to the dispatcher only after the previous response was
written. A long-poll Fetch therefore delays later requests on the same connection, as in Kafka.

One exception, for acks=all: a handler that has done its work and only waits for replication
answers :class:`Overlapped`, and while every unanswered request of the connection is such a wait,
the next frame may start if it is a request of the same API (a Produce after acks=all Produces),
up to :data:`MAX_OVERLAPPED` of them. Responses still leave in request order (each waits for the
ones before it), appends happen in request order, and any other request waits for every answer
before it, as before. Without it a producer's connection carried one acks=all Produce per
replication round trip: librdkafka sends one partition per Produce request, so at 10,000
records/s on 3 brokers each producer connection was busy 97 % of the time with one request
waiting for its followers while the next ones sat in the socket (docs/benchmarks.md, scenario 4).

Backpressure: when a connection's queue of unprocessed frames reaches ``queued.max.requests`` the
transport stops reading; when the socket's outgoing buffer is full (a slow consumer), Twisted
pauses us as a push producer and we stop starting new requests until it drains.

Sockets and limits, with Kafka's properties: every accepted connection gets TCP_NODELAY (Kafka's
broker sets it; without it Nagle's algorithm holds a small response back until the previous
segment is acknowledged) and ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``
(-1 leaves the OS default). :class:`ConnectionQuotas` is Kafka's ConnectionQuotas: connections per
client address (``max.connections.per.ip`` and its overrides: one more is closed at once) and in
total (``max.connections``: at the limit the listeners stop accepting, so new connections wait in
the kernel's backlog as Kafka's blocked acceptor leaves them). One periodic sweep per listener
closes connections idle for ``connections.max.idle.ms`` (no bytes either way and no request in
progress), as Kafka's Selector does.

Security (``kafkalite.net.tls``, ``kafkalite.net.sasl``): an SSL or SASL_SSL listener wraps this
factory in Twisted's TLS protocol, so a connection sees plaintext frames either way; its
``principal`` is the client certificate's DN (``User:ANONYMOUS`` without one). On a SASL listener
each connection has a :class:`~kafkalite.net.sasl.SaslAuthenticator` that answers every frame
until authentication completes (then ``principal`` is the SASL user); PLAINTEXT connections pay
one attribute test per request batch for all of this.
"""
from __future__ import annotations

import enum
import logging
import socket
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Mapping, Protocol as TypingProtocol

from twisted.internet import defer, protocol, task
from twisted.internet.interfaces import IPushProducer, IReactorTime
from twisted.python.failure import Failure
from zope.interface import implementer

from kafkalite.net.sendfile import RegionSender, close_regions, copy_regions, has_regions
from kafkalite.net.tcp_receive import listen_tcp
from kafkalite.net.transport import stream_transport
from kafkalite.net.tls import TLSServerFactory, peer_certificate, tcp_transport
from kafkalite.protocol.errors import ProtocolError
from kafkalite.protocol.framing import FrameDecoder, FramePool, unshared
from kafkalite.security import principal as principals

if TYPE_CHECKING:
    from kafkalite.net.sasl import SaslSettings

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


class NoResponse(enum.Enum):
    """The type of :data:`NO_RESPONSE` (an enum member, so a handler's return type can name it)."""
    NO_RESPONSE = "no response"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE   # a handler's result when no response frame is sent (Produce acks=0)

#: at most this many overlapped requests (and one more being dispatched) per connection: the
#: producers' default in-flight limit (librdkafka's and Java's ``max.in.flight`` are 5)
MAX_OVERLAPPED = 5


class Overlapped:
    """A handler's answer that comes later, while the request only waits (an acks=all Produce whose
    batches are appended): the connection may start its next request meanwhile if that is of the
    same API (see the module docstring). ``deferred`` fires with the answer as a plain Deferred
    result would."""

    __slots__ = ("deferred",)

    def __init__(self, deferred: defer.Deferred) -> None:
        self.deferred = deferred


class _Answer:
    """One dispatched request of a connection whose response has not been written yet."""

    __slots__ = ("api_key", "overlapped", "done", "result")

    def __init__(self, api_key: bytes) -> None:
        self.api_key = api_key            # the frame's first two bytes
        self.overlapped = False           # the handler answered Overlapped and still waits
        self.done = False
        self.result: Any = None


class Dispatcher(TypingProtocol):
    def dispatch(self, frame: bytearray, conn: "KafkaConnection") -> Any:
        """Return a list of buffers, NO_RESPONSE, or a Deferred of either; raise CloseConnection."""


def _as_bytes(chunk: Any) -> bytes:
    """Twisted transports take only bytes. Record chunks arrive as memoryviews, usually over the
    whole ``bytes`` of one log read: hand over that object itself (immutable, so safe to share)
    instead of copying it; Twisted copies once more when it joins its buffer before send()."""
    if type(chunk) is bytes:
        return chunk
    if type(chunk) is memoryview:
        base = chunk.obj
        if type(base) is bytes and chunk.nbytes == len(base) and chunk.contiguous:
            return base
    return bytes(chunk)


USE_DEFAULT_BUFFER_SIZE = -1        # Kafka's Selectable.USE_DEFAULT_BUFFER_SIZE
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class SocketOptions:
    """Options of accepted sockets (``socket.send.buffer.bytes``, ``socket.receive.buffer.bytes``)."""

    send_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE
    receive_buffer_bytes: int = USE_DEFAULT_BUFFER_SIZE

    def apply(self, sock: Any, *, listening: bool = False) -> None:
        """Set the buffers (and TCP_NODELAY on a connection); an option the OS refuses is logged."""
        opts = [] if listening else [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        if self.send_buffer_bytes != USE_DEFAULT_BUFFER_SIZE and not listening:
            opts.append((socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes))
        if self.receive_buffer_bytes != USE_DEFAULT_BUFFER_SIZE:
            opts.append((socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes))
        for level, name, value in opts:
            try:
                sock.setsockopt(level, name, value)
            except OSError as exc:
                log.warning("cannot set socket option %s=%s: %s", name, value, exc)


def resolve_connection_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: each host name is resolved to its addresses
    (Kafka resolves them once, at start-up). Blocking DNS: call it before the reactor runs."""
    out: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        for info in infos:
            out[str(info[4][0])] = limit
    return out


class ConnectionQuotas:
    """Kafka's ConnectionQuotas, shared by all listeners of a broker: connections per client address
    and in total. ``admit`` counts a new connection or says why it is refused; ``release`` uncounts
    it. The protected listener (the inter-broker one, when there are several) counts towards the
    total but is never held to ``max.connections``, so replication keeps working at the limit."""

    def __init__(self, max_connections: int = INT_MAX, max_per_ip: int = INT_MAX,
                 per_ip_overrides: Mapping[str, int] | None = None, protected_listener: str | None = None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.protected_listener = protected_listener
        self.counts: dict[str, int] = {}
        self.total = 0
        self.factories: list["KafkaServerFactory"] = []

    def limit_for(self, host: str) -> int:
        return self.per_ip_overrides.get(host, self.max_per_ip)

    def slot_available(self, listener: str) -> bool:
        return listener == self.protected_listener or self.total < self.max_connections

    def admit(self, listener: str, host: str) -> str | None:
        """Count a new connection from ``host``; or, over a limit, return why it is refused."""
        if not self.slot_available(listener):
            return f"the broker has the configured maximum of {self.max_connections} connections (max.connections)"
        count = self.counts.get(host, 0)
        limit = self.limit_for(host)
        if count >= limit:
            return f"address {host} already has the configured maximum of {limit} connections"
        self.counts[host] = count + 1
        self.total += 1
        if self.total >= self.max_connections:
            for factory in self.factories:
                if not self.slot_available(factory.listener):
                    factory.pause_accepting()
        return None

    def release(self, host: str) -> None:
        count = self.counts.get(host, 0)
        if count <= 1:
            self.counts.pop(host, None)
        else:
            self.counts[host] = count - 1
        self.total = max(self.total - 1, 0)
        if self.total < self.max_connections:
            for factory in self.factories:
                factory.resume_accepting()


@implementer(IPushProducer)
class KafkaConnection(protocol.Protocol):
    def __init__(self, dispatcher: Dispatcher, max_frame_bytes: int, max_queued: int,
                 on_close: Callable[["KafkaConnection"], None] | None = None,
                 socket_options: SocketOptions | None = None, clock: IReactorTime | None = None,
                 frame_pool: FramePool | None = None) -> None:
        self.dispatcher = dispatcher
        self.decoder = FrameDecoder(max_frame_bytes, frame_pool)
        self.max_queued = max_queued
        self.queue: deque[bytearray] = deque()
        #: requests dispatched and not yet answered on the wire, oldest first: one, or several
        #: Overlapped waits (and the one started after them)
        self.in_flight: deque[_Answer] = deque()
        self.draining = False        # inside _next's loop (see _next)
        self.paused_by_transport = False
        self.reading_paused = False
        self.closed = False
        self.on_close = on_close
        self.peer = "?"
        self.peer_host = "?"
        self.client_id: str | None = None
        # KIP-511: what ApiVersions v3+ said the client is (name, version); None until then
        self.client_software: tuple[str, str] | None = None
        self.socket_options = socket_options
        self.clock = clock
        self.last_active = clock.seconds() if clock is not None else 0.0
        self.quota_host: str | None = None       # counted in the factory's ConnectionQuotas
        self.tls = False                          # set by the factory on SSL / SASL_SSL listeners
        self.principal: principals.KafkaPrincipal | None = principals.ANONYMOUS
        self.authenticator: Any = None            # net.sasl.SaslAuthenticator on SASL listeners
        self.close_after_response = False         # close once the next response is written
        #: KIP-219 channel muting: nothing is read or dispatched until the throttle time passes
        self.muted = False
        self.muted_until = 0.0
        self._unmute_call: Any = None
        #: plaintext TCP only: writes responses that carry file regions with os.sendfile
        self.sender: RegionSender | None = None
        self.sending = False                      # a response is with the sender

    # -- Twisted callbacks ---------------------------------------------------------------------
    def connectionMade(self) -> None:
        addr = stream_transport(self).getPeer()
        self.peer = f"{getattr(addr, 'host', '?')}:{getattr(addr, 'port', '?')}"
        self.peer_host = str(getattr(addr, "host", "?"))   # the host ACLs match
        if self.socket_options is not None:
            get_handle = getattr(tcp_transport(self.transport), "getHandle", None)
            if get_handle is not None:
                self.socket_options.apply(get_handle())
        if not self.tls:
            self.sender = RegionSender.for_transport(self.transport, self._written, self._send_failed)
        stream_transport(self).registerProducer(self, True)

    @property
    def busy(self) -> bool:
        """A request is being handled (its response is not written yet)."""
        return bool(self.in_flight)

    @property
    def zero_copy(self) -> bool:
        """Whether record sets may stay in their files until sent (plaintext TCP): a Fetch
        then reads regions instead of bytes (``FetchParams.zero_copy``)."""
        return self.sender is not None and not self.closed

    def _touch(self) -> None:
        if self.clock is not None:
            self.last_active = self.clock.seconds()

    def idle_since(self, now: float) -> float:
        """Seconds without traffic and without a request in progress (0 while one is)."""
        if self.busy or self.sending or self.queue:
            return 0.0
        return now - self.last_active

    def dataReceived(self, data: bytes) -> None:
        if self.closed:
            return
        self._touch()
        if self.principal is None:
            # TLS: application data arrives only after the handshake, so the peer is verified now
            self.principal = principals.from_certificate(peer_certificate(self.transport))
        self._decode(self.decoder.feed, data)

    # -- net.tcp_receive.BufferedReceiver: plaintext TCP reads straight into the frame's buffer --
    def get_buffer(self, spare: memoryview) -> memoryview:
        if self.closed:
            return spare                       # read and dropped, as dataReceived drops it
        return self.decoder.get_buffer(spare)

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self._touch()
        self._decode(self.decoder.buffer_updated, nbytes)

    def _decode(self, step: Callable[[Any], list[bytearray]], arg: Any) -> None:
        """Run one decoder step (bytes fed, or bytes read into its buffer) and handle the frames
        it completed; a framing error closes the connection (the stream position is lost)."""
        try:
            frames = step(arg)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
            return
        self._received(frames)

    def _received(self, frames: list[bytearray]) -> None:
        if frames:
            self.queue.extend(frames)
            frames.clear()          # the queue holds them now; a frame done with is then unshared
            if len(self.queue) >= self.max_queued and not self.reading_paused:
                self.reading_paused = True
                if not self.muted:
                    stream_transport(self).pauseProducing()
            self._next()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True
        self.queue.clear()
        if self.sender is not None:
            self.sender.abort()
        if self._unmute_call is not None and self._unmute_call.active():
            self._unmute_call.cancel()
        self._unmute_call = None
        if self.on_close is not None:
            self.on_close(self)

    # -- IPushProducer: the transport tells us when its send buffer is full -----------------------
    def pauseProducing(self) -> None:
        self.paused_by_transport = True

    def resumeProducing(self) -> None:
        self.paused_by_transport = False
        self._next()

    def stopProducing(self) -> None:
        self.closed = True

    # -- quota throttling (KIP-219) ---------------------------------------------------------------
    def mute(self, throttle_ms: int) -> None:
        """Read and dispatch nothing more from this client for ``throttle_ms`` (the response that
        carries the throttle time still goes out at once): Kafka's channel muting for a client
        over its quota. A longer throttle extends the mute; a shorter one leaves it."""
        if throttle_ms <= 0 or self.closed:
            return
        clock = self.clock if self.clock is not None else _global_reactor()
        until = clock.seconds() + throttle_ms / 1000.0
        if until <= self.muted_until:
            return
        self.muted_until = until
        if self._unmute_call is not None and self._unmute_call.active():
            self._unmute_call.cancel()
        if not self.muted:
            self.muted = True
            if not self.reading_paused:
                stream_transport(self).pauseProducing()
        self._unmute_call = clock.callLater(throttle_ms / 1000.0, self._unmute)

    def _unmute(self) -> None:
        self._unmute_call = None
        self.muted = False
        if self.closed:
            return
        if not self.reading_paused:
            stream_transport(self).resumeProducing()
        self._next()

    # -- pipeline ------------------------------------------------------------------------------
    def lose_connection(self) -> None:
        """Close after the written data is sent. We are the transport's streaming producer: Twisted's
        TLS transport holds its close (close_notify) back while a producer is registered, so
        unregister first (harmless on plain TCP)."""
        transport = stream_transport(self)
        try:
            transport.unregisterProducer()
        except RuntimeError:        # test transports refuse when none is registered
            pass
        transport.loseConnection()

    def abort(self) -> None:
        self.closed = True
        self.queue.clear()
        if self.sender is not None:
            self.sender.abort()
        stream_transport(self).abortConnection()

    def _may_start(self, frame: bytearray) -> bool:
        """May ``frame`` be dispatched now? When nothing is in flight; else only a request of the
        API every unfinished one is an Overlapped wait of, below :data:`MAX_OVERLAPPED`."""
        in_flight = self.in_flight
        if not in_flight:
            return True
        if len(in_flight) > MAX_OVERLAPPED:
            return False
        key = bytes(frame[:2])
        return all(a.done or (a.overlapped and a.api_key == key) for a in in_flight)

    def _next(self) -> None:
        """Dispatch queued frames one at a time (or overlapped, see :meth:`_may_start`).
        Iterative on purpose: a handler's Deferred that has already fired (an acks=all write the
        high watermark covers at once, e.g. an OffsetCommit on a partition with replication
        factor 1) calls ``_answered`` -> ``_next`` synchronously; recursing there once per
        pipelined request overflowed the stack after a few hundred requests and left the
        connection busy forever. Re-entrant calls return at once and this loop carries on."""
        if self.draining:
            return
        self.draining = True
        try:
            while not (self.sending or self.closed or self.paused_by_transport or self.muted) \
                    and self.queue and self._may_start(self.queue[0]):
                frame = self.queue.popleft()
                if self.reading_paused and len(self.queue) < self.max_queued // 2:
                    self.reading_paused = False
                    stream_transport(self).resumeProducing()
                answer = _Answer(bytes(frame[:2]))
                self.in_flight.append(answer)
                try:
                    auth = self.authenticator
                    if auth is not None and (not auth.complete or auth.intercepts(frame)):
                        result = auth.handle(frame, self)
                    else:
                        result = self.dispatcher.dispatch(frame, self)
                except CloseConnection as exc:
                    log.info("closing connection from %s: %s", self.peer, exc)
                    self.abort()
                    return
                except Exception:
                    log.exception("unexpected error handling a request from %s; closing it", self.peer)
                    self.abort()
                    return
                if isinstance(result, Overlapped):
                    answer.overlapped = True
                    result = result.deferred
                if isinstance(result, defer.Deferred):
                    # fires now (already called: answered) or later (_answered resumes us)
                    result.addCallbacks(self._answered, self._failed, callbackArgs=(answer,),
                                       errbackArgs=(answer,))
                    continue
                self._answered(result, answer)
                # answered at once (acks=1 produce): when nothing kept the frame or a view of it,
                # its buffer serves a later big frame (FramePool)
                pool = self.decoder.pool
                if pool is not None and unshared(frame):
                    pool.give(frame)
        finally:
            self.draining = False

    def _answered(self, result: Any, answer: _Answer) -> None:
        """A request's response is ready: write it, and those after it that were waiting for it."""
        answer.done, answer.overlapped, answer.result = True, False, result
        self._flush()

    def _flush(self) -> None:
        """Write the ready responses at the head of ``in_flight``, in request order."""
        in_flight = self.in_flight
        answered = False
        while in_flight and in_flight[0].done and not self.sending:
            result = in_flight.popleft().result
            answered = True
            if self.closed:
                if result is not NO_RESPONSE and isinstance(result, list):
                    close_regions(result)
                continue
            if not self._respond(result):
                return                    # with the sender: _written carries on
        if answered:
            self._written()
        else:
            self._next()                  # a later answer is ready; the head still waits

    def _respond(self, result: Any) -> bool:
        """Write one response; False when the region sender took it (it calls _written)."""
        if result is not NO_RESPONSE:
            if has_regions(result):
                if self.sender is not None:
                    # zero-copy: the sender writes it and calls _written (or _send_failed)
                    self.sending = True
                    self.sender.send(result)
                    return False
                try:
                    result = copy_regions(result)
                except OSError as exc:
                    self._send_failed(exc)
                    return False
            stream_transport(self).writeSequence([_as_bytes(c) for c in result])
        return True

    def _send_failed(self, exc: BaseException) -> None:
        """A response could not be sent whole (the peer went away, or a segment file shrank
        under a queued region): close the connection, never send less than the size promised."""
        self.sending = False
        if not self.closed:
            log.warning("closing connection from %s: a response could not be sent: %s", self.peer, exc)
            self.abort()

    def _written(self) -> None:
        """The response is written (to the transport's buffer, or by the sender to the socket)."""
        was_sending, self.sending = self.sending, False
        if self.closed:
            return
        if self.close_after_response:
            # Kafka's answer-then-close (a refused SASL mechanism or failed authentication)
            self.closed = True
            self.queue.clear()
            self.lose_connection()
            return
        self._touch()
        if was_sending and self.in_flight and self.in_flight[0].done:
            self._flush()                 # answers that became ready while the sender wrote
            return
        self._next()

    def _failed(self, failure: Failure, answer: _Answer | None = None) -> None:
        if answer is not None:
            answer.done, answer.overlapped = True, False
        if failure.check(CloseConnection):
            log.info("closing connection from %s: %s", self.peer, failure.value)
        elif not self.closed:
            log.error("unexpected error handling a request from %s; closing it: %s",
                      self.peer, failure.getTraceback())
        if not self.closed:
            self.abort()


class KafkaServerFactory(protocol.ServerFactory):
    """One listener: its connections, its share of the broker's ConnectionQuotas, and the idle sweep."""

    def __init__(self, dispatcher: Dispatcher, max_frame_bytes: int, max_queued: int, *,
                 listener: str = "PLAINTEXT", quotas: ConnectionQuotas | None = None,
                 socket_options: SocketOptions | None = None, max_idle_ms: int = -1,
                 clock: IReactorTime | None = None, tls_options: Any = None,
                 sasl: "SaslSettings | None" = None) -> None:
        self.dispatcher = dispatcher
        self.tls_options = tls_options          # a twisted.internet.ssl context factory: SSL / SASL_SSL
        self.sasl = sasl                        # SASL_PLAINTEXT / SASL_SSL
        self.max_frame_bytes = max_frame_bytes
        self.max_queued = max_queued
        self.listener = listener
        self.quotas = quotas
        self.socket_options = socket_options
        self.max_idle_ms = max_idle_ms          # needs ``clock``; negative: never close idle connections
        self.clock = clock
        self.connections: set[KafkaConnection] = set()
        #: big request frames' buffers, reused across this listener's connections (reactor thread)
        self.frame_pool = FramePool()
        self.port: Any = None
        self.accepting = True
        self.idle_sweep: task.LoopingCall | None = None
        if quotas is not None:
            quotas.factories.append(self)

    def listen(self, reactor: Any, port: int, interface: str) -> Any:
        """Bind this listener (plaintext: ``net.tcp_receive.listen_tcp``, whose connections read
        into the frame's buffer; TLS: ``reactor.listenTCP`` under Twisted's TLS protocol); its
        receive buffer is set on the listening socket too, so accepted connections start with it
        (as Kafka sets it before binding)."""
        if self.tls_options is None:
            self.port = listen_tcp(reactor, port, self, interface)      # reads with recv_into
        else:
            self.port = reactor.listenTCP(port, TLSServerFactory(self.tls_options, False, self), interface=interface)
        if self.socket_options is not None and getattr(self.port, "socket", None) is not None:
            self.socket_options.apply(self.port.socket, listening=True)
        return self.port

    # -- quotas ------------------------------------------------------------------------------------
    def buildProtocol(self, addr: Any) -> KafkaConnection | None:
        host = str(getattr(addr, "host", "?"))
        if self.quotas is not None:
            refused = self.quotas.admit(self.listener, host)
            if refused is not None:
                # Twisted closes the accepted socket when buildProtocol returns None
                log.info("rejected connection from %s: %s", host, refused)
                return None
        conn = KafkaConnection(self.dispatcher, self.max_frame_bytes, self.max_queued,
                               on_close=self._closed, socket_options=self.socket_options, clock=self.clock,
                               frame_pool=self.frame_pool)
        conn.quota_host = host if self.quotas is not None else None
        if self.tls_options is not None:
            conn.tls = True
            conn.principal = None               # known after the TLS handshake
        if self.sasl is not None:
            from kafkalite.net.sasl import SaslAuthenticator
            conn.authenticator = SaslAuthenticator(self.sasl)
        self.connections.add(conn)
        return conn

    def _closed(self, conn: KafkaConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            if self.quotas is not None and conn.quota_host is not None:
                self.quotas.release(conn.quota_host)

    def pause_accepting(self) -> None:
        """max.connections reached: leave new connections in the kernel's backlog."""
        if self.accepting and self.port is not None and getattr(self.port, "connected", False):
            self.accepting = False
            self.port.stopReading()
            log.info("listener %s: max.connections reached, not accepting", self.listener)

    def resume_accepting(self) -> None:
        if not self.accepting and self.port is not None and getattr(self.port, "connected", False):
            self.accepting = True
            self.port.startReading()
            log.info("listener %s: accepting connections again", self.listener)

    # -- idle connections --------------------------------------------------------------------------
    def startFactory(self) -> None:
        if self.max_idle_ms >= 0 and self.clock is not None and self.idle_sweep is None:
            self.idle_sweep = task.LoopingCall(self.close_idle)
            self.idle_sweep.clock = self.clock
            # one sweep for all connections; a connection closes between max_idle_ms and
            # max_idle_ms plus one interval after its last traffic
            interval_ms = min(max(self.max_idle_ms / 10.0, 10.0), 1000.0)
            self.idle_sweep.start(interval_ms / 1000.0, now=False)

    def stopFactory(self) -> None:
        if self.idle_sweep is not None and self.idle_sweep.running:
            self.idle_sweep.stop()
        self.idle_sweep = None

    def close_idle(self) -> int:
        """Close every connection idle for connections.max.idle.ms; returns how many."""
        if self.clock is None or self.max_idle_ms < 0:
            return 0
        now = self.clock.seconds()
        limit = self.max_idle_ms / 1000.0
        idle = [c for c in self.connections if not c.closed and c.idle_since(now) >= limit]
        for conn in idle:
            log.info("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)",
                     conn.peer, self.max_idle_ms)
            conn.closed = True
            conn.lose_connection()
        return len(idle)

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.lose_connection()


def _global_reactor() -> IReactorTime:
    """The running reactor, for a connection built without a clock (production passes one)."""
    from twisted.internet import reactor
    return reactor
