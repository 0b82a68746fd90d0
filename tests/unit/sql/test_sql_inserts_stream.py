"""/inserts-stream as ksqlDB serves it, from the HTTP layer down to the record bytes, without
brokers or Spark: the handler over Twisted's request helpers with an engine double (acks per row,
ksqlDB's error lines and codes, HTTP/2 only, both response shapes), the handler over a real
HTTP/2 connection (rows acked while the client is still sending), and the pure parts: the target's
resolution with ksqlDB's refusals and a JSON row's coercion (``serde.row_from_json``)."""
from __future__ import annotations

import json
from io import BytesIO
from typing import Any, Callable

import pytest
from twisted.web.test.requesthelper import DummyRequest

from kafkalite.sql import ast, rest, serde
from kafkalite.sql.errors import KsqlError
from kafkalite.sql.inserts import InsertsSubscriber, resolve_target
from kafkalite.sql.metastore import DataSource, MetaStore, Window

STREAM = DataSource("CLICKS", "STREAM", "clicks", (
    ast.ColumnDef("USERID", ast.SqlType("STRING"), key=True), ast.ColumnDef("PAGE", ast.SqlType("STRING")),
    ast.ColumnDef("N", ast.SqlType("INT"))))


class FakeSubscriber:
    """Records rows as the real one would produce them; acks at once unless ``hold``."""

    def __init__(self, source: DataSource, hold: bool = False, fail_at: int | None = None) -> None:
        self.source, self.hold, self.fail_at = source, hold, fail_at
        self.rows: list[dict[str, Any]] = []
        self.pending: list[Callable[[BaseException | None], None]] = []
        self.closed = False

    def send(self, row: Any, done: Callable[[BaseException | None], None]) -> None:
        if not isinstance(row, dict):
            raise KsqlError("Invalid JSON in inserts stream", code=40000)
        values = serde.row_from_json(row, self.source)
        if self.fail_at == len(self.rows):
            self.rows.append(values)
            done(RuntimeError("NOT_ENOUGH_REPLICAS"))
            return
        self.rows.append(values)
        if self.hold:
            self.pending.append(done)
        else:
            done(None)

    def close(self) -> None:
        self.closed = True


class InsertsEngine:
    def __init__(self, **kw: Any) -> None:
        self.metastore = MetaStore()
        self.metastore.add(STREAM)
        self.kw = kw
        self.subscribers: list[FakeSubscriber] = []
        self.targets: list[tuple[str, dict]] = []

    def inserts_subscriber(self, target: str, properties: dict[str, Any] | None = None) -> InsertsSubscriber:
        self.targets.append((target, dict(properties or {})))
        sub = FakeSubscriber(resolve_target(self.metastore, target, ("_confluent-ksql-x_command_topic",)), **self.kw)
        self.subscribers.append(sub)
        return sub  # type: ignore[return-value]


def _post(engine: Any, lines: list[Any], *, proto: bytes = b"HTTP/2", accept: str | None = None,
          raw: bytes | None = None) -> DummyRequest:
    req = DummyRequest([b"inserts-stream"])
    req.method, req.path, req.clientproto = b"POST", b"/inserts-stream", proto
    body = raw if raw is not None else b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines)
    req.content = BytesIO(body)
    if accept:
        req.requestHeaders.setRawHeaders(b"accept", [accept.encode()])
    out = rest.KsqlApi(engine).render(req)
    if isinstance(out, bytes):
        req.write(out)
        req.finish()
    return req


def _lines(req: DummyRequest) -> list[Any]:
    return [json.loads(x) for x in b"".join(req.written).splitlines() if x.strip()]


def test_rows_are_acked_in_sequence_and_produced_coerced(inline: None) -> None:
    engine = InsertsEngine()
    req = _post(engine, [{"target": "clicks", "properties": {"auto.offset.reset": "earliest"}},
                         {"userid": "u1", "page": "/home", "n": 3}, {"USERID": "u2", "`PAGE`": "/x"}])
    assert req.finished and req.responseCode == 200
    assert req.responseHeaders.getRawHeaders(b"content-type") == [b"application/vnd.ksqlapi.delimited.v1"]
    assert _lines(req) == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    assert engine.targets == [("clicks", {"auto.offset.reset": "earliest"})]
    sub = engine.subscribers[0]
    assert sub.rows == [{"USERID": "u1", "PAGE": "/home", "N": 3}, {"USERID": "u2", "PAGE": "/x", "N": None}]
    assert sub.closed


