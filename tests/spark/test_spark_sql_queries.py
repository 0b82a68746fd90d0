"""Push and pull queries through the real ``kafkalite-sql-server`` process (its own local[2] Spark
session) over HTTP/1.1: a push query with LIMIT over /query-stream receives, as they come, rows
produced after it started (and only those its WHERE keeps), then the response ends; a CTAS
aggregate materializes a table and a pull query by key over /query answers its current
aggregate from the query's state store. Then the interactive shell is driven through a pipe.
The server is the launcher's SqlServerProcess (tests/support/sql_server.py)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from typing import Any

import httpx
from confluent_kafka import Producer

from tests.support.sql_server import ROOT, SqlServerFactory, sql_server_env
from tests.support.waiting import wait_for


def _produce(bootstrap: str, topic: str, rows: list[tuple[str, float]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for truck, speed in rows:
        p.produce(topic, json.dumps({"truck": truck, "speed": speed}).encode(), truck.encode())
    assert p.flush(30) == 0


def _ksql(url: str, text: str, **props: str) -> Any:
    resp = httpx.post(url + "/ksql", json={"ksql": text, "streamsProperties": props}, timeout=120)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_push_and_pull_queries_over_http(kafka: Any, sql_server_factory: SqlServerFactory) -> None:
    topic = f"gps-{uuid.uuid4().hex[:6]}"
    server = sql_server_factory(kafka.bootstrap, {"ksql.streams.commit.interval.ms": "300", "spark.master": "local[2]"})
    url, log = server.url, server.log_path
    _ksql(url, f"CREATE STREAM trucks (truck VARCHAR KEY, speed DOUBLE) "
               f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    _produce(kafka.bootstrap, topic, [("old", 99.0)])             # before the query: not seen

    lines: list[Any] = []
    header = threading.Event()

    def push() -> None:
        with httpx.stream("POST", url + "/query-stream", timeout=120,
                          headers={"Accept": "application/vnd.ksqlapi.delimited.v1"},
                          json={"sql": "SELECT truck, speed * 2 AS double_speed FROM trucks "
                                       "WHERE speed > 10 EMIT CHANGES LIMIT 3;", "properties": {}}) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                if line:
                    lines.append(json.loads(line))
                    header.set()
    reader = threading.Thread(target=push, daemon=True)
    reader.start()
    assert header.wait(120), log.read_text()[-3000:]
    assert lines[0]["columnNames"] == ["TRUCK", "DOUBLE_SPEED"]
    assert lines[0]["columnTypes"] == ["STRING", "DOUBLE"] and lines[0]["queryId"].startswith("transient_")
    _produce(kafka.bootstrap, topic, [("a", 5.0), ("b", 20.0), ("c", 30.0), ("d", 1.0), ("e", 40.0),
                                      ("f", 50.0)])
    reader.join(120)
    assert not reader.is_alive()                                   # LIMIT 3 ended the response
    assert lines[1:] == [["b", 40.0], ["c", 60.0], ["e", 80.0]]

    body = _ksql(url, "CREATE TABLE stats AS SELECT truck, COUNT(*) AS n, MAX(speed) AS top FROM trucks "
                      "GROUP BY truck EMIT CHANGES;", **{"auto.offset.reset": "earliest"})
    assert body[0]["commandStatus"]["queryId"].startswith("CTAS_STATS_")
    _produce(kafka.bootstrap, topic, [("t1", 10.0), ("t2", 70.0), ("t1", 30.0)])

    def pulled() -> Any:
        resp = httpx.post(url + "/query", json={"ksql": "SELECT * FROM stats WHERE truck = 't1';"}, timeout=60)
        assert resp.status_code == 200, resp.text
        doc = resp.json()
        return doc if len(doc) == 2 and doc[1]["row"]["columns"] == ["t1", 2, 30.0] else None
    doc = wait_for(pulled, 90, "the pull query to answer t1's aggregate")
    assert doc[0]["header"]["schema"] == "`TRUCK` STRING, `N` BIGINT, `TOP` DOUBLE"
    resp = httpx.post(url + "/query-stream", json={"sql": "SELECT truck, top FROM stats WHERE truck = 't2';"},
                      headers={"Accept": "application/json"}, timeout=60)
    assert resp.json()[1:] == [["t2", 70.0]]
    resp = httpx.post(url + "/query", json={"ksql": "SELECT * FROM trucks WHERE truck = 't1';"}, timeout=60)
    assert resp.status_code == 400 and "Pull queries are not supported on streams" in resp.json()["message"]

    shell = subprocess.run([sys.executable, "-m", "kafkalite.sql.cli", url], cwd=str(ROOT), env=sql_server_env(),
                           input="SHOW TABLES;\nSELECT truck, n\n  FROM stats WHERE truck = 't2';\n"
                                 "SHOW STREEMS;\nexit\n", capture_output=True, text=True, timeout=120)
    assert shell.returncode == 1, shell.stderr                      # the bad statement failed
    assert "| STATS      | STATS       | KAFKA      | JSON         | false    |" in shell.stdout, shell.stdout
    assert "| t2           | 1            |" in shell.stdout, shell.stdout
    errors = [line for line in shell.stdout.splitlines() if "STREEMS" in line]
    assert len(errors) == 1 and errors[0].startswith("line 1:"), shell.stdout
