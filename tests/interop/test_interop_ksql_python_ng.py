"""ksql-python-ng, the second Python ksqlDB client on PyPI, unmodified against
``kafkalite-sql-server`` (the first, ``ksqldb``: tests/integration/test_sql_ksql_python_client.py).

It passes httpx's ``cert`` argument that httpx 0.28 removed, so it runs in ``.venv-ksql`` (setup.cfg's
``ksql-interop`` extra, httpx below 0.28; FINDINGS.md) as a subprocess, and prints what
each call returned: the server's version from /info, CREATE STREAM built by its SQL builder,
SHOW/DESCRIBE, a statement error as its ``KSQLError`` (message with ksqlDB's line:column, error
code 40001), INSERT VALUES, /inserts-stream over HTTP/2, the server's properties, PRINT over /query (HTTP/1.1)
and /query-stream (HTTP/2), /close-query of an unknown id, DROP. No persistent query, so no Spark.
"""
from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.interop.streams_support import APPS, streams_python
from tests.support.sql_server import SqlServerFactory
from tests.support.topics import create_topic


def test_ksql_python_ng_drives_the_server(broker: Any, sql_server_factory: SqlServerFactory, tmp_path: Path) -> None:
    python = streams_python("ksql", ".venv-ksql")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    url = sql_server_factory(broker.bootstrap, {"ksql.streams.commit.interval.ms": "1500"}, timeout=90).url
    run = subprocess.run([python, str(APPS / "ksql_python_ng_client.py"), url, topic], capture_output=True,
                         timeout=180, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"})
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    steps = {s.pop("step"): s for s in map(json.loads, run.stdout.decode().splitlines())}

    assert steps["version"]["version"]
    assert steps["create"]["answer"] is True
    assert [s["name"] for s in steps["show"]["answer"][0]["streams"]] == ["ORDERS"]
    described = steps["describe"]["answer"][0]["sourceDescription"]
    assert (described["name"], described["topic"]) == ("ORDERS", topic)
    assert [f["name"] for f in described["fields"]] == ["ID", "ITEM", "QTY"]
    bad = steps["bad-sql"]
    assert bad["error_code"] == 40001 and bad["message"].startswith("line 1:"), bad
    assert steps["insert-values"]["answer"] == []
    assert steps["inserts"]["answer"] == [{"status": "ok", "seq": 0}]
    assert "ksql.streams.commit.interval.ms" in steps["properties"]["names"]
    for endpoint in ("print-http1", "print-http2"):
        printed = "".join(steps[endpoint]["chunks"])
        rows = [line for line in printed.splitlines() if line.startswith("rowtime:")]
        assert [r.split(", key: ", 1)[1] for r in rows] == [
            'o1, value: {"ITEM":"tea","QTY":2}, partition: 0', 'o2, value: {"ITEM":"jam","QTY":1}, partition: 0'], \
            (endpoint, printed)
    assert steps["close-unknown"]["answer"] is False
    assert steps["drop"]["answer"][0]["commandStatus"]["status"] == "SUCCESS"