def test_json_array_shape_when_the_client_accepts_json(inline: None) -> None:
    req = _post(InsertsEngine(), [{"target": "CLICKS"}, {"USERID": "a", "N": 1}, {"USERID": "b"}],
                accept="application/json")
    assert req.responseHeaders.getRawHeaders(b"content-type") == [b"application/json"]
    assert json.loads(b"".join(req.written)) == [{"status": "ok", "seq": 0}, {"status": "ok", "seq": 1}]
    empty = _post(InsertsEngine(), [{"target": "CLICKS"}], accept="application/json")
    assert b"".join(empty.written) == b"[]" and empty.finished


def test_a_bad_row_is_an_error_line_that_ends_the_acks(inline: None) -> None:
    engine = InsertsEngine()
    req = _post(engine, [{"target": "CLICKS"}, {"USERID": "a", "N": 1}, {"N": 2}, {"USERID": "c", "N": 3}])
    assert _lines(req) == [{"status": "ok", "seq": 0},
                           {"@type": "InsertError", "error_code": 40000, "message": "Key field must be specified: USERID",
                            "status": "error", "seq": 1}]
    assert req.finished and len(engine.subscribers[0].rows) == 1      # nothing after the error is written
    req = _post(InsertsEngine(), [{"target": "CLICKS"}, {"USERID": "a", "N": "three"}])
    assert _lines(req)[0]["message"] == "Can't coerce a field of type class java.lang.String into type INTEGER"
    req = _post(InsertsEngine(), [{"target": "CLICKS"}, b"{ijqwdijqw"])
    assert _lines(req) == [{"@type": "InsertError", "error_code": 40000, "message": "Invalid JSON in inserts stream",
                            "status": "error", "seq": 0}]


def test_a_produce_failure_is_a_server_error_line(inline: None) -> None:
    req = _post(InsertsEngine(fail_at=1), [{"target": "CLICKS"}, {"USERID": "a"}, {"USERID": "b"}])
    assert _lines(req) == [{"status": "ok", "seq": 0}, {
        "@type": "InsertError", "error_code": 50000, "status": "error", "seq": 1,
        "message": "Error in processing inserts. Check server logs for details."}]


def test_request_errors_are_ksqldb_http_errors(inline: None) -> None:
    req = _post(InsertsEngine(), [{"target": "CLICKS"}], proto=b"HTTP/1.1")
    assert req.responseCode == 400 and _lines(req) == [{
        "@type": "generic_error", "error_code": 40004, "message": "This endpoint is only available when using HTTP2"}]
    req = _post(InsertsEngine(), [{"target": "nope"}, {"USERID": "a"}])
    assert req.responseCode == 400 and _lines(req) == [{
        "@type": "generic_error", "error_code": 40001, "message": "Cannot insert values into an unknown stream/table: `NOPE`"}]
    req = _post(InsertsEngine(), [{}])
    assert req.responseCode == 400 and _lines(req)[0] == {
        "@type": "generic_error", "error_code": 40000,
        "message": "Invalid JSON in request: Missing required creator property 'target'"}
    req = _post(InsertsEngine(), [], raw=b"{nope\n")
    assert req.responseCode == 400 and _lines(req)[0]["message"].startswith("Invalid JSON in request: ")


def test_acks_follow_the_broker_and_the_response_ends_after_the_last(inline: None) -> None:
    engine = InsertsEngine(hold=True)
    req = _post(engine, [{"target": "CLICKS"}, {"USERID": "a"}, {"USERID": "b"}])
    sub = engine.subscribers[0]
    assert req.responseCode == 200 and _lines(req) == [] and not req.finished
    sub.pending[1](None)                                   # acks may come back out of order
    assert _lines(req) == [{"status": "ok", "seq": 1}] and not req.finished
    sub.pending[0](None)
    assert _lines(req)[-1] == {"status": "ok", "seq": 0} and req.finished and sub.closed


