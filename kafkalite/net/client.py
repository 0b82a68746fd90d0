"""Outbound Kafka connections from a broker (followers fetching from their leader).

One connection per remote broker; requests are pipelined and matched to responses by
correlation id (the remote answers in order anyway). Each request carries its own timeout; a
timeout or a lost connection fails every outstanding request, and the connection is gone: the
caller reconnects.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IReactorTCP, IReactorTime
from twisted.python.failure import Failure

from kafkalite.net.transport import stream_transport
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ProtocolError
from kafkalite.protocol.framing import FrameDecoder

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
        self.pending: dict[int, tuple[int, int, defer.Deferred, Any]] = {}
        self.closed = False

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
        timer = self.clock.callLater(timeout_s, self._timeout, corr)
        self.pending[corr] = (api_key, api_version, d, timer)
        chunks = codec.encode_request(api_key, api_version, corr, self.client_id, body)
        stream_transport(self).writeSequence([c if type(c) is bytes else bytes(c) for c in chunks])
        return d

    def dataReceived(self, data: bytes) -> None:
        try:
            for frame in self.decoder.feed(data):
                corr = int.from_bytes(frame[:4], "big", signed=True)
                entry = self.pending.pop(corr, None)
                if entry is None:
                    raise ProtocolError(f"response with unknown correlation id {corr}")
                api_key, version, d, timer = entry
                timer.cancel()
                d.callback(codec.decode_response(api_key, version, frame)[1])
        except ProtocolError as exc:
            log.warning("bad response from %s: %s", stream_transport(self).getPeer(), exc)
            stream_transport(self).abortConnection()

    def _timeout(self, corr: int) -> None:
        entry = self.pending.pop(corr, None)
        if entry is not None:
            entry[2].errback(RequestTimedOut(f"no response within the timeout (correlation id {corr})"))
            stream_transport(self).abortConnection()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.closed = True
        pending, self.pending = self.pending, {}
        for _, _, d, timer in pending.values():
            if timer.active():
                timer.cancel()
            d.errback(ConnectionLost(str(reason.value)))

    def close(self) -> None:
        if not self.closed:
            stream_transport(self).loseConnection()


def connect(reactor: IReactorTCP, host: str, port: int, client_id: str, timeout_s: float) -> defer.Deferred:
    """Deferred KafkaClientProtocol connected to host:port."""
    creator = protocol.ClientCreator(reactor, KafkaClientProtocol, client_id, reactor)
    return creator.connectTCP(host, port, timeout=timeout_s)
