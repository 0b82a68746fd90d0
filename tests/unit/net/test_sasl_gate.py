"""The per-connection SASL gate (kafkalite.net.sasl) driven through KafkaConnection with a
memory transport and a task.Clock: KIP-152 framing and the v0 raw framing succeed; a request
other than ApiVersions before authentication closes the connection; failures are answered with
SASL_AUTHENTICATION_FAILED only after connection.failed.authentication.delay.ms and then closed;
and random frames and tokens (fuzzing) end in an answer or a closed connection, never in an
unexpected error."""
from __future__ import annotations

import logging
import struct
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from twisted.internet import defer, task
from twisted.internet.testing import StringTransport

from kafkalite.net.sasl import SaslAuthenticator, SaslSettings
from kafkalite.net.server import CloseConnection, KafkaConnection, KafkaServerFactory
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ProtocolError
from kafkalite.protocol.framing import FrameDecoder
from kafkalite.security import principal, scram
from kafkalite.security.plain import encode_token

CRED = scram.make_credential("SCRAM-SHA-512", "pw")
DELAY = 0.1
METADATA_BODY = {"topics": [], "allow_auto_topic_creation": False,
                 "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


class Dispatcher:
    """Answers anything with a fixed frame and counts what got through."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def dispatch(self, frame: bytearray, conn: Any) -> Any:
        try:
            header = codec.read_request_header(frame)
        except ProtocolError as exc:       # what the broker's dispatcher does too
            raise CloseConnection(str(exc)) from None
        self.seen.append(header.api_key)
        return [struct.pack(">ii", 4, header.correlation_id)]


class Transport(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def abortConnection(self) -> None:
        self.aborted = True
        self.loseConnection()


def make(mechanisms: tuple[str, ...] = ("SCRAM-SHA-512", "PLAIN"),
         reauth_ms: int = 0) -> tuple[KafkaConnection, Transport, Dispatcher, task.Clock]:
    clock = task.Clock()
    lookup = lambda mech, user: defer.succeed(  # noqa: E731
        CRED if mech == "SCRAM-SHA-512" and user in ("alice", "alice2") else None)
    sasl = SaslSettings(mechanisms, {"carol": "cpw", "dan": "dpw"}, lookup, DELAY, clock, reauth_ms)
    dispatcher = Dispatcher()
    factory = KafkaServerFactory(dispatcher, 1 << 20, 16, listener="SASL_PLAINTEXT", sasl=sasl, clock=clock)
    conn = factory.buildProtocol(None)
    transport = Transport()
    conn.makeConnection(transport)
    return conn, transport, dispatcher, clock


def send(conn: KafkaConnection, api_key: int, version: int, body: dict, corr: int = 7) -> None:
    conn.dataReceived(b"".join(bytes(c) for c in codec.encode_request(api_key, version, corr, "t", body)))


def responses(transport: Transport, api_key: int, version: int) -> list[dict]:
    frames = FrameDecoder(1 << 20).feed(transport.value())
    transport.clear()
    return [codec.decode_response(api_key, version, f)[1] for f in frames]


def test_scram_over_kip_152_framing_then_requests_flow() -> None:
    """ApiVersions, SaslHandshake v1, two SaslAuthenticate rounds; then requests reach the dispatcher
    and the connection's principal is User:alice."""
    conn, transport, dispatcher, _ = make()
    send(conn, 18, 0, {})
    assert dispatcher.seen == [18]
    transport.clear()
    send(conn, 17, 1, {"mechanism": "SCRAM-SHA-512"})
    assert responses(transport, 17, 1)[0] == {"error_code": 0, "mechanisms": ["SCRAM-SHA-512", "PLAIN"]}
    client = scram.ScramClient("SCRAM-SHA-512", "alice", "pw")
    send(conn, 36, 2, {"auth_bytes": client.first_message()})
    first = responses(transport, 36, 2)[0]
    assert first["error_code"] == 0
    send(conn, 36, 2, {"auth_bytes": client.final_message(bytes(first["auth_bytes"]))})
    final = responses(transport, 36, 2)[0]
    client.verify_server_final(bytes(final["auth_bytes"]))
    assert conn.principal == principal.user("alice")
    send(conn, ApiKey.METADATA, 9, METADATA_BODY)
    assert dispatcher.seen == [18, 3] and not transport.aborted


def test_plain_over_v0_raw_framing() -> None:
    """SaslHandshake v0, then the PLAIN token itself, size-prefixed; the answer is an empty raw token."""
    conn, transport, dispatcher, _ = make()
    send(conn, 17, 0, {"mechanism": "PLAIN"})
    assert responses(transport, 17, 0)[0]["error_code"] == 0
    token = encode_token("carol", "cpw")
    conn.dataReceived(struct.pack(">i", len(token)) + token)
    assert transport.value() == struct.pack(">i", 0)
    assert conn.principal == principal.user("carol")


def test_requests_before_authentication_close_the_connection() -> None:
    """A Metadata request before SaslHandshake closes the connection and never reaches the dispatcher."""
    conn, transport, dispatcher, _ = make()
    send(conn, ApiKey.METADATA, 9, METADATA_BODY)
    assert transport.aborted and dispatcher.seen == []


def test_unsupported_mechanism_is_answered_then_closed() -> None:
    conn, transport, _, _ = make()
    send(conn, 17, 1, {"mechanism": "GSSAPI"})
    answer = responses(transport, 17, 1)[0]
    assert answer == {"error_code": 33, "mechanisms": ["SCRAM-SHA-512", "PLAIN"]}
    assert transport.disconnecting


def test_wrong_password_is_answered_after_the_delay_then_closed() -> None:
    """SASL_AUTHENTICATION_FAILED with Kafka's message, only after the configured delay; then closed."""
    conn, transport, dispatcher, clock = make()
    send(conn, 17, 1, {"mechanism": "SCRAM-SHA-512"})
    transport.clear()
    client = scram.ScramClient("SCRAM-SHA-512", "alice", "not-pw")
    send(conn, 36, 1, {"auth_bytes": client.first_message()})
    first = responses(transport, 36, 1)[0]
    send(conn, 36, 1, {"auth_bytes": client.final_message(bytes(first["auth_bytes"]))})
    assert transport.value() == b"" and not transport.disconnecting
    clock.advance(DELAY)
    answer = responses(transport, 36, 1)[0]
    assert answer["error_code"] == 58 and "Invalid user credentials" in answer["error_message"]
    assert transport.disconnecting and conn.principal == principal.ANONYMOUS
    send(conn, ApiKey.METADATA, 9, METADATA_BODY)
    assert dispatcher.seen == []


def test_unknown_user_is_refused_at_the_first_message() -> None:
    conn, transport, _, clock = make()
    send(conn, 17, 1, {"mechanism": "SCRAM-SHA-512"})
    transport.clear()
    send(conn, 36, 1, {"auth_bytes": scram.ScramClient("SCRAM-SHA-512", "mallory", "x").first_message()})
    clock.advance(DELAY)
    assert responses(transport, 36, 1)[0]["error_code"] == 58 and transport.disconnecting


def test_sasl_requests_after_authentication_get_illegal_sasl_state() -> None:
    """The broker's registered handlers answer ILLEGAL_SASL_STATE once the exchange is over."""
    from kafkalite.broker.handlers.sasl import handle_sasl_authenticate, handle_sasl_handshake

    assert handle_sasl_handshake(None, {"mechanism": "PLAIN"})["error_code"] == 34  # type: ignore[arg-type]
    assert handle_sasl_authenticate(None, {"auth_bytes": b""})["error_code"] == 34  # type: ignore[arg-type]


def _run(frames: list[bytes], caplog: Any) -> None:
    caplog.clear()
    conn, transport, _, clock = make()
    for frame in frames:
        if conn.closed:
            break
        conn.dataReceived(struct.pack(">i", len(frame)) + frame)
        clock.advance(DELAY)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


header = st.tuples(st.sampled_from([17, 36, 18, 3, 0, 99]), st.integers(-1, 4), st.integers(0, 2**31 - 1))
tokens = st.one_of(st.binary(max_size=200), st.sampled_from([
    b"n,,n=alice,r=abc", b"n,,n=,r=", b"y,a=bob,n=alice,r=x", b"c=biws,r=abc,p=!!", b"\x00carol\x00cpw",
    b"n,,n=alice,r=abc,t=okenauth=true", b"p=x,,n=a,r=b"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.binary(max_size=64), st.tuples(header, tokens)), max_size=6))
def test_fuzzed_frames_never_crash(caplog: Any, items: list) -> None:
    """Random frames, and well-formed headers with random SASL tokens, in random orders."""
    frames = []
    for item in items:
        if isinstance(item, bytes):
            frames.append(item)
            continue
        (api, version, corr), token = item
        if api == 17 and 0 <= version <= 1:
            body: dict = {"mechanism": token.decode("latin-1")[:20] if token[:1] != b"S" else "SCRAM-SHA-512"}
        elif api == 36 and 0 <= version <= 2:
            body = {"auth_bytes": token}
        else:
            frames.append(struct.pack(">hhi", api, version, corr) + token)
            continue
        frames.append(b"".join(bytes(c) for c in codec.encode_request(api, version, corr, "f", body))[4:])
    _run(frames, caplog)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["SCRAM-SHA-512", "PLAIN"]), st.integers(0, 1), st.lists(tokens, min_size=1, max_size=4))
