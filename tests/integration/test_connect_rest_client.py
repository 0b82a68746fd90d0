"""Connect's REST API driven by kafka-connect-py (``kafka_connect.KafkaConnect``), a client
people use for Kafka Connect, against one distributed worker: create, read, update, pause,
resume, restart, delete, with Connect's error answers for the mistakes."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests
from kafka_connect import KafkaConnect
from requests.exceptions import HTTPError

from tests.support.waiting import wait_for


def _state(kc: KafkaConnect, name: str) -> tuple[str, list[str]]:
    try:
        s = kc.get_connector_status(name)
    except HTTPError as exc:       # 404 "No status found" until a worker has started it (as Kafka's)
        if exc.response is None or exc.response.status_code != 404:
            raise
        return "", []
    return s["connector"]["state"], [t["state"] for t in s["tasks"]]


def test_lifecycle_through_kafka_connect_py(broker: Any, connect_factory: Any, tmp_path: Path) -> None:
    worker = connect_factory(broker.bootstrap)
    kc = KafkaConnect(url=worker.url)
    info = kc.get_cluster_info()
    assert info["kafka_cluster_id"] and info["version"]
    plugins = {p["class"]: p["type"] for p in requests.get(f"{worker.url}/connector-plugins", timeout=10).json()}
    assert plugins["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert plugins["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"

    (tmp_path / "a.txt").write_text("x\n")
    created = kc.create_connector({"name": "files", "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "a.txt"), "topic": "rest-lines"}})
    assert created["name"] == "files" and created["config"]["topic"] == "rest-lines"
    assert kc.list_connectors() == ["files"]
    wait_for(lambda: _state(kc, "files") == ("RUNNING", ["RUNNING"]), timeout=60, what="RUNNING")
    expanded = kc.list_connectors(expand="status")
    assert expanded["files"]["status"]["connector"]["state"] == "RUNNING"

    updated = kc.update_connector("files", {"connector.class": "FileStreamSource", "file": str(tmp_path / "a.txt"),
                                            "topic": "rest-lines-2", "batch.size": "10"})
    assert updated["config"]["topic"] == "rest-lines-2"
    assert kc.get_connector_config("files")["batch.size"] == "10"
    wait_for(lambda: kc.list_connector_tasks("files") and
             kc.list_connector_tasks("files")[0]["config"].get("topic") == "rest-lines-2",
             timeout=60, what="task configs regenerated")

    kc.pause_connector("files")
    wait_for(lambda: _state(kc, "files") == ("PAUSED", ["PAUSED"]), timeout=60, what="PAUSED")
    kc.resume_connector("files")
    wait_for(lambda: _state(kc, "files") == ("RUNNING", ["RUNNING"]), timeout=60, what="RUNNING again")

    assert kc.restart_connector("files") is None                      # 204
    answer = kc.restart_connector("files", include_tasks=True)        # 202 with the RESTARTING states
    assert answer["connector"]["state"] == "RESTARTING" and answer["tasks"][0]["state"] == "RESTARTING"
    wait_for(lambda: _state(kc, "files") == ("RUNNING", ["RUNNING"]), timeout=60, what="RUNNING after restart")
    kc.restart_connector_task("files", 0)
    assert kc.get_connector_task_status("files", 0)["id"] == 0
    topics = requests.get(f"{worker.url}/connectors/files/topics", timeout=10).json()
    assert "files" in topics

    with pytest.raises(HTTPError) as err:
        kc.get_connector("nope")
    assert err.value.response.status_code == 404
    assert err.value.response.json() == {"error_code": 404, "message": "Connector nope not found"}
    with pytest.raises(HTTPError) as err:
        kc.create_connector({"name": "files", "config": {"connector.class": "FileStreamSource", "topic": "t"}})
    assert err.value.response.status_code == 409
    with pytest.raises(HTTPError) as err:
        kc.create_connector({"name": "bad", "config": {"connector.class": "FileStreamSource", "tasks.max": "x",
                                                       "topic": "t"}})
    assert err.value.response.status_code == 400
    assert "tasks.max" in err.value.response.json()["message"]
    bad_json = requests.post(f"{worker.url}/connectors", data=b"{not json", timeout=10,
                             headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 500 and bad_json.json()["error_code"] == 500

    kc.delete_connector("files")
    wait_for(lambda: kc.list_connectors() == [], timeout=30, what="the connector gone")
    # its status goes with the status topic's tombstones, which the worker reads a little after
    # the config's removal (Kafka's AbstractHerder.connectorStatus reads the same store)
    wait_for(lambda: requests.get(f"{worker.url}/connectors/files/status", timeout=10).status_code == 404,
             timeout=30, what="the connector's status gone")
    with pytest.raises(HTTPError) as err:
        kc.get_connector_status("files")
    assert err.value.response.status_code == 404
