"""Confluent Schema Registry's REST API on Twisted Web.

One leaf resource routes ``(method, path)`` to :mod:`kafkalite.registry.operations`. Requests and
answers are JSON with Confluent's content types (``application/vnd.schemaregistry.v1+json``,
``application/vnd.schemaregistry+json``, ``application/json``); every failure, including a body
that is not JSON, a wrong content type, an unknown path and a body over ``max_body_bytes``
(refused from its Content-Length or as it streams, never buffered), is the registry's error JSON.

Writes (register, deletes, config and mode changes) run on the primary; another instance forwards
the request unchanged to the primary's URL (:mod:`kafkalite.registry.forwarding`) and returns its
answer, then waits until its own replay has caught up, so a client reading from it right after
sees its write.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Callable, Sequence
from urllib.parse import unquote

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.web import resource, server

from . import errors, operations as ops
from .errors import RegistryError
from .schemas import SCHEMA_TYPES
from .service import SchemaRegistry

log = logging.getLogger(__name__)

V1_JSON = "application/vnd.schemaregistry.v1+json"
SR_JSON = "application/vnd.schemaregistry+json"
JSON = "application/json"
CONTENT_TYPES = (V1_JSON, SR_JSON, JSON)
DEFAULT_MAX_BODY = 16 * 1024 * 1024
#: Set on a write forwarded to the primary; a non-primary receiving one answers 50004 instead.
FORWARDED_HEADER = "x-kafkalite-registry-forwarded"

Handler = Callable[["Call"], Any]
_UNSET = object()


def match_route(routes: Sequence[tuple[Any, ...]], method: str, segments: Sequence[str]
                ) -> tuple[tuple[Any, ...] | None, list[str], bool]:
    """The route ``(method, pattern, ...)`` whose pattern matches the path's segments (``"*"``
    matches one segment and is returned among the params), the params, and whether some route
    matched the path with another method (so the answer is 405, not 404). The registry's and
    Connect's REST layers share it."""
    path_known = False
    for route in routes:
        pattern = route[1]
        if len(pattern) != len(segments):
            continue
        params = []
        for p, s in zip(pattern, segments):
            if p == "*":
                params.append(s)
            elif p != s:
                break
        else:
            path_known = True
            if route[0] == method:
                return route, params, True
    return None, [], path_known


class LimitedRequest(server.Request):
    """A request whose body is dropped (and the request refused) once it exceeds the site's limit."""

    max_body = DEFAULT_MAX_BODY

    def gotLength(self, length: int | None) -> None:
        self.body_too_large = length is not None and length > self.max_body
        self._body_seen = 0
        super().gotLength(None if self.body_too_large else length)

    def handleContentChunk(self, data: bytes) -> None:
        self._body_seen = getattr(self, "_body_seen", 0) + len(data)
        if getattr(self, "body_too_large", False) or self._body_seen > self.max_body:
            self.body_too_large = True
            return                               # drop: never buffer a huge body
        super().handleContentChunk(data)


class Call:
    """One routed request: path parameters, query flags, the parsed body."""

    def __init__(self, request: server.Request, params: list[str]) -> None:
        self.request = request
        self.params = params
        self._body: Any = _UNSET
        self.raw = b""

    def _values(self, name: str) -> list[bytes]:
        args: dict[bytes, list[bytes]] = self.request.args or {}
        return args.get(name.encode(), [])

    def flag(self, name: str) -> bool:
        values = self._values(name)
        return bool(values) and values[-1].decode("utf-8", "replace").strip().lower() == "true"

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self._values(name)
        return values[-1].decode("utf-8", "replace") if values else default

    def body(self) -> Any:
        if self._body is _UNSET:
            ctype = (self.request.getHeader("content-type") or "").split(";")[0].strip().lower()
            if ctype not in CONTENT_TYPES:
                raise errors.unsupported_media_type(ctype or "(none)")
            if self.request.content is not None:
                self.request.content.seek(0)
                raw = self.request.content.read()
            else:
                raw = b""
            self.raw = raw
            try:
                self._body = json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise errors.unprocessable(f"Unrecognized JSON: {exc}") from None
            except RecursionError:
                raise errors.unprocessable("Unrecognized JSON: nested too deeply") from None
        return self._body


