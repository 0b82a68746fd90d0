"""Signed internal requests between distributed workers (KIP-507, Kafka's ``SessionKey``,
``InternalRequestSignature`` and the ``inter.worker.*`` settings of ``DistributedConfig``).

When the group runs ``connect.protocol=sessioned`` (protocol version 2) the leader generates a
session key (``inter.worker.key.generation.algorithm``, ``inter.worker.key.size``), writes it to
the config topic under ``session-key`` as ``{"key": <base64>, "algorithm": ..., "creation-timestamp":
<ms>}`` and replaces it every ``inter.worker.key.ttl.ms``. Every worker reads it; a worker sending
an internal request (task configs to the leader) signs the exact body bytes with an HMAC
(``inter.worker.signature.algorithm``) and sends ``X-Connect-Authorization: <base64 MAC>`` and
``X-Connect-Request-Signature-Algorithm``; the receiver accepts only the algorithms in
``inter.worker.verification.algorithms`` and a MAC that matches under the current key.

Algorithms carry the JVM's names (``HmacSHA256``...) so that the config topic and the headers
mean the same to Kafka's workers; key sizes default to what the JVM's KeyGenerator makes.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kafkalite.connect.errors import ConnectException

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
#: the config topic's key for the session key (Kafka's KafkaConfigBackingStore.SESSION_KEY_KEY)
SESSION_KEY_KEY = "session-key"

#: the JVM's MAC names -> the digest (SunJCE's Mac algorithms)
MAC_DIGESTS: dict[str, Callable[..., Any]] = {
    "HmacMD5": hashlib.md5, "HmacSHA1": hashlib.sha1, "HmacSHA224": hashlib.sha224,
    "HmacSHA256": hashlib.sha256, "HmacSHA384": hashlib.sha384, "HmacSHA512": hashlib.sha512,
}
#: SunJCE KeyGenerator's default key length in bytes, per algorithm
DEFAULT_KEY_BYTES = {"HmacMD5": 64, "HmacSHA1": 64, "HmacSHA224": 28, "HmacSHA256": 32, "HmacSHA384": 48,
                     "HmacSHA512": 64}


class BadSignatureRequest(ConnectException):
    """400: the signature headers cannot be used (Kafka's BadRequestException)."""


class ForbiddenRequest(ConnectException):
    """403: the signature does not match (Kafka's ConnectRestException with FORBIDDEN)."""


def _digest(algorithm: str) -> Callable[..., Any]:
    digest = MAC_DIGESTS.get(algorithm)
    if digest is None:
        raise ValueError(f"Algorithm {algorithm} not available")      # the JVM's NoSuchAlgorithmException
    return digest


def mac(key: bytes, body: bytes, algorithm: str) -> bytes:
    return hmac.new(key, body, _digest(algorithm)).digest()


@dataclass(frozen=True)
class SessionKey:
    """A key and when the leader made it (ms since the epoch)."""
    key: bytes
    algorithm: str
    creation_timestamp: int

    def to_json(self) -> dict[str, Any]:
        """Kafka's SESSION_KEY_V0 struct as the config topic's JsonConverter writes it."""
        return {"key": base64.b64encode(self.key).decode("ascii"), "algorithm": self.algorithm,
                "creation-timestamp": self.creation_timestamp}

    @classmethod
    def from_json(cls, value: Any) -> "SessionKey | None":
        """The config topic's record; None (logged, as Kafka ignores it) when malformed."""
        if not isinstance(value, dict):
            log.error("Ignoring session key because the value is not a Map but is %s", type(value).__name__)
            return None
        key, algorithm, created = value.get("key"), value.get("algorithm"), value.get("creation-timestamp")
        if not isinstance(key, str) or not isinstance(algorithm, str) or not isinstance(created, int) \
                or isinstance(created, bool):
            log.error("Ignoring session key with invalid fields: key %s, algorithm %s, creation-timestamp %s",
                      type(key).__name__, type(algorithm).__name__, type(created).__name__)
            return None
        try:
            raw = base64.b64decode(key, validate=True)
        except (binascii.Error, ValueError) as exc:
            log.error("Ignoring session key whose key is not base64: %s", exc)
            return None
        return cls(raw, algorithm, created)

    def expiration(self, ttl_ms: int) -> float:
        """When the leader replaces it (never with a TTL of 0)."""
        return self.creation_timestamp + ttl_ms if ttl_ms > 0 else float("inf")


class KeyGenerator:
    """``inter.worker.key.generation.algorithm`` and ``inter.worker.key.size`` (bits)."""

    def __init__(self, algorithm: str, key_size_bits: int | None) -> None:
        _digest(algorithm)
        if key_size_bits is not None and (key_size_bits < 40 or key_size_bits % 8):
            raise ValueError(f"Unable to create key generator with algorithm {algorithm} and key size "
                             f"{key_size_bits}: Key length must be a multiple of 8 and at least 40 bits")
        self.algorithm = algorithm
        self.key_bytes = key_size_bits // 8 if key_size_bits is not None else DEFAULT_KEY_BYTES[algorithm]

    def generate(self, now_ms: int) -> SessionKey:
        return SessionKey(secrets.token_bytes(self.key_bytes), self.algorithm, now_ms)

    def matches(self, key: SessionKey) -> bool:
        """Whether ``key`` is what this worker would generate (else the leader replaces it)."""
        return key.algorithm == self.algorithm and len(key.key) == self.key_bytes


def sign(key: SessionKey, body: bytes, algorithm: str) -> dict[str, str]:
    """The two headers of a signed internal request."""
    return {SIGNATURE_HEADER: base64.b64encode(mac(key.key, body, algorithm)).decode("ascii"),
            SIGNATURE_ALGORITHM_HEADER: algorithm}


@dataclass(frozen=True)
class InternalRequestSignature:
    body: bytes
    algorithm: str
    signature: bytes

    @classmethod
    def from_headers(cls, body: bytes, header: Callable[[str], str | None]) -> "InternalRequestSignature | None":
        """The request's signature; None when either header is missing; 400 when unusable."""
        algorithm, encoded = header(SIGNATURE_ALGORITHM_HEADER), header(SIGNATURE_HEADER)
        if algorithm is None or encoded is None:
            return None
        try:
            _digest(algorithm)
        except ValueError as exc:
            raise BadSignatureRequest(str(exc)) from None
        try:
            signature = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadSignatureRequest(str(exc)) from None
        return cls(body, algorithm, signature)

    def is_valid(self, key: SessionKey) -> bool:
        return hmac.compare_digest(mac(key.key, self.body, self.algorithm), self.signature)


def verify(signature: InternalRequestSignature | None, key: SessionKey | None,
           verification_algorithms: Sequence[str]) -> None:
    """Kafka's checks in ``DistributedHerder.putTaskConfigs``, with its messages."""
    if signature is None:
        raise BadSignatureRequest("Internal request missing required signature")
    if signature.algorithm not in verification_algorithms:
        raise BadSignatureRequest(
            f"This worker does not support the '{signature.algorithm}' key signing algorithm used by other workers. "
            f"This worker is currently configured to use: [{', '.join(verification_algorithms)}]. "
            "Check that all workers' configuration files permit the same set of signature algorithms, "
            "and correct any misconfigured worker and restart it.")
    if key is None:
        raise ConnectException("Internal request signing is enabled but no session key has been distributed yet")
    if not signature.is_valid(key):
        raise ForbiddenRequest("Internal request contained invalid signature.")


@dataclass(frozen=True)
class SigningConfig:
    """The ``inter.worker.*`` settings, validated as Kafka's DistributedConfig validates them."""
    key_generation_algorithm: str = "HmacSHA256"
    key_size: int | None = None
    key_ttl_ms: int = 3600000
    signature_algorithm: str = "HmacSHA256"
    verification_algorithms: tuple[str, ...] = ("HmacSHA256",)

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> "SigningConfig":
        def invalid(name: str, value: str, why: str) -> ValueError:
            return ValueError(f"Invalid value {value} for configuration {name}: {why}")
        key_alg = props.get("inter.worker.key.generation.algorithm", "HmacSHA256").strip()
        sig_alg = props.get("inter.worker.signature.algorithm", "HmacSHA256").strip()
        raw_ver = props.get("inter.worker.verification.algorithms", "HmacSHA256")
        verification = tuple(a.strip() for a in raw_ver.split(",") if a.strip())
        raw_size = props.get("inter.worker.key.size", "").strip()
        raw_ttl = props.get("inter.worker.key.ttl.ms", "3600000").strip()
        for name, alg in [("inter.worker.key.generation.algorithm", key_alg),
                          ("inter.worker.signature.algorithm", sig_alg)] + \
                         [("inter.worker.verification.algorithms", a) for a in verification]:
            if alg not in MAC_DIGESTS:
                raise invalid(name, alg, f"Algorithm {alg} not available")
        if not verification:
            raise invalid("inter.worker.verification.algorithms", "[]",
                          "At least one signature verification algorithm must be provided")
        if key_alg not in verification:
            raise invalid("inter.worker.key.generation.algorithm", key_alg,
                          "Key generation algorithm must be present in inter.worker.verification.algorithms list")
        try:
            size = int(raw_size) if raw_size and raw_size.lower() != "null" else None
        except ValueError:
            raise invalid("inter.worker.key.size", raw_size, "Not a number of type INT") from None
        try:
            ttl = int(raw_ttl)
        except ValueError:
            raise invalid("inter.worker.key.ttl.ms", raw_ttl, "Not a number of type INT") from None
        if not 0 <= ttl <= 2 ** 31 - 1:
            raise invalid("inter.worker.key.ttl.ms", raw_ttl, "Value must be in the range [0, 2147483647]")
        out = cls(key_alg, size, ttl, sig_alg, verification)
        KeyGenerator(key_alg, size)                           # a key size the generator cannot make
        return out

    def key_generator(self) -> KeyGenerator:
        return KeyGenerator(self.key_generation_algorithm, self.key_size)
