"""``kafkalite-sql-server`` as a process against a broker, driven over ksqlDB's REST API: DDL
through /ksql, a statement error with its position, /info, /healthcheck and /status; then the
server is killed and started again with the same ksql.service.id, and it rebuilds its streams
from the command topic; INSERT VALUES writes records (also with ARRAY/MAP/STRUCT values) that PRINT
streams back over /query. (No
persistent query here, so no Spark session is started: Spark runs in tests/spark/test_spark_sql.py.)
The server is the launcher's SqlServerProcess (tests/support/sql_server.py)."""
from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

from tests.support.sql_rest import ksql_call
from tests.support.sql_server import SqlServerFactory


def _call(url: str, body: Any = None) -> tuple[int, Any]:
    return ksql_call(url, body, timeout=60)


def test_server_rest_and_replay_after_restart(broker: Any, sql_server_factory: SqlServerFactory) -> None:
    service = f"it_{uuid.uuid4().hex[:6]}_"
    topic = f"pageviews-{uuid.uuid4().hex[:6]}"
    server = sql_server_factory(broker.bootstrap, {"ksql.service.id": service,
                                                   "ksql.streams.auto.offset.reset": "earliest"}, timeout=90)
    url = server.url
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
    server.kill()                                  # a crash: nothing is flushed on the way out
    server.start(90)                               # the same properties, port and state directory
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
    assert records[0] == ('rowtime: 2023/11/14 22:13:20.000 Z, key: u1, value: {"PAGEID":"p1"}, partition: '
                          + records[0].rsplit(" ", 1)[1])
    assert records[1].startswith("rowtime: ") and ', key: u2, value: {"PAGEID":"p\'2"}' in records[1]
    code, body = _call(url + "/query", {"ksql": "PRINT nosuchtopic;"})
    assert code == 400 and body["message"].startswith("Could not find topic 'nosuchtopic'")
    # collections: ARRAY/MAP/STRUCT constructors and element access, written as ksqlDB's JSON
    orders = f"orders-{uuid.uuid4().hex[:6]}"
    code, body = _call(url + "/ksql", {"ksql": f"CREATE STREAM orders (id VARCHAR KEY, tags ARRAY<VARCHAR>, "
                                               f"prices MAP<VARCHAR, DOUBLE>, item STRUCT<sku VARCHAR, qty INT>) "
                                               f"WITH (KAFKA_TOPIC='{orders}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                                               "INSERT INTO orders VALUES ('o1', ARRAY['a', 'b'], MAP('tea' := 1.5), "
                                               "STRUCT(sku := 'T-1', qty := ARRAY[1, 2][-1]));"})
    assert code == 200, body
    code, body = _call(url + "/ksql", {"ksql": "INSERT INTO orders (id, tags) VALUES ('o2', ARRAY[1, 2]);"})
    assert code == 400 and body["message"] == ("Failed to insert values into 'ORDERS'. Expected type ARRAY<STRING> "
                                               "for field `TAGS` but got ARRAY<INTEGER>([1, 2])")
    code, body = _call(url + "/ksql", {"ksql": "INSERT INTO orders (id, prices) VALUES ('o2', MAP('k' = 1));"})
    assert code == 400 and body["message"].startswith("line 1:58: mismatched input ')' expecting ':='"), body
    req = urllib.request.Request(url + "/query", data=json.dumps(
        {"ksql": f"PRINT '{orders}' FROM BEGINNING LIMIT 1;", "streamsProperties": {}}).encode())
    with urllib.request.urlopen(req, timeout=60) as resp:
        printed = [line for line in resp.read().decode().splitlines() if line.startswith("rowtime:")]
    assert (', key: o1, value: {"TAGS":["a","b"],"PRICES":{"tea":1.5},"ITEM":{"SKU":"T-1","QTY":2}}'
            in printed[0]), printed
