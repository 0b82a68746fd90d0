"""Connect's REST API (Kafka 2.8's ``ConnectorsResource``, ``ConnectorPluginsResource``,
``LoggingResource``, ``RootResource``) on Twisted Web.

One leaf resource routes ``(method, path)`` to a handler that only calls the herder (in the
reactor's thread pool: herder calls block). Answers are JSON; every failure is Connect's
``{"error_code": <http status>, "message": ...}``: unknown connector or path 404, an existing
connector 409, an invalid configuration 400 with the validation messages, a rebalance in progress
409, a body that is not JSON 500 (as Kafka's Jackson mapper answers). A write a follower cannot
serve is forwarded to the leader's URL (``?forward=`` as Kafka does: one more hop at most).
The request parsing helpers (:class:`LimitedRequest`, :class:`Call`) are the registry's.
"""
from __future__ import annotations

import json
import logging
from io import BytesIO
from typing import Any, Callable, cast
from urllib.parse import unquote, urlencode

from twisted.internet import defer, threads
from twisted.python.failure import Failure
from twisted.web import resource, server
from twisted.web.client import Agent, FileBodyProducer, readBody
from twisted.web.http_headers import Headers
from twisted.web.iweb import IBodyProducer

from kafkalite.connect.errors import AlreadyExistsException, ConfigException, ConnectException, NotFoundException
from kafkalite.registry.rest import Call, LimitedRequest, match_route

from .herder import BadRequestException, NotLeaderException, RebalanceNeededException
from .metrics import CONTENT_TYPE_LATEST
from .signing import (SIGNATURE_ALGORITHM_HEADER, SIGNATURE_HEADER, BadSignatureRequest, ForbiddenRequest,
                      InternalRequestSignature)

log = logging.getLogger(__name__)

JSON = b"application/json"
DEFAULT_MAX_BODY = 16 * 1024 * 1024


class RestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.status, "message": self.message}


class Reply:
    """A status code other than 200, an optional body and headers."""

    def __init__(self, status: int, body: Any = None, headers: dict[bytes, bytes] | None = None,
                 raw: bytes | None = None, content_type: bytes = JSON) -> None:
        self.status, self.body, self.headers, self.raw, self.content_type = status, body, headers or {}, raw, content_type


def error_for(exc: BaseException) -> RestError:
    """Connect's status code for a herder error (Kafka's ConnectExceptionMapper)."""
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, NotFoundException):
        return RestError(404, str(exc))
    if isinstance(exc, AlreadyExistsException):
        return RestError(409, str(exc))
    if isinstance(exc, RebalanceNeededException):
        return RestError(409, str(exc))
    if isinstance(exc, NotLeaderException):
        return RestError(409, "Cannot complete request because of a conflicting operation (e.g. worker rebalance)")
    if isinstance(exc, ForbiddenRequest):
        return RestError(403, str(exc))
    if isinstance(exc, (BadRequestException, BadSignatureRequest, ConfigException)):
        return RestError(400, str(exc))
    if isinstance(exc, ConnectException):
        return RestError(500, str(exc))
    log.error("unexpected error in a REST request", exc_info=exc)
    return RestError(500, str(exc) or type(exc).__name__)


class ConnectCall(Call):
    """The registry's routed call, with Connect's body rules (any JSON; bad JSON is 500)."""

    def body(self) -> Any:
        if not getattr(self, "_parsed", False):
            content = self.request.content
            raw = b""
            if content is not None:
                content.seek(0)
                raw = content.read()
            self.raw = raw
            if not raw.strip():
                raise RestError(400, "Request body is required")
            try:
                self._body = json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise RestError(500, f"Unrecognized JSON in the request body: {exc}") from None
            self._parsed = True
        return self._body


Handler = Callable[[ConnectCall], Any]


