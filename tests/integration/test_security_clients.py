"""Real clients over TLS and SASL against a broker with PLAINTEXT, SSL (client certificates
required) and SASL_SSL (SCRAM-SHA-512/256, PLAIN) listeners; certificates and users are made
at test time. Shows: produce/consume/group round trips over SASL_SSL with SCRAM-SHA-512 and over
SSL with a client certificate for confluent-kafka, kafka-python, aiokafka and kcat; wrong
passwords, unknown users, a certificate from another CA and a replaced SCRAM credential are
refused."""
from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.cli import configs as configs_tool
from tests.support.security import ADMIN_PASSWORD, ADMIN_USER, Pki, listener_port, make_pki, secure_overrides

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def secure(zookeeper: Any, tmp_path_factory: Any) -> Any:
    """One secured broker, the PKI and the SCRAM users alice and admin (written with kafkalite-configs)."""
    from tests.support.brokers import Cluster

    base = tmp_path_factory.mktemp("secure")
    pki = make_pki(base / "pki")
    cluster = Cluster(zookeeper, base / "cluster", 1, secure_overrides(pki)).start()
    zk = cluster.brokers[0].cluster.zk_connect
    for user, password in ((USER, PASSWORD), (ADMIN_USER, ADMIN_PASSWORD)):
        assert configs_tool.main(["--zookeeper", zk, "--alter", "--entity-type", "users", "--entity-name", user,
                                  "--add-config", f"SCRAM-SHA-512=[password={password}],"
                                                  f"SCRAM-SHA-256=[iterations=8192,password={password}]"]) == 0
    broker = cluster.brokers[0]
    yield broker, pki
    cluster.stop()


def sasl_conf(broker: Any, pki: Pki, user: str = USER, password: str = PASSWORD,
              mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{listener_port(broker, 'SASL_SSL')}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(pki.ca)}


def ssl_conf(broker: Any, pki: Pki) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{listener_port(broker, 'SSL')}", "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key)}


def create_topic(conf: dict[str, Any], name: str) -> None:
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=30)[name].result(30)


def confluent_round_trip(conf: dict[str, Any], topic: str, n: int = 200) -> None:
    create_topic(conf, topic)
    p = Producer({**conf, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=str(i % 7).encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    committed = c.committed([tp for tp in c.assignment()], timeout=10)
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))
    assert sum(tp.offset for tp in committed) == n


def test_confluent_sasl_ssl_scram_sha_512(secure: Any) -> None:
    """confluent-kafka over SASL_SSL/SCRAM-SHA-512: topic creation, acks=all produce, a group consume and commit."""
    broker, pki = secure
    confluent_round_trip(sasl_conf(broker, pki), f"scram512-{uuid.uuid4().hex[:6]}")


def test_confluent_sasl_ssl_scram_sha_256_and_plain(secure: Any) -> None:
    """The other mechanisms: SCRAM-SHA-256 (8192 iterations) and PLAIN with the JAAS users."""
    broker, pki = secure
    confluent_round_trip(sasl_conf(broker, pki, mechanism="SCRAM-SHA-256"), f"scram256-{uuid.uuid4().hex[:6]}", 50)
    confluent_round_trip(sasl_conf(broker, pki, "carol", "carol-secret", "PLAIN"), f"plain-{uuid.uuid4().hex[:6]}", 50)


def test_sasl_plaintext_listener_offers_only_its_mechanisms(secure: Any) -> None:
    """SASL_PLAINTEXT with its listener-prefixed sasl.enabled.mechanisms: SCRAM-SHA-256 works
    (confluent-kafka round trip), SCRAM-SHA-512 is not offered there."""
    broker, pki = secure
    conf = {"bootstrap.servers": f"127.0.0.1:{listener_port(broker, 'SASL_PLAINTEXT')}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": USER, "sasl.password": PASSWORD}
    confluent_round_trip(conf, f"saslplain-{uuid.uuid4().hex[:6]}", 50)
    error = metadata_error({**conf, "sasl.mechanism": "SCRAM-SHA-512"})
    assert error is not None and "SCRAM-SHA-512" in error, error


