"""The SASL exchange on a SASL_PLAINTEXT / SASL_SSL listener, before any other request.

Kafka's SaslServerAuthenticator as a per-connection gate in front of the dispatcher:

* ``handshake``: ApiVersions (answered by the dispatcher as usual) or SaslHandshake (17). A
  mechanism not in ``sasl.enabled.mechanisms`` gets UNSUPPORTED_SASL_MECHANISM with the enabled
  list, then the connection closes. Handshake v1 leads to ``authenticate``: tokens in
  SaslAuthenticate (36) requests (KIP-152); v0 leads to ``raw``: the tokens themselves,
  size-prefixed without a Kafka header, and the answers likewise (the pre-KIP-152 framing).
* any other request before authentication completes closes the connection, as Kafka does.
* a failed authentication (unknown user, wrong password, malformed token) is answered with
  SASL_AUTHENTICATION_FAILED and its message (raw framing: nothing) and the connection closes,
  both after ``connection.failed.authentication.delay.ms``, which slows password guessing.

Then the connection carries Kafka requests with ``principal`` ``User:<name>``. With
``connections.max.reauth.ms`` (KIP-368) the session lasts that long: SaslAuthenticate tells the
client (``session_lifetime_ms``), a SaslHandshake on the authenticated connection starts a
re-authentication (same mechanism, same principal, else the connection closes), and any other
request after expiry closes the connection, as Kafka's Processor does. The mechanisms'
arithmetic (PLAIN, SCRAM) is in ``kafkalite.security``; SCRAM credentials come from the
broker's ``scram_credential(mechanism, user)`` lookup (``/config/users/<user>``).
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime

from kafkalite.errors import ErrorCode
from kafkalite.net.server import CloseConnection
from kafkalite.protocol import codec
from kafkalite.protocol.errors import ProtocolError
from kafkalite.security import AuthenticationError, IllegalSaslState, principal, scram
from kafkalite.security.plain import PlainServer
from kafkalite.protocol.api_keys import ApiKey

log = logging.getLogger(__name__)

API_VERSIONS = 18
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)      # plain ints: compared on every frame before login
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
_SIZE = struct.Struct(">i")

CredentialLookup = Callable[[str, str], defer.Deferred]     # (mechanism, user) -> Deferred[ScramCredential | None]


@dataclass(frozen=True)
class SaslSettings:
    """One SASL listener's settings, resolved from its listener config."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_credential: CredentialLookup
    failure_delay_s: float
    clock: IReactorTime
    reauth_ms: int = 0                 # connections.max.reauth.ms; 0: sessions never expire


