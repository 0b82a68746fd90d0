"""/query, /query-stream and /close-query from the HTTP layer: ksqlDB's streamed shapes for push
queries (rows written as they arrive, LIMIT ends the response and stops the query, a client going
away stops it), pull queries answered whole, errors as ksqlDB's JSON. The engine is a double that
hands out TransientQuery objects; the pull-query WHERE evaluation and the state store are tested
directly."""
from __future__ import annotations

import json
from io import BytesIO
from typing import Any

import pytest
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.sql import rest
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.parser import parse
from kafkalite.sql.queries import StateStore, TransientQuery, evaluate, ksql_type


class QueryEngine:
    def __init__(self) -> None:
        self.queries: list[TransientQuery] = []
        self.stopped: list[str] = []

    def query(self, text: str, properties: dict[str, Any] | None = None) -> TransientQuery:
        stmt = parse(text)[0]
        q = stmt.statement.query  # type: ignore[union-attr]
        if q.source == "MISSING":
            raise KsqlError("MISSING does not exist.", statement=stmt.text)
        tq = TransientQuery(stmt.text, ["ID", "SPEED"], ["STRING", "DOUBLE"], q.limit, push=q.emit == "CHANGES",
                            rows=[["t1", 50.0], ["t2", 60.5]])
        tq._stop = lambda: self.stopped.append(tq.id)
        self.queries.append(tq)
        return tq

    def close_query(self, query_id: str) -> bool:
        for tq in self.queries:
            if tq.id == query_id:
                tq.close()
                return True
        return False


def _post(api: rest.KsqlApi, path: str, body: Any, accept: str | None = None) -> DummyRequest:
    req = DummyRequest([p.encode() for p in path.strip("/").split("/")])
    req.method, req.path = b"POST", path.encode()
    req.content = BytesIO(json.dumps(body).encode())
    if accept:
        req.requestHeaders.setRawHeaders(b"accept", [accept.encode()])
    out = api.render(req)
    if isinstance(out, bytes):
        req.write(out)
        req.finish()
    return req


def test_push_query_on_query_streams_rows_until_limit(inline: None) -> None:
    engine = QueryEngine()
    req = _post(rest.KsqlApi(engine), "/query", {"ksql": "SELECT id, speed FROM s EMIT CHANGES LIMIT 3;",
                                                  "streamsProperties": {}})
    tq = engine.queries[0]
    assert not req.finished and len(req.written) == 1               # the header went out at once
    tq.offer([["a", 1.0], ["b", 2.0]])
    assert not req.finished
    tq.offer([["c", 3.0], ["d", 4.0]])                              # the 4th row is past LIMIT
    assert req.finished and engine.stopped == [tq.id]
    doc = json.loads(b"".join(req.written))
    assert doc[0] == {"header": {"queryId": tq.id, "schema": "`ID` STRING, `SPEED` DOUBLE"}}
    assert doc[1:4] == [{"row": {"columns": ["a", 1.0]}}, {"row": {"columns": ["b", 2.0]}},
                        {"row": {"columns": ["c", 3.0]}}]
    assert doc[4] == {"finalMessage": "Limit Reached"} and len(doc) == 5


def test_query_stream_delimited_is_one_json_per_line_and_disconnect_stops(inline: None) -> None:
    engine = QueryEngine()
    req = _post(rest.KsqlApi(engine), "/query-stream", {"sql": "SELECT * FROM s EMIT CHANGES;", "properties": {}},
                accept="application/vnd.ksqlapi.delimited.v1")
    tq = engine.queries[0]
    tq.offer([["a", 1.0]])
    lines = b"".join(req.written).decode().splitlines()
    assert json.loads(lines[0]) == {"queryId": tq.id, "columnNames": ["ID", "SPEED"],
                                    "columnTypes": ["STRING", "DOUBLE"]}
    assert json.loads(lines[1]) == ["a", 1.0]
    assert req.responseHeaders.getRawHeaders(b"content-type") == [b"application/vnd.ksqlapi.delimited.v1"]
    req.processingFailed(Exception("client went away"))             # the connection dropped
    assert engine.stopped == [tq.id]
    tq.offer([["late", 0.0]])
    assert b"late" not in b"".join(req.written)


@pytest.mark.parametrize("path, accept", [("/query", None), ("/query-stream", "application/vnd.ksqlapi.delimited.v1"),
                                          ("/query-stream", "application/json")])
def test_a_failed_push_query_ends_with_ksqls_error_row(inline: None, path: str, accept: str | None) -> None:
    engine = QueryEngine()
    field, props = ("ksql", "streamsProperties") if path == "/query" else ("sql", "properties")
    req = _post(rest.KsqlApi(engine), path, {field: "SELECT * FROM s EMIT CHANGES;", props: {}}, accept=accept)
    tq = engine.queries[0]
    tq.offer([["a", 1.0]])
    tq.error = "Query failed: broker unreachable"               # what Engine._watch records
    tq.close()
    assert req.finished
    text = b"".join(req.written).decode()
    error = {"@type": "generic_error", "error_code": 50000, "message": "Query failed: broker unreachable"}
    if accept == "application/vnd.ksqlapi.delimited.v1":
        assert json.loads(text.splitlines()[-1]) == error
    else:
        doc = json.loads(text)
        assert doc[-1] == ({"errorMessage": error} if path == "/query" else error) and len(doc) == 3


