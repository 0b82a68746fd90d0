"""Test-time TLS certificates and SCRAM users (nothing secret is committed).

:func:`make_pki` writes a fresh CA, a broker key store (key + chain in one PEM, SANs
``127.0.0.1``/``localhost``; optionally encrypted) and client key stores under a directory, with
``cryptography``. :func:`secure_overrides` gives broker properties for a cluster with PLAINTEXT
(the launcher's readiness port), SSL (client certificates required) and SASL_SSL (SCRAM-SHA-256/512
and PLAIN) listeners; :func:`listener_port` reads a listener's port from the registration.
"""
from __future__ import annotations

import datetime
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

BROKER_PASSWORD = "broker-secret"
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path                 # CA certificate (trust store)
    broker: Path             # broker key + chain (key encrypted with BROKER_PASSWORD)
    client_cert: Path        # client "CN=alice,O=kafkalite-tests"
    client_key: Path
    client_keystore: Path    # client key + cert in one PEM (unencrypted)
    rogue_cert: Path         # a client certificate from another CA
    rogue_key: Path

    def client_dn(self) -> str:
        return "CN=alice,O=kafkalite-tests"


def _name(cn: str, org: str = "kafkalite-tests") -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: x509.Name, key: Any, issuer: x509.Name, issuer_key: Any, *, ca: bool = False,
          sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: Any, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kafkalite-test-ca")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = _cert(_name("broker"), broker_key, ca_name, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert(_name("alice"), client_key, ca_name, ca_key)
    rogue_ca_key = ec.generate_private_key(ec.SECP256R1())
    rogue_ca_name = _name("rogue-ca", "elsewhere")
    rogue_key = ec.generate_private_key(ec.SECP256R1())
    rogue = _cert(_name("mallory", "elsewhere"), rogue_key, rogue_ca_name, rogue_ca_key)
    files = {
        "ca.pem": _pem(ca),
        "broker.pem": _key_pem(broker_key, BROKER_PASSWORD) + _pem(broker) + _pem(ca),
        "client.pem": _pem(client), "client.key": _key_pem(client_key),
        "client-keystore.pem": _key_pem(client_key) + _pem(client),
        "rogue.pem": _pem(rogue), "rogue.key": _key_pem(rogue_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    return Pki(d, d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", d / "client-keystore.pem",
               d / "rogue.pem", d / "rogue.key")


def secure_overrides(pki: Pki, inter_broker: str = "PLAINTEXT", mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """Broker properties: PLAINTEXT, SSL (client certificates required), SASL_SSL and SASL_PLAINTEXT
    (SCRAM-SHA-256 only, KIP-368 sessions of 1.5 s) listeners on
    ephemeral ports; the brokers authenticate to each other as ``admin`` when ``inter_broker`` is
    SASL_SSL (PLAIN's users and the admin's SCRAM credential both know that password)."""
    jaas_scram = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                  f'username="{ADMIN_USER}" password="{ADMIN_PASSWORD}";')
    jaas_plain = (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                  f'username="{ADMIN_USER}" password="{ADMIN_PASSWORD}" user_{ADMIN_USER}="{ADMIN_PASSWORD}" '
                  f'user_carol="carol-secret";')
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "1500",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": BROKER_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas_scram,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": jaas_scram,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas_plain,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "inter.broker.listener.name": inter_broker,
        "connection.failed.authentication.delay.ms": "200",
    }
    return props


def registration(zk_get: Any, broker_id: int) -> dict[str, Any]:
    data = zk_get(f"/brokers/ids/{broker_id}")
    assert data is not None, f"broker {broker_id} is not registered"
    return json.loads(data)


def listener_port(broker: Any, listener: str) -> int:
    """The port ``listener`` of a started test broker advertises."""
    reg = registration(broker.cluster.zk_get, broker.broker_id)
    for ep in reg["endpoints"]:
        name, _, rest = ep.partition("://")
        if name == listener:
            return int(rest.rsplit(":", 1)[1])
    raise AssertionError(f"broker {broker.broker_id} has no {listener} listener: {reg['endpoints']}")
