"""One blocking TCP connection to one broker: framing, correlation ids, ApiVersions.

The broker answers requests on a connection in order (kafka-protocol.md §1), so a request is
written, and its response is the next frame with the same correlation id. ``send``/``receive``
are separate so a caller can write to several brokers before reading any answer (the client's
fetch and produce fan-out); each call has a deadline.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Mapping
from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.errors import ProtocolError

from .errors import ClientError, ConnectionFailed
from .security import ClientSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

#: Versions this client knows the semantics of, per API key (the last non-flexible versions,
#: as Kafka 2.x clients used them). The version used against a broker is the highest in both
#: this range and the broker's advertised one.
CLIENT_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 8),                   # magic v2 batches
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 5),
    ApiKey.METADATA: (1, 8),
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 2),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.LIST_GROUPS: (0, 2),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),               # v2+ flexible; bodies always carry v3's producer id/epoch
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),              # v3: the consumer's generation, member and instance
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 3),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1),
    ApiKey.ELECT_LEADERS: (1, 2),                 # v1: ElectionType
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 1),             # v2 is flexible
    ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 1),        # v2 is flexible
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),  # v1 is flexible
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 0),        # v1 is flexible
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 0),           # v1 is flexible
    ApiKey.DESCRIBE_ACLS: (1, 2),                 # v1: pattern types (KIP-290)
    ApiKey.CREATE_ACLS: (1, 2),
    ApiKey.DELETE_ACLS: (1, 2),
}


class BrokerConnection:
    """A connected socket to ``host:port`` with the negotiated version per API.

    Threads share it by holding :attr:`lock` around each send and each receive (:meth:`request`
    holds it around the pair). A pipelined caller may release the lock between its send and its
    receive; another thread's receive that reads the pipelined answer first keeps it in
    ``_answered`` for its owner, so no response is lost to the wrong reader.
    """

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str,
                 connect_timeout: float, request_timeout: float, security: "ClientSecurity | None" = None) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.lock = threading.RLock()
        self._correlation = 0
        self._pending: list[tuple[int, int, int]] = []   # (correlation id, api key, version)
        self._answered: dict[int, dict] = {}              # read by another thread's receive()
        self.api_versions: dict[int, tuple[int, int]] = {}
        try:
            self.sock: socket.socket | None = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise ConnectionFailed(f"cannot connect to broker {host}:{port}: {exc.strerror or exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if security is not None and security.tls:
                self.sock.settimeout(connect_timeout)
                self.sock = security.wrap(self.sock, host)
            self._negotiate(time.monotonic() + connect_timeout + request_timeout)
            if security is not None and security.sasl:
                security.authenticate(lambda api, v, body: self.request(api, body, version=v),
                                      f"broker {host}:{port}")
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"BrokerConnection(node {self.node_id} at {self.host}:{self.port})"

    @property
    def closed(self) -> bool:
        return self.sock is None

    def close(self) -> None:
        sock, self.sock = self.sock, None
        self._pending.clear()
        self._answered.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    # -- versions -------------------------------------------------------------------------------
    def _negotiate(self, deadline: float) -> None:
        """ApiVersions at our highest version; on UNSUPPORTED_VERSION retry at the broker's max.

        A broker that does not know our version answers in the v0 layout (KIP-511), so that
        answer is decoded at v0 and its ApiVersions entry tells which version to retry with.
        """
        version = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        for _attempt in range(2):
            body = {"client_software_name": "kafkalite", "client_software_version": "1.0"}
            corr = self.send(ApiKey.API_VERSIONS, version, body)
            frame = self._read_frame(deadline)
            try:
                got, resp = codec.decode_response(ApiKey.API_VERSIONS, version, frame)
            except ProtocolError:
                got, resp = codec.decode_response(ApiKey.API_VERSIONS, 0, frame)
            self._pending.pop(0)
            if got != corr:
                raise ConnectionFailed(f"broker {self.host}:{self.port} answered correlation id {got}, expected {corr}")
            if resp["error_code"] == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                _, resp = codec.decode_response(ApiKey.API_VERSIONS, 0, frame)
                theirs = {e["api_key"]: e["max_version"] for e in resp["api_keys"]}
                version = max(0, min(version - 1, theirs.get(ApiKey.API_VERSIONS, 0)))
                continue
            if resp["error_code"]:
                raise ClientError.from_code(resp["error_code"], f"ApiVersions to {self.host}:{self.port}")
            self.api_versions = {e["api_key"]: (e["min_version"], e["max_version"]) for e in resp["api_keys"]}
            return
        raise ClientError(f"broker {self.host}:{self.port} refused every ApiVersions version")

    def version_for(self, api_key: ApiKey) -> int:
        """Highest version both sides support; ClientError(UNSUPPORTED_VERSION) if none."""
        ours = CLIENT_VERSIONS.get(api_key)
        theirs = self.api_versions.get(api_key)
        name = codec.API_KEYS.get(api_key, str(api_key))
        if ours is None:
            raise ClientError(f"the client does not implement {name}")
        if theirs is None:
            raise ClientError(f"broker {self.node_id} at {self.host}:{self.port} does not support {name}",
                              ErrorCode.UNSUPPORTED_VERSION)
        high = min(ours[1], theirs[1])
        if high < max(ours[0], theirs[0]):
            raise ClientError(f"no common version of {name} with broker {self.node_id} "
                              f"(client {ours[0]}-{ours[1]}, broker {theirs[0]}-{theirs[1]})",
                              ErrorCode.UNSUPPORTED_VERSION)
        return high

    # -- requests -------------------------------------------------------------------------------
    def send(self, api_key: ApiKey, version: int, body: Mapping[str, Any], *, expect_response: bool = True) -> int:
        """Write one request; returns its correlation id (to pass to :meth:`receive`)."""
        if self.sock is None:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} is closed")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        corr = self._correlation
        parts = codec.encode_request(api_key, version, corr, self.client_id, body)
        try:
            self.sock.settimeout(self.request_timeout)
            self.sock.sendall(b"".join(parts) if len(parts) > 1 else parts[0])
        except OSError as exc:
            self.close()
            raise ConnectionFailed(f"sending to broker {self.node_id} at {self.host}:{self.port} failed: {exc}") from None
        if expect_response:
            self._pending.append((corr, api_key, version))
        return corr

    def receive(self, correlation_id: int, timeout: float | None = None) -> dict:
        """The decoded response to the request with ``correlation_id`` (earlier ones are read first)."""
        deadline = time.monotonic() + (self.request_timeout if timeout is None else timeout)
        while True:
            if correlation_id in self._answered:
                return self._answered.pop(correlation_id)
            if not self._pending:
                raise ClientError(f"no request {correlation_id} in flight to {self.host}:{self.port}")
            corr, api_key, version = self._pending[0]
            frame = self._read_frame(deadline)
            self._pending.pop(0)
            try:
                got, body = codec.decode_response(api_key, version, frame)
            except ProtocolError as exc:
                self.close()
                raise ConnectionFailed(f"undecodable {codec.API_KEYS.get(api_key)} response from "
                                       f"{self.host}:{self.port}: {exc}") from None
            if got != corr:
                self.close()
                raise ConnectionFailed(f"broker {self.host}:{self.port} answered correlation id {got}, expected {corr}")
            if corr == correlation_id:
                return body
            self._answered[corr] = body

    def request(self, api_key: ApiKey, body: Mapping[str, Any], *, version: int | None = None,
                timeout: float | None = None) -> dict:
        """Send and wait for the answer, at the negotiated version unless one is given."""
        with self.lock:
            v = self.version_for(api_key) if version is None else version
            corr = self.send(api_key, v, body)
            return self.receive(corr, timeout)

    def _read_frame(self, deadline: float) -> bytearray:
        head = self._read_exact(4, deadline)
        (size,) = _SIZE.unpack(head)
        if size < 4:
            self.close()
            raise ConnectionFailed(f"broker {self.host}:{self.port} sent a frame of {size} bytes")
        return self._read_exact(size, deadline)

    def _read_exact(self, n: int, deadline: float) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        sock = self.sock
        if sock is None:
            raise ConnectionFailed(f"connection to {self.host}:{self.port} is closed")
        try:
            while got < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout()
                sock.settimeout(remaining)
                k = sock.recv_into(view[got:], n - got)
                if k == 0:
                    self.close()
                    raise ConnectionFailed(f"broker {self.node_id} at {self.host}:{self.port} closed the connection")
                got += k
        except socket.timeout:
            self.close()
            raise ClientError(f"request to broker {self.node_id} at {self.host}:{self.port} timed out",
                              ErrorCode.REQUEST_TIMED_OUT) from None
        except OSError as exc:
            self.close()
            raise ConnectionFailed(f"reading from broker {self.host}:{self.port} failed: {exc}") from None
        return buf


def parse_bootstrap(servers: str | list[str] | None) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` or a list of ``host:port`` to (host, port) pairs; none is ClientError."""
    items = servers.split(",") if isinstance(servers, str) else list(servers or ())
    out: list[tuple[str, int]] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ClientError(f"invalid bootstrap server {item!r} (expected host:port)")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ClientError("no bootstrap servers given")
    return out


