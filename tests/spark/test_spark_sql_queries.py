"""Push and pull queries through the real ``kafkalite-sql-server`` process (its own local[2] Spark
session), one server for the module (the launcher's SqlServerProcess, tests/support/sql_server.py),
each test on its own streams and tables.

Over HTTP/1.1: a push query with LIMIT over /query-stream receives, as they come, rows produced
after it started (and only those its WHERE keeps), then the response ends; a CTAS aggregate
materializes a table and a pull query by key over /query answers its current aggregate from the
query's state store; pull queries on the stream (ksqlDB 0.23+) answer what its topic holds, through
WHERE, an expression and LIMIT. Then the interactive shell is driven through a pipe.

Through a Python ksqlDB client from PyPI, unmodified (``ksqldb``'s ``KSQLdbClient``, over HTTP/2
with prior knowledge; the rest of its API, which needs no Spark, is in
tests/integration/test_sql_ksql_python_client.py): ``query_async`` runs a push query that
receives the rows produced after it started that its WHERE keeps, in order, and ``close_query``
ends it; ``query_sync`` runs pull queries by key on a CTAS table. Both answers are checked against
the same computation over the produced input in plain Python."""
from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import threading
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from kafkalite.cluster.processes import SqlServerProcess
from tests.support.sql_server import ROOT, SqlServerFactory, sql_server_env
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def sql_server(kafka: Any, module_sql_server_factory: SqlServerFactory) -> SqlServerProcess:
    return module_sql_server_factory(kafka.bootstrap, {"ksql.streams.commit.interval.ms": "300"})


def _produce(bootstrap: str, topic: str, rows: list[tuple[str, float]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for truck, speed in rows:
        p.produce(topic, json.dumps({"truck": truck, "speed": speed}).encode(), truck.encode())
    assert p.flush(30) == 0


def _ksql(url: str, text: str, **props: str) -> Any:
    resp = httpx.post(url + "/ksql", json={"ksql": text, "streamsProperties": props}, timeout=120)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_push_and_pull_queries_over_http(kafka: Any, sql_server: SqlServerProcess) -> None:
    topic = f"gps-{uuid.uuid4().hex[:6]}"
    url, log = sql_server.url, sql_server.log_path
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
    # a pull query on the stream (ksqlDB 0.23+): what its topic holds now, through WHERE and the projection
    resp = httpx.post(url + "/query", json={"ksql": "SELECT * FROM trucks WHERE truck = 't1';"}, timeout=60)
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert doc[0]["header"]["schema"] == "`TRUCK` STRING, `SPEED` DOUBLE"
    assert [r["row"]["columns"] for r in doc[1:]] == [["t1", 10.0], ["t1", 30.0]]
    resp = httpx.post(url + "/query-stream", headers={"Accept": "application/json"}, timeout=60, json={
        "sql": "SELECT truck, speed * 2 AS d FROM trucks WHERE speed > 45 LIMIT 2;", "properties": {}})
    assert resp.json()[1:] == [["old", 198.0], ["f", 100.0]]

    shell = subprocess.run([sys.executable, "-m", "kafkalite.sql.cli", url], cwd=str(ROOT), env=sql_server_env(),
                           input="SHOW TABLES;\nSELECT truck, n\n  FROM stats WHERE truck = 't2';\n"
                                 "SHOW STREEMS;\nexit\n", capture_output=True, text=True, timeout=120)
    assert shell.returncode == 1, shell.stderr                      # the bad statement failed
    assert "| STATS      | STATS       | KAFKA      | JSON         | false    |" in shell.stdout, shell.stdout
    assert "| t2           | 1            |" in shell.stdout, shell.stdout
    errors = [line for line in shell.stdout.splitlines() if "STREEMS" in line]
    assert len(errors) == 1 and errors[0].startswith("line 1:"), shell.stdout


@pytest.mark.skipif(importlib.util.find_spec("ksqldb") is None, reason="the ksqldb client is not installed")
def test_ksqldb_client_push_and_pull_queries(kafka: Any, sql_server: SqlServerProcess) -> None:
    from ksqldb import KSQLdbClient

    topic = f"fleet-{uuid.uuid4().hex[:6]}"
    client = KSQLdbClient(sql_server.url)
    created = client.ksql(f"CREATE STREAM fleet (truck VARCHAR KEY, speed DOUBLE) "
                          f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert created[0]["commandStatus"]["status"] == "SUCCESS", created
    before = [("t0", 99.0), ("t2", 21.0)]                     # produced before the push query: not pushed
    _produce(kafka.bootstrap, topic, before)
    # (the table first: its query starts the server's Spark session if no test has yet)
    created = client.ksql("CREATE TABLE fleet_stats AS SELECT truck, COUNT(*) AS n, MAX(speed) AS top FROM fleet "
                          "GROUP BY truck EMIT CHANGES;", stream_properties={"auto.offset.reset": "earliest"})
    assert created[0]["commandStatus"]["queryId"].startswith("CTAS_FLEET_STATS_"), created

    pushed: list[Any] = []
    failures: list[BaseException] = []
    started = threading.Event()

    def push() -> None:
        async def consume() -> None:
            async for item in client.query_async("SELECT truck, speed FROM fleet WHERE speed > 20 EMIT CHANGES;",
                                                 timeout=180):
                pushed.append(item)
                started.set()
        try:
            asyncio.run(consume())
        except BaseException as exc:                          # reported by the main thread
            failures.append(exc)
            started.set()
    reader = threading.Thread(target=push, daemon=True)
    reader.start()
    assert started.wait(120) and not failures, (failures, sql_server.tail())
    header = pushed[0]
    assert header["columnNames"] == ["TRUCK", "SPEED"] and header["columnTypes"] == ["STRING", "DOUBLE"], header
    after = [("t1", 10.0), ("t2", 25.5), ("t3", 30.0), ("t4", 5.0), ("t2", 42.0)]
    _produce(kafka.bootstrap, topic, after)
    expected_push = [[truck, speed] for truck, speed in after if speed > 20]
    wait_for(lambda: failures or len(pushed) > len(expected_push), 120, "the pushed rows")
    assert not failures, failures
    assert client.close_query(header["queryId"]) is True      # ends the response: the client's loop returns
    reader.join(60)
    assert not reader.is_alive() and not failures, failures
    assert pushed[1:] == expected_push

    everything = before + after
    oracle = {t: [t, sum(1 for k, _ in everything if k == t), max(v for k, v in everything if k == t)]
              for t, _ in everything}
    last: dict[str, Any] = {}

    def pulled(truck: str) -> Any:
        last[truck] = client.query_sync(f"SELECT * FROM fleet_stats WHERE truck = '{truck}';", timeout=60)
        return last[truck] if last[truck][1:] == [oracle[truck]] else None
    for truck in ("t2", "t3"):
        wait_for(lambda: pulled(truck), 120, f"the pull query to answer {truck}'s aggregate {oracle[truck]} "
                                             f"(last answer: {last.get(truck)})", 0.5)
        assert last[truck][0]["columnNames"] == ["TRUCK", "N", "TOP"], last[truck]
