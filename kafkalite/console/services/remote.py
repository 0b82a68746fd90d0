"""Clients of the REST services around the cluster: Kafka Connect and the SQL server (ksqlDB's API).

They speak the upstream shapes, so the console works against kafkalite's services and against
Apache Kafka Connect or ksqlDB alike: Connect's ``GET /connectors?expand=status`` and its
restart/pause/resume resources; ksqlDB's ``POST /ksql`` for statements and ``POST /query-stream``
(delimited format: a header object, then one JSON array per row) for queries. A push query never
ends, so the console reads it for a bounded time and number of rows.
"""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any


class RemoteError(Exception):
    """A Connect or SQL server error: its own ``message`` when it sent its error JSON."""


def _request(base: str, method: str, path: str, body: Any = None, timeout: float = 15.0,
             accept: str = "application/json") -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Accept": accept, **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        try:
            doc = json.loads(exc.read())
            message = doc.get("message") if isinstance(doc, dict) else None
        except ValueError:
            message = None
        raise RemoteError(f"{method} {path}: HTTP {exc.code}" + (f": {message}" if message else "")) from None
    except (urllib.error.URLError, OSError) as exc:
        raise RemoteError(f"cannot reach {base}: {getattr(exc, 'reason', exc)}") from None
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        raise RemoteError(f"{method} {path}: the answer is not JSON") from None


@dataclass(frozen=True)
class ConnectorStatus:
    name: str
    type: str
    state: str
    worker_id: str
    tasks: list[tuple[int, str, str, str]]     # (id, state, worker, trace)


class ConnectService:
    ACTIONS = {"restart": ("POST", "/restart"), "pause": ("PUT", "/pause"), "resume": ("PUT", "/resume")}

    def __init__(self, url: str) -> None:
        self.url = url

    def connectors(self) -> list[ConnectorStatus]:
        doc = _request(self.url, "GET", "/connectors?expand=status") or {}
        out = []
        for name, entry in sorted(doc.items()):
            st = entry.get("status") or {}
            conn = st.get("connector") or {}
            tasks = [(int(t.get("id", 0)), str(t.get("state", "")), str(t.get("worker_id", "")), str(t.get("trace", "")))
                     for t in st.get("tasks") or []]
            out.append(ConnectorStatus(name, str(st.get("type", "")), str(conn.get("state", "")),
                                       str(conn.get("worker_id", "")), tasks))
        return out

    def act(self, name: str, action: str) -> None:
        if action not in self.ACTIONS:
            raise RemoteError(f"unknown connector action {action!r}")
        method, suffix = self.ACTIONS[action]
        _request(self.url, method, f"/connectors/{urllib.parse.quote(name, safe='')}{suffix}")


@dataclass
class SqlResult:
    kind: str                                  # statement | query
    columns: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    complete: bool = True                      # False: a push query cut at the row or time bound


class SqlService:
    def __init__(self, url: str) -> None:
        self.url = url

    def run(self, sql: str, max_rows: int = 100, max_seconds: float = 5.0) -> SqlResult:
        text = sql.strip()
        if not text:
            raise RemoteError("give a statement")
        if text.upper().startswith(("SELECT", "PRINT")):
            return self.query(text, max_rows, max_seconds)
        doc = _request(self.url, "POST", "/ksql", {"ksql": text if text.endswith(";") else text + ";",
                                                   "streamsProperties": {}}, accept="application/vnd.ksql.v1+json")
        result = SqlResult("statement")
        for entry in doc or []:
            status = entry.get("commandStatus") or {}
            if status:
                result.messages.append(str(status.get("message", "")))
            for key in ("streams", "tables", "queries", "topics"):
                for item in entry.get(key) or []:
                    if not result.columns:
                        result.columns = list(item)
                    result.rows.append([item.get(c) for c in result.columns])
        return result

    def query(self, sql: str, max_rows: int, max_seconds: float) -> SqlResult:
        """Rows of ``/query-stream`` as they arrive, until the query ends, ``max_rows`` or ``max_seconds``."""
        body = json.dumps({"sql": sql, "properties": {"auto.offset.reset": "earliest"}}).encode()
        req = urllib.request.Request(self.url.rstrip("/") + "/query-stream", data=body, method="POST",
                                     headers={"Accept": "application/vnd.ksqlapi.delimited.v1",
                                              "Content-Type": "application/vnd.ksqlapi.delimited.v1"})
        result = SqlResult("query")
        deadline = time.monotonic() + max_seconds
        try:
            with urllib.request.urlopen(req, timeout=max_seconds) as resp:
                header = json.loads(resp.readline() or b"{}")
                result.columns = [str(c) for c in header.get("columnNames") or []]
                while len(result.rows) < max_rows and time.monotonic() < deadline:
                    line = resp.readline()
                    if not line:
                        return result
                    if line.strip():
                        row = json.loads(line)
                        if isinstance(row, list):
                            result.rows.append(row)
                        elif isinstance(row, dict) and row.get("message"):
                            result.messages.append(str(row["message"]))
                result.complete = False
        except socket.timeout:
            result.complete = False
        except urllib.error.HTTPError as exc:
            raise RemoteError(f"/query-stream: HTTP {exc.code}: {exc.read()[:300].decode('utf-8', 'replace')}") from None
        except (urllib.error.URLError, OSError) as exc:
            if isinstance(getattr(exc, "reason", None), socket.timeout):
                result.complete = False
                return result
            raise RemoteError(f"cannot reach {self.url}: {getattr(exc, 'reason', exc)}") from None
        except ValueError:
            raise RemoteError("/query-stream: a line of the answer is not JSON") from None
        return result