def _route_table(api: "RegistryResource") -> list[tuple[str, tuple[str, ...], Handler, bool]]:
    """(method, path pattern, handler, is_write); ``*`` matches one segment."""
    return [
        ("GET", (), api.root, False),
        ("GET", ("subjects",), api.list_subjects, False),
        ("POST", ("subjects", "*"), api.lookup, False),
        ("DELETE", ("subjects", "*"), api.delete_subject, True),
        ("GET", ("subjects", "*", "versions"), api.list_versions, False),
        ("POST", ("subjects", "*", "versions"), api.register, True),
        ("GET", ("subjects", "*", "versions", "*"), api.get_version, False),
        ("DELETE", ("subjects", "*", "versions", "*"), api.delete_version, True),
        ("GET", ("subjects", "*", "versions", "*", "schema"), api.get_version_schema, False),
        ("GET", ("subjects", "*", "versions", "*", "referencedby"), api.referenced_by, False),
        ("GET", ("schemas",), api.list_schemas, False),
        ("GET", ("schemas", "types"), api.schema_types, False),
        ("GET", ("schemas", "ids", "*"), api.schema_by_id, False),
        ("GET", ("schemas", "ids", "*", "schema"), api.schema_text_by_id, False),
        ("GET", ("schemas", "ids", "*", "versions"), api.versions_of_id, False),
        ("GET", ("schemas", "ids", "*", "subjects"), api.subjects_of_id, False),
        ("POST", ("compatibility", "subjects", "*", "versions"), api.compatibility_all, False),
        ("POST", ("compatibility", "subjects", "*", "versions", "*"), api.compatibility_version, False),
        ("GET", ("config",), api.get_global_config, False),
        ("PUT", ("config",), api.put_global_config, True),
        ("DELETE", ("config",), api.delete_global_config, True),
        ("GET", ("config", "*"), api.get_config, False),
        ("PUT", ("config", "*"), api.put_config, True),
        ("DELETE", ("config", "*"), api.delete_config, True),
        ("GET", ("mode",), api.get_global_mode, False),
        ("PUT", ("mode",), api.put_global_mode, True),
        ("GET", ("mode", "*"), api.get_mode, False),
        ("PUT", ("mode", "*"), api.put_mode, True),
        ("DELETE", ("mode", "*"), api.delete_mode, True),
        ("GET", ("contexts",), api.contexts, False),
    ]