def test_fuzzed_tokens_after_a_good_handshake(caplog: Any, mechanism: str, version: int, toks: list[bytes]) -> None:
    """After a valid handshake (v0 raw or v1 framed), random tokens get an error or a close."""
    frames = [b"".join(bytes(c) for c in codec.encode_request(17, version, 1, "f", {"mechanism": mechanism}))[4:]]
    for i, t in enumerate(toks):
        frames.append(t if version == 0 else
                      b"".join(bytes(c) for c in codec.encode_request(36, 1, i + 2, "f", {"auth_bytes": t}))[4:])
    _run(frames, caplog)


def test_authenticator_is_per_connection() -> None:
    """Each connection of a SASL listener gets its own state machine."""
    conn_a, *_ = make()
    conn_b, *_ = make()
    assert isinstance(conn_a.authenticator, SaslAuthenticator) and conn_a.authenticator is not conn_b.authenticator


def scram_login(conn: KafkaConnection, transport: Transport, user: str = "alice") -> dict:
    send(conn, 17, 1, {"mechanism": "SCRAM-SHA-512"})
    assert responses(transport, 17, 1)[0]["error_code"] == 0
    client = scram.ScramClient("SCRAM-SHA-512", user, "pw")
    send(conn, 36, 1, {"auth_bytes": client.first_message()})
    first = responses(transport, 36, 1)[0]
    send(conn, 36, 1, {"auth_bytes": client.final_message(bytes(first["auth_bytes"]))})
    return responses(transport, 36, 1)[0]