def test_kip_368_clients_reauthenticate_on_the_same_connection(secure: Any) -> None:
    """SASL_PLAINTEXT has connections.max.reauth.ms=1500: a confluent-kafka producer sending for
    ~5 s re-authenticates on its connection (broker log) and every record is acknowledged; a raw
    connection that lets its session expire is closed at its next request."""
    import socket

    from kafkalite.protocol import codec
    from kafkalite.security import scram as scram_math

    broker, pki = secure
    port = listener_port(broker, "SASL_PLAINTEXT")
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD}
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    create_topic(conf, topic)
    before = broker.log_path.read_text().count(f"re-authenticated as User:{USER}")
    delivered: list[Any] = []
    p = Producer({**conf, "acks": "all", "linger.ms": 0})
    deadline = time.monotonic() + 5
    i = 0
    while time.monotonic() < deadline:
        p.produce(topic, value=f"r{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        i += 1
        p.poll(0.1)              # one record every ~100 ms across several session lifetimes
    assert p.flush(30) == 0
    assert len(delivered) == i and all(err is None for err in delivered)
    assert broker.log_path.read_text().count(f"re-authenticated as User:{USER}") >= before + 2

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        def call(api: int, version: int, body: dict) -> dict:
            sock.sendall(b"".join(bytes(c) for c in codec.encode_request(api, version, 1, "raw", body)))
            size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
            return codec.decode_response(api, version, sock.recv(size, socket.MSG_WAITALL))[1]

        call(17, 1, {"mechanism": "SCRAM-SHA-256"})
        client = scram_math.ScramClient("SCRAM-SHA-256", USER, PASSWORD)
        first = call(36, 1, {"auth_bytes": client.first_message()})
        final = call(36, 1, {"auth_bytes": client.final_message(bytes(first["auth_bytes"]))})
        assert final["session_lifetime_ms"] == 1500
        assert call(3, 1, {"topics": []})["brokers"]
        expires = time.monotonic() + 1.5
        while time.monotonic() < expires + 0.3:       # let the session run out
            time.sleep(0.1)
        sock.sendall(b"".join(bytes(c) for c in codec.encode_request(3, 1, 2, "raw", {"topics": []})))
        try:
            assert sock.recv(4) == b""
        except ConnectionResetError:
            pass


def test_confluent_ssl_client_certificate(secure: Any) -> None:
    """confluent-kafka over SSL with a client certificate (ssl.client.auth=required)."""
    broker, pki = secure
    confluent_round_trip(ssl_conf(broker, pki), f"ssl-{uuid.uuid4().hex[:6]}")


def metadata_error(conf: dict[str, Any], timeout: float = 8.0) -> str | None:
    """The error a metadata request ends with (None if it succeeds). Asks in 1 s steps and stops
    at the first error librdkafka reports (error_cb, served by poll): a refused login is known
    at once, so only a success or silence costs the whole ``timeout``."""
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e))})
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.list_topics(timeout=1)
            return None
        except KafkaException as exc:
            producer.poll(0.2)      # serves error_cb: librdkafka reports the broker's message there
            if errors or time.monotonic() >= deadline:
                return f"{exc} {' '.join(errors)}"


@pytest.mark.parametrize("user,password,mechanism", [
    (USER, "wrong", "SCRAM-SHA-512"), ("nobody", PASSWORD, "SCRAM-SHA-512"),
    (USER, "wrong", "SCRAM-SHA-256"), ("carol", "wrong", "PLAIN"), ("nobody", "x", "PLAIN")])
def test_wrong_credentials_are_refused(secure: Any, user: str, password: str, mechanism: str) -> None:
    """Wrong password or unknown user: the client is told authentication failed and gets no metadata."""
    broker, pki = secure
    error = metadata_error(sasl_conf(broker, pki, user, password, mechanism))
    assert error is not None and "Authentication failed" in error, error


def test_certificate_from_another_ca_is_refused(secure: Any) -> None:
    """SSL listener with ssl.client.auth=required: a client certificate signed by an unknown CA
    (and no certificate at all) fails the handshake."""
    broker, pki = secure
    rogue = {**ssl_conf(broker, pki), "ssl.certificate.location": str(pki.rogue_cert),
             "ssl.key.location": str(pki.rogue_key)}
    assert metadata_error(rogue) is not None
    bare = {k: v for k, v in ssl_conf(broker, pki).items() if not k.startswith("ssl.certificate")
            and not k.startswith("ssl.key")}
    assert metadata_error(bare) is not None


