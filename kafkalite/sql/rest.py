"""ksqlDB's REST API on Twisted Web (``ksqldb-rest-app``'s ``KsqlResource``, ``ServerInfoResource``,
``HealthCheckResource``, ``StatusResource``): the handlers only decode the request and call the
engine; the engine runs in Twisted's thread pool (it talks to brokers and Spark), one statement
list at a time.

* ``POST /ksql`` ``{"ksql": "...;", "streamsProperties": {...}}`` -> a JSON array of entities;
  a statement error is 400 with ksqlDB's ``statement_error`` body;
* ``GET /info``, ``GET /healthcheck``, ``GET /status``, ``GET /status/<type>/<entity>/<action>``.

* ``POST /query`` ``{"ksql": "SELECT ...;", "streamsProperties": {...}}`` -> ksqlDB's streamed JSON
  array over chunked HTTP/1.1: ``[{"header":{"queryId":..,"schema":..}},`` then one
  ``{"row":{"columns":[..]}},`` per row, ``{"finalMessage":"Limit Reached"}]`` at a LIMIT;
* ``POST /query-stream`` ``{"sql": ..., "properties": {...}}`` -> with ``Accept:
  application/vnd.ksqlapi.delimited.v1`` (the default) one metadata JSON line
  ``{"queryId","columnNames","columnTypes"}`` then one JSON array per row; with
  ``application/json`` one JSON array of the metadata and the rows;
* ``POST /close-query`` ``{"queryId": ...}`` stops a push query.

A push query's rows arrive on Spark's callback thread and are written from the reactor thread
(``callFromThread``); the query is stopped (off the reactor) when the client disconnects, on
/close-query, or at its LIMIT. ``/inserts-stream`` answers 501 with ksqlDB's error JSON.

Every endpoint is served over HTTP/1.1 and over cleartext HTTP/2 with prior knowledge on the same
listener (``PriorKnowledgeChannel``), as ksqlDB's Vert.x server does.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from twisted.internet import reactor, threads
from twisted.python.failure import Failure
from twisted.web import http, resource, server

from kafkalite.sql.errors import BAD_REQUEST, NOT_FOUND, SERVER_ERROR, KsqlError
from kafkalite.sql.queries import Row, TransientQuery

log = logging.getLogger(__name__)

KSQL_JSON = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
NOT_SERVED = {b"/inserts-stream"}


class EngineLike(Protocol):
    def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def info(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]: ...

    def command_statuses(self) -> dict[str, str]: ...

    def query(self, text: str, properties: dict[str, Any] | None = None) -> TransientQuery: ...

    def close_query(self, query_id: str) -> bool: ...


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
        if path not in (b"/ksql", b"/query", b"/query-stream", b"/close-query"):
            return self._unknown(request, path)
        try:
            body = json.loads((request.content.read() if request.content is not None else b"") or b"{}")
        except ValueError as exc:
            return _error(request, 400, KsqlError(f"Invalid JSON in request: {exc}", code=BAD_REQUEST))
        if not isinstance(body, dict):
            return _error(request, 400, KsqlError("The request must be a JSON object", code=BAD_REQUEST))
        if path == b"/close-query":
            return self._close(request, body)
        field, props_field = ("sql", "properties") if path == b"/query-stream" else ("ksql", "streamsProperties")
        if not isinstance(body.get(field), str):
            return _error(request, 400, KsqlError(f"The request must be a JSON object with a '{field}' string",
                                                  code=BAD_REQUEST))
        props = body.get(props_field) or {}
        if not isinstance(props, dict):
            return _error(request, 400, KsqlError(f"{props_field} must be a JSON object", code=BAD_REQUEST))
        if path == b"/ksql":
            d = threads.deferToThread(self.engine.execute, body[field], props)
            d.addCallbacks(lambda entities: _finish(request, 200, entities), lambda f: _failed(request, f))
            return server.NOT_DONE_YET
        accept = (request.getHeader(b"accept") or b"").decode("latin-1")
        writer: type[QueryWriter] = (QueryWriter if path == b"/query"
                                     else JsonStreamWriter if "application/json" in accept
                                     and DELIMITED not in accept else DelimitedWriter)
        dq = threads.deferToThread(self.engine.query, body[field], props)
        dq.addCallbacks(lambda q: (PrintWriter if q.printing else writer)(request).start(q),
                        lambda f: _failed(request, f))
        return server.NOT_DONE_YET

    def _close(self, request: server.Request, body: dict[str, Any]) -> bytes | int:
        query_id = body.get("queryId")
        if not isinstance(query_id, str):
            return _error(request, 400, KsqlError("The request must be a JSON object with a 'queryId' string",
                                                  code=BAD_REQUEST))
        d = threads.deferToThread(self.engine.close_query, query_id)

        def answered(found: bool) -> None:
            if found:
                _finish(request, 200, {})
            else:
                _finish(request, 400, KsqlError(f"No query with id {query_id}", code=BAD_REQUEST).body())
        d.addCallbacks(answered, lambda f: _failed(request, f))
        return server.NOT_DONE_YET

    def _unknown(self, request: server.Request, path: bytes) -> bytes:
        if path in NOT_SERVED:
            return _error(request, 501, KsqlError(f"{path.decode()} (push and pull queries) is not served by "
                                                  "this server yet", code=50100))
        return _error(request, 404, KsqlError(f"Path not found: {path.decode('utf-8', 'replace')}",
                                              code=NOT_FOUND))


class QueryWriter:
    """Streams one transient query to the client in ``/query``'s shape (ksqlDB's
    ``QueryStreamWriter``); the subclasses are ``/query-stream``'s two shapes. Every write happens
    on the reactor thread; the query is stopped in the thread pool."""

    content_type = "application/json"

    def __init__(self, request: server.Request) -> None:
        self.request = request
        self.query: TransientQuery | None = None
        self.sent = 0
        self.done = False

    def start(self, query: TransientQuery) -> None:
        self.query = query
        if getattr(self.request, "_disconnected", False):
            self._close_query()
            return
        self.request.setResponseCode(200)
        self.request.setHeader(b"content-type", self.content_type.encode())
        self.request.write(self.header(query))
        if not query.push:
            self.rows(query.rows, final=True)
            return
        self.request.notifyFinish().addErrback(lambda _: self._close_query())
        query.on_close.append(lambda: reactor.callFromThread(self.rows, [], True))  # type: ignore[attr-defined]
        query.listen(lambda rows: reactor.callFromThread(self.rows, rows))  # type: ignore[attr-defined]

    def rows(self, rows: list[Row], final: bool = False) -> None:
        if self.done or self.query is None:
            return
        limit = self.query.limit
        for row in rows:
            if limit is not None and self.sent >= limit:
                break
            self.request.write(self.row(row))
            self.sent += 1
        if final or (limit is not None and self.sent >= limit):
            self.done = True
            if self.query.error is not None:             # ksqlDB's error row: the query failed
                self.request.write(self.row_error(KsqlError(self.query.error, code=SERVER_ERROR).body()))
            self.request.write(self.end(limit is not None and self.sent >= limit))
            self.request.finish()
            self._close_query()

    def _close_query(self) -> None:
        self.done = True
        if self.query is not None and self.query.push and not self.query.closed:
            threads.deferToThread(self.query.close)

    def header(self, query: TransientQuery) -> bytes:
        return b"[" + json.dumps({"header": {"queryId": query.id, "schema": query.schema}}).encode()

    def row(self, row: Row) -> bytes:
        return b",\n" + json.dumps({"row": {"columns": row}}).encode()

    def row_error(self, error: dict[str, Any]) -> bytes:
        return b",\n" + json.dumps({"errorMessage": error}).encode()

    def end(self, limit_reached: bool) -> bytes:
        return (b",\n" + json.dumps({"finalMessage": "Limit Reached"}).encode() if limit_reached else b"") + b"]\n"


class DelimitedWriter(QueryWriter):
    """``/query-stream`` as ``application/vnd.ksqlapi.delimited.v1``: one JSON document per line."""

    content_type = DELIMITED

    def header(self, query: TransientQuery) -> bytes:
        return json.dumps({"queryId": query.id, "columnNames": query.column_names,
                           "columnTypes": query.column_types}).encode() + b"\n"

    def row(self, row: Row) -> bytes:
        return json.dumps(row).encode() + b"\n"

    def row_error(self, error: dict[str, Any]) -> bytes:
        return json.dumps(error).encode() + b"\n"

    def end(self, limit_reached: bool) -> bytes:
        return b""


class JsonStreamWriter(DelimitedWriter):
    """``/query-stream`` as ``application/json``: one JSON array of the metadata then the rows."""

    content_type = "application/json"

    def header(self, query: TransientQuery) -> bytes:
        return b"[" + super().header(query).rstrip(b"\n")

    def row(self, row: Row) -> bytes:
        return b",\n" + json.dumps(row).encode()

    def row_error(self, error: dict[str, Any]) -> bytes:
        return b",\n" + json.dumps(error).encode()

    def end(self, limit_reached: bool) -> bytes:
        return b"]\n"


class PrintWriter(QueryWriter):
    """PRINT's stream (ksqlDB's ``TopicStreamWriter``): plain text, one line per record and per
    change of the possible key and value formats."""

    content_type = "text/plain"

    def header(self, query: TransientQuery) -> bytes:
        return b""

    def row(self, row: Row) -> bytes:
        return str(row).encode() + b"\n"

    def end(self, limit_reached: bool) -> bytes:
        return b""


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


#: what an HTTP/2 client sends first on a cleartext connection with prior knowledge (RFC 7540 3.5)
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class PriorKnowledgeChannel(http._GenericHTTPChannelProtocol):
    """HTTP/1.1, or HTTP/2 over cleartext when the client starts with HTTP/2's preface ("prior
    knowledge", h2c), as ksqlDB's Vert.x listener serves both on one port: the Python ksqlDB
    clients (``ksqldb``, ``jetblack-ksql-dbapi``, ksql-python's http2 mode) open /query-stream so.
    Twisted switches to its ``H2Connection`` only for TLS ALPN's ``h2``; this records the preface
    as that negotiation (``INegotiated.negotiatedProtocol``) before Twisted looks at it."""

    _seen = b""

    def dataReceived(self, data: bytes) -> None:
        if self._negotiatedProtocol is None and http.H2_ENABLED:
            transport = self._channel.transport
            if getattr(transport, "negotiatedProtocol", None) is None:
                self._seen += data
                if len(self._seen) < len(H2_PREFACE) and H2_PREFACE.startswith(self._seen):
                    return                                # too early to tell: wait for more bytes
                data, self._seen = self._seen, b""
                if data.startswith(H2_PREFACE):
                    transport.negotiatedProtocol = b"h2"
        super().dataReceived(data)


class KsqlSite(server.Site):
    def protocol(self) -> PriorKnowledgeChannel:
        return PriorKnowledgeChannel(http.HTTPChannel())


def make_site(engine: EngineLike) -> server.Site:
    return KsqlSite(KsqlApi(engine))
