"""Connect, SQL and metrics pages against small fake upstream servers speaking the upstream REST
shapes (Kafka Connect's /connectors?expand=status and its actions, ksqlDB's /ksql and
/query-stream, a broker's Prometheus text), and the charts' arithmetic."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kafkalite.console.services.metrics import MetricsService, totals
from kafkalite.console.services.remote import ConnectService, RemoteError, SqlService
from kafkalite.console.settings import ConsoleSettings

from .conftest import make_console

CONNECTORS = {"sink-<x>": {"status": {"name": "sink-<x>", "type": "sink",
                                      "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
                                      "tasks": [{"id": 0, "state": "FAILED", "worker_id": "w1:8083",
                                                 "trace": "boom <b>"}]}}}


class Upstream(BaseHTTPRequestHandler):
    calls: list[tuple[str, str]] = []
    metrics = b""

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        Upstream.calls.append(("GET", self.path))
        if self.path == "/connectors?expand=status":
            self._send(200, CONNECTORS)
        elif self.path == "/metrics":
            self._send(200, Upstream.metrics, "text/plain; version=0.0.4")
        else:
            self._send(404, {"error_code": 404, "message": "no such path"})

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def do_PUT(self) -> None:
        Upstream.calls.append(("PUT", self.path))
        self._send(202, b"", "application/json")

    def do_POST(self) -> None:
        body = self._body()
        Upstream.calls.append(("POST", self.path))
        if self.path == "/ksql":
            self._send(200, [{"@type": "streams", "statementText": body["ksql"],
                              "streams": [{"name": "PAGEVIEWS", "topic": "pageviews", "format": "JSON"}]}])
        elif self.path == "/query-stream":
            lines = [json.dumps({"queryId": "q1", "columnNames": ["ID", "NAME"], "columnTypes": ["INT", "STRING"]})]
            lines += [json.dumps([i, f"<i>row{i}</i>"]) for i in range(3)]
            self._send(200, ("\n".join(lines) + "\n").encode(), "application/vnd.ksqlapi.delimited.v1")
        elif self.path.startswith("/connectors/"):
            self._send(409 if "missing" in self.path else 204,
                       {"error_code": 409, "message": "no connector"} if "missing" in self.path else b"")
        else:
            self._send(404, {"error_code": 404, "message": "no"})


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    Upstream.calls = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def exposition(bytes_in: float, requests: int) -> bytes:
    reg = CollectorRegistry()
    c = Counter("kafka_server_brokertopicmetrics_bytesinpersec", "b", ["topic"], registry=reg)
    c.labels("orders").inc(bytes_in)
    h = Histogram("kafka_network_requestmetrics_totaltimems", "ms", ["request"], registry=reg)
    for _ in range(requests):
        h.labels("Produce").observe(4.0)
    return generate_latest(reg)


def test_connect_service_and_page(upstream: str) -> None:
    svc = ConnectService(upstream)
    [c] = svc.connectors()
    assert (c.name, c.type, c.state, c.tasks[0][1]) == ("sink-<x>", "sink", "RUNNING", "FAILED")
    svc.act("sink-<x>", "pause")
    assert ("PUT", "/connectors/sink-%3Cx%3E/pause") in Upstream.calls
    with pytest.raises(RemoteError, match="HTTP 409: no connector"):
        svc.act("missing", "restart")
    for console in make_console(ConsoleSettings("127.0.0.1:1", connect_url=upstream, lag_sample_interval_s=0)):
        page = console.get("/connect").text
        assert "sink-&lt;x&gt;" in page and "boom &lt;b&gt;" in page and "FAILED" in page
        r = console.post("/connect/sink-%3Cx%3E/restart")
        assert r.status_code == 303 and ("POST", "/connectors/sink-%3Cx%3E/restart") in Upstream.calls


def test_sql_statement_and_push_query(upstream: str) -> None:
    svc = SqlService(upstream)
    listed = svc.run("SHOW STREAMS")
    assert listed.kind == "statement" and listed.rows == [["PAGEVIEWS", "pageviews", "JSON"]]
    rows = svc.run("SELECT * FROM PAGEVIEWS EMIT CHANGES;", max_rows=2)
    assert rows.columns == ["ID", "NAME"] and rows.rows == [[0, "<i>row0</i>"], [1, "<i>row1</i>"]]
    assert not rows.complete
    for console in make_console(ConsoleSettings("127.0.0.1:1", sql_url=upstream, lag_sample_interval_s=0)):
        console.get("/sql")
        r = console.post("/sql", {"statement": "SELECT * FROM PAGEVIEWS EMIT CHANGES;"}, headers={"HX-Request": "true"})
        assert r.status_code == 200 and r.text.lstrip().startswith('<div id="sql-result">')
        assert "&lt;i&gt;row2&lt;/i&gt;" in r.text and "<i>row2" not in r.text


def test_metrics_rates_latency_and_page(upstream: str) -> None:
    svc = MetricsService([upstream + "/metrics"])
    Upstream.metrics = exposition(1000, 2)
    svc.scrape(now=100.0)
    Upstream.metrics = exposition(3000, 6)
    svc.scrape(now=110.0)
    charts = svc.charts()
    assert charts["Bytes in per second"] == {"orders": [(110.0, 200.0)]}
    assert charts["Request latency (mean ms)"] == {"Produce": [(110.0, 4.0)]}
    assert svc.topic_rates()["orders"][0] == 200.0
    assert totals([exposition(5, 0).decode()])[("Bytes in per second", "orders")] == 5.0
    for console in make_console(ConsoleSettings("127.0.0.1:1", metrics_urls=(upstream + "/metrics",),
                                                lag_sample_interval_s=0)):
        page = console.get("/metrics?scrape=1").text
        assert 'hx-get="/metrics/charts"' in page and 'hx-trigger="every 5s"' in page
        console.get("/metrics?scrape=1")
        fragment = console.get("/metrics/charts").text
        assert "<svg" in fragment and "orders" in fragment


def test_unreachable_service_is_an_error_page() -> None:
    for console in make_console(ConsoleSettings("127.0.0.1:1", connect_url="http://127.0.0.1:1",
                                                lag_sample_interval_s=0)):
        r = console.get("/connect")
        assert r.status_code == 502 and "cannot reach http://127.0.0.1:1" in r.text
