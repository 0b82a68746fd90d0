"""A Python ksqlDB client from PyPI, unmodified, against ``kafkalite-sql-server``: ``ksqldb``
(``KSQLdbClient``) drives the server process through its own API: ``ksql`` (DDL, SHOW, DESCRIBE
... EXTENDED, INSERT VALUES, errors as ksqlDB's JSON with HTTP 400), ``get_properties``,
``close_query``, ``query_sync`` over /query-stream and ``inserts_stream`` over /inserts-stream,
which it opens with HTTP/2 in cleartext (prior knowledge), as does a plain httpx HTTP/2 client
streaming inserts (acks, an error line, a refused target; HTTP/1.1 refused as ksqlDB does) and
PRINT. No persistent or push query, so no Spark session is started (push and pull queries
through the same client: tests/spark/test_spark_sql_queries.py)."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.sql_server import SqlServerFactory

pytest.importorskip("ksqldb")


def test_ksqldb_client_drives_the_server(broker: Any, sql_server_factory: SqlServerFactory) -> None:
    import httpx
    import requests
    from ksqldb import KSQLdbClient

    topic = f"clicks-{uuid.uuid4().hex[:6]}"
    url = sql_server_factory(broker.bootstrap, {"ksql.streams.commit.interval.ms": "1500"}, timeout=90).url
    client = KSQLdbClient(url)
    created = client.ksql(f"CREATE STREAM clicks (userid VARCHAR KEY, page VARCHAR, n INT) "
                          f"WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert created[0]["@type"] == "currentStatus" and created[0]["commandStatus"]["status"] == "SUCCESS"
    shown, described = client.ksql("SHOW STREAMS; DESCRIBE clicks EXTENDED;")
    assert [s["name"] for s in shown["streams"]] == ["CLICKS"]
    info = described["sourceDescription"]
    assert (info["name"], info["topic"], info["extended"]) == ("CLICKS", topic, True)
    assert [(f["name"], f["schema"]["type"]) for f in info["fields"]] == [
        ("ROWTIME", "BIGINT"), ("USERID", "STRING"), ("PAGE", "STRING"), ("N", "INTEGER")]
    assert client.ksql("INSERT INTO clicks (userid, page, n) VALUES ('u1', '/home', 3);") == []
    with pytest.raises(requests.HTTPError) as bad:
        client.ksql("INSERT INTO clicks (userid, page, n) VALUES ('u2', '/x', 'three');")
    error = bad.value.response.json()
    assert bad.value.response.status_code == 400 and error["@type"] == "statement_error"
    assert (error["error_code"], error["message"]) == (
        40001, "Failed to insert values into 'CLICKS'. Expected type INTEGER for field `N` but got STRING(three)")
    # /inserts-stream over HTTP/2: the client's own call, then raw HTTP (JSON shape, refusals)
    acks = client.inserts_stream("clicks", [{"USERID": "u2", "PAGE": "/a", "N": 4}, {"userid": "u3", "n": 5}])
    assert acks == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    with httpx.Client(http1=False, http2=True) as h2:
        body = b'{"target": "CLICKS"}\n{"USERID": "u4", "N": 6}\n'
        answer = h2.post(url + "/inserts-stream", content=body, headers={"accept": "application/json"}, timeout=60)
        assert answer.http_version == "HTTP/2" and answer.status_code == 200
        assert answer.json() == [{"status": "ok", "seq": 0}]
        bad_row = h2.post(url + "/inserts-stream", content=b'{"target": "CLICKS"}\n{"USERID": "u5", "N": "six"}',
                          timeout=60)
        assert bad_row.status_code == 200 and bad_row.text.splitlines() == [json.dumps({
            "@type": "InsertError", "error_code": 40000,
            "message": "Can't coerce a field of type class java.lang.String into type INTEGER",
            "status": "error", "seq": 0}, separators=(",", ":"))]
        unknown = h2.post(url + "/inserts-stream", content=b'{"target": "nope"}\n{}\n', timeout=60)
        assert (unknown.status_code, unknown.json()["error_code"]) == (400, 40001)
    http1 = requests.post(url + "/inserts-stream", data=b'{"target": "CLICKS"}\n', timeout=60)
    assert (http1.status_code, http1.json()["error_code"]) == (400, 40004)
    properties = {p["name"]: p["value"] for p in client.get_properties()}
    assert properties["ksql.streams.commit.interval.ms"] == "1500"
    assert client.close_query("transient_CLICKS_1") is False          # unknown: 400
    # the client's queries go over HTTP/2 with prior knowledge (h2c), as ksqlDB's listener takes them
    answer = client.query_sync("SELECT userid, COUNT(*) AS n FROM clicks GROUP BY userid;")
    assert len(answer) == 1 and answer[0]["@type"] == "statement_error", answer
    assert answer[0]["message"].startswith("Pull queries don't support GROUP BY clauses. See https://cnfl.io/queries")
    with httpx.Client(http1=False, http2=True) as h2:
        with h2.stream("POST", url + "/query-stream", json={"sql": f"PRINT '{topic}' FROM BEGINNING LIMIT 4;",
                                                             "properties": {}}, timeout=60) as printed:
            assert printed.http_version == "HTTP/2" and printed.status_code == 200
            lines = [line for line in printed.iter_lines() if line.startswith("rowtime:")]
    assert [line.split(", key: ", 1)[1] for line in lines] == [
        'u1, value: {"PAGE":"/home","N":3}, partition: 0', 'u2, value: {"PAGE":"/a","N":4}, partition: 0',
        'u3, value: {"PAGE":null,"N":5}, partition: 0', 'u4, value: {"PAGE":null,"N":6}, partition: 0']
    assert client.ksql("DROP STREAM clicks;")[0]["commandStatus"]["status"] == "SUCCESS"
    assert client.ksql("SHOW STREAMS;")[0]["streams"] == []
