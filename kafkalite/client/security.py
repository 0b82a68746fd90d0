"""The client's security settings, from Kafka's client properties (a ``--command-config`` file).

``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ``sasl.mechanism`` PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 with the user in ``sasl.jaas.config`` (Kafka's
``...LoginModule required username="..." password="...";``) or librdkafka's
``sasl.username``/``sasl.password``; TLS trust from ``ssl.truststore.location`` (PEM, as
``ssl.truststore.type=PEM``) or librdkafka's ``ssl.ca.location``, a client certificate from
``ssl.keystore.location`` (PEM with key) or ``ssl.certificate.location``/``ssl.key.location``, and
``ssl.endpoint.identification.algorithm`` ('' turns host name checking off). The exchange is
Kafka's: ApiVersions, SaslHandshake v1, then SaslAuthenticate (KIP-152) frames.
"""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.security import AuthenticationError, jaas, plain, scram

from .errors import ClientError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def is_security_key(key: str) -> bool:
    """The client properties that configure TLS and SASL (Kafka's and librdkafka's names): what a
    service hands on to the clients it makes, as ksqlDB and Connect do."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ClientSecurity":
        """Kafka's (and librdkafka's) client property names; a bad value is ClientError."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ClientError(f"unknown security.protocol {protocol!r} (one of {', '.join(PROTOCOLS)})")
        mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
        username, password = props.get("sasl.username"), props.get("sasl.password")
        if props.get("sasl.jaas.config"):
            try:
                entry = jaas.parse(props["sasl.jaas.config"])
            except jaas.JaasError as exc:
                raise ClientError(f"invalid sasl.jaas.config: {exc}") from None
            username, password = entry.username or username, entry.password or password
        if protocol.startswith("SASL"):
            if mechanism not in MECHANISMS:
                raise ClientError(f"unsupported sasl.mechanism {mechanism!r} (one of {', '.join(MECHANISMS)})")
            if not username or password is None:
                raise ClientError("SASL needs a user: sasl.jaas.config, or sasl.username and sasl.password")
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            if props.get(key, "PEM").upper() != "PEM":
                raise ClientError(f"{key} {props[key]!r} is not supported: give PEM files")
        keystore = props.get("ssl.keystore.location")
        return cls(protocol, mechanism, username, password,
                   props.get("ssl.truststore.location") or props.get("ssl.ca.location"),
                   keystore or props.get("ssl.certificate.location"),
                   keystore or props.get("ssl.key.location"),
                   props.get("ssl.key.password") or props.get("ssl.keystore.password"),
                   props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() != "")

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """TLS around a connected socket (SSL and SASL_SSL)."""
        if not self.tls:
            return sock
        try:
            context = ssl.create_default_context(cafile=self.ca_location)
            context.check_hostname = self.check_hostname
            if self.certificate_location:
                context.load_cert_chain(self.certificate_location, self.key_location, self.key_password)
            return context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as exc:
            raise ClientError(f"TLS to {host} failed: {exc}") from None

    def authenticate(self, request: Callable[[ApiKey, int, dict[str, Any]], dict[str, Any]], where: str) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 exchanges over ``request(api, version, body)``."""
        if not self.sasl:
            return
        assert self.username is not None and self.password is not None
        answer = request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if answer["error_code"]:
            raise ClientError(f"{where} does not offer SASL {self.mechanism} (it offers "
                              f"{', '.join(answer.get('mechanisms') or []) or 'none'})", answer["error_code"])

        def exchange(token: bytes) -> bytes:
            reply = request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            if reply["error_code"]:
                raise ClientError(f"authentication as {self.username} to {where} failed: "
                                  f"{reply.get('error_message') or 'refused'}", ErrorCode.SASL_AUTHENTICATION_FAILED)
            return bytes(reply["auth_bytes"])
        if self.mechanism == "PLAIN":
            exchange(plain.encode_token(self.username, self.password))
            return
        client = scram.ScramClient(self.mechanism, self.username, self.password)
        try:
            server_first = exchange(client.first_message())
            server_final = exchange(client.final_message(server_first))
            client.verify_server_final(server_final)
        except AuthenticationError as exc:
            raise ClientError(f"authentication as {self.username} to {where} failed: {exc}",
                              ErrorCode.SASL_AUTHENTICATION_FAILED) from None


PLAINTEXT = ClientSecurity()