def test_rows_before_the_header_are_kept(inline: None) -> None:
    tq = TransientQuery("SELECT", ["X"], ["INTEGER"], None, push=True)
    tq.offer([[1]])
    got: list[list[Any]] = []
    tq.listen(got.extend)
    tq.offer([[2]])
    assert got == [[1], [2]]


def test_pull_query_json_and_close_query(inline: None) -> None:
    engine = QueryEngine()
    api = rest.KsqlApi(engine)
    req = _post(api, "/query-stream", {"sql": "SELECT * FROM t WHERE id = 't1';"}, accept="application/json")
    assert req.finished
    doc = json.loads(b"".join(req.written))
    assert doc[0]["columnNames"] == ["ID", "SPEED"] and doc[1:] == [["t1", 50.0], ["t2", 60.5]]
    req = _post(api, "/query", {"ksql": "SELECT * FROM t WHERE id = 't1';"})
    doc = json.loads(b"".join(req.written))
    assert [d["row"]["columns"] for d in doc[1:]] == [["t1", 50.0], ["t2", 60.5]] and req.finished
    push = _post(api, "/query-stream", {"sql": "SELECT * FROM s EMIT CHANGES;"})
    qid = engine.queries[-1].id
    closed = _post(api, "/close-query", {"queryId": qid})
    assert closed.finished and (closed.responseCode or 200) == 200 and engine.stopped == [qid]
    assert push.finished                                            # /close-query ended the stream
    bad = _post(api, "/close-query", {"queryId": "nope"})
    assert bad.responseCode == 400 and json.loads(b"".join(bad.written))["error_code"] == 40000


def test_query_errors_are_ksql_json(inline: None) -> None:
    api = rest.KsqlApi(QueryEngine())
    req = _post(api, "/query-stream", {"sql": "SELECT * FROM missing EMIT CHANGES;"})
    body = json.loads(b"".join(req.written))
    assert req.responseCode == 400 and body["@type"] == "statement_error" and "MISSING" in body["message"]
    req = _post(api, "/query", {"ksql": "SELEC x;"})
    body = json.loads(b"".join(req.written))
    assert req.responseCode == 400 and body["message"].startswith("line 1:1:")
    req = _post(api, "/query-stream", {"ksql": "SELECT 1;"})
    assert req.responseCode == 400 and "'sql' string" in json.loads(b"".join(req.written))["message"]


def test_state_store_and_pull_where() -> None:
    store = StateStore(["ID"], True, ["ID", "WINDOWSTART", "WINDOWEND", "AVG"], ["STRING", "BIGINT", "BIGINT",
                                                                               "DOUBLE"])
    store.update([{"ID": "a", "WINDOWSTART": 0, "WINDOWEND": 10, "AVG": 1.0},
                  {"ID": "a", "WINDOWSTART": 10, "WINDOWEND": 20, "AVG": 2.0},
                  {"ID": "b", "WINDOWSTART": 0, "WINDOWEND": 10, "AVG": 3.0}])
    store.update([{"ID": "a", "WINDOWSTART": 0, "WINDOWEND": 10, "AVG": 1.5}])     # the latest value wins
    where = parse("SELECT * FROM t WHERE ID = 'a' AND WINDOWSTART >= 5;")[0].statement.query.where  # type: ignore
    assert store.scan(lambda r: evaluate(where, r, "")) == [["a", 10, 20, 2.0]]
    where = parse("SELECT * FROM t WHERE ID = 'a';")[0].statement.query.where  # type: ignore
    assert store.scan(lambda r: evaluate(where, r, "")) == [["a", 0, 10, 1.5], ["a", 10, 20, 2.0]]
    where = parse("SELECT * FROM t WHERE NOPE = 1;")[0].statement.query.where  # type: ignore
    with pytest.raises(KsqlError, match="NOPE"):
        store.scan(lambda r: evaluate(where, r, ""))
    assert ksql_type("array<bigint>") == "ARRAY<BIGINT>" and ksql_type("decimal(4,2)") == "DECIMAL(4,2)"


def test_decode_output_inverts_the_table_encoding() -> None:
    from kafkalite.sql.metastore import DataSource
    from kafkalite.sql.queries import decode_output

    store = StateStore(["TRUCK"], True, ["TRUCK", "WINDOWSTART", "WINDOWEND", "AVG", "N"],
                       ["STRING", "BIGINT", "BIGINT", "DOUBLE", "BIGINT"])
    tumbling = parse("SELECT a FROM s WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY a;")[0].statement.query.window  # type: ignore
    sink = DataSource("T", "TABLE", "t", (), "KAFKA", "JSON", None, tumbling)
    key = b"t1" + (20_000).to_bytes(8, "big")
    assert decode_output(key, b'{"AVG": 2.5, "N": 4}', sink, store, tumbling) == {
        "TRUCK": "t1", "WINDOWSTART": 20_000, "WINDOWEND": 30_000, "AVG": 2.5, "N": 4}
    assert decode_output(key, None, sink, store, tumbling) == {                     # a tombstone: the key deleted
        "TRUCK": "t1", "WINDOWSTART": 20_000, "WINDOWEND": 30_000, "__deleted": True}
    plain = StateStore(["ID"], False, ["ID", "N", "TOP"], ["BIGINT", "BIGINT", "DOUBLE"])
    delimited = DataSource("T", "TABLE", "t", (), "KAFKA", "DELIMITED", None, None)
    assert decode_output(b"7", b"3,9.5", delimited, plain, None) == {"ID": 7, "N": 3, "TOP": 9.5}
    assert decode_output(b"7", b"\xff\xfe", delimited, plain, None) is None
