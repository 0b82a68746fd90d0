"""The per-connection pipeline: one request at a time, answers in order, Kafka's close rules."""
from __future__ import annotations

import struct
from types import SimpleNamespace

from twisted.internet import defer, task
from twisted.internet.testing import StringTransport

from kafkalite.broker import registry
from kafkalite.broker.dispatcher import Dispatcher
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.services import Clock
from kafkalite.net.server import MAX_OVERLAPPED, NO_RESPONSE, KafkaConnection, Overlapped
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey

#: what a handler's context needs for client quotas: none are configured, so none apply
NO_QUOTAS = dict(quotas=BrokerQuotas(), quota_user="ANONYMOUS", client_id=None, throttle=lambda ms: None,
                 authorize=lambda *action: True)  # no authorizer: everything allowed

registry.load_handlers()

#: ApiVersions needs no service; the dispatcher itself times and counts every request.
SERVICES = SimpleNamespace(clock=Clock(task.Clock()), metrics=BrokerMetrics(), quotas=NO_QUOTAS["quotas"], authorizer=None)


def connect(dispatcher) -> tuple[KafkaConnection, StringTransport]:
    conn = KafkaConnection(dispatcher, max_frame_bytes=1 << 20, max_queued=4)
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport


def request(api_key: int, version: int, correlation_id: int, body: dict | None = None) -> bytes:
    return b"".join(bytes(c) for c in codec.encode_request(api_key, version, correlation_id, "test", body or {}))


def raw_frame(api_key: int, version: int, correlation_id: int, rest: bytes = b"\xff\xff") -> bytes:
    """A frame with the given header fields and a null client id, whatever the version."""
    body = struct.pack(">hhi", api_key, version, correlation_id) + rest
    return struct.pack(">i", len(body)) + body


