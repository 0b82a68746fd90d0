"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) and Kafka's stored credentials.

Kafka keeps a user's credential per mechanism in ``/config/users/<user>`` as a config entry
``SCRAM-SHA-512`` = ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(ScramCredentialUtils); the password itself is never stored. From it the broker verifies the
client's proof (StoredKey = H(ClientKey), ClientKey = proof XOR HMAC(StoredKey, AuthMessage))
and proves itself (HMAC(ServerKey, AuthMessage)).

Exchange (server side, :class:`ScramServer`)::

    client-first  n,,n=<user>,r=<cnonce>[,ext]   -> username (the caller looks up the credential)
    server-first  r=<cnonce+snonce>,s=<salt>,i=<iterations>
    client-final  c=biws,r=<cnonce+snonce>,p=<proof>
    server-final  v=<server signature>

:class:`ScramClient` is the other side, for the broker's own inter-broker connections.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from kafkalite.security import AuthenticationError, IllegalSaslState

#: mechanism -> (hashlib name, minimum iterations) as Kafka's ScramMechanism has them
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 4096), "SCRAM-SHA-512": ("sha512", 4096)}
#: ScramMechanism's ids in Describe/AlterUserScramCredentials
MECHANISM_IDS: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MAX_ITERATIONS = 16384        # Kafka's AlterUserScramCredentials limit
DEFAULT_ITERATIONS = 4096


class CredentialFormatError(ValueError):
    """A stored credential string that is not Kafka's format."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> "ScramCredential":
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise CredentialFormatError(f"invalid SCRAM credential field {item!r}")
            fields[key.strip()] = value.strip()
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except (KeyError, ValueError, binascii.Error) as exc:
            raise CredentialFormatError(f"invalid SCRAM credential: {exc}") from None


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def random_salt() -> bytes:
    """Kafka's ScramFormatter.secureRandomBytes: the bytes of a random base-36 string."""
    return _nonce().encode("ascii")


def _nonce() -> str:
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, r = divmod(value, 36)
        out = digits[r] + out
    return out or "0"


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """What ``kafka-configs --add-config 'SCRAM-SHA-512=[password=...]'`` stores."""
    name = _hash_name(mechanism)
    if iterations < MECHANISMS[mechanism][1]:
        raise ValueError(f"Iterations {iterations} is less than the minimum {MECHANISMS[mechanism][1]} "
                         f"required for {mechanism}")
    salt = salt if salt is not None else random_salt()
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(name, client_key).digest(), _hmac(name, salted, b"Server Key"),
                           iterations)


