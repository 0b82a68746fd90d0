"""ksqlDB's REST API on Twisted Web (``ksqldb-rest-app``'s ``KsqlResource``, ``ServerInfoResource``,
``HealthCheckResource``, ``StatusResource``): the handlers only decode the request and call the
engine; the engine runs in Twisted's thread pool (it talks to brokers and Spark), one statement
list at a time.

* ``POST /ksql`` ``{"ksql": "...;", "streamsProperties": {...}}`` -> a JSON array of entities;
  a statement error is 400 with ksqlDB's ``statement_error`` body;
* ``GET /info``, ``GET /healthcheck``, ``GET /status``, ``GET /status/<type>/<entity>/<action>``.

Push and pull queries (``/query``, ``/query-stream``, ``/close-query``) are not served yet: those
paths answer ksqlDB's error JSON with 501, never a stack trace.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from twisted.internet import threads
from twisted.python.failure import Failure
from twisted.web import resource, server

from kafkalite.sql.errors import BAD_REQUEST, NOT_FOUND, SERVER_ERROR, KsqlError

log = logging.getLogger(__name__)

KSQL_JSON = "application/vnd.ksql.v1+json"
NOT_SERVED = {b"/query", b"/query-stream", b"/close-query", b"/inserts-stream"}


class EngineLike(Protocol):
    def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def info(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]: ...

    def command_statuses(self) -> dict[str, str]: ...


class KsqlApi(resource.Resource):
    """One leaf resource: routes ``(method, path)`` to the engine."""

    isLeaf = True

    def __init__(self, engine: EngineLike) -> None:
        super().__init__()
        self.engine = engine

    def render_GET(self, request: server.Request) -> bytes | int:
        path = request.path.rstrip(b"/") or b"/"
        if path == b"/info":
            return _json(request, 200, {"KsqlServerInfo": self.engine.info()})
        if path == b"/healthcheck":
            health = self.engine.health()
            return _json(request, 200 if health["isHealthy"] else 503, health)
        if path == b"/status":
            return _json(request, 200, {"commandStatuses": self.engine.command_statuses()})
        if path.startswith(b"/status/"):
            command_id = path[len(b"/status/"):].decode("utf-8", "replace")
            status = self.engine.command_statuses().get(command_id)
            if status is None:
                return _error(request, 404, KsqlError(f"Command not found: {command_id}", code=NOT_FOUND))
            return _json(request, 200, {"status": status, "message": ""})
        return self._unknown(request, path)

    def render_POST(self, request: server.Request) -> bytes | int:
        path = request.path.rstrip(b"/")
        if path != b"/ksql":
            return self._unknown(request, path)
        try:
            body = json.loads((request.content.read() if request.content is not None else b"") or b"{}")
        except ValueError as exc:
            return _error(request, 400, KsqlError(f"Invalid JSON in request: {exc}", code=BAD_REQUEST))
        if not isinstance(body, dict) or not isinstance(body.get("ksql"), str):
            return _error(request, 400, KsqlError("The request must be a JSON object with a 'ksql' string",
                                                  code=BAD_REQUEST))
        props = body.get("streamsProperties") or {}
        if not isinstance(props, dict):
            return _error(request, 400, KsqlError("streamsProperties must be a JSON object", code=BAD_REQUEST))
        d = threads.deferToThread(self.engine.execute, body["ksql"], props)
        d.addCallbacks(lambda entities: _finish(request, 200, entities), lambda f: _failed(request, f))
        return server.NOT_DONE_YET

    def _unknown(self, request: server.Request, path: bytes) -> bytes:
        if path in NOT_SERVED:
            return _error(request, 501, KsqlError(f"{path.decode()} (push and pull queries) is not served by "
                                                  "this server yet", code=50100))
        return _error(request, 404, KsqlError(f"Path not found: {path.decode('utf-8', 'replace')}",
                                              code=NOT_FOUND))


def _json(request: server.Request, status: int, doc: Any) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", KSQL_JSON.encode())
    return json.dumps(doc).encode()


def _error(request: server.Request, status: int, err: KsqlError) -> bytes:
    return _json(request, status, err.body())


def _finish(request: server.Request, status: int, doc: Any) -> None:
    if getattr(request, "_disconnected", False):
        return
    request.write(_json(request, status, doc))
    request.finish()


def _failed(request: server.Request, failure: Failure) -> None:
    err = failure.value
    if isinstance(err, KsqlError):
        _finish(request, err.http_status if 400 <= err.http_status < 600 else 400, err.body())
        return
    log.error("statement failed: %s", failure.getTraceback())
    _finish(request, 500, KsqlError(f"{type(err).__name__}: {err}", code=SERVER_ERROR).body())


def make_site(engine: EngineLike) -> server.Site:
    return server.Site(KsqlApi(engine))
