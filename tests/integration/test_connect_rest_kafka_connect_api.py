"""Connect's REST API driven by kafka-connect-api (``kafka_connect_api``: ``Api``/``Cluster``/
``Connector``/``Task``), the second REST client from PyPI people use for Kafka Connect (the first,
kafka-connect-py, is in test_connect_rest_client.py), against one distributed worker.

This client has no "create" call: it creates and updates a connector the way Kafka's docs
recommend for idempotent deployments, ``PUT /connectors/{name}/config`` (201 the first time, 200
after), and it reads a connector with a trailing slash (``GET /connectors/{name}/``), which
Kafka's Jersey resources accept. Errors surface as its ``GenericNotFound``/``GenericConflict``/
``ConnectApiException`` carrying Connect's ``{"error_code", "message"}`` body."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka_connect_api.errors import ConnectApiException, GenericConflict, GenericNotFound
from kafka_connect_api.kafka_connect_api import Api, Cluster, Connector

from tests.support.waiting import wait_for


def _states(connector: Connector) -> tuple[str, list[str]]:
    try:
        status = connector.status
    except GenericNotFound:        # 404 "No status found" until a worker has started it (as Kafka's)
        return "", []
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def _status_error(connector: Connector) -> GenericNotFound | None:
    """The 404 a status read raises, or None while the status still exists."""
    try:
        connector.status
    except GenericNotFound as missing:
        return missing
    return None


def _wait_states(connector: Connector, state: str, tasks: int, what: str) -> None:
    wait_for(lambda: _states(connector) == (state, [state] * tasks), timeout=60, what=what)


def test_lifecycle_through_kafka_connect_api(broker: Any, connect_factory: Any, tmp_path: Path) -> None:
    worker = connect_factory(broker.bootstrap)
    cluster = Cluster(Api(url=worker.url))
    assert cluster.version and cluster.kafka_cluster
    assert cluster.connectors == {}

    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "b.txt").write_text("y\n")
    files = Connector(cluster, "api-files")
    config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
              "file": str(tmp_path / "a.txt"), "topic": "api-lines", "tasks.max": "1"}
    files.config = config                                   # PUT .../config: created
    assert list(cluster.connectors) == ["api-files"]
    assert files.exists()                                   # GET /connectors/api-files/
    assert files.connector_class == config["connector.class"]
    _wait_states(files, "RUNNING", 1, "RUNNING")

    files.config = {**config, "file": str(tmp_path / "b.txt"), "topic": "api-lines-2"}   # updated
    assert files.config["topic"] == "api-lines-2"
    wait_for(lambda: [t.config.get("topic") for t in files.tasks] == ["api-lines-2"], timeout=60,
             what="the task's config regenerated from the update")
    task = files.tasks[0]
    assert (task.id, repr(task)) == (0, "api-files.0")

    files.pause()
    _wait_states(files, "PAUSED", 1, "PAUSED")
    assert files.tasks[0].state == "PAUSED"
    files.resume()
    _wait_states(files, "RUNNING", 1, "RUNNING after resume")

    files.restart()                                          # POST .../restart: 204, no body
    files.restart_all_tasks()                                # POST .../tasks/0/restart per task
    _wait_states(files, "RUNNING", 1, "RUNNING after the restarts")
    assert files.tasks[0].is_running()
    files.cycle_connector()                                  # pause, restart every task, resume
    _wait_states(files, "RUNNING", 1, "RUNNING after a cycle")

    with pytest.raises(GenericConflict) as conflict:        # POST /connectors of an existing name: 409
        cluster.api.post("/connectors", json={"name": "api-files", "config": config})
    assert conflict.value.code == 409 and conflict.value.details[0]["error_code"] == 409
    with pytest.raises(ConnectApiException) as invalid:     # a config Connect rejects: 400
        files.config = {**config, "tasks.max": "many"}
    assert invalid.value.code == 400 and "tasks.max" in invalid.value.details["message"]
    assert files.config["topic"] == "api-lines-2"            # the rejected update changed nothing

    cluster.root_logger = "WARN"                            # PUT /admin/loggers/root, log4j's names
    assert cluster.root_logger == {"level": "WARN"} and cluster.loggers["root"] == {"level": "WARN"}
    assert "root" in cluster.set_logger_log_level("root", "INFO")
    assert cluster.root_logger == {"level": "INFO"}

    files.delete()
    wait_for(lambda: cluster.connectors == {}, timeout=30, what="the connector gone")
    # The status topic catches up after the config topic: the worker stopping the deleted
    # connector writes its UNASSIGNED statuses before their tombstones, so, as with Kafka, a
    # status read right after the list empties may still see them; the 404 comes after.
    missing = wait_for(lambda: _status_error(files), timeout=30, what="the status gone")
    assert missing.code == 404
    assert missing.details[0] == {"error_code": 404, "message": "No status found for connector api-files"}
