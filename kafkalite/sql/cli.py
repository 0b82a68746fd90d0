"""``kafkalite-sql [http://host:port]``: an interactive shell in the manner of ksqlDB's CLI, over the
server's REST API (httpx).

Statements end with ``;`` and may span lines; ``SELECT`` goes to ``/query-stream`` (rows printed
as a table as they arrive, until LIMIT or Ctrl-C, which closes the query with ``/close-query``),
everything else to ``/ksql`` (SHOW/DESCRIBE printed as tables). ``RUN SCRIPT 'file';`` runs a file's
statements; ``exit``/``quit`` or end of input leaves. An error is printed as one line (the
server's message, with the position for a parse error); the shell goes on to the next statement.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Iterator, TextIO

import httpx

DEFAULT_SERVER = "http://localhost:8088"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
_RUN_SCRIPT = re.compile(r"^\s*RUN\s+SCRIPT\s+'((?:[^']|'')*)'\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_SET = re.compile(r"^\s*SET\s+'((?:[^']|'')+)'\s*=\s*'((?:[^']|'')*)'\s*;?\s*$", re.IGNORECASE | re.DOTALL)
_UNSET = re.compile(r"^\s*UNSET\s+'((?:[^']|'')+)'\s*;?\s*$", re.IGNORECASE | re.DOTALL)


def split_statements(text: str) -> tuple[list[str], str]:
    """Complete ``;``-terminated statements in ``text`` and the unfinished rest; quotes, backticks
    and ``--`` comments are respected."""
    out: list[str] = []
    start, i, quote = 0, 0, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            stmt = text[start:i + 1].strip()
            if stmt != ";":
                out.append(stmt)
            start = i + 1
        i += 1
    rest = text[start:]
    if not "".join(line for line in rest.splitlines() if not line.strip().startswith("--")).strip():
        rest = ""
    return out, rest


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """ksqlDB's CLI table: a ruled header and one line per row."""
    cells = [[_cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells if i < len(r)]) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    line = lambda vals: "|" + "|".join(f" {v:<{w}} " for v, w in zip(vals, widths)) + "|"  # noqa: E731
    return "\n".join([rule, line(headers), rule] + [line(r) for r in cells] + [rule])


