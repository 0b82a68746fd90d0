"""A raw-socket Kafka connection for tests, built on kafkalite.protocol.codec.

``Wire.request`` sends one request and decodes its answer; ``send_raw``/``read_frame`` let a
test put arbitrary bytes on the wire and see whether the broker answers or closes. Blocking
sockets with a timeout: a broker that neither answers nor closes makes the test fail, not hang.
"""
from __future__ import annotations

import socket
import struct
from typing import Any

from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey

_SIZE = struct.Struct(">i")


class ConnectionClosed(Exception):
    """The broker closed the connection (EOF or reset) instead of answering."""


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


class Wire:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str | None = "wire-test") -> None:
        self.sock = socket.create_connection(_host_port(bootstrap), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- raw bytes --------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed(str(exc)) from None

    def _read_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(min(n - got, 1 << 20))
            except ConnectionResetError as exc:
                raise ConnectionClosed(str(exc)) from None
            if not chunk:
                raise ConnectionClosed(f"EOF after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        """The next response frame without its size prefix; ConnectionClosed on EOF/reset;
        socket.timeout if the broker neither answers nor closes."""
        (size,) = _SIZE.unpack(self._read_exact(4))
        return self._read_exact(size)

    def expect_closed(self) -> None:
        """Assert the broker closes the connection without sending anything more."""
        try:
            data = self.sock.recv(4096)
        except ConnectionResetError:
            return
        assert data == b"", f"expected the broker to close the connection, got {len(data)} bytes: {data[:40]!r}"

    # -- requests ----------------------------------------------------------------------------------
    def encode(self, api_key: ApiKey, version: int, body: dict) -> bytes:
        self.correlation_id += 1
        parts = codec.encode_request(api_key, version, self.correlation_id, self.client_id, body)
        return b"".join(bytes(p) for p in parts)

    def request(self, api_key: ApiKey, version: int, body: dict) -> dict:
        """Send one request and return the decoded response body (correlation id checked)."""
        self.send_raw(self.encode(api_key, version, body))
        frame = self.read_frame()
        corr, resp = codec.decode_response(api_key, version, frame)
        assert corr == self.correlation_id, f"correlation id {corr} != {self.correlation_id}"
        return resp


def metadata_body(topics: list[str] | None, allow_auto_topic_creation: bool = False) -> dict:
    """A complete Metadata v8 request body (the suite encodes strictly: every v8 field is given)."""
    return {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def request(bootstrap: str, api_key: ApiKey, version: int, body: dict, timeout: float = 30.0) -> dict:
    """One request on a fresh connection."""
    with Wire(bootstrap, timeout) as w:
        return w.request(api_key, version, body)
