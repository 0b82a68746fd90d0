"""TLS for listeners and inter-broker connections, from Kafka's PEM ``ssl.*`` properties.

Kafka 2.7+ (KIP-651) accepts PEM key and trust stores; kafkalite reads only those:
``ssl.keystore.location`` (one PEM file with the private key and the certificate chain, leaf
first) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` inline, an encrypted key
unlocked by ``ssl.key.password``, and trusted CAs from ``ssl.truststore.location`` or
``ssl.truststore.certificates``. ``ssl.client.auth`` none/requested/required decides whether the
listener asks for (and insists on) a client certificate; the client's principal is its subject
DN (``kafkalite.security.principal``). TLS runs in Twisted's memory-BIO TLS protocol over the
ordinary TCP transport, so the Kafka connection above it is the same code for every protocol.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import crypto
from twisted.internet import ssl
from twisted.protocols.tls import TLSMemoryBIOFactory

from kafkalite.config import ConfigError

log = logging.getLogger(__name__)

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class KeyMaterial:
    """A PEM key store and trust store, parsed: what a TLS context is built from."""

    key: Any                          # cryptography private key, or None
    chain: tuple[x509.Certificate, ...]
    trusted: tuple[x509.Certificate, ...]
    client_auth: str = "none"
    min_version: str = "TLSv1.2"
    max_version: str = "TLSv1.3"

    def version_options(self) -> dict[str, Any]:
        """``ssl.enabled.protocols`` as CertificateOptions' bounds."""
        out: dict[str, Any] = {"raiseMinimumTo": _TLS_VERSIONS[self.min_version]}
        if self.max_version != "TLSv1.3":
            out["lowerMaximumSecurityTo"] = _TLS_VERSIONS[self.max_version]
        return out


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None


def _certs(pem: bytes, what: str) -> tuple[x509.Certificate, ...]:
    try:
        return tuple(x509.load_pem_x509_certificates(pem))
    except ValueError as exc:
        raise ConfigError(f"{what}: no valid PEM certificate ({exc})") from None