def test_changed_scram_credential_is_refused_on_the_next_connection(secure: Any) -> None:
    """After kafkalite-configs replaces bob's SCRAM-SHA-512 credential, the old password fails on a
    new connection and the new one works; deleting the credential refuses bob."""
    broker, pki = secure
    zk = broker.cluster.zk_connect
    alter = ["--zookeeper", zk, "--alter", "--entity-type", "users", "--entity-name", "bob"]
    assert configs_tool.main(alter + ["--add-config", "SCRAM-SHA-512=[password=first]"]) == 0
    assert metadata_error(sasl_conf(broker, pki, "bob", "first")) is None
    assert configs_tool.main(alter + ["--add-config", "SCRAM-SHA-512=[password=second]"]) == 0
    assert "Authentication failed" in (metadata_error(sasl_conf(broker, pki, "bob", "first")) or "")
    assert metadata_error(sasl_conf(broker, pki, "bob", "second")) is None
    assert configs_tool.main(alter + ["--delete-config", "SCRAM-SHA-512"]) == 0
    assert "Authentication failed" in (metadata_error(sasl_conf(broker, pki, "bob", "second")) or "")


def test_kafka_python_sasl_ssl_and_ssl(secure: Any) -> None:
    """kafka-python: SCRAM-SHA-512 over SASL_SSL and a client certificate over SSL, produce + group consume."""
    from kafka import KafkaConsumer, KafkaProducer

    broker, pki = secure
    for name, kw, bootstrap in (
            ("sasl", dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER,
                          sasl_plain_password=PASSWORD, ssl_cafile=str(pki.ca)), listener_port(broker, "SASL_SSL")),
            ("ssl", dict(security_protocol="SSL", ssl_cafile=str(pki.ca), ssl_certfile=str(pki.client_cert),
                         ssl_keyfile=str(pki.client_key)), listener_port(broker, "SSL"))):
        topic = f"kp-{name}-{uuid.uuid4().hex[:6]}"
        create_topic(sasl_conf(broker, pki), topic)
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{bootstrap}", acks="all", **kw)
        for i in range(50):
            producer.send(topic, f"kp{i}".encode())
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{bootstrap}", group_id=f"g-{topic}",
                                 auto_offset_reset="earliest", consumer_timeout_ms=15000, **kw)
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) == 50:
                break
        consumer.commit()
        consumer.close()
        assert sorted(got) == sorted(f"kp{i}".encode() for i in range(50))


def test_kafka_python_wrong_password_refused(secure: Any) -> None:
    """kafka-python with a wrong SCRAM password cannot connect."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    broker, pki = secure
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=f"127.0.0.1:{listener_port(broker, 'SASL_SSL')}", security_protocol="SASL_SSL",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER, sasl_plain_password="wrong",
                      ssl_cafile=str(pki.ca), request_timeout_ms=5000, max_block_ms=5000,
                      # kafka-python 3 retries a refused bootstrap for 30 s by default
                      **({"bootstrap_timeout_ms": 5000} if "bootstrap_timeout_ms" in KafkaProducer.DEFAULT_CONFIG
                         else {}))


def test_aiokafka_sasl_ssl_and_ssl(secure: Any) -> None:
    """aiokafka: SCRAM-SHA-512 over SASL_SSL and a client certificate over SSL, produce + group consume."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, pki = secure

    async def run(topic: str, port: int, kw: dict[str, Any]) -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", acks="all", **kw)
        await producer.start()
        try:
            for i in range(40):
                await producer.send_and_wait(topic, f"ai{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", enable_auto_commit=False, **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < 40:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for msgs in batch.values():
                    got.extend(m.value for m in msgs)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    sasl_ctx = create_ssl_context(cafile=str(pki.ca))
    ssl_ctx = create_ssl_context(cafile=str(pki.ca), certfile=str(pki.client_cert), keyfile=str(pki.client_key))
    for name, port, kw in (
            ("sasl", listener_port(broker, "SASL_SSL"),
             dict(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=USER,
                  sasl_plain_password=PASSWORD, ssl_context=sasl_ctx)),
            ("ssl", listener_port(broker, "SSL"), dict(security_protocol="SSL", ssl_context=ssl_ctx))):
        topic = f"ai-{name}-{uuid.uuid4().hex[:6]}"
        create_topic(sasl_conf(broker, pki), topic)
        got = asyncio.run(run(topic, port, kw))
        assert sorted(got) == sorted(f"ai{i}".encode() for i in range(40))


def kcat(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["kcat", *args], input=data, capture_output=True, timeout=60)


def test_kcat_sasl_ssl_and_ssl(secure: Any) -> None:
    """kcat produces and consumes (with a group) over SASL_SSL/SCRAM-SHA-512 and over SSL with a
    client certificate; with a wrong password it fails."""
    broker, pki = secure
    sasl = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", f"sasl.username={USER}",
            "-X", f"sasl.password={PASSWORD}", "-X", f"ssl.ca.location={pki.ca}"]
    ssl = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}", "-X",
           f"ssl.certificate.location={pki.client_cert}", "-X", f"ssl.key.location={pki.client_key}"]
    for name, listener, conf in (("sasl", "SASL_SSL", sasl), ("ssl", "SSL", ssl)):
        topic = f"kcat-{name}-{uuid.uuid4().hex[:6]}"
        create_topic(sasl_conf(broker, pki), topic)
        bootstrap = f"127.0.0.1:{listener_port(broker, listener)}"
        lines = b"".join(f"kc{i}\n".encode() for i in range(30))
        out = kcat("-b", bootstrap, "-P", "-t", topic, *conf, data=lines)
        assert out.returncode == 0, out.stderr[-2000:]
        out = kcat("-b", bootstrap, "-G", f"g-{topic}", topic, "-o", "beginning", "-c", "30", "-e", *conf)
        assert out.returncode == 0, out.stderr[-2000:]
        assert sorted(out.stdout.split()) == sorted(f"kc{i}".encode() for i in range(30))
    bad = [c if not c.startswith("sasl.password=") else "sasl.password=wrong" for c in sasl]
    out = kcat("-b", f"127.0.0.1:{listener_port(broker, 'SASL_SSL')}", "-L", "-m", "5", *bad)
    assert out.returncode != 0 and b"Authentication failed" in out.stderr, out.stderr[-2000:]