def test_target_resolution_refuses_as_ksqldb() -> None:
    ms = MetaStore()
    ms.add(STREAM)
    ms.add(DataSource("Mixed", "TABLE", "mixed", STREAM.columns))
    ms.add(DataSource("WIN", "TABLE", "win", STREAM.columns, window=Window("TUMBLING", 1000)))
    ms.add(DataSource("CMD", "STREAM", "_confluent-ksql-x_command_topic", STREAM.columns))
    assert resolve_target(ms, "clicks").name == "CLICKS"
    assert resolve_target(ms, "`Mixed`").name == "Mixed"
    assert resolve_target(ms, '"Mixed"').name == "Mixed"
    cases = {"`clicks`": "Cannot insert values into an unknown stream/table: `clicks`\nDid you mean CLICKS? "
                         "Hint: try removing double quotes from the source name.",
             "mixed": "Cannot insert values into an unknown stream/table: `MIXED`\nDid you mean \"Mixed\"? "
                      "Hint: wrap the source name in double quotes to make it case-sensitive.",
             "win": "Cannot insert values into windowed stream/table",
             "`a": "Invalid target name: Expected matching quote at end of value"}
    for target, message in cases.items():
        with pytest.raises(KsqlError) as err:
            resolve_target(ms, target, ("_confluent-ksql-x_command_topic",))
        assert (err.value.code, err.value.message) == (40001, message)
    with pytest.raises(KsqlError, match="Cannot insert values into read-only topic: _confluent-ksql-x_command_topic"):
        resolve_target(ms, "cmd", ("_confluent-ksql-x_command_topic",))


def test_json_rows_are_coerced_strictly_as_ksqldb_api_does() -> None:
    t = ast.SqlType
    src = DataSource("S", "STREAM", "s", (
        ast.ColumnDef("K", t("BIGINT"), key=True), ast.ColumnDef("D", t("DECIMAL", (4, 2))),
        ast.ColumnDef("X", t("DOUBLE")), ast.ColumnDef("TS", t("TIMESTAMP")), ast.ColumnDef("DT", t("DATE")),
        ast.ColumnDef("TM", t("TIME")), ast.ColumnDef("B", t("BYTES")), ast.ColumnDef("A", t("ARRAY", items=(t("INT"),))),
        ast.ColumnDef("M", t("MAP", items=(t("STRING"), t("DOUBLE")))),
        ast.ColumnDef("ST", t("STRUCT", fields=(("F1", t("INT")), ("F2", t("STRING")))))))
    row = serde.row_from_json({"k": 5, "d": 1.005, "x": 2, "ts": "2024-01-02T03:04:05.006", "dt": "2024-01-02",
                               "tm": "10:11:12", "b": "AAEC", "a": [1, None], "m": {"a": 1},
                               "st": {"f1": 7}, "ignored": True}, src)
    assert row == {"K": 5, "D": serde.decimal.Decimal("1.01"), "X": 2.0, "TS": 1704164645006, "DT": "2024-01-02",
                   "TM": "10:11:12", "B": b"\x00\x01\x02", "A": [1, None], "M": {"a": 1.0},
                   "ST": {"F1": 7, "F2": None}}
    refused = {"K": ("x", "class java.lang.String into type BIGINT"),
               "D": ({}, "class io.vertx.core.json.JsonObject into type DECIMAL(4, 2)"),
               "A": ([1, "b"], "class io.vertx.core.json.JsonArray into type ARRAY<INTEGER>"),
               "ST": ({"f9": 1}, "class io.vertx.core.json.JsonObject into type STRUCT<`F1` INTEGER, `F2` STRING>"),
               "TS": ("yesterday", "class java.lang.String into type TIMESTAMP"),
               "X": (True, "class java.lang.Boolean into type DOUBLE")}
    for col, (value, message) in refused.items():
        with pytest.raises(KsqlError) as err:
            serde.row_from_json({"K": 1, col: value}, src)
        assert (err.value.code, err.value.message) == (40000, "Can't coerce a field of type " + message)
    with pytest.raises(KsqlError, match="Found duplicate column / struct field name: K"):
        serde.row_from_json({"K": 1, "k": 2}, src)


