"""The outbound connection's request timeouts (``net/client.py``): one reactor timer per
connection, armed at the earliest pending deadline, instead of a ``callLater`` and a ``cancel``
per request; every request still times out at its own deadline, on the reactor's clock."""
from __future__ import annotations

from typing import Any

from twisted.internet import task
from twisted.internet.testing import StringTransport

from kafkalite.net.client import ConnectionLost, KafkaClientProtocol, RequestTimedOut
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey


class CountingClock(task.Clock):
    def __init__(self) -> None:
        super().__init__()
        self.scheduled = 0

    def callLater(self, delay: float, f: Any, *args: Any, **kw: Any) -> Any:
        self.scheduled += 1
        return super().callLater(delay, f, *args, **kw)


def connected() -> tuple[KafkaClientProtocol, StringTransport, CountingClock]:
    clock = CountingClock()
    conn = KafkaClientProtocol("follower", clock)
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport, clock


def answer(conn: KafkaClientProtocol, corr: int) -> None:
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    conn.dataReceived(b"".join(bytes(c) for c in codec.encode_response(ApiKey.API_VERSIONS, 1, corr, body)))


def ask(conn: KafkaClientProtocol, timeout_s: float, out: list[Any]) -> None:
    conn.request(ApiKey.API_VERSIONS, 1, {}, timeout_s).addBoth(out.append)


def test_a_request_per_round_trip_schedules_no_timer_per_request() -> None:
    conn, _, clock = connected()
    out: list[Any] = []
    for corr in range(1, 101):                 # a follower's loop: ask, answered, ask again
        ask(conn, 30.0, out)
        clock.advance(0.01)
        answer(conn, corr)
    assert len(out) == 100 and all(isinstance(r, dict) for r in out)
    assert clock.scheduled == 1                # one timer for the connection, armed once
    assert len(clock.getDelayedCalls()) == 1
    ask(conn, 30.0, out)
    clock.advance(29.0)                        # the first deadline passes: re-armed, nothing fails
    assert len(out) == 100 and not conn.closed and clock.scheduled == 2
    clock.advance(0.99)
    assert len(out) == 100 and not conn.closed
    clock.advance(0.02)                        # the 101st request's own deadline
    assert isinstance(out[-1].value, RequestTimedOut) and transport_aborted(conn)


def transport_aborted(conn: KafkaClientProtocol) -> bool:
    transport = conn.transport
    assert isinstance(transport, StringTransport)
    return bool(getattr(transport, "disconnecting", False) or getattr(transport, "disconnected", False))


def test_a_later_request_with_a_shorter_timeout_times_out_at_its_own_deadline() -> None:
    conn, _, clock = connected()
    slow: list[Any] = []
    quick: list[Any] = []
    ask(conn, 30.0, slow)
    ask(conn, 2.0, quick)
    clock.advance(1.9)
    assert slow == [] and quick == []
    clock.advance(0.2)
    assert isinstance(quick[0].value, RequestTimedOut)
    conn.connectionLost()                      # the abort's consequence: the rest fail, no timer left
    assert isinstance(slow[0].value, ConnectionLost)
    assert clock.getDelayedCalls() == []


def test_an_idle_connection_keeps_no_timer_armed() -> None:
    conn, _, clock = connected()
    out: list[Any] = []
    ask(conn, 5.0, out)
    answer(conn, 1)
    clock.advance(5.0)                         # fires once, finds nothing pending
    assert clock.getDelayedCalls() == [] and not conn.closed
    ask(conn, 5.0, out)
    clock.advance(5.01)
    assert isinstance(out[-1].value, RequestTimedOut)
