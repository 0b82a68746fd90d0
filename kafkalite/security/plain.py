"""SASL/PLAIN (RFC 4616) on the server side, as Kafka's PlainSaslServer checks it.

The client's one message is ``[authzid] NUL authcid NUL passwd`` (UTF-8). The authorization id
must be empty or the user name itself; the password is compared with the broker's
``user_<name>`` entry of PlainLoginModule's JAAS options in constant time.
"""
from __future__ import annotations

import hmac
from typing import Mapping

from kafkalite.security import AuthenticationError, IllegalSaslState

MECHANISM = "PLAIN"


def parse_token(token: bytes) -> tuple[str, str, str]:
    """(authzid, username, password) of a PLAIN message; AuthenticationError if malformed."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise AuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise AuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise AuthenticationError("Authentication failed: username not specified")
    if not password:
        raise AuthenticationError("Authentication failed: password not specified")
    return authzid, username, password


def encode_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN message (inter-broker connections)."""
    return f"{authzid}\x00{username}\x00{password}".encode("utf-8")


class PlainServer:
    """One PLAIN exchange: one client message, an empty server answer."""

    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise IllegalSaslState("SASL/PLAIN authentication already complete")
        authzid, username, password = parse_token(token)
        if authzid and authzid != username:
            raise AuthenticationError("Authentication failed: Client requested an authorization id that is "
                                      "different from username")
        expected = self.users.get(username)
        # compare against something even for an unknown user, so timing tells nothing
        ok = hmac.compare_digest((expected or "\x00unknown").encode("utf-8"), password.encode("utf-8"))
        if expected is None or not ok:
            raise AuthenticationError("Authentication failed: Invalid username or password")
        self.authorization_id = username
        self.complete = True
        return b""