def metadata(conn: KafkaConnection) -> None:
    send(conn, ApiKey.METADATA, 9, METADATA_BODY)


def test_kip_368_session_lifetime_and_reauthentication() -> None:
    """With connections.max.reauth.ms the client is told the lifetime; a re-authentication on the
    same connection renews it; a request after expiry closes the connection."""
    conn, transport, dispatcher, clock = make(reauth_ms=1000)
    final = scram_login(conn, transport)
    assert final["error_code"] == 0 and final["session_lifetime_ms"] == 1000
    clock.advance(0.9)
    metadata(conn)
    assert dispatcher.seen == [3]
    transport.clear()
    final = scram_login(conn, transport)                     # re-authentication, same principal
    assert final["error_code"] == 0 and final["session_lifetime_ms"] == 1000
    clock.advance(0.9)                                       # 1.8 s after the first login
    metadata(conn)
    assert dispatcher.seen == [3, 3] and not transport.disconnecting and not transport.aborted
    clock.advance(0.2)
    metadata(conn)
    assert transport.aborted and dispatcher.seen == [3, 3]


def test_kip_368_reauthentication_cannot_change_principal_or_mechanism() -> None:
    """Re-authenticating as another user, or with another mechanism, closes the connection."""
    conn, transport, dispatcher, clock = make(reauth_ms=1000)
    scram_login(conn, transport)
    send(conn, 17, 1, {"mechanism": "SCRAM-SHA-512"})
    responses(transport, 17, 1)
    client = scram.ScramClient("SCRAM-SHA-512", "alice2", "pw")
    send(conn, 36, 1, {"auth_bytes": client.first_message()})
    first = responses(transport, 36, 1)[0]
    send(conn, 36, 1, {"auth_bytes": client.final_message(bytes(first["auth_bytes"]))})
    clock.advance(DELAY)
    answer = responses(transport, 36, 1)[0]
    assert answer["error_code"] == 58 and "Cannot change principals" in answer["error_message"]
    assert transport.disconnecting and conn.principal == principal.user("alice")
    conn, transport, _, _ = make(reauth_ms=1000)
    scram_login(conn, transport)
    send(conn, 17, 1, {"mechanism": "PLAIN"})
    assert responses(transport, 17, 1)[0]["error_code"] == 34 and transport.disconnecting


def test_without_reauth_sessions_never_expire() -> None:
    """connections.max.reauth.ms=0 (the default): lifetime 0, requests flow hours later."""
    conn, transport, dispatcher, clock = make()
    assert scram_login(conn, transport)["session_lifetime_ms"] == 0
    clock.advance(36000)
    metadata(conn)
    assert dispatcher.seen == [3]