class RegistryResource(resource.Resource):
    """The whole API as one leaf resource."""

    isLeaf = True

    def __init__(self, registry: SchemaRegistry, forwarder: Any = None) -> None:
        super().__init__()
        self.registry = registry
        self.forwarder = forwarder
        self.routes = _route_table(self)

    # -- dispatch ---------------------------------------------------------------------------
    def render(self, request: server.Request) -> bytes | int:
        accept = self._response_type(request)
        try:
            if getattr(request, "body_too_large", False):
                raise errors.too_large(getattr(request, "max_body", DEFAULT_MAX_BODY))
            if accept is None:
                raise errors.not_acceptable(request.getHeader("accept") or "")
            method = request.method.decode("ascii", "replace").upper()
            segments = [unquote(s) for s in request.path.decode("utf-8", "replace").split("/") if s]
            handler, params, is_write = self._match(method, segments)
            call = Call(request, params)
            if is_write and not self.registry.is_primary:
                result: Any = self._forward(request, call)
            elif is_write:
                result = self.registry.write(handler(call))
            else:
                result = handler(call)
        except RegistryError as exc:
            return self._error(request, exc, accept)
        except Exception:  # noqa: BLE001 - a bug must still answer with the error JSON
            log.exception("request %s %s failed", request.method, request.uri)
            return self._error(request, errors.RegistryError(500, 50001, "Internal Server Error"), accept)
        if isinstance(result, defer.Deferred):
            result.addCallbacks(lambda value: self._finish(request, value, accept),
                                lambda failure: self._finish_failure(request, failure, accept))
            return server.NOT_DONE_YET
        return self._encode(request, result, accept)

    def _match(self, method: str, segments: list[str]) -> tuple[Callable, list[str], bool]:
        route, params, path_known = match_route(self.routes, method, segments)
        if route is not None:
            return route[2], params, route[3]
        if path_known:
            raise errors.method_not_allowed(method)
        raise errors.not_found("/" + "/".join(segments))

    def _response_type(self, request: server.Request) -> str | None:
        accept = request.getHeader("accept")
        if not accept:
            return V1_JSON
        offered = [a.split(";")[0].strip().lower() for a in accept.split(",")]
        for a in offered:
            if a in CONTENT_TYPES:
                return a
        if any(a in ("*/*", "application/*", "") for a in offered):
            return V1_JSON
        return None

    def _encode(self, request: server.Request, value: Any, accept: str | None) -> bytes:
        request.setHeader(b"content-type", (accept or V1_JSON).encode())
        if isinstance(value, RawJson):
            return value.data
        return json.dumps(value, separators=(",", ":")).encode()

    def _error(self, request: server.Request, exc: RegistryError, accept: str | None) -> bytes:
        request.setResponseCode(exc.status)
        return self._encode(request, exc.body(), accept)

    def _finish(self, request: server.Request, value: Any, accept: str | None) -> None:
        if getattr(request, "_disconnected", False) or request.finished:
            return
        if isinstance(value, Forwarded):
            request.setResponseCode(value.status)
            request.setHeader(b"content-type", value.content_type)
            request.write(value.body)
        else:
            request.write(self._encode(request, value, accept))
        request.finish()

    def _finish_failure(self, request: server.Request, failure: Failure, accept: str | None) -> None:
        if getattr(request, "_disconnected", False) or request.finished:
            return
        exc = failure.value
        if not isinstance(exc, RegistryError):
            log.error("request %s %s failed: %s", request.method, request.uri, failure.getTraceback())
            exc = errors.store_error(f"Error in the backend data store: {failure.getErrorMessage()}")
        request.write(self._error(request, exc, accept))
        request.finish()

    def _forward(self, request: server.Request, call: Call) -> defer.Deferred:
        body = b""
        if request.method in (b"POST", b"PUT"):
            # A bad body is refused (422/415) before anything else, as Confluent's JAX-RS layer
            # does, so a client sees the same answer during an election as after it.
            call.body()
            body = call.raw
        primary = self.registry.primary_url
        if primary is None or self.forwarder is None or request.getHeader(FORWARDED_HEADER):
            raise errors.unknown_leader()       # (a forwarded request is never forwarded again)
        return self.forwarder.forward(primary, request, body)

    # -- handlers: reads return values; writes return ``state -> (answer, records)`` ---------
    def root(self, call: Call) -> Any:
        return {}

    def list_subjects(self, call: Call) -> Any:
        return self.registry.state.subject_names(call.flag("deleted"), call.flag("deletedOnly"),
                                                 call.arg("subjectPrefix", "") or "")

    def lookup(self, call: Call) -> Any:
        return ops.lookup(self.registry.state, call.params[0], call.body(), call.flag("normalize"),
                          call.flag("deleted"))

    def delete_subject(self, call: Call) -> Any:
        subject, permanent = call.params[0], call.flag("permanent")
        return lambda state: ops.delete_subject(state, subject, permanent)

    def list_versions(self, call: Call) -> Any:
        subject = call.params[0]
        state = self.registry.state
        if call.flag("deletedOnly"):
            versions = [sv.version for sv in state.versions(subject, True) if sv.deleted]
        else:
            versions = [sv.version for sv in state.versions(subject, call.flag("deleted"))]
        if not versions and not state.has_subject(subject, True):
            raise errors.subject_not_found(subject)
        if not versions and not call.flag("deletedOnly"):
            raise errors.subject_not_found(subject)
        return versions

    def register(self, call: Call) -> Any:
        subject, body, normalize = call.params[0], call.body(), call.flag("normalize")

        def operation(state: Any) -> Any:
            cfg = state.configs.get(subject) or state.configs.get(None) or {}
            answer, records = ops.register(state, subject, body, normalize or cfg.get("normalize") is True)
            return {"id": answer["id"]}, records
        return operation

    def get_version(self, call: Call) -> Any:
        return ops.find_version(self.registry.state, call.params[0], call.params[1], call.flag("deleted")).to_json()

    def delete_version(self, call: Call) -> Any:
        subject, version, permanent = call.params[0], call.params[1], call.flag("permanent")
        return lambda state: ops.delete_version(state, subject, version, permanent)

    def get_version_schema(self, call: Call) -> Any:
        sv = ops.find_version(self.registry.state, call.params[0], call.params[1], call.flag("deleted"))
        return RawJson(sv.schema.encode())

    def referenced_by(self, call: Call) -> Any:
        sv = ops.find_version(self.registry.state, call.params[0], call.params[1], call.flag("deleted"))
        return sorted({r.id for r in self.registry.state.referenced_by(sv.subject, sv.version)})

    def list_schemas(self, call: Call) -> Any:
        state, prefix = self.registry.state, call.arg("subjectPrefix", "") or ""
        deleted, latest_only = call.flag("deleted"), call.flag("latestOnly")
        out: list[dict[str, Any]] = []
        for subject in state.subject_names(include_deleted=deleted, prefix=prefix):
            versions = state.versions(subject, deleted)
            out.extend(sv.to_json() for sv in (versions[-1:] if latest_only else versions))
        return out

    def schema_types(self, call: Call) -> Any:
        return list(SCHEMA_TYPES)

    def _schema_id(self, call: Call) -> Any:
        try:
            schema_id = int(call.params[0])
        except ValueError:
            raise errors.schema_not_found() from None
        sv = self.registry.state.schema_by_id_live(schema_id)
        if sv is None:
            raise errors.schema_not_found(schema_id)
        return sv

    def schema_by_id(self, call: Call) -> Any:
        out = self._schema_id(call).to_json()
        for k in ("subject", "version", "id"):
            out.pop(k)
        return out

    def schema_text_by_id(self, call: Call) -> Any:
        return RawJson(self._schema_id(call).schema.encode())

    def versions_of_id(self, call: Call) -> Any:
        sv = self._schema_id(call)
        return [{"subject": v.subject, "version": v.version}
                for v in self.registry.state.versions_of_id(sv.id, call.flag("deleted"))]

    def subjects_of_id(self, call: Call) -> Any:
        sv = self._schema_id(call)
        return sorted({v.subject for v in self.registry.state.versions_of_id(sv.id, call.flag("deleted"))})

    def compatibility_all(self, call: Call) -> Any:
        return ops.check_compatibility(self.registry.state, call.params[0], None, call.body(),
                                       call.flag("normalize"), call.flag("verbose"))

    def compatibility_version(self, call: Call) -> Any:
        return ops.check_compatibility(self.registry.state, call.params[0], call.params[1], call.body(),
                                       call.flag("normalize"), call.flag("verbose"))

    def get_global_config(self, call: Call) -> Any:
        return ops.get_config(self.registry.state, None, False)

    def put_global_config(self, call: Call) -> Any:
        body = call.body()
        return lambda state: ops.set_config(state, None, body)

    def delete_global_config(self, call: Call) -> Any:
        return lambda state: ops.delete_config(state, None)

    def get_config(self, call: Call) -> Any:
        return ops.get_config(self.registry.state, call.params[0], call.flag("defaultToGlobal"))

    def put_config(self, call: Call) -> Any:
        subject, body = call.params[0], call.body()
        return lambda state: ops.set_config(state, subject, body)

    def delete_config(self, call: Call) -> Any:
        subject = call.params[0]
        return lambda state: ops.delete_config(state, subject)

    def get_global_mode(self, call: Call) -> Any:
        return ops.get_mode(self.registry.state, None, False)

    def put_global_mode(self, call: Call) -> Any:
        body, force = call.body(), call.flag("force")
        return lambda state: ops.set_mode(state, None, body, force)

    def get_mode(self, call: Call) -> Any:
        return ops.get_mode(self.registry.state, call.params[0], call.flag("defaultToGlobal"))

    def put_mode(self, call: Call) -> Any:
        subject, body, force = call.params[0], call.body(), call.flag("force")
        return lambda state: ops.set_mode(state, subject, body, force)

    def delete_mode(self, call: Call) -> Any:
        subject = call.params[0]
        return lambda state: ops.delete_mode(state, subject)

    def contexts(self, call: Call) -> Any:
        return ["."]


class RawJson:
    """An answer that is already JSON text (a stored schema string, returned as is)."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class Forwarded:
    """The primary's answer to a forwarded write, passed through unchanged."""

    def __init__(self, status: int, content_type: bytes, body: bytes) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body


def make_site(registry: SchemaRegistry, forwarder: Any = None, max_body: int = DEFAULT_MAX_BODY) -> server.Site:
    """The Twisted Web site serving ``registry``, refusing bodies over ``max_body`` bytes."""
    request_class = type("RegistryRequest", (LimitedRequest,), {"max_body": max_body})
    site = server.Site(RegistryResource(registry, forwarder), requestFactory=request_class)
    site.displayTracebacks = False
    site.noisy = False
    return site