def _h2_connection(monkeypatch: Any, engine: Any, idle_timeout_s: int = 600) -> tuple[Any, Any, Any, Any]:
    """The server's protocol on a string transport, an h2 client that has sent its preface, and
    the clock Twisted's H2Connection schedules on: (protocol, transport, client, clock)."""
    import h2.config
    import h2.connection
    import twisted.internet
    from twisted.internet import task
    from twisted.internet.address import IPv4Address
    from twisted.internet.testing import StringTransport

    clock = task.Clock()
    monkeypatch.setattr(twisted.internet, "reactor", clock)
    proto = rest.make_site(engine, idle_timeout_s).buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    transport = StringTransport()
    proto.makeConnection(transport)
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    return proto, transport, client, clock


def test_http2_rows_are_acked_while_the_client_is_still_sending(inline: None, monkeypatch: Any) -> None:
    """A real HTTP/2 exchange (h2 as the client, Twisted's H2 server over a string transport, a
    clock for its reactor): the server answers rows before the request's stream has ended."""
    import h2.events

    engine = InsertsEngine()
    proto, transport, client, clock = _h2_connection(monkeypatch, engine)

    def exchange() -> list[Any]:
        events: list[Any] = []
        for _ in range(5):
            proto.dataReceived(client.data_to_send())
            clock.advance(0)
            events += client.receive_data(transport.value())
            transport.clear()
        return events

    exchange()
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, [(":method", "POST"), (":path", "/inserts-stream"), (":scheme", "http"),
                              (":authority", "127.0.0.1")])
    client.send_data(sid, b'{"target": "clicks"}\n{"USERID": "a", "N": 1}\n{"USERID": "b"')
    events = exchange()
    status = [dict(e.headers)[b":status"] for e in events if isinstance(e, h2.events.ResponseReceived)]
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert status == [b"200"] and data == b'{"status":"ok","seq":0}\n'
    assert not any(isinstance(e, h2.events.StreamEnded) for e in events)
    client.send_data(sid, b', "N": 2}\n{"USERID": "c"}', end_stream=True)   # the last line needs no newline
    events = exchange()
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert data == b'{"status":"ok","seq":1}\n{"status":"ok","seq":2}\n'
    assert any(isinstance(e, h2.events.StreamEnded) for e in events)
    assert [r["USERID"] for r in engine.subscribers[0].rows] == ["a", "b", "c"] and engine.subscribers[0].closed
    # a refused target is answered at once; the response ends when the client ends its side, and
    # rows the client still sends meanwhile are ignored (not a broken connection)
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, [(":method", "POST"), (":path", "/inserts-stream"), (":scheme", "http"),
                              (":authority", "127.0.0.1")])
    client.send_data(sid, b'{"target": "nope"}\n')
    events = exchange()
    status = [dict(e.headers)[b":status"] for e in events if isinstance(e, h2.events.ResponseReceived)]
    body = json.loads(b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived)))
    assert status == [b"400"] and body["error_code"] == 40001
    assert not any(isinstance(e, h2.events.StreamEnded) for e in events)
    client.send_data(sid, b'{"USERID": "z"}\n', end_stream=True)
    events = exchange()
    assert any(isinstance(e, h2.events.StreamEnded) for e in events) and not transport.disconnecting
    assert len(engine.subscribers) == 1


@pytest.mark.parametrize("idle_timeout_s", [600, 90])
def test_an_open_http2_stream_outlives_twisteds_minute_until_ksqls_idle_timeout(
        inline: None, monkeypatch: Any, idle_timeout_s: int) -> None:
    """A push query or an inserts stream may see no data for minutes: the connection is closed only
    after ksql.idle.connection.timeout.seconds (ksqlDB's default 10 minutes), not Twisted's 60 s."""
    proto, transport, client, clock = _h2_connection(monkeypatch, InsertsEngine(), idle_timeout_s)
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, [(":method", "POST"), (":path", "/inserts-stream"), (":scheme", "http"),
                              (":authority", "127.0.0.1")])
    client.send_data(sid, b'{"target": "clicks"}\n')
    proto.dataReceived(client.data_to_send())
    clock.advance(0)
    clock.advance(61)
    assert not transport.disconnecting, "closed after Twisted's default minute"
    clock.advance(idle_timeout_s - 62)
    assert not transport.disconnecting
    clock.advance(2)
    assert transport.disconnecting


