"""The ``kafkalite-sql`` shell against a double of the REST API (httpx's MockTransport): statements
split on ``;`` across lines (quotes and comments respected), SHOW output as a table, a push query's
rows printed as they arrive with LIMIT, a statement error printed as one line with its position,
SET carried into later requests, RUN SCRIPT, and the exit status of a failing script."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx

from kafkalite.sql.cli import Shell, split_statements


def test_split_statements() -> None:
    done, rest = split_statements("SHOW STREAMS; SELECT ';' FROM s\n-- a comment; still one\nEMIT CHANGES;\nDESC")
    assert done == ["SHOW STREAMS;", "SELECT ';' FROM s\n-- a comment; still one\nEMIT CHANGES;"]
    assert rest.strip() == "DESC"
    assert split_statements("-- only a comment\n") == ([], "")


def _server(seen: list[tuple[str, Any]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        if request.url.path == "/query-stream":
            lines = [{"queryId": "transient_S_1", "columnNames": ["ID", "SPEED"], "columnTypes": ["STRING", "DOUBLE"]},
                     ["a", 1.5], ["b", None]]
            return httpx.Response(200, content="".join(json.dumps(x) + "\n" for x in lines).encode())
        text = body["ksql"]
        if text.startswith("SHO "):
            return httpx.Response(400, json={"@type": "statement_error", "error_code": 40001,
                                             "message": "line 1:1: mismatched input 'SHO' expecting {...}\n(more)",
                                             "statementText": text, "entities": []})
        if text.startswith("PRINT"):
            return httpx.Response(200, content=b"Key format: KAFKA_STRING\nValue format: JSON or KAFKA_STRING\n"
                                               b"rowtime: 2026/01/01 00:00:00.000 Z, key: a, value: {}, partition: 0\n"
                                               b"\n")
        return httpx.Response(200, json=[{"@type": "streams", "statementText": text, "streams": [
            {"type": "STREAM", "name": "TRUCKS", "topic": "gps", "keyFormat": "KAFKA", "valueFormat": "JSON",
             "isWindowed": False}], "warnings": []}])
    return httpx.MockTransport(handle)


def test_shell_session(tmp_path: Path) -> None:
    seen: list[tuple[str, Any]] = []
    out = io.StringIO()
    shell = Shell("http://sql.test", out, transport=_server(seen))
    script = tmp_path / "s.sql"
    script.write_text("SHOW STREAMS;\n")
    status = shell.run(iter(["SET 'auto.offset.reset' = 'earliest';\n", "SHOW\n", "  STREAMS;\n", "SHO x;\n",
                             "SELECT * FROM trucks EMIT CHANGES LIMIT 2;\n", f"RUN SCRIPT '{script}';\n",
                             "SET 'a'='1'; SET 'a'='2'; UNSET 'a'; UNSET 'b';", "PRINT 'gps' LIMIT 1;"]), False)
    text = out.getvalue()
    assert ("Successfully changed local property 'auto.offset.reset' to 'earliest'. Use the UNSET command to "
            "revert your change.\n") in text
    assert "Successfully changed local property 'a' from '1' to '2'.\n" in text
    assert "Successfully unset local property 'a' (value was '2').\n" in text
    assert "Cannot unset local property 'b' which was never set in the first place\n" in text
    assert "rowtime: 2026/01/01 00:00:00.000 Z, key: a, value: {}, partition: 0\nTopic printing ceased\n" in text
    assert status == 1                                              # one statement failed
    assert "| Stream Name | Kafka Topic | Key Format | Value Format | Windowed |" in text
    assert "| TRUCKS      | gps         | KAFKA      | JSON         | false    |" in text
    assert "line 1:1: mismatched input 'SHO' expecting {...} (more)\n" in text    # one line
    assert "| a            | 1.5          |" in text and "| b            | null         |" in text
    assert "Limit Reached" in text
    assert [p for p, _ in seen] == ["/ksql", "/ksql", "/query-stream", "/ksql", "/query"]   # SET stays local
    assert seen[0][1] == {"ksql": "SHOW\n  STREAMS;", "streamsProperties": {"auto.offset.reset": "earliest"}}
    assert seen[2][1]["properties"] == {"auto.offset.reset": "earliest"}
    assert seen[3][1]["ksql"] == "SHOW STREAMS;"
    assert seen[4][1] == {"ksql": "PRINT 'gps' LIMIT 1;", "streamsProperties": {"auto.offset.reset": "earliest"}}
    shell.close()


def test_unreachable_server_is_one_line() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")
    out = io.StringIO()
    assert Shell("http://nowhere.test", out, transport=httpx.MockTransport(refuse)).run(iter(["SHOW TOPICS;"]),
                                                                                       False) == 1
    assert out.getvalue().startswith("Error: cannot reach the server at http://nowhere.test")


def test_explain_renders_as_ksqls_cli_prints_a_query_description() -> None:
    from kafkalite.sql.cli import render
    text = render({"@type": "queryDescription", "statementText": "EXPLAIN CSAS_FAST_3;", "queryDescription": {
        "id": "CSAS_FAST_3", "statementText": "CREATE STREAM fast AS SELECT id, v FROM s;", "windowType": None,
        "fields": [{"name": "ID", "schema": {"type": "STRING"}, "type": "KEY"}, {"name": "V", "schema": {"type": "INTEGER"}}],
        "sources": ["S"], "sinks": ["FAST"], "topology": "== Physical Plan ==", "executionPlan": "SELECT ...",
        "overriddenProperties": {}, "ksqlHostQueryStatus": {"127.0.0.1:8088": "RUNNING"}, "queryType": "PERSISTENT",
        "queryErrors": [], "tasksMetadata": [], "state": "RUNNING", "consumerGroupId": ""}, "warnings": []})
    assert text.startswith("ID                   : CSAS_FAST_3\nQuery Type           : PERSISTENT\n"
                           "SQL                  : CREATE STREAM fast AS SELECT id, v FROM s;\n"
                           "Host Query Status    : {127.0.0.1:8088: RUNNING}\n")
    assert "| ID    | VARCHAR(STRING) (key) |" in text and "| V     | INTEGER               |" in text
    assert "Sources that this query reads from: \n-----------------------------------\nS\n" in text
    assert text.endswith("Processing topology \n------------------- \n== Physical Plan ==")


def test_describe_prints_a_tables_key_as_its_primary_key() -> None:
    """ksqlDB's answer marks key columns ``KEY`` in streams and tables alike (its FieldInfo.FieldType
    has no other key kind); its CLI prints a table's as ``(primary key)``, a stream's as ``(key)``."""
    from kafkalite.sql.cli import render

    def described(kind: str) -> str:
        return render({"@type": "sourceDescription", "sourceDescription": {
            "name": "X", "type": kind, "extended": False, "fields": [
                {"name": "ID", "schema": {"type": "STRING"}, "type": "KEY"}, {"name": "V", "schema": {"type": "INTEGER"}}]}})
    assert "| ID    | VARCHAR(STRING) (primary key) |" in described("TABLE")
    assert "| ID    | VARCHAR(STRING) (key) |" in described("STREAM")
