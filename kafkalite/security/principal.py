"""Kafka's principals: ``User:<name>``, and the default principal builder's rules.

Kafka's DefaultKafkaPrincipalBuilder (no ``ssl.principal.mapping.rules``) names an SSL client
by its certificate subject's distinguished name as Java's ``X500Principal.getName()`` prints it
(RFC 2253: most specific RDN first, ``CN=alice,OU=eng,O=acme``), a SASL client by its
authenticated user name, and anything unauthenticated ``User:ANONYMOUS``.
"""
from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


def distinguished_name(cert: x509.Certificate) -> str:
    """The subject DN in RFC 2253/4514 order and escaping, as Java's X500Principal prints it."""
    return cert.subject.rfc4514_string()


def from_certificate(cert: x509.Certificate | None) -> KafkaPrincipal:
    """``User:<subject DN>`` for a client certificate, ``User:ANONYMOUS`` without one."""
    if cert is None:
        return ANONYMOUS
    return user(distinguished_name(cert))