def test_a_flood_of_rows_pauses_the_request_until_acks_drain(inline: None) -> None:
    """Back pressure: past MAX_OUTSTANDING unanswered rows the HTTP/2 stream is paused (its flow
    control then holds the client), and resumed once the acks have caught up."""
    class Channel:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def pauseProducing(self) -> None:
            self.calls.append("pause")

        def resumeProducing(self) -> None:
            self.calls.append("resume")

    engine = InsertsEngine(hold=True)
    req = DummyRequest([b"inserts-stream"])
    req.method, req.path, req.clientproto = b"POST", b"/inserts-stream", b"HTTP/2"
    req.channel = channel = Channel()
    handler = rest.InsertsStreamHandler(req, engine)
    handler.feed(b'{"target": "CLICKS"}\n' + b'{"USERID": "u"}\n' * (rest.InsertsStreamHandler.MAX_OUTSTANDING + 1))
    assert channel.calls == ["pause"]
    pending = engine.subscribers[0].pending
    for done in pending[:rest.InsertsStreamHandler.MAX_OUTSTANDING // 2]:
        done(None)
    assert channel.calls == ["pause"]
    pending[rest.InsertsStreamHandler.MAX_OUTSTANDING // 2](None)
    assert channel.calls == ["pause", "resume"] and not req.finished
    handler.end()
    for done in pending[rest.InsertsStreamHandler.MAX_OUTSTANDING // 2 + 1:]:
        done(None)
    assert req.finished and len(_lines(req)) == rest.InsertsStreamHandler.MAX_OUTSTANDING + 1


def test_subscriber_encodes_rows_as_the_source_and_reports_the_broker() -> None:
    """The real InsertsSubscriber over a producer double: AVRO values through the subject's latest
    schema (looked up once per request) with TIME as time-millis, TIMESTAMP as timestamp-millis
    and DECIMAL as decimal; the producer's outcome reaches the callback."""
    import datetime
    import decimal
    from concurrent.futures import Future

    from kafkalite.registry.serde import decode, parse_avro

    schema = {"type": "record", "name": "KsqlDataSourceSchema", "fields": [
        {"name": "AT", "type": ["null", {"type": "int", "logicalType": "time-millis"}], "default": None},
        {"name": "TS", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "AMOUNT", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}],
         "default": None}]}
    lookups: list[str] = []

    def lookup(subject: str) -> tuple[int, Any, list[str]]:
        lookups.append(subject)
        return 9, parse_avro(json.dumps(schema)), [f["name"] for f in schema["fields"]]

    class Producer:
        def __init__(self) -> None:
            self.sent: list[tuple[str, Any, Any, Any]] = []
            self.futures: list[Future] = []

        def send(self, topic: str, value: Any, key: Any, *, timestamp_ms: int, callback: Any) -> Future:
            self.sent.append((topic, key, value, timestamp_ms))
            f: Future = Future()
            f.add_done_callback(callback)
            self.futures.append(f)
            return f

    t = ast.SqlType
    source = DataSource("R", "STREAM", "r", (ast.ColumnDef("ID", t("STRING"), key=True), ast.ColumnDef("AT", t("TIME")),
                                             ast.ColumnDef("TS", t("TIMESTAMP")),
                                             ast.ColumnDef("AMOUNT", t("DECIMAL", (6, 2)))), value_format="AVRO")
    producer = Producer()
    sub = InsertsSubscriber(source, producer, lookup)  # type: ignore[arg-type]
    outcomes: list[Any] = []
    sub.send({"id": "t1", "at": "10:00:00.250", "ts": "2026-01-01T00:00:00", "amount": 12.345}, outcomes.append)
    sub.send({"id": "t2"}, outcomes.append)
    assert lookups == ["r-value"]
    (topic, key, value, ts), second = producer.sent
    assert (topic, key) == ("r", b"t1") and isinstance(ts, int)
    datum = decode(value, lambda i: (None, parse_avro(json.dumps(schema))))[2]
    assert datum == {"AT": datetime.time(10, 0, 0, 250000), "AMOUNT": decimal.Decimal("12.35"),
                     "TS": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)}
    producer.futures[0].set_result(None)
    producer.futures[1].set_exception(RuntimeError("NOT_LEADER"))
    assert outcomes[0] is None and isinstance(outcomes[1], RuntimeError)
    with pytest.raises(KsqlError, match="Key field must be specified: ID"):
        sub.send({"at": "10:00:00"}, outcomes.append)