class ConnectResource(resource.Resource):
    """The whole API as one leaf resource."""

    isLeaf = True

    def __init__(self, herder: Any, reactor: Any, metrics: Any = None,
                 run_blocking: Callable[..., defer.Deferred] | None = None) -> None:
        """``herder``: a StandaloneHerder or DistributedHerder (the writes are theirs);
        ``run_blocking(fn, *args)`` runs a herder call off the reactor thread (tests run it inline)."""
        super().__init__()
        self._run_blocking = run_blocking
        self.herder = herder
        self.reactor = reactor
        self.metrics = metrics
        self.agent = Agent(reactor, connectTimeout=10)
        self.routes: list[tuple[str, tuple[str, ...], Handler]] = [
            ("GET", (), self.root),
            ("GET", ("health",), self.health),
            ("GET", ("metrics",), self.prometheus),
            ("GET", ("connectors",), self.list_connectors),
            ("POST", ("connectors",), self.create_connector),
            ("GET", ("connectors", "*"), self.get_connector),
            ("DELETE", ("connectors", "*"), self.delete_connector),
            ("GET", ("connectors", "*", "config"), self.get_config),
            ("PUT", ("connectors", "*", "config"), self.put_config),
            ("GET", ("connectors", "*", "status"), self.get_status),
            ("POST", ("connectors", "*", "restart"), self.restart_connector),
            ("PUT", ("connectors", "*", "pause"), self.pause),
            ("PUT", ("connectors", "*", "resume"), self.resume),
            ("GET", ("connectors", "*", "tasks"), self.get_tasks),
            ("POST", ("connectors", "*", "tasks"), self.put_task_configs),
            ("GET", ("connectors", "*", "tasks", "*", "status"), self.get_task_status),
            ("POST", ("connectors", "*", "tasks", "*", "restart"), self.restart_task),
            ("GET", ("connectors", "*", "topics"), self.get_topics),
            ("PUT", ("connectors", "*", "topics", "reset"), self.reset_topics),
            ("GET", ("connector-plugins",), self.plugins),
            ("PUT", ("connector-plugins", "*", "config", "validate"), self.validate),
            ("GET", ("admin", "loggers"), self.loggers),
            ("GET", ("admin", "loggers", "*"), self.get_logger),
            ("PUT", ("admin", "loggers", "*"), self.set_logger),
        ]

    # -- dispatch ---------------------------------------------------------------------------
    def render(self, request: server.Request) -> bytes | int:
        try:
            if getattr(request, "body_too_large", False):
                raise RestError(413, "Request body is too large")
            method = request.method.decode("ascii", "replace").upper()
            segments = [unquote(s) for s in request.path.decode("utf-8", "replace").split("/") if s]
            handler, params = self._match(method, segments)
            call = ConnectCall(request, params)
            result = handler(call)
        except Exception as exc:  # noqa: BLE001 - every failure answers Connect's error JSON
            return self._error(request, error_for(exc))
        if isinstance(result, defer.Deferred):
            result.addCallbacks(lambda value: self._finish(request, value),
                                lambda failure: self._finish_failure(request, failure, call))
            return server.NOT_DONE_YET
        return self._encode(request, result)

    def _match(self, method: str, segments: list[str]) -> tuple[Handler, list[str]]:
        route, params, path_known = match_route(self.routes, method, segments)
        if route is not None:
            return route[2], params
        if path_known:
            raise RestError(405, "HTTP 405 Method Not Allowed")
        raise RestError(404, "HTTP 404 Not Found")

    def _encode(self, request: server.Request, value: Any) -> bytes:
        if isinstance(value, Reply):
            request.setResponseCode(value.status)
            for k, v in value.headers.items():
                request.setHeader(k, v)
            request.setHeader(b"content-type", value.content_type)
            if value.raw is not None:
                return value.raw
            if value.body is None:
                return b""
            value = value.body
        request.setHeader(b"content-type", JSON)
        return json.dumps(value, separators=(",", ":")).encode()

    def _error(self, request: server.Request, exc: RestError) -> bytes:
        request.setResponseCode(exc.status)
        request.setHeader(b"content-type", JSON)
        return json.dumps(exc.body(), separators=(",", ":")).encode()

    def _finish(self, request: server.Request, value: Any) -> None:
        if getattr(request, "_disconnected", False) or request.finished:
            return
        request.write(self._encode(request, value))
        request.finish()

    def _finish_failure(self, request: server.Request, failure: Failure, call: ConnectCall) -> None:
        if getattr(request, "_disconnected", False) or request.finished:
            return
        exc = failure.value
        if isinstance(exc, NotLeaderException) and exc.leader_url and call.arg("forward", "true") != "false":
            d = defer.Deferred.fromCoroutine(self._forward(exc.leader_url, request, call))
            d.addCallbacks(lambda value: self._finish(request, value),
                           lambda f: self._finish(request, Reply(error_for(f.value).status, error_for(f.value).body())))
            return
        request.write(self._error(request, error_for(exc)))
        request.finish()

    async def _forward(self, leader_url: str, request: server.Request, call: ConnectCall) -> Reply:
        """Send the request to the leader as it came (Kafka's RestClient.httpRequest)."""
        query: dict[bytes, list[bytes]] = request.args or {}
        args = {k.decode(): v[-1].decode() for k, v in query.items() if k != b"forward"}
        args["forward"] = "false" if call.arg("forward") is not None else "true"
        url = (leader_url.rstrip("/") + request.path.decode() + "?" + urlencode(args)).encode()
        producer = cast(IBodyProducer, FileBodyProducer(BytesIO(call.raw))) if call.raw else None
        headers = Headers({b"content-type": [JSON], b"accept": [JSON]})
        for name in INTERNAL_REQUEST_HEADERS:           # a signature covers the body, which goes unchanged
            value = request.getHeader(name)
            if value is not None:
                headers.setRawHeaders(name, [value.encode("latin-1") if isinstance(value, str) else value])
        try:
            d = self.agent.request(request.method, url, headers, producer)
            d.addTimeout(90, self.reactor)
            response = await d
            content = await readBody(response)
        except Exception as exc:  # noqa: BLE001 - any transport failure is the same answer
            log.warning("forwarding %s %s to the leader %s failed: %s", request.method, request.uri, leader_url, exc)
            raise RestError(500, f"IO Error trying to forward REST request: {exc}") from None
        ctype = (response.headers.getRawHeaders(b"content-type") or [JSON])[0]
        location = response.headers.getRawHeaders(b"location")
        return Reply(response.code, raw=content, content_type=ctype,
                     headers={b"location": location[0]} if location else None)

    def _run(self, fn: Callable[..., Any], *args: Any) -> defer.Deferred:
        """A herder call, off the reactor thread (herder calls block on the brokers)."""
        if self._run_blocking is not None:
            return self._run_blocking(fn, *args)
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)

    # -- root, health, metrics --------------------------------------------------------------
    def root(self, call: ConnectCall) -> Any:
        return self.herder.server_info()

    def health(self, call: ConnectCall) -> Any:
        ready = getattr(self.herder, "ready", True)
        if not ready:
            return Reply(503, {"status": "starting", "message": "Worker is still starting up."})
        return {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}

    def prometheus(self, call: ConnectCall) -> Any:
        if self.metrics is None:
            raise RestError(404, "HTTP 404 Not Found")
        return Reply(200, raw=self.metrics.render(), content_type=CONTENT_TYPE_LATEST.encode())

    # -- connectors -------------------------------------------------------------------------
    def list_connectors(self, call: ConnectCall) -> Any:
        query: dict[bytes, list[bytes]] = call.request.args or {}
        expand = [v.decode() for v in query.get(b"expand", [])]
        h = self.herder

        def work() -> Any:
            names = h.connectors()
            if not expand:
                return names
            out: dict[str, Any] = {}
            for name in names:
                entry: dict[str, Any] = {}
                try:
                    if "status" in expand:
                        entry["status"] = h.connector_status(name)
                    if "info" in expand:
                        entry["info"] = h.connector_info(name)
                except NotFoundException:
                    continue                      # deleted meanwhile
                out[name] = entry
            return out
        return self._run(work)

    def create_connector(self, call: ConnectCall) -> Any:
        body = call.body()
        if not isinstance(body, dict):
            raise RestError(500, "Cannot deserialize the request body into a connector creation request")
        name = body.get("name")
        config = body.get("config")
        if not isinstance(name, str) or not name:
            raise RestError(400, "Connector name is null or empty.")
        if not isinstance(config, dict):
            raise RestError(400, "Connector config is required")
        if config.get("name", name) != name:
            raise RestError(400, f"Connector name configuration ({config['name']}) doesn't match connector name in "
                                 f"the URL ({name})")
        config = {**config, "name": name}
        d = self._run(self.herder.put_connector_config, name, config, False)

        def created(result: tuple[bool, dict[str, Any]]) -> Reply:
            return Reply(201, result[1], {b"location": f"/connectors/{name}".encode()})
        d.addCallback(created)
        return d

    def get_connector(self, call: ConnectCall) -> Any:
        return self._run(self.herder.connector_info, call.params[0])

    def delete_connector(self, call: ConnectCall) -> Any:
        d = self._run(self.herder.delete_connector, call.params[0])
        d.addCallback(lambda _: Reply(204))
        return d

    def get_config(self, call: ConnectCall) -> Any:
        return self._run(self.herder.connector_config, call.params[0])

    def put_config(self, call: ConnectCall) -> Any:
        name, body = call.params[0], call.body()
        if not isinstance(body, dict):
            raise RestError(500, "Cannot deserialize the request body into a connector configuration")
        d = self._run(self.herder.put_connector_config, name, body, True)

        def answered(result: tuple[bool, dict[str, Any]]) -> Reply:
            created, info = result
            if created:
                return Reply(201, info, {b"location": f"/connectors/{name}".encode()})
            return Reply(200, info)
        d.addCallback(answered)
        return d

    def get_status(self, call: ConnectCall) -> Any:
        return self._run(self.herder.connector_status, call.params[0])

    def restart_connector(self, call: ConnectCall) -> Any:
        include_tasks, only_failed = call.flag("includeTasks"), call.flag("onlyFailed")
        d = self._run(self.herder.restart_connector, call.params[0], include_tasks, only_failed)
        d.addCallback(lambda status: Reply(204) if status is None else Reply(202, status))
        return d

    def pause(self, call: ConnectCall) -> Any:
        d = self._run(self.herder.pause_connector, call.params[0])
        d.addCallback(lambda _: Reply(202))
        return d

    def resume(self, call: ConnectCall) -> Any:
        d = self._run(self.herder.resume_connector, call.params[0])
        d.addCallback(lambda _: Reply(202))
        return d

    def get_tasks(self, call: ConnectCall) -> Any:
        return self._run(self.herder.task_configs, call.params[0])

    def put_task_configs(self, call: ConnectCall) -> Any:
        """The internal endpoint a follower running a connector sends its task configs to; the
        leader writes them (204). The body is a list of string maps, as Kafka's reader wants."""
        name, body = call.params[0], call.body()
        configs = _task_config_list(body)
        signature = self.signature_from(call)
        d = self._run(self.herder.put_task_configs, name, configs, signature)
        d.addCallback(lambda _: Reply(204))
        return d

    def signature_from(self, call: ConnectCall) -> InternalRequestSignature | None:
        """The request's KIP-507 signature over the exact body bytes (None: unsigned; 400 when
        its headers cannot be used)."""
        def header(name: str) -> str | None:
            value = call.request.getHeader(name)
            return value.decode("latin-1") if isinstance(value, bytes) else value
        return InternalRequestSignature.from_headers(call.raw, header)

    def _task(self, call: ConnectCall) -> int:
        try:
            return int(call.params[1])
        except ValueError:
            raise RestError(404, "HTTP 404 Not Found") from None

    def get_task_status(self, call: ConnectCall) -> Any:
        return self._run(self.herder.task_status, call.params[0], self._task(call))

    def restart_task(self, call: ConnectCall) -> Any:
        d = self._run(self.herder.restart_task, call.params[0], self._task(call))
        d.addCallback(lambda _: Reply(204))
        return d

    def get_topics(self, call: ConnectCall) -> Any:
        return self._run(self.herder.active_topics, call.params[0])

    def reset_topics(self, call: ConnectCall) -> Any:
        d = self._run(self.herder.reset_active_topics, call.params[0])
        d.addCallback(lambda _: Reply(200))
        return d

    # -- plugins ----------------------------------------------------------------------------
    def plugins(self, call: ConnectCall) -> Any:
        from kafkalite.connect.plugins import connector_plugins
        return self._run(connector_plugins)

    def validate(self, call: ConnectCall) -> Any:
        plugin, body = call.params[0], call.body()
        if not isinstance(body, dict):
            raise RestError(500, "Cannot deserialize the request body into a connector configuration")
        body = {str(k): v if isinstance(v, str) or v is None else str(v) for k, v in body.items()}
        given = body.get("connector.class")
        if given is not None and not _same_plugin(given, plugin):
            raise RestError(400, f"Included connector type {given} does not match request type {plugin}")
        body["connector.class"] = given or plugin
        return self._run(self.herder.validate, body)

    # -- loggers (KIP-495) ------------------------------------------------------------------
    def loggers(self, call: ConnectCall) -> Any:
        out = {"root": {"level": _level_name(logging.getLogger().level)}}
        for name in sorted(logging.Logger.manager.loggerDict):
            lg = logging.Logger.manager.loggerDict[name]
            if isinstance(lg, logging.Logger) and lg.level != logging.NOTSET:
                out[name] = {"level": _level_name(lg.level)}
        return out

    def get_logger(self, call: ConnectCall) -> Any:
        name = call.params[0]
        if name == "root":
            return {"level": _level_name(logging.getLogger().level)}
        lg = logging.Logger.manager.loggerDict.get(name)
        if not isinstance(lg, logging.Logger):
            raise RestError(404, f"Logger {name} not found.")
        return {"level": _level_name(lg.getEffectiveLevel())}

    def set_logger(self, call: ConnectCall) -> Any:
        name, body = call.params[0], call.body()
        level = body.get("level") if isinstance(body, dict) else None
        if not isinstance(level, str) or not level:
            raise RestError(400, "Desired 'level' parameter was not specified in request.")
        python_level = _LEVELS.get(level.upper())
        if python_level is None:
            raise RestError(400, f"Invalid log level '{level}'.")
        target = logging.getLogger() if name == "root" else logging.getLogger(name)
        target.setLevel(python_level)
        changed = [name] + sorted(n for n, lg in logging.Logger.manager.loggerDict.items()
                                  if isinstance(lg, logging.Logger) and (name == "root" or n.startswith(name + ".")))
        for n in changed[1:]:
            child = logging.Logger.manager.loggerDict[n]
            if isinstance(child, logging.Logger) and child.level != logging.NOTSET:
                child.setLevel(python_level)
        return changed