def test_scram_credentials_through_the_admin_api(secure: Any) -> None:
    """AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554) from confluent-kafka over
    SASL_SSL: a user created this way authenticates, describe shows its mechanisms and
    iterations, Kafka's per-user errors come back, and a deleted credential is refused."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)

    broker, pki = secure
    admin = AdminClient(sasl_conf(broker, pki))
    dave = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000), b"dave-pw")
    for future in admin.alter_user_scram_credentials([dave]).values():
        future.result(30)
    assert metadata_error(sasl_conf(broker, pki, "dave", "dave-pw")) is None
    assert "Authentication failed" in (metadata_error(sasl_conf(broker, pki, "dave", "other")) or "")
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_512, 10000)]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"dave", USER, ADMIN_USER} <= set(everyone)
    too_few = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")
    with pytest.raises(KafkaException, match="Too few iterations"):
        admin.alter_user_scram_credentials([too_few])["erin"].result(30)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["erin"])["erin"].result(30)
    missing = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([missing])["dave"].result(30)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)])["dave"].result(30)
    assert "Authentication failed" in (metadata_error(sasl_conf(broker, pki, "dave", "dave-pw")) or "")


def test_garbage_on_secured_listeners_closes_only_that_connection(secure: Any) -> None:
    """Random bytes, a plaintext Kafka request and a garbled TLS ClientHello on the SSL and SASL_SSL
    listeners, and malformed SASL exchanges after a real TLS handshake: each connection is closed
    (or answered with an error), and the broker keeps serving authenticated clients afterwards."""
    import os
    import socket
    import ssl as pyssl
    import struct

    from kafkalite.protocol import codec

    broker, pki = secure

    def closed_by_broker(sock: socket.socket) -> bool:
        sock.settimeout(10)
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, pyssl.SSLError):
            return True
        except socket.timeout:
            return False

    api_versions = b"".join(bytes(c) for c in codec.encode_request(18, 0, 1, "raw", {}))
    for listener in ("SSL", "SASL_SSL"):
        port = listener_port(broker, listener)
        for payload in (os.urandom(3000), api_versions, b"\x16\x03\x01\x00\x64\x01\x00\x00\x60\x03\x03" + os.urandom(95)):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(payload)
                assert closed_by_broker(sock), (listener, payload[:16])
    # through TLS: a SaslHandshake for GSSAPI, garbage frames, a request before authenticating
    context = pyssl.create_default_context(cafile=str(pki.ca))
    port = listener_port(broker, "SASL_SSL")
    frames = [b"".join(bytes(c) for c in codec.encode_request(17, 1, 1, "raw", {"mechanism": "GSSAPI"})),
              struct.pack(">i", 12) + os.urandom(12),
              b"".join(bytes(c) for c in codec.encode_request(3, 9, 1, "raw", {"topics": [], "allow_auto_topic_creation": False,
                                                                                     "include_cluster_authorized_operations": False,
                                                                                     "include_topic_authorized_operations": False}))]
    for frame in frames:
        with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(frame)
            assert closed_by_broker(tls), frame[:12]
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"".join(bytes(c) for c in codec.encode_request(17, 1, 1, "raw", {"mechanism": "SCRAM-SHA-512"})))
        tls.sendall(b"".join(bytes(c) for c in codec.encode_request(36, 1, 2, "raw", {"auth_bytes": os.urandom(64)})))
        assert closed_by_broker(tls)
    assert metadata_error(sasl_conf(broker, pki)) is None
    assert metadata_error(ssl_conf(broker, pki)) is None
    assert "Traceback" not in broker.log_path.read_text()


def test_v0_unframed_sasl_exchange_on_the_wire(secure: Any) -> None:
    """The pre-KIP-152 path against the real broker: SaslHandshake v0, then SCRAM-SHA-256 tokens
    as bare size-prefixed frames, then an ordinary Metadata request is answered; with a wrong
    password the broker just closes (v0 has no error frame)."""
    import socket
    import struct

    from kafkalite.protocol import codec
    from kafkalite.protocol.framing import FrameDecoder
    from kafkalite.security import scram as scram_math

    broker, _ = secure
    port = listener_port(broker, "SASL_PLAINTEXT")

    def read_frame(sock: socket.socket) -> bytes | None:
        decoder = FrameDecoder(1 << 20)
        while True:
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            frames = decoder.feed(data)
            if frames:
                return bytes(frames[0])

    for password, ok in ((PASSWORD, True), ("wrong", False)):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"".join(bytes(c) for c in codec.encode_request(17, 0, 1, "v0", {"mechanism": "SCRAM-SHA-256"})))
            assert codec.decode_response(17, 0, read_frame(sock))[1]["error_code"] == 0
            client = scram_math.ScramClient("SCRAM-SHA-256", USER, password)
            first = client.first_message()
            sock.sendall(struct.pack(">i", len(first)) + first)
            server_first = read_frame(sock)
            final = client.final_message(server_first)
            sock.sendall(struct.pack(">i", len(final)) + final)
            server_final = read_frame(sock)
            if not ok:
                assert server_final is None
                continue
            client.verify_server_final(server_final)
            sock.sendall(b"".join(bytes(c) for c in codec.encode_request(3, 0, 2, "v0", {"topics": []})))
            _, metadata = codec.decode_response(3, 0, read_frame(sock))
            assert [b["node_id"] for b in metadata["brokers"]] == [broker.broker_id]


def test_malformed_handshakes_and_tokens_keep_memory_flat(secure: Any) -> None:
    """Hundreds of garbled TLS ClientHellos and of SASL exchanges with random tokens after a real
    TLS handshake: every connection is closed and the broker's resident memory stays flat (after a
    warm-up round, 250 more bad connections add less than 8 MiB)."""
    import os
    import socket
    import ssl as pyssl

    from kafkalite.protocol import codec

    broker, pki = secure
    context = pyssl.create_default_context(cafile=str(pki.ca))
    sasl_port, ssl_port = listener_port(broker, "SASL_SSL"), listener_port(broker, "SSL")
    handshake = b"".join(bytes(c) for c in codec.encode_request(17, 1, 1, "raw", {"mechanism": "SCRAM-SHA-512"}))

    def rss_kib() -> int:
        with open(f"/proc/{broker.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

    def bad_connection(i: int) -> None:
        if i % 2:
            with socket.create_connection(("127.0.0.1", ssl_port)) as sock:
                sock.sendall(b"\x16\x03\x01\x00\x64\x01\x00\x00\x60\x03\x03" + os.urandom(95 + i % 200))
                sock.settimeout(10)
                try:
                    while sock.recv(65536):
                        pass
                except (ConnectionResetError, socket.timeout):
                    pass
        else:
            with socket.create_connection(("127.0.0.1", sasl_port)) as raw, \
                    context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(handshake)
                token = os.urandom(16 + i % 500)
                tls.sendall(b"".join(bytes(c) for c in codec.encode_request(36, 1, 2, "raw", {"auth_bytes": token})))
                tls.settimeout(10)
                try:
                    while tls.recv(65536):
                        pass
                except (ConnectionResetError, pyssl.SSLError, socket.timeout):
                    pass

    def round_of(n: int) -> None:
        # ten at a time: each refused SASL login is answered after the broker's
        # connection.failed.authentication.delay.ms (200 ms here), one after another that was 35 s
        with ThreadPoolExecutor(10) as pool:
            list(pool.map(bad_connection, range(n)))

    round_of(100)                      # warm-up: allocator pools, TLS contexts, caches
    before = rss_kib()
    round_of(250)
    growth = rss_kib() - before
    print(f"security fuzz: RSS {before} KiB -> +{growth} KiB after 250 bad connections")
    assert growth < 8 * 1024, f"broker RSS grew {growth} KiB over 250 bad connections"
    assert metadata_error(sasl_conf(broker, pki)) is None
    assert "Traceback" not in broker.log_path.read_text()
