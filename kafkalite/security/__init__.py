"""Pure security pieces: principals, JAAS option parsing, SASL PLAIN and SCRAM (RFC 5802/7677).

Nothing here touches the network, Twisted or ZooKeeper: the per-connection machinery
(``kafkalite.net.sasl``, ``kafkalite.net.tls``) feeds bytes in and gets bytes or an
:class:`AuthenticationError` out, so the state machines are unit-tested (and fuzzed) with plain
values.
"""
from __future__ import annotations


class AuthenticationError(Exception):
    """Authentication failed (Kafka's SaslAuthenticationException); str() is the client's message."""


class IllegalSaslState(Exception):
    """A SASL message out of order for the mechanism's exchange (Kafka's IllegalSaslStateException)."""
