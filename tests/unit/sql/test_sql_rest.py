"""ksqlDB's REST shapes from the HTTP layer, over Twisted's request helpers: /ksql hands the
statements to the engine and returns its entities; a statement error is 400 with ksqlDB's
statement_error body; /info, /healthcheck and /status; unknown and unserved paths are ksqlDB's
error JSON. The engine here is a recording double: the HTTP layer only decodes and delegates."""
from __future__ import annotations

import json
from typing import Any

from twisted.internet import defer
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.sql import rest
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse


class RecordingEngine:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        self.calls.append((text, dict(properties or {})))
        parse(text)                                      # a statement error propagates as the engine's would
        return [{"@type": "streams", "statementText": text, "streams": [], "warnings": []}]

    def info(self) -> dict[str, Any]:
        return {"version": "x", "kafkaClusterId": "c", "ksqlServiceId": "svc_", "serverStatus": "RUNNING"}

    def health(self) -> dict[str, Any]:
        return {"isHealthy": False, "details": {"kafka": {"isHealthy": False}}}

    def command_statuses(self) -> dict[str, str]:
        return {"stream/`S`/create": "SUCCESS"}


def _request(method: str, path: str, body: Any = None) -> DummyRequest:
    req = DummyRequest([p.encode() for p in path.strip("/").split("/")])
    req.method = method.encode()
    req.path = path.encode()
    if body is not None:
        from io import BytesIO
        req.content = BytesIO(body if isinstance(body, bytes) else json.dumps(body).encode())
    return req


def _render(api: rest.KsqlApi, req: DummyRequest, monkeypatch: Any) -> tuple[int, Any]:
    monkeypatch.setattr(rest.threads, "deferToThread", lambda f, *a: defer.maybeDeferred(f, *a))
    out = api.render(req)
    if isinstance(out, bytes):
        req.write(out)
        req.finish()
    assert req.finished
    return req.responseCode or 200, json.loads(b"".join(req.written))


def test_ksql_endpoint_and_statement_errors(monkeypatch: Any) -> None:
    engine = RecordingEngine()
    api = rest.KsqlApi(engine)
    code, body = _render(api, _request("POST", "/ksql", {"ksql": "SHOW STREAMS;",
                                                         "streamsProperties": {"auto.offset.reset": "earliest"}}),
                         monkeypatch)
    assert code == 200 and body[0]["@type"] == "streams"
    assert engine.calls == [("SHOW STREAMS;", {"auto.offset.reset": "earliest"})]
    code, body = _render(api, _request("POST", "/ksql", {"ksql": "SELEC * FROM x;"}), monkeypatch)
    assert code == 400 and body["@type"] == "statement_error" and body["error_code"] == 40001
    assert body["message"].startswith("line 1:1: Syntax Error\nUnknown statement 'SELEC'")
    assert body["statementText"] == "SELEC * FROM x;"
    code, body = _render(api, _request("POST", "/ksql", b"{not json"), monkeypatch)
    assert code == 400 and body["@type"] == "generic_error" and body["error_code"] == 40000
    code, body = _render(api, _request("POST", "/ksql", {"sql": "x"}), monkeypatch)
    assert code == 400 and "'ksql' string" in body["message"]


def test_engine_failure_is_a_generic_error_not_a_trace(monkeypatch: Any) -> None:
    class Broken(RecordingEngine):
        def execute(self, text: str, properties: dict[str, Any] | None = None) -> list[dict[str, Any]]:
            raise RuntimeError("brokers unreachable")
    code, body = _render(rest.KsqlApi(Broken()), _request("POST", "/ksql", {"ksql": "SHOW TOPICS;"}), monkeypatch)
    assert code == 500 and body == {"@type": "generic_error", "error_code": 50000,
                                    "message": "RuntimeError: brokers unreachable"}
    err = KsqlError("X does not exist.", statement="DROP STREAM X;")
    assert err.http_status == 400


def test_info_health_status_and_unknown_paths(monkeypatch: Any) -> None:
    api = rest.KsqlApi(RecordingEngine())
    assert _render(api, _request("GET", "/info"), monkeypatch) == (200, {"KsqlServerInfo": {
        "version": "x", "kafkaClusterId": "c", "ksqlServiceId": "svc_", "serverStatus": "RUNNING"}})
    code, body = _render(api, _request("GET", "/healthcheck"), monkeypatch)
    assert code == 503 and body["isHealthy"] is False
    assert _render(api, _request("GET", "/status"), monkeypatch) == (
        200, {"commandStatuses": {"stream/`S`/create": "SUCCESS"}})
    assert _render(api, _request("GET", "/status/stream/`S`/create"), monkeypatch) == (
        200, {"status": "SUCCESS", "message": ""})
    code, body = _render(api, _request("GET", "/status/stream/`T`/create"), monkeypatch)
    assert code == 404 and body["error_code"] == 40400
    code, body = _render(api, _request("GET", "/nope"), monkeypatch)
    assert code == 404 and body["@type"] == "generic_error"
    code, body = _render(api, _request("POST", "/inserts-stream", {}), monkeypatch)   # HTTP/1.x: ksqlDB refuses
    assert code == 400 and body["error_code"] == 40004