def _escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape_username(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i:i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise AuthenticationError("Invalid SCRAM username encoding")
            i += 3
        elif text[i] == ",":
            raise AuthenticationError("Invalid SCRAM username encoding")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _attributes(text: str, what: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=" or not item[0].isalpha():
            raise AuthenticationError(f"Invalid SCRAM {what} message")
        out.append((item[0], item[2:]))
    return out


def _decode(token: bytes, what: str) -> str:
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError(f"Invalid SCRAM {what} message: not UTF-8") from None
    if not text:
        raise AuthenticationError(f"Invalid SCRAM {what} message: empty")
    return text


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AuthenticationError(f"Invalid SCRAM {what} message: bad base64") from None


class ScramServer:
    """One server-side SCRAM exchange; states: client-first, (credential), client-final, complete.

    ``client_first`` returns the user name to look up; ``server_first`` takes that user's
    credential for this mechanism (None: unknown user, refused); ``client_final`` checks the
    proof. Any step out of order raises IllegalSaslState; any bad input AuthenticationError."""

    def __init__(self, mechanism: str, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.hash = _hash_name(mechanism)
        self._server_nonce = server_nonce        # tests pin it (RFC 7677's example); else random
        self.min_iterations = MECHANISMS[mechanism][1]
        self.state = "client-first"
        self.complete = False
        self.authorization_id: str | None = None
        self.username: str | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def client_first(self, token: bytes) -> str:
        if self.state != "client-first":
            raise IllegalSaslState(f"unexpected SCRAM client-first message in state {self.state}")
        text = _decode(token, "client-first")
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise AuthenticationError("Invalid SCRAM client-first message")
        cbind, authzid, bare = parts
        if cbind == "p" or cbind.startswith("p="):
            raise AuthenticationError("SCRAM channel binding is not supported")
        if cbind not in ("n", "y"):
            raise AuthenticationError("Invalid SCRAM client-first message: bad gs2 header")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationError("Invalid SCRAM client-first message: bad authzid")
        attrs = _attributes(bare, "client-first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise AuthenticationError("Invalid SCRAM client-first message")
        username = _unescape_username(attrs[0][1])
        if not username:
            raise AuthenticationError("Invalid SCRAM client-first message: empty user name")
        for key, value in attrs[2:]:
            # Kafka's extensions: only tokenauth (delegation tokens), which kafkalite does not issue
            if key == "t" or value.startswith("okenauth"):
                raise AuthenticationError("Delegation token authentication is not supported")
        if authzid and _unescape_username(authzid[2:]) != username:
            raise AuthenticationError("Authentication failed: Client requested an authorization id that is "
                                      "different from username")
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + (self._server_nonce or _nonce())
        self.username = username
        self.state = "credential"
        return username

    def server_first(self, credential: ScramCredential | None) -> bytes:
        if self.state != "credential":
            raise IllegalSaslState(f"unexpected SCRAM credential in state {self.state}")
        if credential is None:
            self.state = "failed"
            raise AuthenticationError(f"Authentication failed during authentication due to invalid credentials "
                                      f"with SASL mechanism {self.mechanism}")
        if credential.iterations < self.min_iterations:
            self.state = "failed"
            raise AuthenticationError(f"Iterations {credential.iterations} is less than the minimum "
                                      f"{self.min_iterations} for {self.mechanism}")
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self.state = "client-final"
        return self._server_first.encode("utf-8")

    def client_final(self, token: bytes) -> bytes:
        if self.state != "client-final" or self._credential is None:
            raise IllegalSaslState(f"unexpected SCRAM client-final message in state {self.state}")
        self.state = "failed"
        text = _decode(token, "client-final")
        proof_at = text.rfind(",p=")
        if proof_at < 0:
            raise AuthenticationError("Invalid SCRAM client-final message: no proof")
        without_proof, proof_b64 = text[:proof_at], text[proof_at + 3:]
        attrs = dict(_attributes(without_proof, "client-final"))
        if _b64(attrs.get("c", ""), "client-final") != self._gs2_header.encode("utf-8"):
            raise AuthenticationError("Invalid SCRAM client-final message: channel binding does not match")
        # RFC 5802 wants r equal to the server-first nonce. librdkafka before 2.6.1 (kcat 1.7's
        # 2.0.2 too) prepends its client nonce once more; Kafka 2.x did not check r at all and
        # Kafka 3.8.1+ (CVE-2024-56128) accepts a value that ends with the full nonce: so do we,
        # which still binds the proof to this exchange's server nonce
        if not (attrs.get("r") or "").endswith(self._nonce):
            raise AuthenticationError("Invalid SCRAM client-final message: nonce does not match")
        proof = _b64(proof_b64, "client-final")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        cred = self._credential
        signature = _hmac(self.hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), cred.stored_key):
            raise AuthenticationError("Authentication failed: Invalid user credentials")
        self.state = "complete"
        self.complete = True
        self.authorization_id = self.username
        server_signature = _hmac(self.hash, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (the broker's inter-broker connections, and tests)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.hash = _hash_name(mechanism)
        self.username = username
        self.password = password
        self.nonce = nonce or _nonce()
        self._client_first_bare = f"n={_escape_username(username)},r={self.nonce}"
        self._auth_message = b""
        self._salted = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        text = _decode(server_first, "server-first")
        attrs = dict(_attributes(text, "server-first"))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce) or not iterations.isdigit():
            raise AuthenticationError("Invalid SCRAM server-first message")
        self._salted = salted_password(self.mechanism, self.password, _b64(salt, "server-first"), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{text},{without_proof}".encode("utf-8")
        client_key = _hmac(self.hash, self._salted, b"Client Key")
        stored_key = hashlib.new(self.hash, client_key).digest()
        signature = _hmac(self.hash, stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("utf-8")

    def verify_server_final(self, server_final: bytes) -> None:
        text = _decode(server_final, "server-final")
        if text.startswith("e="):
            raise AuthenticationError(f"SCRAM server error: {text[2:]}")
        if not text.startswith("v="):
            raise AuthenticationError("Invalid SCRAM server-final message")
        server_key = _hmac(self.hash, self._salted, b"Server Key")
        expected = _hmac(self.hash, server_key, self._auth_message)
        if not hmac.compare_digest(_b64(text[2:].split(",")[0], "server-final"), expected):
            raise AuthenticationError("SCRAM server signature does not match: not the expected broker")
