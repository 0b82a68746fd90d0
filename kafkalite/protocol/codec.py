"""Requests, responses and data structs to and from bytes, driven by the message tables.

Frames handed to the decoders are the bytes *after* the int32 size prefix (what
:class:`.framing.FrameDecoder` yields). Encoders return a list of buffers whose first element
starts with the size prefix, ready for ``transport.writeSequence``.

Trailing bytes after the last field are tolerated, as Kafka's generated readers do (they never
check that a buffer is exhausted); this is what lets a reader parse a newer version of a
data struct (ConsumerProtocol subscriptions) by the fields it knows.

Strict encoding (:func:`set_strict`, or ``KAFKALITE_STRICT_CODEC=1`` in the environment when
this module is imported, so broker subprocesses started by tests inherit it): every encoder
refuses a key that is no field of its struct in any version and a non-tagged field of the
encoded version that the dict lacks, with an :class:`EncodeError` naming message, version and
key. Off by default: then a missing key takes its default and unknown keys are ignored. The
test suite turns it on; the switch picks compiled encoder variants once, so the default mode
pays nothing for it.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

from . import compiler
from .api_keys import ApiKey
from .errors import (EncodeError, InvalidFrameError, ProtocolError, TruncatedError,
                     UnknownApiError, UnknownMessageError, UnsupportedVersionError)
from .schema import MessageSpec, Tables, load_tables

log = logging.getLogger(__name__)

_TABLES: Tables = load_tables()
# a plain int: compared on every response encode, and an enum attribute lookup costs ~4x more
_API_VERSIONS = int(ApiKey.API_VERSIONS)
_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_REQUEST_HEADER = _TABLES.messages["RequestHeader"]
_RESPONSE_HEADER = _TABLES.messages["ResponseHeader"]

#: api_key -> API name (``"Produce"``, ``"Fetch"``, ...), for every request in the tables.
API_KEYS: dict[int, str] = {
    key: spec.name[: -len("Request")] for key, spec in sorted(_TABLES.requests.items())
}

#: Environment variable that turns strict encoding on at import ("1", "true", "yes", "on").
STRICT_ENV = "KAFKALITE_STRICT_CODEC"

_EncoderFactory = Callable[[MessageSpec, int], Callable[[dict, bytearray, list], bytearray]]
#: The encoder factory every encode call uses: compiler.encoder, or compiler.strict_encoder.
_encoder: _EncoderFactory = compiler.encoder


def set_strict(on: bool) -> None:
    """Turn strict encoding on or off for this process (see the module docstring)."""
    global _encoder
    _encoder = compiler.strict_encoder if on else compiler.encoder


def is_strict() -> bool:
    """Whether encoders refuse unknown keys and missing fields."""
    return _encoder is compiler.strict_encoder


def strict_from_env(environ: Any = os.environ) -> bool:
    """The strict switch as ``KAFKALITE_STRICT_CODEC`` says (unset or "0"/"false": off)."""
    return environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


set_strict(strict_from_env())


class RequestHeader(NamedTuple):
    """A parsed request header; ``body_offset`` is where the body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def valid_versions(api_key: int) -> tuple[int, int]:
    """The (min, max) versions the tables describe for ``api_key`` (not what the broker serves)."""
    spec = _TABLES.requests.get(api_key)
    if spec is None:
        raise UnknownApiError(api_key)
    return spec.valid


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header v2 for flexible versions, else v1.

    For ApiVersions above the known maximum this still says v2, as Kafka does (every version
    from the first flexible one up counts as flexible).
    """
    spec = _TABLES.requests.get(api_key)
    if spec is None:
        raise UnknownApiError(api_key)
    return 2 if spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header v1 for flexible versions, else v0; ApiVersions always v0 (KIP-511)."""
    if api_key == _API_VERSIONS:
        return 0
    spec = _TABLES.responses.get(api_key)
    if spec is None:
        raise UnknownApiError(api_key)
    return 1 if spec.is_flexible(api_version) else 0


def _as_view(frame: Any) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def _run_decoder(fn: Callable, view: memoryview, pos: int, what: str) -> tuple[dict, int]:
    """Call a generated decoder, turning every low-level failure into a ProtocolError."""
    try:
        return fn(view, pos)
    except ProtocolError:
        raise
    except (struct.error, IndexError) as exc:
        raise TruncatedError(f"{what}: data ends early ({exc})") from None
    except (ValueError, OverflowError, MemoryError, RecursionError, TypeError) as exc:
        raise InvalidFrameError(f"{what}: malformed content ({exc.__class__.__name__}: {exc})") from None


def _run_encoder(fn: Callable, body: Any, out: bytearray, parts: list, what: str) -> bytearray:
    """Call a generated encoder, turning bad values into an EncodeError."""
    try:
        return fn(body, out, parts)
    except ProtocolError:
        raise
    except (struct.error, AttributeError, TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"{what}: cannot encode ({exc.__class__.__name__}: {exc})") from exc


def _versioned(spec: MessageSpec | None, api_key: int, version: int,
               correlation_id: int | None = None) -> MessageSpec:
    if spec is None:
        raise UnknownApiError(api_key, correlation_id)
    if not spec.supports(version):
        raise UnsupportedVersionError(api_key, version, correlation_id)
    return spec


# ------------------------------------------------------------------------- requests


