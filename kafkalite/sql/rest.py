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
/close-query, or at its LIMIT.

* ``POST /inserts-stream`` (HTTP/2 only, as ksqlDB: HTTP/1.1 gets 400 with error 40004): a
  ``{"target": ..., "properties": {...}}`` line, then one JSON object per line, each row
  answered with ``{"status":"ok","seq":n}`` or, ending the stream, ``{"@type":"InsertError",
  "error_code":..,"message":..,"status":"error","seq":n}`` (delimited lines by default, one JSON
  array with ``Accept: application/json``). Rows are read as they arrive (``KsqlRequest``), so
  acks flow while the client is still sending.

Every endpoint is served over HTTP/1.1 and over cleartext HTTP/2 with prior knowledge on the same
listener (``PriorKnowledgeChannel``), as ksqlDB's Vert.x server does.
"""
from __future__ import annotations

import functools
import json
import logging
from typing import Any, Protocol

from twisted.internet import reactor, threads
from twisted.python.failure import Failure
from twisted.web import http, resource, server

try:
    from twisted.web._http2 import H2Stream
except ImportError:                                       # h2 missing: HTTP/1.1 only, no live inserts
    H2Stream = None  # type: ignore[assignment,misc]

from kafkalite.sql.errors import BAD_REQUEST, HTTP2_ONLY, NOT_FOUND, SERVER_ERROR, KsqlError
from kafkalite.sql.inserts import InsertsSubscriber
from kafkalite.sql.queries import Row, TransientQuery

log = logging.getLogger(__name__)

KSQL_JSON = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
INSERTS_STREAM = b"/inserts-stream"


class EngineLike(Protocol):
    def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[dict[str, Any]]: ...

    def info(self) -> dict[str, Any]: ...

    def health(self) -> dict[str, Any]: ...

    def command_statuses(self) -> dict[str, str]: ...

    def query(self, text: str, properties: dict[str, Any] | None = None) -> TransientQuery: ...

    def close_query(self, query_id: str) -> bool: ...

    def inserts_subscriber(self, target: str, properties: dict[str, Any] | None = None) -> InsertsSubscriber: ...


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
        if path == INSERTS_STREAM:
            if request.clientproto != b"HTTP/2":
                return _error(request, 400, KsqlError("This endpoint is only available when using HTTP2",
                                                      code=HTTP2_ONLY))
            # the whole body arrived before any of it was read (see KsqlRequest): same handling
            inserts = InsertsStreamHandler(request, self.engine)
            inserts.feed(request.content.read() if request.content is not None else b"")
            inserts.end()
            return server.NOT_DONE_YET
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


class InsertsStreamHandler:
    """One ``/inserts-stream`` request (ksqlDB's ``InsertsStreamHandler`` and ``AcksSubscriber``):
    body bytes are split into lines as they come; the first is the arguments, which the engine
    turns into an ``InsertsSubscriber`` in the thread pool (a bad target is a 400 before any row);
    rows then go to it in order from one worker at a time (encoding may ask the registry, producing
    may fetch metadata), and each row's outcome comes back to the reactor thread as an ack. The
    first error ends the acks; the response ends once the request has ended and every row is
    answered. While more than ``MAX_OUTSTANDING`` rows wait, the HTTP/2 stream is paused, so
    HTTP/2 flow control holds the client back (ksqlDB pauses its record parser the same way)."""

    MAX_OUTSTANDING = 200

    def __init__(self, request: server.Request, engine: EngineLike) -> None:
        self.request = request
        self.engine = engine
        accept = (request.getHeader(b"accept") or b"").decode("latin-1")
        self.json_array = "application/json" in accept and DELIMITED not in accept
        self.buffer = b""
        self.args_read = False
        self.subscriber: InsertsSubscriber | None = None
        self.queue: list[tuple[int, Any]] = []              # rows waiting for the worker
        self.working = False
        self.received = 0                                   # rows read (the next seq)
        self.answered = 0                                   # rows acked
        self.written = 0                                    # ack or error lines written
        self.request_ended = False
        self.failed = False                                 # an error line was written: no more acks
        self.finished = False
        self.finish_at_end = False                          # a response complete before the request
        self.paused = False
        request.notifyFinish().addErrback(lambda _: self._client_gone())

    # -- request side ----------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        if self.finished:
            return
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self._line(line)

    def end(self) -> None:
        """The request's body is complete (a last line needs no newline)."""
        if self.buffer:
            line, self.buffer = self.buffer, b""
            self._line(line)
        self.request_ended = True
        if not self.args_read and not self.finished:
            self._refuse(KsqlError("Invalid JSON in request: No content to map due to end-of-input",
                                   code=BAD_REQUEST))
        if self.finish_at_end:
            self.finish_at_end = False
            self._end_response()
        self._maybe_finish()

    def _line(self, line: bytes) -> None:
        if not line.strip() or self.finished:
            return
        if not self.args_read:
            self.args_read = True
            self._arguments(line)
            return
        if self.failed:
            return                                          # ksqlDB ignores the rest after an error
        seq = self.received
        self.received += 1
        try:
            row = json.loads(line)
        except ValueError:
            row = _BAD_JSON
        self.queue.append((seq, row))
        self._pump()

    def _arguments(self, line: bytes) -> None:
        try:
            args = json.loads(line)
        except ValueError as exc:
            self._refuse(KsqlError(f"Invalid JSON in request: {exc}", code=BAD_REQUEST))
            return
        if not isinstance(args, dict) or not isinstance(args.get("target"), str):
            self._refuse(KsqlError("Invalid JSON in request: Missing required creator property 'target'",
                                   code=BAD_REQUEST))
            return
        props = args.get("properties") or {}
        if not isinstance(props, dict):
            self._refuse(KsqlError("Invalid JSON in request: 'properties' must be a JSON object", code=BAD_REQUEST))
            return
        d = threads.deferToThread(self.engine.inserts_subscriber, args["target"], props)
        d.addCallbacks(self._subscribed, self._not_subscribed)

    def _subscribed(self, subscriber: InsertsSubscriber) -> None:
        if self.finished:
            threads.deferToThread(subscriber.close)
            return
        self.subscriber = subscriber
        self.request.setResponseCode(200)
        self.request.setHeader(b"content-type", (b"application/json" if self.json_array else DELIMITED.encode()))
        self.request.write(b"")                             # the 200 and headers go now
        self._pump()
        self._maybe_finish()

    def _not_subscribed(self, failure: Failure) -> None:
        err = failure.value
        if not isinstance(err, KsqlError):
            log.error("inserts stream failed: %s", failure.getTraceback())
            err = KsqlError("The server encountered an internal error when processing the query. Please consult "
                            "the server logs for more information.", code=SERVER_ERROR)
        self._refuse(err)

    def _refuse(self, err: KsqlError) -> None:
        """The request fails as a whole: an HTTP error with ksqlDB's error JSON, no acks."""
        self.failed = True
        self._flow()                                        # a paused body must be read to its end
        if self.finished:
            return
        self.finished = True
        if getattr(self.request, "_disconnected", False):
            return
        self.request.write(_json(self.request, err.http_status if 400 <= err.http_status < 600 else 400,
                                 {"@type": "generic_error", "error_code": err.code, "message": err.message}))
        self._end_response()

    def _end_response(self) -> None:
        """Ends the response, but not before the request: Twisted's HTTP/2 server forgets a stream
        whose response is complete and fails on the client's later DATA frames for it, so a live
        request's response waits for the client's END_STREAM (the client has every byte already)."""
        if not self.request_ended:
            self.finish_at_end = True
            return
        if not getattr(self.request, "_disconnected", False):
            self.request.finish()

    # -- rows ------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Hands the queued rows to the worker, one batch at a time, keeping their order."""
        self._flow()
        if self.working or self.subscriber is None or not self.queue or self.failed:
            return
        batch, self.queue = self.queue, []
        self.working = True
        subscriber = self.subscriber

        def work() -> None:
            for seq, row in batch:
                try:
                    if row is _BAD_JSON:
                        raise KsqlError("Invalid JSON in inserts stream", code=BAD_REQUEST)
                    subscriber.send(row, functools.partial(self._answer_from_thread, seq))
                except Exception as exc:                    # the row is refused: it ends the stream
                    reactor.callFromThread(self._answered, seq, exc)  # type: ignore[attr-defined]
                    return

        def worked(_: Any) -> None:
            self.working = False
            self._pump()
        threads.deferToThread(work).addBoth(worked)

    def _answer_from_thread(self, seq: int, exc: BaseException | None) -> None:
        reactor.callFromThread(self._answered, seq, exc)  # type: ignore[attr-defined]

    def _answered(self, seq: int, exc: BaseException | None) -> None:
        if self.finished or self.failed:
            return
        if exc is None:
            self.answered += 1
            self._write({"status": "ok", "seq": seq})
        else:
            if isinstance(exc, KsqlError) and exc.code == BAD_REQUEST:
                code, message = exc.code, exc.message
            else:
                log.error("Error in processing inserts (row %d): %s", seq, exc)
                code, message = SERVER_ERROR, "Error in processing inserts. Check server logs for details."
            self._write({"@type": "InsertError", "error_code": code, "message": message, "status": "error",
                         "seq": seq})
            self.failed = True
            self.queue.clear()
        self._flow()
        self._maybe_finish()

    def _write(self, doc: dict[str, Any]) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode()
        if self.json_array:
            self.request.write((b"," if self.written else b"[") + data)
        else:
            self.request.write(data + b"\n")
        self.written += 1

    def _flow(self) -> None:
        """Pauses the HTTP/2 stream's body while too many rows wait, resumes it when they drain."""
        channel = getattr(self.request, "channel", None)         # gone once the request finished
        if channel is None or not hasattr(channel, "pauseProducing"):
            return
        waiting = len(self.queue) + (self.received - self.answered)
        if not self.paused and waiting > self.MAX_OUTSTANDING and not self.failed:
            self.paused = True
            channel.pauseProducing()
        elif self.paused and (waiting <= self.MAX_OUTSTANDING // 2 or self.failed):
            self.paused = False
            channel.resumeProducing()

    def _maybe_finish(self) -> None:
        if self.finished or not self.request_ended or self.subscriber is None:
            return
        if not self.failed and (self.answered < self.received or self.working or self.queue):
            return
        self.finished = True
        if self.json_array:
            self.request.write(b"]" if self.written else b"[]")
        self._end_response()
        self._close()

    def _client_gone(self) -> None:
        self.finished = True
        self._close()

    def _close(self) -> None:
        subscriber, self.subscriber = self.subscriber, None
        if subscriber is not None:
            threads.deferToThread(subscriber.close)


#: a row line that is not JSON (answered in its turn with ksqlDB's 40000 error)
_BAD_JSON = object()


class KsqlRequest(server.Request):
    """Twisted's request, except that an HTTP/2 ``/inserts-stream`` body is handed to its
    ``InsertsStreamHandler`` chunk by chunk as it arrives, instead of being buffered until the
    client ends the stream (ksqlDB acks rows while the client is still sending). Other requests
    are Twisted's own."""

    inserts: InsertsStreamHandler | None = None

    def handleContentChunk(self, data: bytes) -> None:
        if self.inserts is None and self._live_inserts():
            stream: Any = self.channel
            self.method, self.clientproto = stream.command, b"HTTP/2"
            self.uri = self.path = stream.path.split(b"?", 1)[0]
            self.inserts = InsertsStreamHandler(self, stream.site.resource.engine)
        if self.inserts is not None:
            self.inserts.feed(data)
            return
        super().handleContentChunk(data)

    def _live_inserts(self) -> bool:
        stream: Any = self.channel
        return (H2Stream is not None and isinstance(stream, H2Stream) and getattr(stream, "command", None) == b"POST"
                and getattr(stream, "path", b"").split(b"?", 1)[0].rstrip(b"/") == INSERTS_STREAM
                and isinstance(getattr(stream.site, "resource", None), KsqlApi))

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if self.inserts is not None:
            self.inserts.end()                              # the client ended its side
            return
        super().requestReceived(command, path, version)


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
    requestFactory = KsqlRequest

    def protocol(self) -> PriorKnowledgeChannel:
        return PriorKnowledgeChannel(http.HTTPChannel())


def make_site(engine: EngineLike) -> server.Site:
    return KsqlSite(KsqlApi(engine))