def _key(pem: bytes, password: str | None, what: str) -> Any:
    start = pem.find(b"-----BEGIN ")
    while start >= 0 and b"PRIVATE KEY-----" not in pem[start:pem.find(b"\n", start)]:
        start = pem.find(b"-----BEGIN ", start + 1)
    if start < 0:
        raise ConfigError(f"{what}: no PEM private key")
    try:
        return serialization.load_pem_private_key(pem[start:], password.encode("utf-8") if password else None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{what}: cannot load the private key (wrong ssl.key.password?): {exc}") from None


def key_material(lc: Any) -> KeyMaterial:
    """Parse one listener's (or the broker's client side's) PEM stores; ConfigError names what is wrong.
    ``lc`` is a ``kafkalite.config.ListenerConfig``."""
    password = lc["ssl.key.password"]
    key: Any = None
    chain: tuple[x509.Certificate, ...] = ()
    if lc["ssl.keystore.location"]:
        pem = _read(lc["ssl.keystore.location"], "ssl.keystore.location")
        key = _key(pem, password, "ssl.keystore.location")
        chain = _certs(pem, "ssl.keystore.location")
    elif lc["ssl.keystore.certificate.chain"]:
        if not lc["ssl.keystore.key"]:
            raise ConfigError("ssl.keystore.certificate.chain needs ssl.keystore.key")
        key = _key(lc["ssl.keystore.key"].encode("utf-8"), password, "ssl.keystore.key")
        chain = _certs(lc["ssl.keystore.certificate.chain"].encode("utf-8"), "ssl.keystore.certificate.chain")
    trusted: tuple[x509.Certificate, ...] = ()
    if lc["ssl.truststore.location"]:
        trusted = _certs(_read(lc["ssl.truststore.location"], "ssl.truststore.location"), "ssl.truststore.location")
    elif lc["ssl.truststore.certificates"]:
        trusted = _certs(lc["ssl.truststore.certificates"].encode("utf-8"), "ssl.truststore.certificates")
    versions = lc["ssl.enabled.protocols"] or ["TLSv1.2"]
    min_version = "TLSv1.2" if "TLSv1.2" in versions else "TLSv1.3"
    max_version = "TLSv1.3" if "TLSv1.3" in versions else "TLSv1.2"
    return KeyMaterial(key, chain, trusted, lc["ssl.client.auth"], min_version, max_version)


def _x509(cert: x509.Certificate) -> crypto.X509:
    return crypto.X509.from_cryptography(cert)


def server_options(material: KeyMaterial) -> ssl.CertificateOptions:
    """The listener's TLS context: our chain, and client certificates per ``ssl.client.auth``."""
    if material.key is None or not material.chain:
        raise ConfigError("an SSL listener needs a key store with a private key and a certificate")
    verify = material.client_auth in ("requested", "required")
    if verify and not material.trusted:
        raise ConfigError(f"ssl.client.auth={material.client_auth} needs a trust store (ssl.truststore.*)")
    return ssl.CertificateOptions(
        privateKey=crypto.PKey.from_cryptography_key(material.key), certificate=_x509(material.chain[0]),
        extraCertChain=[_x509(c) for c in material.chain[1:]],
        verify=verify, caCerts=[_x509(c) for c in material.trusted] if verify else None,
        requireCertificate=material.client_auth == "required", enableSessions=False,
        **material.version_options())


def client_options(material: KeyMaterial, host: str, verify_hostname: bool) -> Any:
    """An inter-broker connection's TLS: trust the configured CAs, present our own chain (for
    listeners that require client certificates), and with ``ssl.endpoint.identification.algorithm=https``
    check the peer's name (DNS name or IP address) against its certificate."""
    if not material.trusted:
        raise ConfigError("inter-broker TLS needs a trust store (ssl.truststore.*)")
    trust = ssl.trustRootFromCertificates([ssl.Certificate(_x509(c)) for c in material.trusted])
    private: ssl.PrivateCertificate | None = None
    if material.key is not None and material.chain:
        private = ssl.PrivateCertificate.fromCertificateAndKeyPair(
            ssl.Certificate(_x509(material.chain[0])), ssl.KeyPair(crypto.PKey.from_cryptography_key(material.key)))
    if verify_hostname:
        extra: dict[str, Any] = material.version_options()
        if len(material.chain) > 1:
            extra["extraCertChain"] = [_x509(c) for c in material.chain[1:]]
        return ssl.optionsForClientTLS(host, trustRoot=trust, clientCertificate=private,
                                       extraCertificateOptions=extra)
    return ssl.CertificateOptions(
        privateKey=private.privateKey.original if private else None,
        certificate=private.original if private else None,
        extraCertChain=[_x509(c) for c in material.chain[1:]], trustRoot=trust, **material.version_options())


class TLSServerFactory(TLSMemoryBIOFactory):
    """TLS around a listener's factory; a connection the wrapped factory refuses (connection
    quotas: ``buildProtocol`` returns None) is refused here too instead of wrapping nothing."""

    def buildProtocol(self, addr: Any) -> Any:
        inner = self.wrappedFactory.buildProtocol(addr)
        if inner is None:
            return None
        return self.protocol(self, inner)


def peer_certificate(transport: Any) -> x509.Certificate | None:
    """The client's verified certificate on a TLS transport (None without TLS or without one)."""
    get = getattr(transport, "getPeerCertificate", None)
    if get is None:
        return None
    try:
        cert = get()
    except Exception:           # no handshake yet / not a TLS transport
        return None
    return cert.to_cryptography() if cert is not None else None


def tcp_transport(transport: Any) -> Any:
    """The TCP transport under a TLS one (socket options apply there)."""
    inner = getattr(transport, "transport", None)
    return inner if inner is not None and hasattr(transport, "wrappedProtocol") else transport
