"""Zero-copy Fetch: on a plaintext socket the record bytes of a Fetch response go from the segment
file to the socket with os.sendfile, never through Python (issue 33); a segment that shrank under
a queued response closes the connection; TLS connections keep the copying path.

The log, the codec and the connection are the real ones; the socket is one end of a real
socketpair (with a small send buffer, so the sender meets EAGAIN and resumes on writability);
only the reactor's writer registration is a stand-in the test drives by hand.
"""
from __future__ import annotations

import os
import socket
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet import task

from kafkalite.broker.handlers.fetch import handle_fetch
from kafkalite.broker.metrics import BrokerMetrics
from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.quotas import BrokerQuotas
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.services import Clock
from kafkalite.net.server import KafkaConnection
from kafkalite.protocol import codec
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.records.batch import validate_batches
from kafkalite.records.builder import build_batch
from kafkalite.records.file_region import FileRegion
from kafkalite.storage import LogConfig, PartitionLog
from kafkalite.storage.segment import LogSegment


class Reactor:
    """Records the writers the sender registers (the reactor's IReactorFDSet part)."""

    def __init__(self) -> None:
        self.writers: list[Any] = []

    def addWriter(self, writer: Any) -> None:
        self.writers.append(writer)

    def removeWriter(self, writer: Any) -> None:
        self.writers.remove(writer)


class SocketTransport:
    """A TCP transport over a real socket: what a broker connection uses of Twisted's."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reactor = Reactor()
        self.dataBuffer = b""           # Twisted's write buffer, empty: nothing queued before us
        self.offset = 0
        self._tempDataLen = 0
        self.written: list[bytes] = []
        self.aborted = False

    def getHandle(self) -> socket.socket:
        return self.sock

    def getPeer(self) -> Any:
        return None

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        pass

    def writeSequence(self, chunks: list[Any]) -> None:
        self.written.extend(bytes(c) for c in chunks)       # kept, as Twisted's buffer would

    def abortConnection(self) -> None:
        self.aborted = True


class Answer:
    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks

    def dispatch(self, frame: bytearray, conn: KafkaConnection) -> Any:
        return self.chunks


@pytest.fixture()
def plog(tmp_path: Any) -> Any:
    """A log of 40 batches of ~20 KB (bigger than a header scan's chunk) and a few small ones."""
    log = PartitionLog.open(str(tmp_path / "t-0"), LogConfig(), 0)
    for i in range(44):
        n = 200 if i < 40 else 2
        buf = build_batch([(1_700_000_000_000, None, bytes([i % 251]) * 100, ()) for _ in range(n)])
        log.append(buf, validate_batches(buf, max_batch_bytes=2**31), leader_epoch=0, now_ms=1_700_000_000_000)
    yield log
    log.close()


def fetch_body(records: Any) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records}]}]}


def connect(chunks: list[Any], *, tls: bool = False) -> tuple[KafkaConnection, SocketTransport, socket.socket]:
    server, client = socket.socketpair()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    server.setblocking(False)
    transport = SocketTransport(server)
    conn = KafkaConnection(Answer(chunks), max_frame_bytes=1 << 20, max_queued=4)
    conn.tls = tls
    conn.makeConnection(transport)
    return conn, transport, client


def ask(conn: KafkaConnection) -> None:
    body = struct.pack(">hhih", 1, 12, 7, -1)
    conn.dataReceived(struct.pack(">i", len(body)) + body)


def receive(client: socket.socket, transport: SocketTransport) -> bytes:
    """Read one response frame, giving the sender its writability events as the reactor would."""
    client.setblocking(False)
    got = bytearray()
    while len(got) < 4 or len(got) < 4 + struct.unpack_from(">i", got)[0]:
        try:
            chunk = client.recv(1 << 16)
            assert chunk, "connection closed early"
            got += chunk
        except BlockingIOError:
            writers = list(transport.reactor.writers)
            assert writers, "the sender stopped with the response unfinished and nothing waiting"
            for w in writers:
                w.doWrite()
    return bytes(got[4:])