class SaslAuthenticator:
    """The per-connection SASL state machine (see the module docstring)."""

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        self.state = "handshake"
        self.server: Any = None            # PlainServer | ScramServer
        self.principal: principal.KafkaPrincipal | None = None
        self.expires_at: float | None = None     # reactor seconds; None: the session never expires
        self.reauthenticating = False

    def intercepts(self, frame: bytearray) -> bool:
        """After authentication (KIP-368 only): True if ``frame`` starts a re-authentication (then
        :meth:`handle` answers it); raises CloseConnection for any other request once the session
        has expired."""
        if self.expires_at is None:
            return False
        if len(frame) >= 2 and int.from_bytes(frame[:2], "big") == SASL_HANDSHAKE:
            self.state = "handshake"
            self.reauthenticating = True
            return True
        if self.settings.clock.seconds() >= self.expires_at:
            raise CloseConnection(f"authentication session of {self.principal} expired "
                                  f"(connections.max.reauth.ms={self.settings.reauth_ms})")
        return False

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    # -- entry point -------------------------------------------------------------------------
    def handle(self, frame: bytearray, conn: Any) -> Any:
        """Answer one frame received before authentication completed; the same result kinds as
        a dispatcher (buffers or a Deferred of them); raises CloseConnection."""
        if self.state == "raw":
            return self._raw_token(bytes(frame), conn)
        if self.state not in ("handshake", "authenticate"):
            raise CloseConnection(f"unexpected data in SASL state {self.state}")
        try:
            header = codec.read_request_header(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"invalid request during SASL authentication: {exc}") from None
        if self.state == "handshake" and header.api_key == API_VERSIONS:
            return conn.dispatcher.dispatch(frame, conn)
        if self.state == "handshake" and header.api_key == SASL_HANDSHAKE:
            return self._handshake(header, self._body(header, frame, 0, 1), conn)
        if self.state == "authenticate" and header.api_key == SASL_AUTHENTICATE:
            return self._authenticate(header, self._body(header, frame, 0, 2), conn)
        raise CloseConnection(f"unexpected Kafka request of type {codec.API_KEYS.get(header.api_key, header.api_key)} "
                              f"during SASL authentication (state {self.state})")

    @staticmethod
    def _body(header: codec.RequestHeader, frame: bytearray, low: int, high: int) -> dict[str, Any]:
        if not low <= header.api_version <= high:
            raise CloseConnection(f"{codec.API_KEYS[header.api_key]} v{header.api_version} is not supported")
        try:
            return codec.decode_request_body(header, frame)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed {codec.API_KEYS[header.api_key]} request: {exc}") from None

    # -- SaslHandshake ---------------------------------------------------------------------------
    def _handshake(self, header: codec.RequestHeader, body: dict[str, Any], conn: Any) -> Any:
        mechanism = body.get("mechanism") or ""
        enabled = list(self.settings.mechanisms)
        if self.reauthenticating and (header.api_version < 1 or mechanism != self.server.mechanism):
            log.info("closing connection from %s: re-authentication must use SaslHandshake v1 and the same "
                     "mechanism (%s)", conn.peer, self.server.mechanism)
            self.state = "failed"
            conn.close_after_response = True
            return self._response(header, {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": enabled})
        if mechanism not in enabled:
            log.info("closing connection from %s: SASL mechanism %r is not enabled", conn.peer, mechanism)
            self.state = "failed"
            conn.close_after_response = True
            return self._response(header, {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                                            "mechanisms": enabled})
        self.server = PlainServer(self.settings.plain_users) if mechanism == "PLAIN" else scram.ScramServer(mechanism)
        self.state = "authenticate" if header.api_version >= 1 else "raw"
        return self._response(header, {"error_code": 0, "mechanisms": enabled})

    # -- tokens ------------------------------------------------------------------------------------
    def _evaluate(self, token: bytes) -> defer.Deferred:
        """The mechanism's answer to ``token`` (a Deferred: SCRAM looks its credential up)."""
        server = self.server
        if isinstance(server, PlainServer):
            return defer.maybeDeferred(server.evaluate, token)
        if server.state == "client-first":
            d = defer.maybeDeferred(server.client_first, token)
            d.addCallback(lambda username: self.settings.scram_credential(server.mechanism, username))
            return d.addCallback(server.server_first)
        return defer.maybeDeferred(server.client_final, token)

    def _authenticate(self, header: codec.RequestHeader, body: dict[str, Any], conn: Any) -> Any:
        token = bytes(body.get("auth_bytes") or b"")

        def done(answer: bytes) -> Any:
            lifetime = self.settings.reauth_ms if self.complete else 0
            return self._response(header, {"error_code": 0, "error_message": None, "auth_bytes": answer,
                                           "session_lifetime_ms": lifetime})

        def failed(f: Any) -> Any:
            message = self._failure_message(f, conn)
            conn.close_after_response = True
            response = self._response(header, {"error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                                               "error_message": message, "auth_bytes": b"",
                                               "session_lifetime_ms": 0})
            return self._delayed(lambda: response)

        d = self._evaluate(token)
        d.addCallback(self._after_step, conn)
        return d.addCallbacks(done, failed)

    def _raw_token(self, token: bytes, conn: Any) -> Any:
        def done(answer: bytes) -> Any:
            return [_SIZE.pack(len(answer)) + answer]

        def failed(f: Any) -> Any:
            message = self._failure_message(f, conn)

            def close() -> Any:
                raise CloseConnection(f"SASL authentication failed: {message}")
            return self._delayed(close)

        d = self._evaluate(token)
        d.addCallback(self._after_step, conn)
        return d.addCallbacks(done, failed)

    def _after_step(self, answer: bytes, conn: Any) -> bytes:
        self._maybe_complete(conn)
        return answer

    def _maybe_complete(self, conn: Any) -> None:
        if self.server.complete:
            authenticated = principal.user(self.server.authorization_id)
            if self.reauthenticating and authenticated != self.principal:
                raise AuthenticationError(f"Cannot change principals during re-authentication from "
                                          f"{self.principal} to {authenticated}")
            if self.reauthenticating:
                log.info("%s re-authenticated as %s (%s)", conn.peer, authenticated, self.server.mechanism)
            self.state = "complete"
            self.reauthenticating = False
            self.principal = authenticated
            conn.principal = self.principal
            if self.settings.reauth_ms > 0:
                self.expires_at = self.settings.clock.seconds() + self.settings.reauth_ms / 1000.0
            log.debug("%s authenticated as %s (%s)", conn.peer, self.principal, self.server.mechanism)

    def _failure_message(self, f: Any, conn: Any) -> str:
        self.state = "failed"
        if f.check(AuthenticationError):
            message = str(f.value)
        elif f.check(IllegalSaslState):
            message = f"Unexpected SASL message: {f.value}"
        elif f.check(scram.CredentialFormatError):
            log.error("unreadable SCRAM credential in ZooKeeper: %s", f.value)
            message = "Authentication failed: invalid stored credential"
        else:
            log.error("SASL authentication of %s failed unexpectedly: %s", conn.peer, f.getTraceback())
            message = "Authentication failed due to an internal error"
        log.info("failed authentication from %s (%s): %s", conn.peer,
                 getattr(self.server, "mechanism", "?"), message)
        return message

    def _delayed(self, fn: Callable[[], Any]) -> defer.Deferred:
        return task.deferLater(self.settings.clock, self.settings.failure_delay_s, fn)

    @staticmethod
    def _response(header: codec.RequestHeader, body: dict[str, Any]) -> Any:
        return codec.encode_response(header.api_key, header.api_version, header.correlation_id, body)