def read_request_header(frame: Any) -> RequestHeader:
    """Parse only the request header, so the broker can refuse a key/version unparsed.

    Raises :class:`UnknownApiError` for a key missing from the tables (its header version, and
    so where the body starts, is unknowable) and :class:`UnsupportedVersionError` for a
    negative version. A version above the table's maximum is returned as is: the broker
    decides (ApiVersions gets the v0 error answer, anything else a closed connection).
    """
    view = _as_view(frame)
    if len(view) < _HEAD.size:
        raise TruncatedError(f"request header needs {_HEAD.size} bytes, frame has {len(view)}")
    api_key, api_version, correlation_id = _HEAD.unpack_from(view, 0)
    spec = _TABLES.requests.get(api_key)
    if spec is None:
        raise UnknownApiError(api_key, correlation_id)
    if api_version < 0:
        raise UnsupportedVersionError(api_key, api_version, correlation_id)
    header_version = 2 if spec.is_flexible(api_version) else 1
    fields, pos = _run_decoder(compiler.decoder(_REQUEST_HEADER, header_version), view, 0,
                               "RequestHeader")
    return RequestHeader(api_key, api_version, correlation_id, fields["client_id"], pos)


def decode_request_body(header: RequestHeader, frame: Any) -> dict:
    """Decode the body that follows ``header`` in ``frame``.

    RECORDS fields come back as ``memoryview`` slices of ``frame`` (zero copy: patching them
    patches the frame).
    """
    spec = _versioned(_TABLES.requests.get(header.api_key), header.api_key, header.api_version,
                      header.correlation_id)
    view = _as_view(frame)
    body, _end = _run_decoder(compiler.decoder(spec, header.api_version), view,
                              header.body_offset, spec.name)
    return body


def decode_request(frame: Any) -> tuple[RequestHeader, dict]:
    """Header and body of one request frame."""
    header = read_request_header(frame)
    return header, decode_request_body(header, frame)


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: Mapping[str, Any]) -> list:
    """A request frame (size prefix first) as a list of buffers, for the project's client."""
    spec = _versioned(_TABLES.requests.get(api_key), api_key, api_version)
    header_version = 2 if spec.is_flexible(api_version) else 1
    header = {"request_api_key": api_key, "request_api_version": api_version,
              "correlation_id": correlation_id, "client_id": client_id}
    parts: list = []
    out = bytearray(4)
    out = _run_encoder(_encoder(_REQUEST_HEADER, header_version), header, out, parts,
                       "RequestHeader")
    out = _run_encoder(_encoder(spec, api_version), body, out, parts, spec.name)
    return _finish(parts, out)


# ------------------------------------------------------------------------- responses


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> list:
    """A response frame as a list of buffers; the first starts with the int32 size.

    Big RECORDS/bytes chunks in ``body`` are passed through by reference, so the list may hold
    the caller's own buffers: keep them unchanged until the transport has written them.
    """
    spec = _versioned(_TABLES.responses.get(api_key), api_key, api_version)
    header_version = 0 if api_key == _API_VERSIONS else (1 if spec.is_flexible(api_version) else 0)
    parts: list = []
    out = bytearray(4)
    out = _run_encoder(_encoder(_RESPONSE_HEADER, header_version),
                       {"correlation_id": correlation_id}, out, parts, "ResponseHeader")
    out = _run_encoder(_encoder(spec, api_version), body, out, parts, spec.name)
    return _finish(parts, out)


def decode_response(api_key: int, api_version: int, frame: Any) -> tuple[int, dict]:
    """(correlation_id, body) of a response frame, for the project's client.

    For an ApiVersions answer with a non-zero error code, decode again at version 0: the
    broker answers an unsupported version in the v0 layout (kafka-protocol.md §5.1).
    """
    spec = _versioned(_TABLES.responses.get(api_key), api_key, api_version)
    header_version = 0 if api_key == _API_VERSIONS else (1 if spec.is_flexible(api_version) else 0)
    view = _as_view(frame)
    header, pos = _run_decoder(compiler.decoder(_RESPONSE_HEADER, header_version), view, 0,
                               "ResponseHeader")
    body, _end = _run_decoder(compiler.decoder(spec, api_version), view, pos, spec.name)
    return header["correlation_id"], body


def _finish(parts: list, out: bytearray) -> list:
    """Append the last buffer and write the total size into the 4 reserved bytes."""
    if out or not parts:
        parts.append(out)
    total = -4
    for p in parts:
        total += p.nbytes if isinstance(p, memoryview) else len(p)
    if total > 0x7FFFFFFF:
        raise EncodeError(f"frame of {total} bytes exceeds the int32 size field")
    _SIZE.pack_into(parts[0], 0, total)
    return parts


# ------------------------------------------------------------------------- data structs


def _data_spec(name: str, version: int) -> MessageSpec:
    spec = _TABLES.messages.get(name)
    if spec is None:
        raise UnknownMessageError(f"unknown message {name!r}")
    if not spec.supports(version):
        raise UnsupportedVersionError(-1, version)
    return spec


def encode_data(name: str, version: int, body: Mapping[str, Any]) -> bytes:
    """Encode a struct (e.g. ``"ConsumerProtocolSubscription"``) at ``version``, no prefix.

    Writing the int16 version in front, as Kafka does for these, is the caller's job.
    """
    spec = _data_spec(name, version)
    parts: list = []
    out = _run_encoder(_encoder(spec, version), body, bytearray(), parts, name)
    parts.append(out)
    return b"".join(parts)


def decode_data(name: str, version: int, buf: Any) -> dict:
    """Decode a struct written by :func:`encode_data` (trailing bytes are ignored)."""
    spec = _data_spec(name, version)
    body, _end = _run_decoder(compiler.decoder(spec, version), _as_view(buf), 0, name)
    return body