def responses(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(raw):
        (size,) = struct.unpack_from(">i", raw, pos)
        out.append(raw[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out


class SlowFirst:
    """Answers request 1 only when released; echoes the correlation id of the others at once."""

    def __init__(self) -> None:
        self.release: defer.Deferred = defer.Deferred()
        self.seen: list[int] = []

    def dispatch(self, frame, conn):
        corr = codec.read_request_header(frame).correlation_id
        self.seen.append(corr)
        payload = [struct.pack(">ii", 4, corr)]
        if corr == 1:
            return self.release.addCallback(lambda _: payload)
        if corr == 3:
            return NO_RESPONSE
        return payload


def test_responses_leave_in_request_order() -> None:
    """Request 2 is not even started until request 1 (a long poll) answered; request 3 sends
    nothing (acks=0), request 4 follows; the wire carries 1, 2, 4 in that order."""
    dispatcher = SlowFirst()
    conn, transport = connect(dispatcher)
    conn.dataReceived(b"".join(request(ApiKey.API_VERSIONS, 0, c) for c in (1, 2, 3, 4)))
    assert dispatcher.seen == [1] and transport.value() == b""
    dispatcher.release.callback(None)
    assert dispatcher.seen == [1, 2, 3, 4]
    assert [struct.unpack(">i", r)[0] for r in responses(transport.value())] == [1, 2, 4]


def test_api_versions_too_high_gets_v0_error_answer() -> None:
    """ApiVersions v99: header v0, error 35, one entry for key 18 with our range."""
    conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
    conn.dataReceived(raw_frame(ApiKey.API_VERSIONS, 99, 5, b"\xff\xff\x00"))
    [resp] = responses(transport.value())
    corr, error, count, key, lo, hi = struct.unpack(">ihihhh", resp)
    assert (corr, error, count, key, lo, hi) == (5, 35, 1, 18, 0, 3)
    assert not transport.disconnecting


def test_api_versions_lists_the_registry() -> None:
    """The served table is the handler registry's, version for version (Produce, Fetch and
    ListOffsets from v0: old clients' message formats are converted both ways)."""
    conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
    conn.dataReceived(request(ApiKey.API_VERSIONS, 3, 9, {"client_software_name": "t", "client_software_version": "1"}))
    corr, body = codec.decode_response(ApiKey.API_VERSIONS, 3, responses(transport.value())[0])
    table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert corr == 9 and body["error_code"] == 0
    assert table[0] == (0, 9) and table[1] == (0, 12) and table[3] == (0, 11)
    assert table == {k: (lo, hi) for k, lo, hi in registry.advertised()}
    assert conn.client_software == ("t", "1")


def test_api_versions_v3_bad_software_name_is_invalid_request() -> None:
    """KIP-511: a client software name outside [a-zA-Z0-9.-] gets INVALID_REQUEST (42) and is
    not recorded on the connection."""
    conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
    conn.dataReceived(request(ApiKey.API_VERSIONS, 3, 4, {"client_software_name": "bad name!",
                                                            "client_software_version": "1"}))
    _, body = codec.decode_response(ApiKey.API_VERSIONS, 3, responses(transport.value())[0])
    assert body["error_code"] == 42 and conn.client_software is None


def test_unknown_key_and_refused_versions_close_the_connection() -> None:
    for frame in (raw_frame(999, 0, 1),
                  request(ApiKey.PRODUCE, 2, 1, {"acks": 1, "timeout_ms": 1, "topic_data": []})):
        conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
        conn.dataReceived(frame)
        assert transport.value() == b"" and conn.closed


def test_flexible_request_with_a_lying_tagged_field_closes_only_its_connection() -> None:
    """A Metadata v11 request whose tag section announces a field longer than the frame closes
    that connection (a malformed request, as Kafka does) and raises nothing; a well-formed
    flexible request on another connection is answered."""
    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    good = request(ApiKey.METADATA, 11, 1, body)
    assert good.endswith(b"\x00")
    bad_body = good[4:-1] + b"\x01\x07\x40xx"           # tag 7, size 64, 2 bytes left
    conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
    conn.dataReceived(struct.pack(">i", len(bad_body)) + bad_body)
    assert conn.closed and transport.value() == b""
    conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
    conn.dataReceived(request(ApiKey.API_VERSIONS, 3, 2, {"client_software_name": "t", "client_software_version": "1"}))
    assert not conn.closed and responses(transport.value())


def test_oversize_or_negative_frame_closes() -> None:
    for size in (-1, (1 << 20) + 1):
        conn, transport = connect(Dispatcher(services=SERVICES, listener="PLAINTEXT"))
        conn.dataReceived(struct.pack(">i", size))
        assert conn.closed and transport.value() == b""


class AlreadyFired:
    """Answers every request with a Deferred that has already fired, as an acks=all write does
    when the high watermark covers it at once (replication factor 1)."""

    def dispatch(self, frame, conn):
        corr = codec.read_request_header(frame).correlation_id
        return defer.succeed([struct.pack(">ii", 4, corr)])


def test_many_pipelined_already_fired_answers_do_not_recurse() -> None:
    """5000 pipelined requests whose Deferreds fired synchronously: all answered, in order, and
    the connection stays open (recursing once per request overflowed the stack after a few
    hundred and left the connection busy, so later requests timed out)."""
    conn = KafkaConnection(AlreadyFired(), max_frame_bytes=1 << 20, max_queued=10000)
    transport = StringTransport()
    conn.makeConnection(transport)
    count = 5000
    conn.dataReceived(b"".join(request(ApiKey.API_VERSIONS, 0, c) for c in range(count)))
    answered = [struct.unpack(">i", r)[0] for r in responses(transport.value())]
    assert answered == list(range(count))
    assert not conn.busy and not transport.disconnecting


class MutesAfterFirst:
    """Answers every request at once; the first asks for a 500 ms throttle (as a handler over
    its quota does through the dispatcher)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def dispatch(self, frame, conn):
        corr = codec.read_request_header(frame).correlation_id
        self.seen.append(corr)
        if corr == 1:
            conn.mute(500)
        return [struct.pack(">ii", 4, corr)]


def test_a_muted_connection_answers_then_reads_nothing_until_the_throttle_passed() -> None:
    """KIP-219: the throttled request's answer leaves at once; the requests already received
    wait, and the socket is not read (transport paused) until 500 ms later, then they are served."""
    clock = task.Clock()
    dispatcher = MutesAfterFirst()
    conn = KafkaConnection(dispatcher, max_frame_bytes=1 << 20, max_queued=4, clock=clock)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(b"".join(request(18, 0, c) for c in (1, 2)))
    assert dispatcher.seen == [1]
    assert [struct.unpack(">i", r)[0] for r in responses(transport.value())] == [1]
    assert transport.producerState == "paused"
    clock.advance(0.499)
    assert dispatcher.seen == [1] and transport.producerState == "paused"
    clock.advance(0.002)
    assert dispatcher.seen == [1, 2] and transport.producerState == "producing"
    assert [struct.unpack(">i", r)[0] for r in responses(transport.value())] == [1, 2]


class TickingClock(task.Clock):
    """Each reading is 10 ms after the previous one: a handler seems to take time."""

    def seconds(self) -> float:
        self.rightNow += 0.01
        return self.rightNow


def test_dispatcher_puts_the_throttle_in_the_response_and_mutes() -> None:
    """A client over its request_percentage gets throttle_time_ms > 0 in its answer (ApiVersions
    v1) and its connection is muted; a client id without a quota on the same broker is not."""
    from kafkalite.quota import QuotaEntity
    quotas = BrokerQuotas()
    quotas.entities.set(QuotaEntity(None, "test"), {"request_percentage": 0.01})
    clock = TickingClock()
    services = SimpleNamespace(clock=Clock(clock), metrics=BrokerMetrics(), quotas=quotas, authorizer=None)
    conn = KafkaConnection(Dispatcher(services, "PLAINTEXT"), max_frame_bytes=1 << 20, max_queued=4, clock=clock)
    transport = StringTransport()
    conn.makeConnection(transport)
    conn.dataReceived(request(18, 1, 7))
    [raw] = responses(transport.value())
    corr, body = codec.decode_response(18, 1, raw)
    assert corr == 7 and body["throttle_time_ms"] > 0
    assert conn.muted and transport.producerState == "paused"

    other = KafkaConnection(Dispatcher(services, "PLAINTEXT"), max_frame_bytes=1 << 20, max_queued=4, clock=clock)
    other_transport = StringTransport()
    other.makeConnection(other_transport)
    other.dataReceived(b"".join(bytes(c) for c in codec.encode_request(18, 1, 8, "someone-else", {})))
    [raw] = responses(other_transport.value())
    assert codec.decode_response(18, 1, raw)[1]["throttle_time_ms"] == 0 and not other.muted


class WaitsForReplication:
    """Produce requests answer ``Overlapped`` (appended, waiting for acks=all), released by hand in
    any order; every other request answers at once."""

    def __init__(self, overlapped: bool = True) -> None:
        self.overlapped = overlapped
        self.seen: list[int] = []
        self.waiting: dict[int, defer.Deferred] = {}

    def dispatch(self, frame, conn):
        header = codec.read_request_header(frame)
        corr = header.correlation_id
        self.seen.append(corr)
        payload = [struct.pack(">ii", 4, corr)]
        if header.api_key != ApiKey.PRODUCE:
            return payload
        d = self.waiting[corr] = defer.Deferred()
        d.addCallback(lambda _: payload)
        return Overlapped(d) if self.overlapped else d

    def release(self, corr: int) -> None:
        self.waiting.pop(corr).callback(None)


def produce_frame(corr: int) -> bytes:
    return raw_frame(ApiKey.PRODUCE, 8, corr)


def answered(transport: StringTransport) -> list[int]:
    return [struct.unpack(">i", r)[0] for r in responses(transport.value())]


def test_produces_waiting_for_replication_overlap_and_answer_in_order() -> None:
    """An acks=all Produce that only waits lets the next Produce start (appended, so one follower
    fetch can carry both); the answers still leave in request order, whatever order replication
    completes them in."""
    dispatcher = WaitsForReplication()
    conn, transport = connect(dispatcher)
    conn.dataReceived(b"".join(produce_frame(c) for c in (1, 2, 3)))
    assert dispatcher.seen == [1, 2, 3] and transport.value() == b""
    dispatcher.release(3)
    dispatcher.release(2)
    assert transport.value() == b"", "an answer overtook an earlier request's"
    dispatcher.release(1)
    assert answered(transport) == [1, 2, 3] and not conn.busy


def test_other_requests_wait_for_every_earlier_answer() -> None:
    """A request of another API (ApiVersions here) behind waiting Produces starts only once they
    are all answered, and a Produce behind it waits for it: Kafka's one-at-a-time rule holds for
    everything but Produce after Produce."""
    dispatcher = WaitsForReplication()
    conn, transport = connect(dispatcher)
    conn.dataReceived(produce_frame(1) + request(ApiKey.API_VERSIONS, 0, 2) + produce_frame(3))
    assert dispatcher.seen == [1]
    dispatcher.release(1)
    assert dispatcher.seen == [1, 2, 3] and answered(transport) == [1, 2]
    dispatcher.release(3)
    assert answered(transport) == [1, 2, 3]


def test_a_plain_deferred_still_holds_the_connection() -> None:
    """A handler that waits without saying Overlapped (a long-poll Fetch, a throttled Produce)
    keeps the next request, Produce or not, from starting."""
    dispatcher = WaitsForReplication(overlapped=False)
    conn, transport = connect(dispatcher)
    conn.dataReceived(produce_frame(1) + produce_frame(2))
    assert dispatcher.seen == [1]
    dispatcher.release(1)
    assert dispatcher.seen == [1, 2] and answered(transport) == [1]


def test_overlapping_stops_at_the_in_flight_limit() -> None:
    """At most MAX_OVERLAPPED waiting Produces and the one started after them; the rest stay
    queued until the oldest is answered."""
    dispatcher = WaitsForReplication()
    conn = KafkaConnection(dispatcher, max_frame_bytes=1 << 20, max_queued=100)
    transport = StringTransport()
    conn.makeConnection(transport)
    total = MAX_OVERLAPPED + 4
    conn.dataReceived(b"".join(produce_frame(c) for c in range(total)))
    assert dispatcher.seen == list(range(MAX_OVERLAPPED + 1))
    dispatcher.release(0)
    assert dispatcher.seen == list(range(MAX_OVERLAPPED + 2)) and answered(transport) == [0]
    for c in range(1, total):
        dispatcher.release(c)
    assert answered(transport) == list(range(total)) and not conn.busy