_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
           "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG}
#: Python's levels under log4j's names, which Kafka's worker answers with (WARN, not WARNING)
_LOG4J_NAMES = {level: name for name, level in _LEVELS.items() if name != "TRACE"}


def _level_name(level: int) -> str:
    """A logger's level as Kafka's ``/admin/loggers`` shows it: log4j's name for it."""
    return _LOG4J_NAMES.get(level) or logging.getLevelName(level)


#: the headers of a signed internal request (KIP-507), kept when a request is forwarded to the leader
INTERNAL_REQUEST_HEADERS = tuple(h.lower().encode("ascii") for h in (SIGNATURE_HEADER, SIGNATURE_ALGORITHM_HEADER))


def _task_config_list(body: Any) -> list[dict[str, str]]:
    """``[{"k": "v"}, ...]`` as Kafka's ``List<Map<String, String>>`` reads it (scalars as
    strings, a null value as no setting); anything else is the 500 Kafka's JSON mapper answers."""
    if not isinstance(body, list) or not all(isinstance(c, dict) for c in body):
        raise RestError(500, "Cannot deserialize the request body into a list of task configurations")
    out = []
    for c in body:
        if any(isinstance(v, (dict, list)) for v in c.values()):
            raise RestError(500, "Cannot deserialize the request body into a list of task configurations")
        out.append({str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in c.items() if v is not None})
    return out


def _same_plugin(given: str, requested: str) -> bool:
    """Kafka compares the class names with and without the ``Connector`` suffix."""
    def norm(s: str) -> str:
        s = s.strip().rsplit(".", 1)[-1].rsplit(":", 1)[-1]
        return s[:-len("Connector")] if s.endswith("Connector") else s
    return norm(given) == norm(requested)


def make_site(herder: Any, reactor: Any, metrics: Any = None, max_body: int = DEFAULT_MAX_BODY) -> server.Site:
    """The Twisted Web site serving the herder's API."""
    request_class = type("ConnectRequest", (LimitedRequest,), {"max_body": max_body})
    site = server.Site(ConnectResource(herder, reactor, metrics), requestFactory=request_class)
    site.displayTracebacks = False
    site.noisy = False
    return site