@pytest.mark.parametrize("version", [12, 11])      # flexible (compact lengths) and not
def test_plaintext_fetch_sends_record_bytes_with_sendfile_not_through_python(
        plog: Any, version: int, monkeypatch: Any) -> None:
    expected = bytes(plog.read(0, 1 << 30).records)          # the bytes, by the copying path
    preads: list[int] = []
    real_pread, real_sendfile = os.pread, os.sendfile
    sent: list[tuple[int, int]] = []

    def spy_pread(fd: int, n: int, pos: int) -> bytes:
        preads.append(n)
        return real_pread(fd, n, pos)

    def spy_sendfile(out_fd: int, in_fd: int, pos: int, n: int) -> int:
        done = real_sendfile(out_fd, in_fd, pos, n)
        sent.append((pos, done))
        return done

    def no_payload_read(*args: Any) -> bytes:
        raise AssertionError("a zero-copy fetch read record bytes into Python")
    monkeypatch.setattr(os, "pread", spy_pread)
    monkeypatch.setattr(os, "sendfile", spy_sendfile)
    monkeypatch.setattr(LogSegment, "read", no_payload_read)

    res = plog.read(0, 1 << 30, as_region=True)
    region = res.records
    assert isinstance(region, FileRegion) and len(region) == len(expected)
    # finding the range read batch headers only (an index lookup, 61-byte headers), no payload
    assert sum(preads) < len(expected) // 20, preads
    chunks = codec.encode_response(ApiKey.FETCH, version, 7, fetch_body(region))
    assert region in chunks                                   # the codec passed the region through

    conn, transport, client = connect(chunks)
    assert conn.zero_copy
    ask(conn)
    frame = receive(client, transport)
    corr, body = codec.decode_response(ApiKey.FETCH, version, frame)
    assert corr == 7
    assert bytes(body["responses"][0]["partitions"][0]["records"]) == expected
    # the kernel moved every record byte, contiguously from the region's start
    assert sum(n for _, n in sent) == len(expected)
    assert sent[0][0] == region.position and len(sent) > 1     # several calls: EAGAIN was met and resumed
    assert transport.written == []                            # nothing went through Twisted's buffer
    assert conn.sender is not None and conn.sender.file_bytes == len(expected)
    assert conn.sender.framing_bytes == 4 + len(frame) - len(expected)
    assert region.fd == -1                                    # the duplicated descriptor is released
    assert not transport.reactor.writers and not conn.sending
    client.close()


