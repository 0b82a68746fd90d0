"""Frame in, response buffers out: header checks, body decode, handler call, response encode.

Kafka's rules (kafka-protocol.md §5.1): ApiVersions is accepted at any version, and one above our
maximum gets the v0-format UNSUPPORTED_VERSION answer; any other unknown key or unsupported
version, or a body that does not decode, closes the connection.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from kafkalite.broker import registry
from kafkalite.broker.services import BrokerServices, RequestContext
from kafkalite.net.server import NO_RESPONSE, CloseConnection, Overlapped
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.apiversions import unsupported_version_response
from kafkalite.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from kafkalite.net.server import KafkaConnection

log = logging.getLogger(__name__)
#: Kafka's request log (log4j's ``kafka.request.logger``): at DEBUG a line per completed request
#: with its times, for finding which hop of a chain of requests costs the time; off by default
#: (``kafkalite-server --logger kafka.request.logger=DEBUG``)
request_log = logging.getLogger("kafka.request.logger")

_API_VERSIONS = int(ApiKey.API_VERSIONS)  # plain int: compared on every request
#: inter-broker APIs that no client quota applies to (Kafka exempts cluster actions; follower
#: fetches are exempted by the Fetch handler, which knows the replica id)
QUOTA_EXEMPT = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN}


class Dispatcher:
    def __init__(self, services: BrokerServices, listener: str) -> None:
        self.services = services
        self.listener = listener

    def dispatch(self, frame: bytearray, conn: "KafkaConnection") -> Any:
        try:
            header = codec.read_request_header(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"unreadable request header: {exc}") from None
        spec = registry.HANDLERS.get(header.api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {header.api_key}")
        if header.api_key == _API_VERSIONS and header.api_version > spec.max_version:
            return unsupported_version_response(header.correlation_id, spec.min_version, spec.max_version)
        if not spec.min_version <= header.api_version <= spec.max_version:
            raise CloseConnection(f"{codec.API_KEYS.get(header.api_key, header.api_key)} "
                                  f"v{header.api_version} is not supported")
        try:
            body = codec.decode_request_body(header, frame)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {codec.API_KEYS[header.api_key]} v{header.api_version} "
                                  f"request: {exc}") from None
        if header.client_id is not None:
            conn.client_id = header.client_id
        ctx = RequestContext(self.services, conn, header.api_key, header.api_version,
                             header.correlation_id, header.client_id, self.listener, request_size=len(frame))
        clock, metrics = self.services.clock, self.services.metrics
        started = clock.seconds()

        def encode(body: Any) -> Any:
            return self._encode(body, ctx, clock.seconds() - started)

        local_ms = 0.0

        def done(passthrough: Any = None) -> Any:
            """Count the request and its latency once, answered or failed."""
            total_ms = (clock.seconds() - started) * 1000.0
            metrics.request_done(header.api_key, header.api_version, total_ms)
            if request_log.isEnabledFor(logging.DEBUG):
                _log_completed(header, ctx, total_ms, local_ms)
            return passthrough

        try:
            result = spec.handler(ctx, body)
        except BaseException:
            done()
            raise
        local_ms = (clock.seconds() - started) * 1000.0
        if isinstance(result, Overlapped):      # an acks=all wait: the connection may go on
            return Overlapped(result.deferred.addCallback(encode).addBoth(done))
        if isinstance(result, defer.Deferred):
            return result.addCallback(encode).addBoth(done)
        done()
        return encode(result)

    @staticmethod
    def _encode(body: Any, ctx: RequestContext, elapsed_s: float) -> Any:
        """Encode the response; first the request quota (the handler's time, in percent of one
        thread, as Kafka's ``request_percentage``) and the throttle: the longest throttle goes
        into ``throttle_time_ms`` and the connection is muted for it (KIP-219)."""
        if ctx.api_key not in QUOTA_EXEMPT and not ctx.throttle_exempt:
            ctx.throttle(ctx.quotas.request.record(ctx.quota_user, ctx.client_id or "", elapsed_s * 100.0, ctx.now_ms))
        if ctx.throttle_ms > 0:
            ctx.conn.mute(ctx.throttle_ms)      # also after an acks=0 produce, which gets no answer
        if body is NO_RESPONSE:
            return NO_RESPONSE
        if ctx.throttle_ms > 0 and isinstance(body, dict) and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(int(body["throttle_time_ms"] or 0), ctx.throttle_ms)
        return codec.encode_response(ctx.api_key, ctx.api_version, ctx.correlation_id, body)


def _log_completed(header: Any, ctx: RequestContext, total_ms: float, local_ms: float) -> None:
    """Kafka's "Completed request" line: ``localTime`` is the handler's own run on the reactor,
    ``remoteTime`` the wait after it (an acks=all produce for its followers, a fetch in purgatory,
    a coordinator's replicated write)."""
    request_log.debug("Completed request:RequestHeader(apiKey=%s, apiVersion=%d, clientId=%s, correlationId=%d) "
                      "from connection %s;totalTime:%.3f,localTime:%.3f,remoteTime:%.3f,throttleTime:%d,"
                      "requestSize:%d,listener:%s",
                      codec.API_KEYS.get(header.api_key, header.api_key), header.api_version, header.client_id,
                      header.correlation_id, getattr(ctx.conn, "peer", "?"),
                      total_ms, local_ms, max(0.0, total_ms - local_ms), ctx.throttle_ms, ctx.request_size,
                      ctx.listener)
