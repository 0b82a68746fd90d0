"""The broker process wires its connection properties to the listener: max.connections.per.ip
closes one connection too many at once, connections.max.idle.ms closes a silent connection, a
working connection is answered meanwhile. (The rules themselves are unit-tested in
tests/unit/net/test_connection_limits.py; this shows server.properties reaches them.)"""
from __future__ import annotations

import socket
import struct
import time

import pytest

IDLE_MS = 1500
PER_IP = 3


@pytest.fixture(scope="module")
def limited(zookeeper, tmp_path_factory):
    from tests.support.brokers import Cluster
    c = Cluster(zookeeper, tmp_path_factory.mktemp("limits"), 1,
                {"connections.max.idle.ms": str(IDLE_MS), "max.connections.per.ip": str(PER_IP),
                 "socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "65536"}).start()
    yield c.brokers[0]
    c.stop()


def api_versions(sock: socket.socket, correlation_id: int) -> int:
    """Send ApiVersions v0 and return the correlation id of the answer."""
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return struct.unpack(">i", recv_exactly(sock, size)[:4])[0]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return out


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the broker closes the connection (EOF or reset) within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_one_connection_too_many_from_an_address_is_closed(limited) -> None:
    socks = [socket.create_connection(("127.0.0.1", limited.port), timeout=10) for _ in range(PER_IP)]
    try:
        for i, s in enumerate(socks):
            assert api_versions(s, i + 1) == i + 1
        extra = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
        with extra:
            assert closed_within(extra, 1.0)                       # at once, well before the idle limit
        socks[0].close()
        deadline = time.monotonic() + 5
        while True:                                                # the broker sees the close, frees the slot
            again = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
            try:
                if api_versions(again, 99) == 99:
                    break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline, "the closed connection's slot was never freed"
            finally:
                again.close()
    finally:
        for s in socks:
            s.close()


def test_a_silent_connection_is_closed_after_connections_max_idle_ms(limited) -> None:
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        assert api_versions(sock, 7) == 7
        started = time.monotonic()
        assert closed_within(sock, 10.0)
        elapsed = time.monotonic() - started
    assert IDLE_MS / 1000.0 - 0.2 <= elapsed <= IDLE_MS / 1000.0 + 2.0, elapsed


def test_traffic_keeps_a_connection_open(limited) -> None:
    with socket.create_connection(("127.0.0.1", limited.port), timeout=10) as sock:
        for i in range(6):                                         # 6 x 0.5 s: twice the idle limit
            time.sleep(0.5)
            assert api_versions(sock, 100 + i) == 100 + i
