"""``kafkalite-sql-server`` as a process against a broker, driven over ksqlDB's REST API: DDL
through /ksql, a statement error with its position, /info, /healthcheck and /status; then the
server is killed and started again with the same ksql.service.id, and it rebuilds its streams
from the command topic; INSERT VALUES writes records that PRINT streams back over /query. (No
persistent query here, so no Spark session is started: Spark runs in tests/spark/test_spark_sql.py.)"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for
from tests.support.zookeeper import free_port
from tests.support.sql_rest import ksql_call

ROOT = Path(__file__).resolve().parents[2]


def _call(url: str, body: Any = None) -> tuple[int, Any]:
    return ksql_call(url, body, timeout=60)


def _start(props: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "kafkalite.sql.server", str(props)], cwd=str(ROOT), env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _ready(url: str, proc: subprocess.Popen, log: Path) -> bool:
    assert proc.poll() is None, log.read_text()[-2000:]
    try:
        return _call(url + "/healthcheck")[1]["isHealthy"] is True
    except (OSError, ValueError):
        return False


def test_server_rest_and_replay_after_restart(broker: Any, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = f"it_{uuid.uuid4().hex[:6]}_"
    topic = f"pageviews-{uuid.uuid4().hex[:6]}"
    props = tmp_path / "ksql-server.properties"
    props.write_text(f"listeners=http://127.0.0.1:{port}\nbootstrap.servers={broker.bootstrap}\n"
                     f"ksql.service.id={service}\nksql.streams.state.dir={tmp_path / 'state'}\n"
                     "ksql.streams.auto.offset.reset=earliest\n")
    log = tmp_path / "server.log"
    proc = _start(props, log)
    try:
        wait_for(lambda: _ready(url, proc, log), 90, "the SQL server")
        code, info = _call(url + "/info")
        assert code == 200 and info["KsqlServerInfo"]["ksqlServiceId"] == service
        assert info["KsqlServerInfo"]["serverStatus"] == "RUNNING"
        code, body = _call(url + "/ksql", {"ksql": f"CREATE STREAM pageviews (userid VARCHAR KEY, pageid VARCHAR) "
                                                   f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=2);",
                                           "streamsProperties": {}})
        assert code == 200, body
        assert body[0]["@type"] == "currentStatus" and body[0]["commandId"] == "stream/`PAGEVIEWS`/create"
        assert body[0]["commandStatus"]["status"] == "SUCCESS" and body[0]["commandSequenceNumber"] == 0
        code, body = _call(url + "/ksql", {"ksql": "CREATE STREAM broken (a INT WITH (KAFKA_TOPIC='x');"})
        assert code == 400 and body["@type"] == "statement_error" and body["error_code"] == 40001
        assert body["message"].startswith("line 1:29: mismatched input 'WITH'")
        code, body = _call(url + "/ksql", {"ksql": "CREATE STREAM pageviews (a INT) WITH (KAFKA_TOPIC='x', "
                                                   "VALUE_FORMAT='JSON');"})
        assert code == 400 and "A stream with the same name already exists" in body["message"]
        code, body = _call(url + "/ksql", {"ksql": "CREATE STREAM nope (a INT) WITH (KAFKA_TOPIC='missing-topic-x', "
                                                   "VALUE_FORMAT='JSON');"})
        assert code == 400 and "Topic 'missing-topic-x' does not exist" in body["message"]
        code, status = _call(url + "/status")
        assert status == {"commandStatuses": {"stream/`PAGEVIEWS`/create": "SUCCESS"}}
    finally:
        proc.send_signal(signal.SIGKILL)                 # a crash: nothing is flushed on the way out
        proc.wait(30)

    proc = _start(props, log)
    try:
        wait_for(lambda: _ready(url, proc, log), 90, "the restarted SQL server")
        code, body = _call(url + "/ksql", {"ksql": "SHOW STREAMS; SHOW TOPICS; DESCRIBE pageviews;"})
        assert code == 200, body
        assert body[0]["streams"] == [{"type": "STREAM", "name": "PAGEVIEWS", "topic": topic, "keyFormat": "KAFKA",
                                       "valueFormat": "JSON", "isWindowed": False}]
        assert {"name": topic, "replicaInfo": [1, 1]} in body[1]["topics"]
        fields = body[2]["sourceDescription"]["fields"]
        assert [(f["name"], f["schema"]["type"], f.get("type")) for f in fields] == [
            ("USERID", "STRING", "KEY"), ("PAGEID", "STRING", None)]
        code, body = _call(url + "/ksql", {"ksql": "INSERT INTO pageviews (ROWTIME, userid, pageid) VALUES "
                                                   "(1700000000000, 'u1', 'p1'); INSERT INTO pageviews VALUES "
                                                   "('u2', 'p''2');"})
        assert (code, body) == (200, [])                  # ksqlDB answers INSERT VALUES with no entity
        code, body = _call(url + "/ksql", {"ksql": "INSERT INTO pageviews (userid, pageid) VALUES ('u3', 1);"})
        assert code == 400 and body["message"] == ("Failed to insert values into 'PAGEVIEWS'. Expected type STRING "
                                                   "for field `PAGEID` but got INTEGER(1)")
        req = urllib.request.Request(url + "/query", data=json.dumps(
            {"ksql": f"PRINT '{topic}' FROM BEGINNING LIMIT 2;", "streamsProperties": {}}).encode())
        with urllib.request.urlopen(req, timeout=60) as resp:
            lines = [line for line in resp.read().decode().splitlines() if line]
        records = sorted(line for line in lines if line.startswith("rowtime:"))
        assert lines[:2] == ["Key format: KAFKA_STRING", "Value format: JSON or KAFKA_STRING"], lines
        assert records[0] == ('rowtime: 2023/11/14 22:13:20.000 Z, key: u1, value: {"PAGEID": "p1"}, partition: '
                              + records[0].rsplit(" ", 1)[1])
        assert records[1].startswith("rowtime: ") and ', key: u2, value: {"PAGEID": "p\'2"}' in records[1]
        code, body = _call(url + "/query", {"ksql": "PRINT nosuchtopic;"})
        assert code == 400 and body["message"].startswith("Could not find topic 'nosuchtopic'")
    finally:
        proc.terminate()
        proc.wait(30)
