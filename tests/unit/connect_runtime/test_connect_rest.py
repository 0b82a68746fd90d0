"""The REST resource in-process (Twisted's DummyRequest, herder calls run inline): Kafka 2.8's
paths, status codes and error JSON over a standalone herder on in-memory brokers."""
from __future__ import annotations

import json
import logging
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.web.server import NOT_DONE_YET
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.connect.runtime.offsets import MemoryOffsetStore
from kafkalite.connect.runtime.rest import ConnectResource
from kafkalite.connect.runtime.standalone import StandaloneHerder
from kafkalite.connect.runtime.status import MemoryStatusStore, Status
from kafkalite.connect.runtime.worker import Worker
from tests.support.waiting import wait_for

from .connect_fakes import FakeBroker, FakeClients, worker_config


@pytest.fixture
def api(tmp_path: Path) -> Any:
    status = MemoryStatusStore()
    herder = StandaloneHerder(Worker("w:8083", worker_config(tmp_path), MemoryOffsetStore(), status,
                                     clients=FakeClients(FakeBroker())), status, "cluster-x")
    resource = ConnectResource(herder, reactor=None, run_blocking=lambda fn, *a: defer.maybeDeferred(fn, *a))

    def call(method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        path_only, _, query = path.partition("?")
        req = DummyRequest([p.encode() for p in path_only.strip("/").split("/") if p])
        req.method = method.encode()
        req.path = path_only.encode()
        req.uri = path.encode()
        req.args = {}
        for item in filter(None, query.split("&")):
            k, _, v = item.partition("=")
            req.args.setdefault(k.encode(), []).append(v.encode())
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        req.content = BytesIO(data)
        out = resource.render(req)
        if out == NOT_DONE_YET:
            assert req.finished
            text = b"".join(req.written)
        else:
            assert isinstance(out, bytes)
            text = out
        return req.responseCode or 200, json.loads(text) if text else None
    call.herder = herder                       # type: ignore[attr-defined]
    yield call, tmp_path
    herder.stop()


def test_connector_crud_and_status_codes(api: Any) -> None:
    call, tmp = api
    code, root = call("GET", "/")
    assert code == 200 and root["kafka_cluster_id"] == "cluster-x" and "version" in root and "commit" in root
    assert call("GET", "/health") == (200, {"status": "healthy", "message":
                                            "Worker has completed startup and is ready to handle requests."})
    cfg = {"connector.class": "FileStreamSink", "topics": "t", "file": str(tmp / "o.txt")}
    code, body = call("POST", "/connectors", {"name": "s", "config": cfg})
    assert code == 201 and body["name"] == "s" and body["type"] == "sink" and body["config"]["name"] == "s"
    assert call("POST", "/connectors", {"name": "s", "config": cfg}) == (
        409, {"error_code": 409, "message": "Connector s already exists"})
    assert call("GET", "/connectors") == (200, ["s"])
    code, body = call("GET", "/connectors?expand=status&expand=info")
    assert set(body["s"]) == {"status", "info"}
    code, body = call("PUT", "/connectors/s/config", {**cfg, "tasks.max": "2"})
    assert code == 200 and body["config"]["tasks.max"] == "2"
    code, body = call("PUT", "/connectors/new/config", cfg)
    assert code == 201 and body["name"] == "new"
    code, tasks = call("GET", "/connectors/s/tasks")
    assert [t["id"] for t in tasks] == [{"connector": "s", "task": 0}, {"connector": "s", "task": 1}]
    assert tasks[0]["config"]["task.class"].endswith("FileStreamSinkTask")
    wait_for(lambda: call("GET", "/connectors/s/status")[1]["tasks"] and
             call("GET", "/connectors/s/tasks/1/status")[1]["state"] == "RUNNING", what="task 1 RUNNING")
    assert call("PUT", "/connectors/s/pause") == (202, None)
    assert call("GET", "/connectors/s/status")[1]["connector"]["state"] == "PAUSED"
    assert call("PUT", "/connectors/s/resume") == (202, None)
    assert call("POST", "/connectors/s/restart") == (204, None)
    code, body = call("POST", "/connectors/s/restart?includeTasks=true&onlyFailed=false")
    assert code == 202 and {t["state"] for t in body["tasks"]} == {"RESTARTING"}
    assert call("POST", "/connectors/s/tasks/0/restart") == (204, None)
    assert call("POST", "/connectors/s/tasks/9/restart")[0] == 404
    assert call("GET", "/connectors/s/topics") == (200, {"s": {"topics": []}})
    assert call("PUT", "/connectors/s/topics/reset")[0] == 200
    assert call("DELETE", "/connectors/s") == (204, None)
    assert call("GET", "/connectors/s") == (404, {"error_code": 404, "message": "Connector s not found"})
    assert call("GET", "/connectors/s/status")[0] == 404


def test_a_connector_without_a_status_is_404_as_in_kafka(api: Any) -> None:
    """Kafka 2.8's AbstractHerder: status comes from the status topic only; a connector whose
    config exists but that no worker has reported on yet is 404, and so is each of its tasks."""
    call, tmp = api
    herder = call.herder
    with herder.lock:                          # configured, not started by any worker yet
        herder.state.connectors["quiet"] = {"name": "quiet", "connector.class": "FileStreamSink", "topics": "t",
                                            "file": str(tmp / "q.txt")}
        herder.state.tasks["quiet"] = [{"task.class": "x"}]
    assert call("GET", "/connectors/quiet")[0] == 200
    assert call("GET", "/connectors/quiet/status") == (
        404, {"error_code": 404, "message": "No status found for connector quiet"})
    assert call("GET", "/connectors/quiet/tasks/0/status") == (
        404, {"error_code": 404, "message": "No status found for task quiet-0"})
    assert call("GET", "/connectors/nobody/status") == (
        404, {"error_code": 404, "message": "No status found for connector nobody"})
    assert call("POST", "/connectors/quiet/restart?includeTasks=true") == (
        404, {"error_code": 404, "message": "Status for connector quiet not found"})
    code, body = call("GET", "/connectors?expand=status")
    assert code == 200 and "quiet" not in body                     # as a deleted one: skipped
    herder.status_store.put(Status(
        "quiet", None, "RUNNING", "w:8083", 1))
    code, body = call("GET", "/connectors/quiet/status")
    assert code == 200 and body["connector"] == {"state": "RUNNING", "worker_id": "w:8083"} and body["tasks"] == []


def test_bad_requests_answer_connects_error_json(api: Any) -> None:
    call, tmp = api
    assert call("POST", "/connectors", raw=b"{nope")[0] == 500
    assert call("POST", "/connectors", {"name": "x"}) == (400, {"error_code": 400,
                                                                "message": "Connector config is required"})
    code, body = call("POST", "/connectors", {"name": "x", "config": {"connector.class": "NoSuchConnector"}})
    assert code == 400 and "NoSuchConnector" in body["message"]
    code, body = call("POST", "/connectors", {"name": "x", "config": {"connector.class": "FileStreamSink"}})
    assert code == 400 and "topics" in body["message"]
    code, body = call("PUT", "/connectors/x/config", {"name": "y", "connector.class": "FileStreamSink",
                                                      "topics": "t"})
    assert code == 400 and "doesn't match" in body["message"]
    assert call("GET", "/nowhere") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call("DELETE", "/connectors")[0] == 405


def test_plugins_validate_and_loggers(api: Any) -> None:
    call, _ = api
    code, plugins = call("GET", "/connector-plugins")
    assert {"class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "type": "source"}.items() <= \
        next(p for p in plugins if p["class"].endswith("FileStreamSourceConnector")).items()
    code, infos = call("PUT", "/connector-plugins/FileStreamSource/config/validate",
                       {"connector.class": "FileStreamSource", "tasks.max": "x"})
    assert code == 200 and infos["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert infos["error_count"] >= 2                              # tasks.max, topic
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]}
    assert errors["tasks.max"] and errors["topic"]
    assert "Common" in infos["groups"]
    code, _ = call("PUT", "/connector-plugins/FileStreamSink/config/validate", {"connector.class": "FileStreamSource"})
    assert code == 400
    logging.getLogger("kafkalite.connect.runtime.worker").setLevel(logging.INFO)
    assert call("PUT", "/admin/loggers/kafkalite.connect", {"level": "DEBUG"})[0] == 200
    assert call("GET", "/admin/loggers/kafkalite.connect.runtime.worker") == (200, {"level": "DEBUG"})
    assert call("PUT", "/admin/loggers/kafkalite.connect", {"level": "LOUD"})[0] == 400
    assert call("PUT", "/admin/loggers/kafkalite.connect", {"level": "WARN"})[0] == 200   # log4j's names back
    assert call("GET", "/admin/loggers/kafkalite.connect.runtime.worker") == (200, {"level": "WARN"})
    assert call("GET", "/admin/loggers")[1]["kafkalite.connect"] == {"level": "WARN"}
    assert "root" in call("GET", "/admin/loggers")[1]
    logging.getLogger("kafkalite.connect").setLevel(logging.NOTSET)
    logging.getLogger("kafkalite.connect.runtime.worker").setLevel(logging.NOTSET)
