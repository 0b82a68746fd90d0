"""The broker's listening socket and per-connection request pipeline.

Kafka's rule per connection: one request is processed at a time and responses leave in request
order (the Java broker mutes a socket until its response is queued). Clients depend on it:
kafka-python pairs each response with its oldest in-flight request. So a connection keeps a FIFO
of complete frames and hands the next one to the dispatcher only after the previous response was
written. A long-poll Fetch therefore delays later requests on the same connection, as in Kafka.

Backpressure: when a connection's queue of unprocessed frames reaches ``queued.max.requests`` the
transport stops reading; when the socket's outgoing buffer is full (a slow consumer), Twisted
pauses us as a push producer and we stop starting new requests until it drains.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Protocol as TypingProtocol

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IPushProducer
from twisted.python.failure import Failure
from zope.interface import implementer

from kafkalite.protocol.errors import ProtocolError
from kafkalite.protocol.framing import FrameDecoder

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


NO_RESPONSE = object()   # a handler's result when no response frame is sent (Produce acks=0)


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


@implementer(IPushProducer)
class KafkaConnection(protocol.Protocol):
    def __init__(self, dispatcher: Dispatcher, max_frame_bytes: int, max_queued: int,
                 on_close: Callable[["KafkaConnection"], None] | None = None) -> None:
        self.dispatcher = dispatcher
        self.decoder = FrameDecoder(max_frame_bytes)
        self.max_queued = max_queued
        self.queue: deque[bytearray] = deque()
        self.busy = False
        self.draining = False        # inside _next's loop (see _next)
        self.paused_by_transport = False
        self.reading_paused = False
        self.closed = False
        self.on_close = on_close
        self.peer = "?"
        self.client_id: str | None = None

    # -- Twisted callbacks ---------------------------------------------------------------------
    def connectionMade(self) -> None:
        addr = self.transport.getPeer()
        self.peer = f"{getattr(addr, 'host', '?')}:{getattr(addr, 'port', '?')}"
        self.transport.registerProducer(self, True)

    def dataReceived(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.abort()
            return
        if frames:
            self.queue.extend(frames)
            if len(self.queue) >= self.max_queued and not self.reading_paused:
                self.reading_paused = True
                self.transport.pauseProducing()
            self._next()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True
        self.queue.clear()
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

    # -- pipeline ------------------------------------------------------------------------------
    def abort(self) -> None:
        self.closed = True
        self.queue.clear()
        self.transport.abortConnection()

    def _next(self) -> None:
        """Dispatch queued frames one at a time. Iterative on purpose: a handler's Deferred that
        has already fired (an acks=all write the high watermark covers at once, e.g. an
        OffsetCommit on a partition with replication factor 1) calls ``_respond`` -> ``_next``
        synchronously; recursing there once per pipelined request overflowed the stack after a
        few hundred requests and left the connection busy forever. Re-entrant calls return at
        once and this loop carries on."""
        if self.draining:
            return
        self.draining = True
        try:
            while not (self.busy or self.closed or self.paused_by_transport) and self.queue:
                frame = self.queue.popleft()
                if self.reading_paused and len(self.queue) < self.max_queued // 2:
                    self.reading_paused = False
                    self.transport.resumeProducing()
                self.busy = True
                try:
                    result = self.dispatcher.dispatch(frame, self)
                except CloseConnection as exc:
                    log.info("closing connection from %s: %s", self.peer, exc)
                    self.abort()
                    return
                except Exception:
                    log.exception("unexpected error handling a request from %s; closing it", self.peer)
                    self.abort()
                    return
                if isinstance(result, defer.Deferred):
                    # fires now (already called: busy is False again) or later (_respond resumes us)
                    result.addCallbacks(self._respond, self._failed)
                    continue
                self._respond(result)
        finally:
            self.draining = False

    def _respond(self, result: Any) -> None:
        self.busy = False
        if self.closed:
            return
        if result is not NO_RESPONSE:
            self.transport.writeSequence([_as_bytes(c) for c in result])
        self._next()

    def _failed(self, failure: Failure) -> None:
        self.busy = False
        if failure.check(CloseConnection):
            log.info("closing connection from %s: %s", self.peer, failure.value)
        elif not self.closed:
            log.error("unexpected error handling a request from %s; closing it: %s",
                      self.peer, failure.getTraceback())
        if not self.closed:
            self.abort()


class KafkaServerFactory(protocol.ServerFactory):
    def __init__(self, dispatcher: Dispatcher, max_frame_bytes: int, max_queued: int) -> None:
        self.dispatcher = dispatcher
        self.max_frame_bytes = max_frame_bytes
        self.max_queued = max_queued
        self.connections: set[KafkaConnection] = set()

    def buildProtocol(self, addr: Any) -> KafkaConnection:
        conn = KafkaConnection(self.dispatcher, self.max_frame_bytes, self.max_queued,
                               on_close=self.connections.discard)
        self.connections.add(conn)
        return conn

    def close_all(self) -> None:
        for conn in list(self.connections):
            conn.transport.loseConnection()
