"""Typed failures of the wire codec.

Everything the codec raises for bad bytes (or for a body it cannot encode) is a
:class:`ProtocolError`, a ``ValueError``, so the network layer has one thing to catch and can
tell "close this connection" apart from bugs elsewhere. ``struct.error``, ``IndexError``,
``UnicodeDecodeError`` and friends never escape the codec.
"""
from __future__ import annotations


class ProtocolError(ValueError):
    """Base class: the bytes (or the value to encode) do not follow the Kafka protocol."""


class TruncatedError(ProtocolError):
    """The data ended before a field, or a length/count points past the end."""


class InvalidFrameError(ProtocolError):
    """A size, length, count or varint is impossible (negative, too big, too long) or garbage."""


class UnknownApiError(ProtocolError):
    """The request header names an API key the tables do not know."""

    def __init__(self, api_key: int, correlation_id: int | None = None) -> None:
        super().__init__(f"unknown API key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class UnsupportedVersionError(ProtocolError):
    """The API is known but this version is outside its valid range."""

    def __init__(self, api_key: int, version: int, correlation_id: int | None = None) -> None:
        super().__init__(f"unsupported version {version} of API key {api_key}")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id


class UnknownMessageError(ProtocolError):
    """A data struct or message name that is not in the tables."""


class EncodeError(ProtocolError):
    """A value handed to the encoder cannot be written (wrong type, out of range, null)."""