def _cell(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def render(entity: dict[str, Any]) -> str:
    """One /ksql entity as the CLI prints it."""
    kind = entity.get("@type")
    if kind in ("streams", "tables"):
        label = "Stream Name" if kind == "streams" else "Table Name"
        return table([label, "Kafka Topic", "Key Format", "Value Format", "Windowed"],
                     [[s["name"], s["topic"], s["keyFormat"], s["valueFormat"], str(s["isWindowed"]).lower()]
                      for s in entity[kind]])
    if kind == "queries":
        return table(["Query ID", "Query Type", "Status", "Sink Name", "Sink Kafka Topic", "Query String"],
                     [[q["id"], q["queryType"], q["state"], ",".join(q["sinks"]), ",".join(q["sinkKafkaTopics"]),
                       q["queryString"]] for q in entity["queries"]])
    if kind == "kafka_topics":
        return table(["Kafka Topic", "Partitions", "Partition Replicas"],
                     [[t["name"], len(t["replicaInfo"]), ",".join(map(str, t["replicaInfo"]))]
                      for t in entity["topics"]])
    if kind == "kafka_topics_extended":
        return table(["Kafka Topic", "Partitions", "Partition Replicas", "Consumers", "ConsumerGroups"],
                     [[t["name"], len(t["replicaInfo"]), ",".join(map(str, t["replicaInfo"])), t["consumerCount"],
                       t["consumerGroupCount"]] for t in entity["topics"]])
    if kind == "source_descriptions":             # SHOW STREAMS|TABLES EXTENDED: each one described
        return "\n\n".join(_describe_source(d) for d in entity["sourceDescriptions"])
    if kind == "query_descriptions":              # SHOW QUERIES EXTENDED: each one explained
        return "\n\n".join(_describe_query(d) for d in entity["queryDescriptions"])
    if kind == "sourceDescription":
        return _describe_source(entity["sourceDescription"])
    if kind == "properties":
        return table(["Property", "Scope", "Value"], [[p["name"], p["scope"], p["value"]]
                                                      for p in entity["properties"]])
    if kind == "currentStatus":
        return table(["Message"], [[entity["commandStatus"]["message"]]])
    if kind == "queryDescription":
        return _describe_query(entity["queryDescription"])
    return json.dumps(entity, indent=2)


def type_string(schema: dict[str, Any]) -> str:
    """A field's ``SchemaInfo`` as ksqlDB's CLI prints it: ``VARCHAR(STRING)``, ``DECIMAL(p, s)``,
    ``ARRAY<...>``, ``MAP<STRING, ...>``, ``STRUCT<name type, ...>``, else the base type's name."""
    kind = schema["type"]
    if kind == "STRING":
        return "VARCHAR(STRING)"
    if kind == "ARRAY":
        return f"ARRAY<{type_string(schema['memberSchema'])}>"
    if kind == "MAP":
        return f"MAP<STRING, {type_string(schema['memberSchema'])}>"
    if kind == "STRUCT":
        return "STRUCT<" + ", ".join(f"{f['name']} {type_string(f['schema'])}" for f in schema["fields"]) + ">"
    params = schema.get("parameters") or {}
    if kind == "DECIMAL" and params:
        return f"DECIMAL({params['precision']}, {params['scale']})"
    return str(kind)


def _describe_source(d: dict[str, Any]) -> str:
    """DESCRIBE's output for one source. ksqlDB's answer marks a key column ``KEY`` in streams and
    tables alike; its CLI prints a table's as the primary key (Console.formatFieldType)."""
    head = (f"Name                 : {d['name']}\n"
            + (f"Type                 : {d['type']}\nKafka topic          : {d['topic']}\n"
               f"Key format           : {d['keyFormat']}\nValue format         : {d['valueFormat']}\n"
               if d.get("extended") else ""))
    fields = table(["Field", "Type"], [[f["name"], type_string(f["schema"]) + (
        (" (primary key)" if d.get("type") == "TABLE" else " (key)") if f.get("type") == "KEY" else "")]
        for f in d["fields"]])
    return head + fields


def _describe_query(d: dict[str, Any]) -> str:
    """EXPLAIN's output, in the order ksqlDB's CLI prints a query description."""
    status = ", ".join(f"{host}: {state}" for host, state in d.get("ksqlHostQueryStatus", {}).items())
    head = (f"ID                   : {d['id']}\nQuery Type           : {d['queryType']}\n"
            f"SQL                  : {d['statementText']}\n"
            + (f"Host Query Status    : {{{status}}}\n" if status else ""))
    fields = table(["Field", "Type"], [[f["name"], type_string(f["schema"]) + (" (key)" if f.get("type") == "KEY" else "")]
                                      for f in d["fields"]])
    return (head + "\n" + fields + "\n\nSources that this query reads from: \n"
            + "".join(f"-----------------------------------\n{s}\n" for s in d["sources"])
            + "\nSinks that this query writes to: \n"
            + "".join(f"-----------------------------------\n{s}\n" for s in d["sinks"])
            + f"\nExecution plan      \n--------------      \n{d['executionPlan']}\n"
            + f"\nProcessing topology \n------------------- \n{d['topology']}")


class Shell:
    def __init__(self, server: str, out: TextIO = sys.stdout, transport: httpx.BaseTransport | None = None) -> None:
        self.server = server.rstrip("/")
        self.out = out
        self.properties: dict[str, str] = {}
        self.http = httpx.Client(base_url=self.server, timeout=httpx.Timeout(60.0, read=None), transport=transport)

    def close(self) -> None:
        self.http.close()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self, lines: Iterator[str], interactive: bool) -> int:
        """Reads statements from ``lines``; returns 1 if any statement failed (for scripts)."""
        failed = False
        pending = ""
        while True:
            if interactive:
                print("ksql> " if not pending else "   > ", end="", file=self.out, flush=True)
            try:
                line = next(lines)
            except StopIteration:
                break
            except KeyboardInterrupt:
                pending = ""
                self.say("")
                continue
            if not pending and line.strip().lower().rstrip(";") in ("exit", "quit"):
                break
            statements, pending = split_statements(pending + line)
            for stmt in statements:
                failed = not self.execute(stmt) or failed
        if pending.strip():
            failed = not self.execute(pending.strip()) or failed
        return 1 if failed else 0

    def execute(self, stmt: str) -> bool:
        script = _RUN_SCRIPT.match(stmt)
        try:
            if script:
                return self.run_script(script.group(1).replace("''", "'"))
            if _SET.match(stmt) or _UNSET.match(stmt):
                return self.set_property(stmt)
            if re.match(r"^\s*SELECT\b", stmt, re.IGNORECASE):
                return self.query(stmt)
            if re.match(r"^\s*PRINT\b", stmt, re.IGNORECASE):
                return self.print_topic(stmt)
            return self.ksql(stmt)
        except httpx.HTTPError as exc:
            self.say(f"Error: cannot reach the server at {self.server}: {exc}")
            return False

    def run_script(self, path: str) -> bool:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            self.say(f"Error: cannot read script {path}: {exc.strerror}")
            return False
        statements, rest = split_statements(text)
        ok = True
        for stmt in statements + ([rest.strip()] if rest.strip() else []):
            ok = self.execute(stmt) and ok
        return ok

    def ksql(self, stmt: str) -> bool:
        resp = self.http.post("/ksql", json={"ksql": stmt, "streamsProperties": self.properties})
        body = _json(resp)
        if resp.status_code != 200:
            self.say(_error_line(body, resp))
            return False
        for entity in body if isinstance(body, list) else [body]:
            self.say(render(entity))
        return True

    def set_property(self, stmt: str) -> bool:
        """SET/UNSET change the session's properties, sent with every later request as
        ``streamsProperties`` (ksqlDB's CLI keeps them locally, the server never stores them)."""
        m = _SET.match(stmt)
        if m:
            name, value = m.group(1).replace("''", "'"), m.group(2).replace("''", "'")
            prior = self.properties.get(name)
            self.properties[name] = value
            self.say(f"Successfully changed local property '{name}'" + (f" from '{prior}'" if prior is not None
                                                                         else "")
                     + f" to '{value}'." + (" Use the UNSET command to revert your change." if prior is None else ""))
            return True
        unset = _UNSET.match(stmt)
        assert unset is not None
        name = unset.group(1).replace("''", "'")
        if name not in self.properties:
            self.say(f"Cannot unset local property '{name}' which was never set in the first place")
            return False
        self.say(f"Successfully unset local property '{name}' (value was '{self.properties.pop(name)}').")
        return True

    def print_topic(self, stmt: str) -> bool:
        """PRINT over /query: the server streams one line per record (blank lines keep the
        connection alive) until LIMIT, or Ctrl-C here."""
        try:
            with self.http.stream("POST", "/query", json={"ksql": stmt, "streamsProperties": self.properties}) as resp:
                if resp.status_code != 200:
                    resp.read()
                    self.say(_error_line(_json(resp), resp))
                    return False
                for line in resp.iter_lines():
                    if line.strip():
                        self.say(line)
        except KeyboardInterrupt:
            pass
        self.say("Topic printing ceased")
        return True

    def query(self, stmt: str) -> bool:
        """A push or pull query over /query-stream; rows printed as they arrive."""
        query_id = None
        try:
            with self.http.stream("POST", "/query-stream", headers={"Accept": DELIMITED},
                                  json={"sql": stmt, "properties": self.properties}) as resp:
                if resp.status_code != 200:
                    resp.read()
                    self.say(_error_line(_json(resp), resp))
                    return False
                widths: list[int] = []
                count = 0
                for line in resp.iter_lines():
                    if not line.strip():
                        continue
                    doc = json.loads(line)
                    if isinstance(doc, dict):
                        query_id = doc.get("queryId")
                        names = doc.get("columnNames", [])
                        widths = [max(len(n), 12) for n in names]
                        rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
                        self.say("\n".join([rule, _row(names, widths), rule]))
                        continue
                    count += 1
                    self.say(_row([_cell(v) for v in doc], widths))
                if widths:
                    self.say("+" + "+".join("-" * (w + 2) for w in widths) + "+")
                limit = re.search(r"\bLIMIT\s+(\d+)\s*;?\s*$", stmt, re.IGNORECASE)
                if limit and count >= int(limit.group(1)) and re.search(r"\bEMIT\s+CHANGES\b", stmt, re.I):
                    self.say("Limit Reached\nQuery terminated")
            return True
        except KeyboardInterrupt:
            if query_id:
                try:
                    self.http.post("/close-query", json={"queryId": query_id})
                except httpx.HTTPError:
                    pass
            self.say("Query terminated")
            return True


def _row(values: list[str], widths: list[int]) -> str:
    return "|" + "|".join(f" {v:<{w}} " for v, w in zip(values, widths)) + "|"


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return {"message": resp.text.strip() or f"HTTP {resp.status_code}"}


def _error_line(body: Any, resp: httpx.Response) -> str:
    message = body.get("message") if isinstance(body, dict) else None
    text = str(message or f"HTTP {resp.status_code}")
    return " ".join(text.split())                         # one line, whatever the server sent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kafkalite-sql", description="ksqlDB's CLI over kafkalite-sql-server")
    parser.add_argument("server", nargs="?", default=DEFAULT_SERVER, help=f"server URL (default {DEFAULT_SERVER})")
    parser.add_argument("-f", "--file", help="run the statements of this file and exit")
    args = parser.parse_args(argv)
    shell = Shell(args.server)
    try:
        if args.file:
            return 0 if shell.run_script(args.file) else 1
        interactive = sys.stdin.isatty()
        if interactive:
            shell.say(f"kafkalite-sql: connected to {args.server} (statements end with ';', exit to leave)")
        return shell.run(iter(sys.stdin.readline, ""), interactive)
    finally:
        shell.close()


if __name__ == "__main__":
    sys.exit(main())