def test_a_segment_truncated_under_a_queued_region_closes_the_connection(plog: Any) -> None:
    res = plog.read(0, 1 << 30, as_region=True)
    region = res.records
    chunks = codec.encode_response(ApiKey.FETCH, 12, 7, fetch_body(region))
    os.truncate(region.path, region.position + len(region) // 2)   # the file shrank after the read
    conn, transport, client = connect(chunks)
    ask(conn)
    client.setblocking(False)
    got = 0
    while not transport.aborted:
        try:
            got += len(client.recv(1 << 16))
        except BlockingIOError:
            for w in list(transport.reactor.writers):
                w.doWrite()
    assert got < len(region)             # never the promised size: the client sees a cut frame
    assert region.fd == -1 and not transport.reactor.writers
    client.close()


def test_tls_connections_copy(plog: Any) -> None:
    expected = bytes(plog.read(0, 1 << 30).records)
    region = plog.read(0, 1 << 30, as_region=True).records
    chunks = codec.encode_response(ApiKey.FETCH, 12, 7, fetch_body(region))
    conn, transport, client = connect(chunks, tls=True)
    assert not conn.zero_copy and conn.sender is None
    ask(conn)
    frame = transport.written
    assert expected in b"".join(frame)                        # copied through the transport
    assert region.fd == -1
    client.close()


# -- the Fetch handler reads regions only for connections that send them ----------------------------

class LogPartition:
    """A leader partition over a real log (what ReplicaManager.read_from uses of Partition)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.log_start_offset = log.log_start_offset
        self.log_end_offset = log.log_end_offset
        self.high_watermark = self.last_stable_offset = log.log_end_offset
        self.isr: set[int] = set()

    def fetch_upper_bound(self, replica_id: int, isolation: int) -> int:
        return self.log_end_offset


class Replicas:
    fetch_messages = ReplicaManager.fetch_messages
    read_from = staticmethod(ReplicaManager.read_from)

    def __init__(self, log: Any) -> None:
        self.clock = Clock(task.Clock())
        self.purgatory = Purgatory(self.clock.reactor)
        self.part = LogPartition(log)

    def leader(self, topic: str, index: int, epoch: int = -1) -> LogPartition:
        return self.part


def handler_fetch(plog: Any, *, zero_copy: bool, version: int = 12) -> Any:
    replicas = Replicas(plog)
    req = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
           "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
           "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                    "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    ctx = SimpleNamespace(replicas=replicas, config={"fetch.max.bytes": 1 << 20}, now_ms=0, metrics=BrokerMetrics(),
                          api_version=version, fetch_sessions=None, quotas=BrokerQuotas(), quota_user="ANONYMOUS",
                          client_id=None, throttle=lambda ms: None, authorize=lambda *action: True,
                          conn=SimpleNamespace(zero_copy=zero_copy))
    return handle_fetch(ctx, req)["responses"][0]["partitions"][0]["records"]


def test_the_fetch_handler_reads_regions_for_plaintext_connections_only(plog: Any) -> None:
    expected = bytes(plog.read(0, 1 << 20).records)
    region = handler_fetch(plog, zero_copy=True)
    assert isinstance(region, FileRegion) and len(region) == len(expected)
    assert region.read() == expected
    copied = handler_fetch(plog, zero_copy=False)
    assert not isinstance(copied, FileRegion) and bytes(copied) == expected
    # Fetch v3 readers get message format v1: converted, so read into Python even on plaintext
    converted = handler_fetch(plog, zero_copy=True, version=3)
    assert not isinstance(converted, FileRegion) and len(converted) > 0


def test_by_default_the_kernel_sizes_the_send_and_receive_buffers() -> None:
    """socket.send.buffer.bytes defaults to -1 (Kafka: 102400): an accepted connection's SO_SNDBUF
    is the kernel's own, autotuned, so a 1 MB zero-copy Fetch answer leaves in one sendfile instead
    of waiting for several reactor turns behind other connections' requests; likewise
    socket.receive.buffer.bytes and SO_RCVBUF, so a large Produce arrives in fewer reads. The Kafka
    values still fix both when configured."""
    from kafkalite.config import BrokerConfig
    from kafkalite.net.server import SocketOptions

    config = BrokerConfig.from_properties({"zookeeper.connect": "h:1"})
    defaults = SocketOptions(config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"])
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(3)
        clients = [socket.create_connection(listener.getsockname()) for _ in range(3)]
        accepted = [listener.accept()[0] for _ in range(3)]
        try:
            untouched, with_defaults, with_kafkas = accepted
            defaults.apply(with_defaults)
            SocketOptions(102400, 102400).apply(with_kafkas)
            for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                kernel_own = untouched.getsockopt(socket.SOL_SOCKET, option)
                assert with_defaults.getsockopt(socket.SOL_SOCKET, option) == kernel_own
                fixed = with_kafkas.getsockopt(socket.SOL_SOCKET, option)
                assert fixed == 2 * 102400 != kernel_own                  # Linux doubles what is asked
            assert with_defaults.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            for s in clients + accepted:
                s.close()


def test_with_the_default_send_buffer_a_whole_answer_is_queued_in_one_turn(tmp_path: Any) -> None:
    """What the default buys: a 1 MB region to a peer that has read nothing yet goes to the kernel
    in one pass (no writability wait, so no reactor turn behind other connections' requests),
    where Kafka's fixed 102400 stops the sender after a few hundred KB until the reactor wakes it."""
    from kafkalite.config import BrokerConfig
    from kafkalite.net.sendfile import RegionSender
    from kafkalite.net.server import SocketOptions

    config = BrokerConfig.from_properties({"zookeeper.connect": "h:1"})
    region_bytes = 1 << 20
    path = tmp_path / "segment.log"
    path.write_bytes(os.urandom(region_bytes))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        outcome = {}
        for name, options in (("default", SocketOptions(config["socket.send.buffer.bytes"], -1)),
                              ("kafka", SocketOptions(102400, -1))):
            client = socket.create_connection(listener.getsockname())
            server = listener.accept()[0]
            try:
                if name == "default" and server.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < 2 * region_bytes:
                    pytest.skip("this kernel starts loopback send buffers below 2 MB")
                options.apply(server)
                server.setblocking(False)
                transport = SocketTransport(server)
                done: list[bool] = []
                sender = RegionSender.for_transport(transport, lambda: done.append(True), lambda e: done.append(False))
                assert sender is not None
                sender.send([b"head", FileRegion(os.open(path, os.O_RDONLY), 0, region_bytes, str(path)), b"\0\0\0"])
                outcome[name] = (bool(done), len(transport.reactor.writers), sender.file_bytes)
                got = 0                             # drain, giving the sender its writability events
                client.setblocking(False)
                while got < region_bytes + 7:
                    try:
                        got += len(client.recv(1 << 16))
                    except BlockingIOError:
                        for w in list(transport.reactor.writers):
                            w.doWrite()
                assert done == [True]
            finally:
                sender.abort()
                client.close()
                server.close()
    assert outcome["default"] == (True, 0, region_bytes)
    finished, waiting, sent = outcome["kafka"]
    assert not finished and waiting == 1 and sent < region_bytes



def test_a_small_answer_leaves_in_one_write_and_is_read_in_one_read(plog: Any, monkeypatch: Any) -> None:
    """A follower's one-record Fetch answer: with sendfile it left in three writes (framing, the
    region, three bytes of tagged fields) and reached the follower as two segments, two reads;
    at most SMALL_RESPONSE_COPY record bytes are copied and the whole answer is one sendmsg."""
    from kafkalite.net.sendfile import SMALL_RESPONSE_COPY, RegionSender

    last = plog.log_end_offset - 2                            # the last, two-record batch
    expected = bytes(plog.read(last, 1 << 30).records)
    region = plog.read(last, 1 << 30, as_region=True).records
    assert isinstance(region, FileRegion) and 0 < len(region) <= SMALL_RESPONSE_COPY
    chunks = codec.encode_response(ApiKey.FETCH, 12, 8, fetch_body(region))
    assert region in chunks and chunks[-1] is not region      # framing follows the region

    sendfiles: list[int] = []
    real_sendfile = os.sendfile

    def spy_sendfile(out_fd: int, in_fd: int, pos: int, n: int) -> int:
        sendfiles.append(n)
        return real_sendfile(out_fd, in_fd, pos, n)
    monkeypatch.setattr(os, "sendfile", spy_sendfile)
    server, client = socket.socketpair()
    writes: list[int] = []

    class Sock(socket.socket):                                # counts the sender's writes
        def sendmsg(self, bufs: Any, *args: Any) -> int:     # type: ignore[override]
            n = super().sendmsg(bufs, *args)
            writes.append(n)
            return n
    sock = Sock(fileno=server.detach())
    sock.setblocking(False)
    transport = SocketTransport(sock)
    done: list[bool] = []
    sender = RegionSender.for_transport(transport, lambda: done.append(True), lambda e: done.append(False))
    assert sender is not None
    sender.send(chunks)
    assert done == [True] and region.fd == -1                 # sent and released at once
    assert len(writes) == 1 and sendfiles == [] and sender.file_bytes == 0
    got = client.recv(1 << 20)                                # the whole answer, in one read
    assert len(got) == writes[0] == 4 + struct.unpack_from(">i", got)[0]
    corr, body = codec.decode_response(ApiKey.FETCH, 12, got[4:])
    assert corr == 8 and bytes(body["responses"][0]["partitions"][0]["records"]) == expected
    sock.close()
    client.close()
