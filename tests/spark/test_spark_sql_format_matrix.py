"""Issue 30's SQL statements with JSON topics and with AVRO topics, in one engine on the shared
local[2] session, broker and schema registry: the same input per format, the same statements, each
output topic's records decoded (JSON text or registry-framed Avro) and compared with a plain-Python
oracle over that input; the AVRO outputs' ``<topic>-value`` subjects hold ksqlDB's
``KsqlDataSourceSchema`` (optional fields). The AVRO topics have AVRO keys too (``FORMAT='AVRO'``):
registry-framed under ``<topic>-key``, a single key column unwrapped (a plain ``"string"``), the
clicks' key column inferred from its subject (``ROWKEY``), the windowed outputs' keys the Avro
bytes followed by the window's. In the JSON pass the views have ``KEY_FORMAT='JSON'`` (a single
key column unwrapped, ``"u0"``, as ksqlDB writes it), which their outputs keep but one written
with ``KEY_FORMAT='DELIMITED'``; the clicks and users keep ``KAFKA`` keys.

Per format: CREATE STREAM (AVRO: declared columns registered) and CREATE TABLE (AVRO: columns from
the registry), a push query, PRINT, a CSAS with a projection, WHERE, scalar functions and PARTITION
BY, INSERT INTO that stream, HOPPING with EMIT FINAL and SESSION with a grace period, a
stream-stream join WITHIN, a stream-table LEFT JOIN, CTAS with WINDOW TUMBLING (EMIT CHANGES, then
a pull query by key, and a windowed table declared over its topic with a pull query of its own;
then both topics the table came from are emptied with DeleteRecords and the pull query answers the
same rows from the query's state, the declared table none), DESCRIBE, and DROP ... DELETE TOPIC.
Through POST /ksql (the REST resource over the engine): SHOW STREAMS, TABLES and TOPICS and DESCRIBE
... EXTENDED on the sources; for each persistent query while it runs SHOW QUERIES, EXPLAIN <id> and
SHOW STREAMS or TABLES for its sink (topic, key and value formats); SET and UNSET of
'auto.offset.reset' in the requests of the CSAS and the INSERT INTO (SHOW PROPERTIES, EXPLAIN's
overriddenProperties, and the INSERT INTO reading from the server's default). The persistent
queries of a format run one at a time (all input is produced first, so each is done after its
first micro-batches). The engine writes its processing log to a topic and has the
KSQL_PROCESSING_LOG stream over it (the poison records' test reads both).
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict
from typing import Any, Iterator

import pytest
from confluent_kafka import Producer

from kafkalite.registry.client import RegistryClient, RegistryClientError
from kafkalite.registry.serde import decode, encode, parse_avro
from kafkalite.sql.engine import Engine
from tests.spark.conftest import running_engine, sql_config
from tests.support.records import read_committed
from tests.support.waiting import wait_for

# an hour ago on a minute boundary: event times that retention keeps and windows that align
T0 = (int(time.time() * 1000) // 60_000) * 60_000 - 3_600_000
#: (uid, page, amount, event time); the last record moves stream time far ahead, so every earlier
#: window and session is closed (EMIT FINAL and sessions are written when they close)
VIEWS = [(f"u{i % 3}", ("home", "cart", "buy")[i % 3 if i % 4 else 0], float(3 * i + 1), T0 + t)
         for i, t in enumerate([0, 1_000, 2_500, 4_000, 7_000, 12_000, 13_500, 21_000, 22_000, 24_500,
                                31_000, 38_000])] + [("u9", "home", 1.0, T0 + 600_000)]
CLICKS = [("u0", "ad1", T0 + 3_000), ("u1", "ad2", T0 + 9_000), ("u2", "ad3", T0 + 40_000), ("u7", "ad4", T0)]
USERS = [("u0", "north"), ("u1", "south"), ("u0", "east")]          # u0 updated, u2 missing
SESSION_GAP, HOP, HOP_SIZE, TUMBLE = 5_000, 10_000, 20_000, 10_000

VIEW_SCHEMA = None           # AVRO views: the engine registers the declared columns' schema
USER_SCHEMA = {"type": "record", "name": "User", "fields": [{"name": "region", "type": "string"}]}
CLICK_SCHEMA = {"type": "record", "name": "Click", "fields": [{"name": "target", "type": ["null", "string"]}]}


@pytest.fixture(scope="module")
def engine(spark: Any, kafka: Any, schema_registry: Any, tmp_path_factory: Any) -> Iterator[Engine]:
    suffix = uuid.uuid4().hex[:6]
    config = sql_config(kafka.bootstrap, f"matrix_{suffix}_", tmp_path_factory.mktemp("sql-matrix"),
                        schema_registry_url=schema_registry.url, processing_log_topic_auto_create=True,
                        processing_log_stream_auto_create=True)
    with running_engine(spark, config) as e:
        yield e


class Topics:
    """Writes and reads one format's topics: JSON text, or registry-framed Avro."""

    def __init__(self, fmt: str, bootstrap: str, registry: RegistryClient) -> None:
        self.fmt, self.bootstrap, self.registry = fmt, bootstrap, registry
        self._schemas: dict[int, Any] = {}

    def produce(self, topic: str, rows: list[tuple[str, dict[str, Any], int]], json_key: bool = False) -> None:
        if self.fmt == "AVRO":
            latest, latest_key = self.registry.latest(f"{topic}-value"), self.registry.latest(f"{topic}-key")
            parsed, parsed_key = parse_avro(latest.schema), parse_avro(latest_key.schema)
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for key, value, ts in rows:
            if self.fmt == "AVRO":                     # as Confluent's KafkaAvroSerializer frames both
                p.produce(topic, encode(latest.schema_id, parsed, value),
                          encode(latest_key.schema_id, parsed_key, key), timestamp=ts)
            else:
                p.produce(topic, json.dumps(value).encode(), (json.dumps(key) if json_key else key).encode(),
                          timestamp=ts)
        assert p.flush(60) == 0

    def key(self, data: bytes, window: int = 0, delimited: bool = False) -> Any:
        """A record's key: registry-framed Avro for AVRO (a string, or a record's fields as a
        tuple), else a JSON value (or with ``delimited`` the bytes' text); ``window`` trailing
        bytes (a windowed key's) left off."""
        data = data[:len(data) - window]
        if self.fmt == "JSON":
            return data.decode() if delimited else json.loads(data)
        decoded = decode(data, self._lookup)[2]
        return tuple(decoded.values()) if isinstance(decoded, dict) else decoded

    def _lookup(self, schema_id: int) -> Any:
        if schema_id not in self._schemas:
            found = self.registry.by_id(schema_id)
            self._schemas[schema_id] = found, parse_avro(found.schema)
        return self._schemas[schema_id]

    def _value(self, data: bytes) -> dict[str, Any]:
        if self.fmt == "JSON":
            return dict(json.loads(data))
        return dict(decode(data, self._lookup)[2])

    def read(self, topic: str, from_log_start: bool = False) -> list[tuple[bytes, dict[str, Any] | None, int]]:
        """(key, decoded value or None, timestamp) of every committed record; ``from_log_start``: of
        a one-partition topic whose first records were deleted (read_committed reads from offset 0,
        which is then out of range)."""
        records = _from_log_start(self.bootstrap, topic) if from_log_start else read_committed(
            self.bootstrap, topic, quiet_s=0.5)
        return [(m.key(), None if m.value() is None else self._value(m.value()), m.timestamp()[1]) for m in records]


# -- the oracles: ksqlDB's results over the same input, in plain Python -------------------------
def _windows(ts: int, size: int, advance: int) -> list[int]:
    first = ts - ts % advance - (size - advance)
    return [s for s in range(max(first, 0), ts + 1, advance) if s <= ts < s + size]


def _tumbling() -> dict[tuple[str, int], tuple[int, float]]:
    out: dict[tuple[str, int], tuple[int, float]] = {}
    for uid, _, amount, ts in VIEWS:
        n, total = out.get((uid, ts - ts % TUMBLE), (0, 0.0))
        out[(uid, ts - ts % TUMBLE)] = (n + 1, total + amount)
    return out


def _hopping_final(grace: int, by_page: bool) -> dict[tuple[Any, int], int]:
    """Windows closed by the last record (end + grace <= stream time): written once; per uid, or
    per (uid, page) with ``by_page``."""
    stream_time = max(ts for *_, ts in VIEWS)
    out: dict[tuple[Any, int], int] = defaultdict(int)
    for uid, page, _, ts in VIEWS:
        for start in _windows(ts, HOP_SIZE, HOP):
            if start + HOP_SIZE + grace <= stream_time:
                out[((uid, page) if by_page else uid, start)] += 1
    return dict(out)


def _sessions(grace: int) -> dict[tuple[str, int, int], tuple[int, float]]:
    """Kafka Streams' sessions: records of a key less than the gap apart, [first, last] record
    time; those closed by the last record (last + gap + grace <= stream time)."""
    stream_time = max(ts for *_, ts in VIEWS)
    by_uid: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for uid, _, amount, ts in VIEWS:
        by_uid[uid].append((ts, amount))
    out = {}
    for uid, events in by_uid.items():
        events.sort()
        session = [events[0]]
        for e in events[1:] + [(10**15, 0.0)]:
            if e[0] - session[-1][0] < SESSION_GAP:
                session.append(e)
                continue
            start, end = session[0][0], session[-1][0]
            if end + SESSION_GAP + grace <= stream_time:
                out[(uid, start, end)] = (len(session), sum(a for _, a in session))
            session = [e]
    return out


def _key_window(topics: Topics, key: bytes, session: bool = False) -> tuple[Any, int, int]:
    """A windowed key: key bytes + 8-byte start (sessions: 8-byte end, then start)."""
    if session:
        return topics.key(key, 16), int.from_bytes(key[-8:], "big"), int.from_bytes(key[-16:-8], "big")
    return topics.key(key, 8), int.from_bytes(key[-8:], "big"), 0


def _latest(topics: Topics, records: list[tuple[bytes, dict[str, Any] | None, int]],
            session: bool = False) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value, _ in records:
        out[_key_window(topics, key, session)] = value
    return out


def _ksql(engine: Engine, text: str) -> list[dict[str, Any]]:
    """POST /ksql through the server's REST resource (kafkalite.sql.rest.KsqlApi) over this
    engine: the JSON a client receives, with a 200 and ksqlDB's content type. The resource hands
    the statements to Twisted's thread pool, which no reactor runs here: they run on this thread."""
    from io import BytesIO
    from unittest import mock

    from twisted.internet import defer
    from twisted.web.test.requesthelper import DummyRequest

    from kafkalite.sql import rest

    request: Any = DummyRequest([b"ksql"])
    request.method, request.path = b"POST", b"/ksql"
    request.content = BytesIO(json.dumps({"ksql": text, "streamsProperties": {}}).encode())
    with mock.patch.object(rest.threads, "deferToThread", lambda f, *a: defer.maybeDeferred(f, *a)):
        rest.KsqlApi(engine).render(request)
    body = json.loads(b"".join(request.written))
    assert request.finished and request.responseCode == 200, body
    assert request.responseHeaders.getRawHeaders(b"content-type") == [rest.KSQL_JSON.encode()]
    return list(body)


def _listed(entity: dict[str, Any], name: str) -> dict[str, Any] | None:
    """One source of a SHOW STREAMS or SHOW TABLES answer."""
    return next((x for x in entity[entity["@type"]] if x["name"] == name), None)


def _delete_all_records(bootstrap: str, *topics: str) -> dict[str, tuple[int, int]]:
    """DeleteRecords (the Admin API's, librdkafka's client) up to the high watermark of each
    one-partition topic: each one's (high watermark, new low watermark)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}"})
    try:
        ends = {topic: watermarks.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1] for topic in topics}
    finally:
        watermarks.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, end) for topic, end in ends.items()])
    return {tp.topic: (ends[tp.topic], future.result(60).low_watermark) for tp, future in futures.items()}


def _from_log_start(bootstrap: str, topic: str) -> list[Any]:
    """The committed records of a one-partition topic from its log start offset, until 0.5 s
    pass with nothing new."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[0])])
    out: list[Any] = []
    try:
        while msgs := c.consume(1000, 0.5):
            out += [m for m in msgs if m.error() is None]
    finally:
        c.close()
    return out


FORMATS = ["JSON", "AVRO"]


def test_statements_with_json_and_avro_topics(engine: Engine, kafka: Any, schema_registry: Any) -> None:
    """One format after the other, one Spark query at a time: on a loaded local[2], queries side
    by side starve each other's Python workers (they fail to connect back in time) and a
    TERMINATE waits for the other query's micro-batch."""
    for fmt in FORMATS:
        for _ in _matrix(fmt, engine, kafka, schema_registry):     # yields once each query has started
            pass


def _matrix(fmt: str, engine: Engine, kafka: Any, schema_registry: Any) -> Iterator[None]:
    s = f"{fmt.lower()}_{uuid.uuid4().hex[:6]}"
    registry = RegistryClient(schema_registry.url)
    topics = Topics(fmt, kafka.bootstrap, registry)
    t = {n: f"{n}-{s}" for n in ("views", "clicks", "users", "big", "tumbled", "hopped", "sessions", "joined",
                                 "enriched")}
    names = {n: f"{n}_{s}".upper() for n in t}
    if fmt == "AVRO":
        registry.register(f"{t['users']}-value", json.dumps(USER_SCHEMA))
        registry.register(f"{t['clicks']}-value", json.dumps(CLICK_SCHEMA))
        registry.register(f"{t['clicks']}-key", json.dumps("string"))      # the clicks' key column inferred
    # AVRO: FORMAT='AVRO', keys and values; the clicks' columns all come from the registry
    formats = f"FORMAT='{fmt}'" if fmt == "AVRO" else f"VALUE_FORMAT='{fmt}'"
    views_formats = formats if fmt == "AVRO" else f"{formats}, KEY_FORMAT='JSON'"
    clicks_key = "ROWKEY" if fmt == "AVRO" else "UID"
    columns = {"users": "(uid VARCHAR PRIMARY KEY) " if fmt == "AVRO" else "(uid VARCHAR PRIMARY KEY, region STRING) ",
               "clicks": "" if fmt == "AVRO" else "(uid VARCHAR KEY, target STRING) "}
    engine.execute(
        f"CREATE STREAM {names['views']} (uid VARCHAR KEY, page STRING, amount DOUBLE) WITH (KAFKA_TOPIC="
        f"'{t['views']}', {views_formats}, PARTITIONS=1);"
        f"CREATE STREAM {names['clicks']} {columns['clicks']}WITH (KAFKA_TOPIC='{t['clicks']}', {formats}, "
        "PARTITIONS=1);"
        f"CREATE TABLE {names['users']} {columns['users']}WITH (KAFKA_TOPIC='{t['users']}', {formats}, "
        "PARTITIONS=1);")
    described = engine.execute(f"DESCRIBE {names['views']}; DESCRIBE {names['users']}; DESCRIBE {names['clicks']};")
    assert [[(f["name"], f["schema"]["type"], f.get("type")) for f in d["sourceDescription"]["fields"]]
            for d in described] == [
        [("UID", "STRING", "KEY"), ("PAGE", "STRING", None), ("AMOUNT", "DOUBLE", None)],
        [("UID", "STRING", "KEY"), ("REGION", "STRING", None)],
        [(clicks_key, "STRING", "KEY"), ("TARGET", "STRING", None)]]
    assert all(d["sourceDescription"]["valueFormat"] == fmt for d in described)
    assert [d["sourceDescription"]["keyFormat"] for d in described] == (
        ["AVRO"] * 3 if fmt == "AVRO" else ["JSON", "KAFKA", "KAFKA"])
    if fmt == "AVRO":                                  # the declared columns' schemas, as ksqlDB registers them
        views_schema = json.loads(registry.latest(f"{t['views']}-value").schema)
        assert views_schema == {"type": "record", "name": "KsqlDataSourceSchema",
                                "namespace": "io.confluent.ksql.avro_schemas", "fields": [
                                    {"name": "PAGE", "type": ["null", "string"], "default": None},
                                    {"name": "AMOUNT", "type": ["null", "double"], "default": None}]}
        # one key column: unwrapped, its plain type
        assert [json.loads(registry.latest(f"{t[n]}-key").schema) for n in ("views", "users")] == ["string"] * 2
    # the same sources as POST /ksql answers them: SHOW STREAMS / TABLES with topics and formats,
    # SHOW TOPICS with their replicas, DESCRIBE ... EXTENDED with the topic's partitions
    shown_streams, shown_tables, shown_topics, extended = _ksql(
        engine, f"SHOW STREAMS; SHOW TABLES; SHOW TOPICS; DESCRIBE {names['views']} EXTENDED;")
    key_format = {"views": "AVRO" if fmt == "AVRO" else "JSON", "clicks": "AVRO" if fmt == "AVRO" else "KAFKA",
                  "users": "AVRO" if fmt == "AVRO" else "KAFKA"}
    assert [_listed(shown_streams, names[n]) for n in ("views", "clicks")] + [_listed(shown_tables, names["users"])] \
        == [{"type": "TABLE" if n == "users" else "STREAM", "name": names[n], "topic": t[n], "keyFormat": key_format[n],
             "valueFormat": fmt, "isWindowed": False} for n in ("views", "clicks", "users")]
    assert shown_topics["@type"] == "kafka_topics" and {x["name"]: x["replicaInfo"] for x in shown_topics["topics"]
                                                       if x["name"] in t.values()} == {
        t[n]: [1] for n in ("views", "clicks", "users")}
    views_extended = extended["sourceDescription"]
    assert (views_extended["extended"], views_extended["topic"], views_extended["partitions"],
            views_extended["replication"], views_extended["keyFormat"], views_extended["valueFormat"]) == (
        True, t["views"], 1, 1, key_format["views"], fmt)
    assert [(f["name"], f.get("type")) for f in views_extended["fields"] if f["name"] != "ROWTIME"] == [
        ("UID", "KEY"), ("PAGE", None), ("AMOUNT", None)]
    field = str.lower if fmt == "JSON" else str.upper                # JSON names match in any case
    topics.produce(t["users"], [(uid, {"region": region}, T0) for uid, region in USERS])
    topics.produce(t["views"], [(uid, {field("page"): page, field("amount"): amount}, ts)
                                for uid, page, amount, ts in VIEWS], json_key=True)
    topics.produce(t["clicks"], [(uid, {"target": target}, ts) for uid, target, ts in CLICKS])

    # a push query over the source, from the start: its rows in the topic's order (one partition)
    pushed: list[list[Any]] = []
    done = threading.Event()
    push = engine.query(f"SELECT uid, amount FROM {names['views']} WHERE amount > 20 EMIT CHANGES LIMIT 4;",
                        {"auto.offset.reset": "earliest"})
    assert (push.column_names, push.column_types) == (["UID", "AMOUNT"], ["STRING", "DOUBLE"])

    def on_rows(rows: list[list[Any]]) -> None:
        pushed.extend(rows)
        if len(pushed) >= 4:
            done.set()
    push.listen(on_rows)
    yield
    assert done.wait(120), pushed
    engine.close_query(push.id)
    assert pushed[:4] == [[u, a] for u, _, a, _ in VIEWS if a > 20][:4]

    # PRINT the source topic: its records as text, whatever the format
    printed: list[Any] = []
    printer = engine.query(f"PRINT '{t['views']}' FROM BEGINNING LIMIT 2;")
    printer.listen(printed.extend)
    wait_for(lambda: len([line for line in printed if line.startswith("rowtime: ")]) >= 2, 60,
             f"{fmt}: PRINT's lines")
    records = [line for line in printed if line.startswith("rowtime: ")]
    shown = (lambda uid: uid) if fmt == "AVRO" else json.dumps                # JSON: the key's JSON text
    assert len(records) == 2 and all(f"key: {shown(VIEWS[i][0])}, value: " in records[i] and f"{VIEWS[i][2]}" in records[i]
                                     and "PAGE" in records[i].upper() for i in range(2)), printed
    assert any(line.startswith("Value format: ") and fmt in line for line in printed), printed

    # -- the persistent queries, one at a time (each Spark query starts Python workers that must
    # connect back: a loaded local[2] runs them best in turn); each output against its oracle
    big_want = sorted((page, uid, page.upper(), amount * 2, len(uid), ts) for uid, page, amount, ts in VIEWS)

    def big() -> list[Any]:                      # JSON: a DELIMITED key (text); AVRO: an Avro string
        return sorted((topics.key(k, delimited=True), v["UID"], v["UPAGE"], v["DOUBLED"], v["ULEN"], ts)
                      for k, v, ts in topics.read(t["big"]) if v is not None)
    want_tumbled = {(uid, start, 0): {"N": n, "TOTAL": total} for (uid, start), (n, total) in _tumbling().items()}
    # AVRO: grouped by two columns, so its keys are a record (UID, PAGE) followed by the window
    hop_keys = "uid, page" if fmt == "AVRO" else "uid"
    want_hopped = {(k, start, 0): {"N": n} for (k, start), n in _hopping_final(2_000, fmt == "AVRO").items()}
    want_sessions = {k: {"N": n, "TOTAL": total} for k, (n, total) in _sessions(2_000).items()}
    want_joined = sorted((uid, page, target, max(vts, cts)) for uid, page, _, vts in VIEWS
                         for cuid, target, cts in CLICKS if uid == cuid and abs(vts - cts) <= 5_000)
    assert want_joined and len(want_joined) < len(VIEWS)
    regions = dict(USERS)
    want_enriched = sorted((uid, page, regions.get(uid), ts) for uid, page, _, ts in VIEWS)

    def joined() -> list[Any]:
        return sorted((topics.key(k), v["PAGE"], v["TARGET"], ts) for k, v, ts in topics.read(t["joined"]))

    def enriched() -> list[Any]:
        return sorted((topics.key(k), v["PAGE"], v["REGION"], ts) for k, v, ts in topics.read(t["enriched"]))

    def pull_tumbled() -> None:
        pull = f"SELECT * FROM {names['tumbled']} WHERE uid = 'u1';"
        pulled = engine.query(pull)
        assert pulled.column_names == ["UID", "WINDOWSTART", "WINDOWEND", "N", "TOTAL"]
        want_u1 = sorted([uid, start, start + TUMBLE, v["N"], v["TOTAL"]]
                         for (uid, start, _), v in want_tumbled.items() if uid == "u1")
        assert sorted(pulled.rows) == want_u1
        # a windowed table declared over the output's topic: its keys (Avro + window) read back
        engine.execute(f"CREATE TABLE {names['tumbled']}_W (uid VARCHAR PRIMARY KEY, n BIGINT, total DOUBLE) WITH "
                       f"(KAFKA_TOPIC='{t['tumbled']}', {views_formats}, WINDOW_TYPE='TUMBLING', "
                       "WINDOW_SIZE='10 SECONDS');")
        declared = f"SELECT * FROM {names['tumbled']}_W WHERE uid = 'u1';"
        assert sorted(engine.query(declared).rows) == want_u1
        # answered from the query's state, not by reading a topic again: with the table's input
        # topic and its own topic emptied (DeleteRecords to their ends), the pull query gives the
        # same rows, where the declared table, read from its topic for each pull query, has none
        emptied = _delete_all_records(kafka.bootstrap, t["views"], t["tumbled"])
        assert emptied[t["views"]] == (len(VIEWS), len(VIEWS)) and emptied[t["tumbled"]][0] == emptied[t["tumbled"]][1]
        assert sorted(engine.query(pull).rows) == want_u1
        assert engine.query(declared).rows == []
        engine.execute(f"DROP TABLE {names['tumbled']}_W;")

    def hopped() -> bool:                                         # EMIT FINAL: one record per window
        records = topics.read(t["hopped"])
        return _latest(topics, records) == want_hopped and len(records) == len(want_hopped)
    # (statement, its output matches the oracle, then, sink, sources, window type); the tumbling
    # table last: its pull query's check empties the views topic the others read
    steps: list[tuple[str, Any, Any, str, tuple[str, ...], str | None]] = [
        (f"CREATE STREAM {names['big']} WITH (KAFKA_TOPIC='{t['big']}', PARTITIONS=1"
         f"{', KEY_FORMAT=' + repr('DELIMITED') if fmt == 'JSON' else ''}) AS SELECT page, uid, "
         f"UCASE(page) AS upage, amount * 2 AS doubled, LEN(uid) AS ulen FROM {names['views']} "
         "WHERE amount > 10 PARTITION BY page EMIT CHANGES;",
         lambda: big() == [r for r in big_want if r[3] > 20], None, "big", ("views",), None),
        (f"INSERT INTO {names['big']} SELECT page, uid, UCASE(page) AS upage, amount * 2 AS doubled, LEN(uid) AS "
         f"ulen FROM {names['views']} WHERE amount <= 10 PARTITION BY page;", lambda: big() == big_want, None,
         "big", ("views",), None),
        (f"CREATE TABLE {names['hopped']} WITH (KAFKA_TOPIC='{t['hopped']}', PARTITIONS=1) AS SELECT {hop_keys}, "
         f"COUNT(*) AS n FROM {names['views']} WINDOW HOPPING (SIZE 20 SECONDS, ADVANCE BY 10 SECONDS, GRACE "
         f"PERIOD 2 SECONDS) GROUP BY {hop_keys} EMIT FINAL;",
         hopped, None, "hopped", ("views",), "HOPPING"),
        (f"CREATE TABLE {names['sessions']} WITH (KAFKA_TOPIC='{t['sessions']}', PARTITIONS=1) AS SELECT uid, "
         f"COUNT(*) AS n, SUM(amount) AS total FROM {names['views']} WINDOW SESSION (5 SECONDS, GRACE PERIOD 2 "
         "SECONDS) GROUP BY uid;", lambda: _latest(topics, topics.read(t["sessions"]), session=True) == want_sessions,
         None, "sessions", ("views",), "SESSION"),
        (f"CREATE STREAM {names['joined']} WITH (KAFKA_TOPIC='{t['joined']}', PARTITIONS=1) AS SELECT v.uid AS uid, "
         f"page, target FROM {names['views']} v JOIN {names['clicks']} c WITHIN 5 SECONDS GRACE PERIOD 1 MINUTE "
         f"ON v.uid = c.{clicks_key};", lambda: joined() == want_joined, None, "joined", ("views", "clicks"), None),
        (f"CREATE STREAM {names['enriched']} WITH (KAFKA_TOPIC='{t['enriched']}', PARTITIONS=1) AS SELECT "
         f"v.uid AS uid, page, region FROM {names['views']} v LEFT JOIN {names['users']} u ON v.uid = u.uid;",
         lambda: enriched() == want_enriched, None, "enriched", ("views", "users"), None),
        (f"CREATE TABLE {names['tumbled']} WITH (KAFKA_TOPIC='{t['tumbled']}', PARTITIONS=1) AS SELECT uid, "
         f"COUNT(*) AS n, SUM(amount) AS total FROM {names['views']} WINDOW TUMBLING (SIZE 10 SECONDS, GRACE "
         "PERIOD 1 HOUR) GROUP BY uid EMIT CHANGES;",
         lambda: _latest(topics, topics.read(t["tumbled"])) == want_tumbled, pull_tumbled, "tumbled", ("views",),
         "TUMBLING"),
    ]
    # SET and UNSET within a /ksql request (ksqlDB's PropertyExecutor on the request's properties):
    # the CSAS is created with the property set, which SHOW PROPERTIES and its EXPLAIN show; the
    # INSERT INTO after an UNSET of 'latest' reads from the server's default, the earliest offset
    # (its oracle needs the records produced before it)
    requests = {0: "SET 'auto.offset.reset'='earliest'; SHOW PROPERTIES; ",
                1: "SET 'auto.offset.reset'='latest'; UNSET 'auto.offset.reset'; SHOW PROPERTIES; "}
    offset_reset = {"name": "ksql.streams.auto.offset.reset", "scope": "KSQL", "value": "earliest"}
    for i, (sql, matches, after, sink, sources, window) in enumerate(steps):
        answered = _ksql(engine, requests.get(i, "") + sql)
        query_id = answered[-1]["commandStatus"]["queryId"]
        if i in requests:
            assert offset_reset in answered[0]["properties"]
            # 'earliest' is also the server's own value (sql_config), so as in ksqlDB's
            # ListPropertiesExecutor the request did not overwrite it
            assert "ksql.streams.auto.offset.reset" not in answered[0]["overwrittenProperties"]
        yield
        wait_for(matches, 150, f"{fmt}: the output of {query_id}")
        # the running query as POST /ksql shows it: SHOW QUERIES lists it (and no other of this
        # format: each is terminated before the next starts) with its sink and the sink's topic;
        # EXPLAIN names its sources and sink and gives the sink's columns; SHOW STREAMS / TABLES
        # the sink's topic and formats
        kind = "TABLE" if window else "STREAM"
        queries, explained, listed, sink_described = _ksql(
            engine, f"SHOW QUERIES; EXPLAIN {query_id}; SHOW {kind}S; DESCRIBE {names[sink]};")
        assert [q for q in queries["queries"] if s.upper() in q["queryString"].upper()] == [
            {"queryString": sql, "sinks": [names[sink]], "sinkKafkaTopics": [t[sink]], "id": query_id,
             "statusCount": {"RUNNING": 1}, "queryType": "PERSISTENT", "state": "RUNNING"}]
        d = explained["queryDescription"]
        assert (d["id"], d["statementText"], sorted(d["sources"]), d["sinks"], d["windowType"], d["queryType"],
                d["state"], d["overriddenProperties"]) == (
            query_id, sql, sorted(names[n] for n in sources), [names[sink]], window, "PERSISTENT", "RUNNING",
            {"auto.offset.reset": "earliest"} if i == 0 else {})
        assert [(f["name"], f["schema"]["type"], f.get("type")) for f in d["fields"]] == [
            (f["name"], f["schema"]["type"], f.get("type") and "KEY") for f in
            sink_described["sourceDescription"]["fields"]]
        assert _listed(listed, names[sink]) == {
            "type": kind, "name": names[sink], "topic": t[sink],
            "keyFormat": "AVRO" if fmt == "AVRO" else "DELIMITED" if sink == "big" else "JSON", "valueFormat": fmt,
            "isWindowed": window is not None}
        if after is not None:
            after()
        engine.execute(f"TERMINATE {query_id};")

    # -- DESCRIBE the outputs, the registry's subjects for AVRO ------------------------------------
    outputs = engine.execute("; ".join(f"DESCRIBE {names[n]}" for n in ("big", "tumbled", "sessions", "joined",
                                                                         "enriched")) + ";")
    fields = {d["sourceDescription"]["name"]: [(f["name"], f["schema"]["type"]) for f in
                                               d["sourceDescription"]["fields"]] for d in outputs}
    assert fields[names["big"]][:5] == [("PAGE", "STRING"), ("UID", "STRING"), ("UPAGE", "STRING"),
                                        ("DOUBLED", "DOUBLE"), ("ULEN", "INTEGER")]
    assert fields[names["tumbled"]] == [("UID", "STRING"), ("N", "BIGINT"), ("TOTAL", "DOUBLE")]
    assert fields[names["joined"]] == [("UID", "STRING"), ("PAGE", "STRING"), ("TARGET", "STRING")]
    assert all(d["sourceDescription"]["valueFormat"] == fmt for d in outputs)
    if fmt == "AVRO":
        def optional(*cols: tuple[str, Any]) -> dict[str, Any]:
            return {"type": "record", "name": "KsqlDataSourceSchema", "namespace": "io.confluent.ksql.avro_schemas",
                    "fields": [{"name": n, "type": ["null", a], "default": None} for n, a in cols]}
        subject = {n: json.loads(registry.latest(f"{t[n]}-value").schema) for n in ("big", "tumbled", "hopped",
                                                                                   "sessions", "joined", "enriched")}
        assert subject["big"] == optional(("UID", "string"), ("UPAGE", "string"), ("DOUBLED", "double"),
                                          ("ULEN", "int"))
        assert subject["tumbled"] == subject["sessions"] == optional(("N", "long"), ("TOTAL", "double"))
        assert subject["hopped"] == optional(("N", "long"))
        assert subject["joined"] == optional(("PAGE", "string"), ("TARGET", "string"))
        assert subject["enriched"] == optional(("PAGE", "string"), ("REGION", "string"))
        # the outputs' AVRO keys (the source's key format carries over): one column an unwrapped
        # string; two a record named after the table, ``<UpperCamel name>Key``
        assert {n: json.loads(registry.latest(f"{t[n]}-key").schema) for n in ("big", "tumbled", "sessions",
                                                                               "joined", "enriched")} \
            == dict.fromkeys(("big", "tumbled", "sessions", "joined", "enriched"), "string")
        assert json.loads(registry.latest(f"{t['hopped']}-key").schema) == {
            "type": "record", "name": "".join(p.capitalize() for p in names["hopped"].split("_")) + "Key",
            "namespace": "io.confluent.ksql.avro_schemas",
            "fields": [{"name": "UID", "type": ["null", "string"], "default": None},
                       {"name": "PAGE", "type": ["null", "string"], "default": None}]}
    described_big = engine.execute(f"DESCRIBE {names['big']};")[0]["sourceDescription"]
    assert described_big["keyFormat"] == ("AVRO" if fmt == "AVRO" else "DELIMITED")

    # -- INSERT VALUES: the record's key and value as the source's formats write them -----------------
    engine.execute(f"INSERT INTO {names['views']} (uid, page, amount) VALUES ('u5', 'home', 1.5);")
    inserted = wait_for(lambda: topics.read(t["views"], from_log_start=True), 30,    # the earlier ones deleted
                        f"{fmt}: the inserted record")[-1]
    assert (topics.key(inserted[0]), inserted[1]) == ("u5", {"PAGE": "home", "AMOUNT": 1.5}), inserted

    # -- DROP ... DELETE TOPIC (its queries terminated above) -------------------------------------
    dropped = engine.execute(f"DROP STREAM {names['big']} DELETE TOPIC;")
    assert dropped[0]["commandStatus"]["message"] == f"Source `{names['big']}` (topic: {t['big']}) was dropped."

    def gone() -> bool:
        from kafkalite.client import KafkaClient
        with KafkaClient(kafka.bootstrap) as client:
            return t["big"] not in client.metadata(None).topics
    wait_for(gone, 60, f"{fmt}: the dropped stream's topic deleted")
    if fmt == "AVRO":                                  # ksqlDB deletes the source's subjects with its topic
        for side in ("key", "value"):
            with pytest.raises(RegistryClientError):
                registry.latest(f"{t['big']}-{side}")


def test_the_kafka_formats_spark_sql_is_kafkas_serializers(spark: Any) -> None:
    """The KAFKA format's Spark SQL (kafkalite/sql/kafka_format.py) on Kafka's serializer bytes:
    INT, BIGINT and DOUBLE read from big-endian binary (a wrong size is null) and written back to
    the same bytes; STRING as UTF-8 text."""
    import struct

    from kafkalite.sql import ast
    from kafkalite.sql.kafka_format import read_sql, write_sql

    cases = [("INT", "INT", ">i", -2), ("INT", "INT", ">i", 2**31 - 1), ("BIGINT", "BIGINT", ">q", -1795964407000),
             ("DOUBLE", "DOUBLE", ">d", -2.5e300), ("DOUBLE", "DOUBLE", ">d", 0.1)]
    for name, spark_type, code, value in cases:
        data = struct.pack(code, value)
        t = ast.SqlType(name)
        row = spark.sql(f"SELECT {read_sql('b', t, spark_type)} AS v, {read_sql('short', t, spark_type)} AS bad "
                        f"FROM (SELECT X'{data.hex()}' AS b, X'0102' AS short)").collect()[0]
        assert (row["v"], row["bad"]) == (value, None), name
        written = spark.sql(f"SELECT {write_sql('v', t)} AS b FROM (SELECT CAST({value!r} AS {spark_type}) AS v)")
        assert bytes(written.collect()[0]["b"]) == data, name
    text = spark.sql(f"SELECT {read_sql('b', ast.SqlType('STRING'), 'STRING')} AS v, "
                     f"{write_sql('v2', ast.SqlType('STRING'))} AS w FROM (SELECT X'7531' AS b, 'u2' AS v2)").collect()
    assert (text[0]["v"], bytes(text[0]["w"])) == ("u1", b"u2")


def test_a_kafka_format_stream_into_a_delimited_stream(engine: Engine, kafka: Any) -> None:
    """KAFKA and DELIMITED topics: a stream keyed by a Java producer's ``LongSerializer`` with
    ``DoubleSerializer`` values (8-byte big-endian binary each) -> a CSAS writing DELIMITED values
    with the KAFKA key kept binary; the output decoded and compared with the input computed in
    Python, DESCRIBE showing the formats."""
    import struct

    s = uuid.uuid4().hex[:6]
    source, out = f"readings-{s}", f"delimited-{s}"
    engine.execute(f"CREATE STREAM readings_{s} (id BIGINT KEY, v DOUBLE) WITH (KAFKA_TOPIC='{source}', "
                   "VALUE_FORMAT='KAFKA', PARTITIONS=1);")
    rows = [(-5, 1.5, T0), (2**40, -0.25, T0 + 1_000), (7, 1e10, T0 + 2_000)]
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for key, value, ts in rows:
        p.produce(source, struct.pack(">d", value), struct.pack(">q", key), timestamp=ts)
    assert p.flush(60) == 0
    created = engine.execute(f"CREATE STREAM delimited_{s} WITH (KAFKA_TOPIC='{out}', VALUE_FORMAT='DELIMITED', "
                             f"PARTITIONS=1) AS SELECT id, v * 2 AS doubled, CONCAT('n', CAST(id AS STRING)) AS name "
                             f"FROM readings_{s};")
    # the key as LongSerializer wrote it; the DELIMITED fields as text (the DOUBLE compared as a number)
    want = sorted((struct.pack(">q", key), (value * 2, f"n{key}"), ts) for key, value, ts in rows)

    def written() -> list[Any]:
        return sorted((m.key(), (float(m.value().split(b",")[0]), m.value().split(b",")[1].decode()),
                       m.timestamp()[1]) for m in read_committed(kafka.bootstrap, out, quiet_s=1.0))
    wait_for(lambda: written() == want, 150, "the DELIMITED output")
    engine.execute(f"TERMINATE {created[0]['commandStatus']['queryId']};")
    described = engine.execute(f"DESCRIBE delimited_{s};")[0]["sourceDescription"]
    assert (described["keyFormat"], described["valueFormat"]) == ("KAFKA", "DELIMITED")
    assert [(f["name"], f["schema"]["type"]) for f in described["fields"]] == [
        ("ID", "BIGINT"), ("DOUBLED", "DOUBLE"), ("NAME", "STRING")]


def test_poison_records_are_skipped_and_the_query_runs_on(engine: Engine, kafka: Any, schema_registry: Any) -> None:
    """ksqlDB's deserialization errors: a KAFKA-keyed (BIGINT) DELIMITED stream whose topic holds
    poison records between good ones (too few and too many fields, text in an INT field, a key
    of the wrong size), an AVRO stream (key and value) with an unframed value, a value of a
    schema id the registry does not know, corrupt Avro and an unframed key, and a JSON stream
    with fields of the wrong JSON type (text in an INT column, coerced; "true" in a BOOLEAN one
    and a boolean in the INT one, poison) -> a CSAS of each writes exactly the good records,
    coerced as ksqlDB coerces them, and stays RUNNING (each poison record is logged instead:
    tests/unit/sql/test_sql_deserialization_errors.py, tests/spark/test_avro_units.py); with the
    engine's ``ksql.logging.processing.topic.auto.create`` and ``.stream.auto.create`` each one
    the SQL checks found or the kafkalite source dropped (an AVRO value) is on the
    processing-log topic, produced from the Spark workers, and read back through the
    KSQL_PROCESSING_LOG stream by a push query."""
    import struct

    s = uuid.uuid4().hex[:6]
    engine.execute(f"CREATE STREAM poisoned_{s} (id BIGINT KEY, n INT, name STRING) WITH (KAFKA_TOPIC='poisoned-{s}', "
                   "VALUE_FORMAT='DELIMITED', PARTITIONS=1);"
                   f"CREATE STREAM spoiled_{s} (id STRING KEY, n INT) WITH (KAFKA_TOPIC='spoiled-{s}', "
                   "FORMAT='AVRO', PARTITIONS=1);"
                   f"CREATE STREAM typed_{s} (id STRING KEY, n INT, ok BOOLEAN, s STRING) WITH ("
                   f"KAFKA_TOPIC='typed-{s}', VALUE_FORMAT='JSON', PARTITIONS=1);"
                   f"CREATE STREAM pair_{s} (a STRING KEY, b INT KEY, v INT) WITH (KAFKA_TOPIC='pair-{s}', "
                   "FORMAT='AVRO', PARTITIONS=1);")
    registry = RegistryClient(schema_registry.url)
    k, v = registry.latest(f"spoiled-{s}-key"), registry.latest(f"spoiled-{s}-value")
    pk, pv = registry.latest(f"pair-{s}-key"), registry.latest(f"pair-{s}-value")

    def avro(value: Any, registered: Any) -> bytes:
        return encode(registered.schema_id, parse_avro(registered.schema), value)
    good = avro({"N": 1}, v)
    topics = {f"poisoned-{s}": [(struct.pack(">q", 1), b"10,a"), (struct.pack(">q", 2), b"11"),
                                (struct.pack(">q", 3), b"x,b"), (b"\1", b"12,c"), (struct.pack(">q", 5), b"13,e"),
                                (struct.pack(">q", 6), b"14,f,extra"), (struct.pack(">q", 7), b"15,")],
              f"spoiled-{s}": [(avro("a", k), good), (avro("b", k), b'{"N": 2}'),
                               (avro("c", k), b"\0\0\0\x7f\xff" + good[5:]), (avro("d", k), good[:5] + b"\xff"),
                               (b"plain key", good), (avro("f", k), avro({"N": 6}, v))],
              f"typed-{s}": [(b"a", b'{"N": 1, "OK": true, "S": "x"}'), (b"b", b'{"N": "2", "OK": false, "S": 7}'),
                             (b"c", b'{"N": 3, "OK": "true"}'), (b"d", b'{"n": true}'),
                             (b"e", b'{"n": 5.9, "s": ["p", 1]}')],
              # two key columns: a key record whose fields are all null is a key, not poison
              f"pair-{s}": [(avro({"A": None, "B": None}, pk), avro({"V": 1}, pv)),
                            (avro({"A": "x", "B": 2}, pk), avro({"V": 2}, pv))]}
    p = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5})
    for topic, records in topics.items():
        for i, (key, value) in enumerate(records):
            p.produce(topic, value, key, timestamp=T0 + i)
    assert p.flush(60) == 0
    created = engine.execute(f"CREATE STREAM cured_{s} WITH (KAFKA_TOPIC='cured-{s}', VALUE_FORMAT='JSON', "
                             f"PARTITIONS=1) AS SELECT id, n + 1 AS n1, name FROM poisoned_{s};"
                             f"CREATE STREAM fresh_{s} WITH (KAFKA_TOPIC='fresh-{s}', KEY_FORMAT='JSON', "
                             f"VALUE_FORMAT='JSON', PARTITIONS=1) AS SELECT id, n * 10 AS n10 FROM spoiled_{s};"
                             f"CREATE STREAM coerced_{s} WITH (KAFKA_TOPIC='coerced-{s}', VALUE_FORMAT='JSON', "
                             f"PARTITIONS=1) AS SELECT id, n + 1 AS n1, ok, s FROM typed_{s};"
                             f"CREATE STREAM paired_{s} WITH (KAFKA_TOPIC='paired-{s}', FORMAT='JSON', "
                             f"PARTITIONS=1) AS SELECT a, b, v FROM pair_{s};")
    query_ids = [c["commandStatus"]["queryId"] for c in created]
    want = {f"cured-{s}": [(struct.pack(">q", 1), {"N1": 11, "NAME": "a"}),
                           (struct.pack(">q", 5), {"N1": 14, "NAME": "e"}),
                           (struct.pack(">q", 7), {"N1": 16, "NAME": None})],
            f"fresh-{s}": [(b'"a"', {"N10": 10}), (b'"f"', {"N10": 60})],
            f"coerced-{s}": [(b"a", {"N1": 2, "OK": True, "S": "x"}), (b"b", {"N1": 3, "OK": False, "S": "7"}),
                             (b"e", {"N1": 6, "OK": None, "S": "[p, 1]"})],
            f"paired-{s}": [(b'{"A":null,"B":null}', {"V": 1}), (b'{"A":"x","B":2}', {"V": 2})]}

    def written() -> dict[str, list[Any]]:
        return {out: [(m.key(), json.loads(m.value())) for m in read_committed(kafka.bootstrap, out, quiet_s=1.0)]
                for out in want}
    wait_for(lambda: written() == want, 150, lambda: f"the good records, and only those (written: {written()})")
    queries = engine.execute("SHOW QUERIES;")[0]["queries"]
    assert [q["state"] for q in queries if q["id"] in query_ids] == ["RUNNING"] * 4
    for query_id in query_ids:
        engine.execute(f"TERMINATE {query_id};")

    # ksql.logging.processing.topic.auto.create: each poison record the SQL checks found is on the
    # processing-log topic, produced from the Spark workers as ksqlDB's Kafka appender writes it
    # (key null; level, logger, time, message); the AVRO values the source dropped too (its
    # malformedRecordHandler), in Confluent's Avro deserializer's words
    poison = {(f"poisoned-{s}", 1, "value", "Column count mismatch on deserialization. expected: 2, got: 1"),
              (f"poisoned-{s}", 2, "value", "Failed to parse x as INTEGER for column N"),
              (f"poisoned-{s}", 3, "key", "Size of data received by LongDeserializer is not 8"),
              (f"poisoned-{s}", 5, "value", "Column count mismatch on deserialization. expected: 2, got: 3"),
              (f"spoiled-{s}", 4, "key", "Unknown magic byte!"),
              (f"spoiled-{s}", 1, "value", "Unknown magic byte!"),
              (f"spoiled-{s}", 2, "value", "Error deserializing Avro message for id 32767"),
              (f"spoiled-{s}", 3, "value", f"Error deserializing Avro message for id {v.schema_id}"),
              (f"typed-{s}", 2, "value", "Can't convert type. sourceType: TextNode, requiredType: BOOLEAN, path: $.OK"),
              (f"typed-{s}", 3, "value", "Can't convert type. sourceType: BooleanNode, requiredType: INTEGER, path: $.N")}
    want_logged = {(topic, offset, target, f"Failed to deserialize {target} from topic: {topic}. {cause}")
                   for topic, offset, target, cause in poison}
    log_topic = engine.config.processing_log_topic

    def logged() -> set[tuple[Any, ...]]:
        out = set()
        for m in read_committed(kafka.bootstrap, log_topic, quiet_s=1.0):
            entry = json.loads(m.value())
            error = entry.get("message", {}).get("deserializationError") or {}
            if error.get("topic") in (f"poisoned-{s}", f"spoiled-{s}", f"typed-{s}", f"pair-{s}"):
                assert m.key() is None and list(entry) == ["level", "logger", "time", "message"], entry
                assert (entry["level"], entry["logger"]) == ("ERROR", "processing.KsqlTopic.Source.deserializer")
                out.add((error["topic"], error["offset"], error["target"], error["errorMessage"]))
        return out
    wait_for(lambda: logged() == want_logged, 60, "the poison records on the processing log topic")

    # ksql.logging.processing.stream.auto.create: the KSQL_PROCESSING_LOG stream over it, made at
    # start, listed and read by a push query (its camelCase JSON fields read case-insensitively)
    assert "KSQL_PROCESSING_LOG" in [x["name"] for x in engine.execute("SHOW STREAMS;")[0]["streams"]]
    rows: list[list[Any]] = []
    push = engine.query("SELECT LEVEL, MESSAGE->TYPE AS KIND, MESSAGE->DESERIALIZATIONERROR->`topic` AS SOURCE, "
                        "MESSAGE->DESERIALIZATIONERROR->TARGET AS TARGET, "
                        "MESSAGE->DESERIALIZATIONERROR->ERRORMESSAGE AS ERROR FROM KSQL_PROCESSING_LOG EMIT CHANGES;",
                        {"auto.offset.reset": "earliest"})
    push.listen(rows.extend)
    want_rows = {("ERROR", 0, topic, target, error) for topic, _, target, error in want_logged}
    try:
        wait_for(lambda: {tuple(r) for r in rows if r[2] in {t for t, *_ in want_logged}} == want_rows, 120,
                 lambda: f"the poison records through KSQL_PROCESSING_LOG (rows {rows}, error {push.error})")
    finally:
        engine.close_query(push.id)


def test_the_poison_checks_spark_sql(spark: Any) -> None:
    """The Spark SQL of kafkalite/sql/deserialization.py on poison and good bytes: the cause of a
    record its format cannot read, null for one that reads (a null record and JSON ``null`` too)."""
    from kafkalite.sql import ast
    from kafkalite.sql.deserialization import error_sql

    a, b = ast.ColumnDef("A", ast.SqlType("INT")), ast.ColumnDef("B", ast.SqlType("STRING"))
    cases: list[tuple[str | None, bytes | None, str | None]] = [
        (error_sql("v", "DELIMITED", [a, b]), b"1,x", None), (error_sql("v", "DELIMITED", [a, b]), b"2,", None),
        (error_sql("v", "DELIMITED", [a, b]), None, None),
        (error_sql("v", "DELIMITED", [a, b]), b"1", "Column count mismatch on deserialization. expected: 2, got: 1"),
        (error_sql("v", "DELIMITED", [a, b]), b"1,2,3", "Column count mismatch on deserialization. expected: 2, got: 3"),
        (error_sql("v", "DELIMITED", [a, b]), b"abc,x", "Failed to parse abc as INTEGER for column A"),
        (error_sql("v", "JSON", [a, b]), b'{"A": 1, "b": {"x": 2}}', None), (error_sql("v", "JSON", [a, b]), b"null", None),
        (error_sql("v", "JSON", [a, b]), b"nope", "Invalid JSON: nope"), (error_sql("v", "JSON", [a, b]), b"[1]", "Invalid JSON: [1]"),
        (error_sql("k", "JSON", [a], unwrapped=True), b'"k"', None), (error_sql("k", "JSON", [a], unwrapped=True), b"12", None),
        (error_sql("k", "JSON", [a], unwrapped=True), b"1 2", "Invalid JSON: 1 2"),
        (error_sql("k", "KAFKA", [a]), b"\0\0\0\1", None),
        (error_sql("k", "KAFKA", [a]), b"\1", "Size of data received by IntegerDeserializer is not 4"),
    ]
    for sql, data, want in cases:
        assert sql is not None
        raw = "v" if sql.startswith("CASE WHEN v ") else "k"
        literal = "CAST(NULL AS BINARY)" if data is None else f"X'{data.hex()}'"
        got = spark.sql(f"SELECT {sql} AS err FROM (SELECT {literal} AS {raw})").collect()[0]["err"]
        assert got == want, (data, got)
    _json_fields_read_and_checked_as_ksqldb_does(spark)


def _json_fields_read_and_checked_as_ksqldb_does(spark: Any) -> None:
    """JSON fields of another type than their column, through the engine's read path: those
    ksqlDB's deserializer coerces read as the coerced value (no error), the rest are the record's
    error in its words (the first failing column in column order)."""
    import datetime
    import decimal

    from kafkalite.sql import ast, deserialization
    from kafkalite.sql.engine import _json_columns

    t = ast.SqlType
    columns = tuple(ast.ColumnDef(n, ty) for n, ty in [
        ("B", t("BOOLEAN")), ("I", t("INT")), ("L", t("BIGINT")), ("D", t("DOUBLE")), ("S", t("STRING")),
        ("A", t("ARRAY", items=(t("INT"),))), ("M", t("MAP", items=(t("STRING"), t("INT")))),
        ("T", t("STRUCT", fields=(("X", t("INT")),))), ("TS", t("TIMESTAMP")), ("DEC", t("DECIMAL", (4, 2))),
        ("BY", t("BYTES"))])
    coerced: list[tuple[str, str, Any]] = [
        ('{"I": "12"}', "I", 12), ('{"i": -7}', "I", -7), ('{"I": 1.9}', "I", 1), ('{"I": 4294967297}', "I", 1),
        ('{"L": "9000000000"}', "L", 9000000000), ('{"L": 2.5}', "L", 2), ('{"D": "1.5e3"}', "D", 1500.0),
        ('{"D": 3}', "D", 3.0), ('{"D": " -2.5 "}', "D", -2.5), ('{"S": 12}', "S", "12"), ('{"S": true}', "S", "true"),
        ('{"S": {"a": 1}}', "S", '{"a":1}'), ('{"S": ["x", 1, null]}', "S", "[x, 1, null]"), ('{"B": false}', "B", False),
        ('{"TS": "1700000000000"}', "TS", datetime.datetime(2023, 11, 14, 22, 13, 20)),
        ('{"DEC": "12.5"}', "DEC", decimal.Decimal("12.50")), ('{"I": null}', "I", None), ('{}', "I", None),
        ('{"A": [1, 2]}', "A", [1, 2]), ('{"T": {"X": 3}}', "T", (3,)),
        # inside collections the same coercions; beyond BIGINT the integer part's low bits (Jackson's
        # BigIntegerNode/DecimalNode intValue() and asLong(): ksqlDB reads them, it does not fail)
        ('{"A": ["3", 4.7, null]}', "A", [3, 4, None]), ('{"M": {"k": "5"}}', "M", {"k": 5}),
        ('{"T": {"x": "6"}}', "T", (6,)), ('{"L": 18446744073709551617}', "L", 1),
        ('{"L": -9223372036854775809}', "L", 9223372036854775807), ('{"I": 18446744073709551621.9}', "I", 5),
        ('{"L": 1e19}', "L", -8446744073709551616)]
    wrong = [('{"B": "true"}', "Can't convert type. sourceType: TextNode, requiredType: BOOLEAN, path: $.B"),
             ('{"I": "abc"}', "Can't coerce string to type. targetType: INTEGER, path: $.I"),
             ('{"I": "1.5"}', "Can't coerce string to type. targetType: INTEGER, path: $.I"),
             ('{"I": true}', "Can't convert type. sourceType: BooleanNode, requiredType: INTEGER, path: $.I"),
             ('{"L": {"x": 1}}', "Can't convert type. sourceType: ObjectNode, requiredType: BIGINT, path: $.L"),
             ('{"D": [1]}', "Can't convert type. sourceType: ArrayNode, requiredType: DOUBLE, path: $.D"),
             ('{"D": "x"}', "Can't coerce string to type. targetType: DOUBLE, path: $.D"),
             ('{"A": {"x": 1}}', "Can't convert type. sourceType: ObjectNode, requiredType: ARRAY<INTEGER>, path: $.A"),
             ('{"M": [1]}', "Can't convert type. sourceType: ArrayNode, requiredType: MAP<STRING, INTEGER>, path: $.M"),
             ('{"T": 5}', "Can't convert type. sourceType: IntNode, requiredType: STRUCT<X INTEGER>, path: $.T"),
             ('{"TS": "yesterday"}', "Can't coerce string to type. targetType: TIMESTAMP, path: $.TS"),
             ('{"DEC": true}', "Can't convert type. sourceType: BooleanNode, requiredType: DECIMAL(4, 2), path: $.DEC"),
             ('{"DEC": 123.5}', "Numeric field overflow: A field with precision 4 and scale 2 must round to an "
                                "absolute value less than 10^2. Got 123.5, path: $.DEC"),
             ('{"DEC": "12.345"}', "Cannot fit decimal '12.345' into DECIMAL(4, 2) without rounding. (Requires 5,3), "
                                   "path: $.DEC"),
             ('{"DEC": "1x"}', 'Character x is neither a decimal digit number, decimal point, nor "e" notation '
                               'exponential mark., path: $.DEC'),
             ('{"BY": 5.5}', "Can't convert type. sourceType: DecimalNode, requiredType: BYTES, path: $.BY"),
             ('{"I": 1.5, "B": "x"}', "Can't convert type. sourceType: TextNode, requiredType: BOOLEAN, path: $.B"),
             # an element, map value or struct field of the wrong type fails the record, with its path
             ('{"A": [1, "x"]}', "Can't coerce string to type. targetType: INTEGER, path: $.A[1]"),
             ('{"A": [1, true, "x"]}', "Can't convert type. sourceType: BooleanNode, requiredType: INTEGER, "
                                      "path: $.A[1]"),
             ('{"M": {"a": 1, "b": [2]}}', "Can't convert type. sourceType: ArrayNode, requiredType: INTEGER, "
                                          "path: $.M.b.value"),
             ('{"T": {"x": {}}}', "Can't convert type. sourceType: ObjectNode, requiredType: INTEGER, path: $.T.X")]
    docs = [doc for doc, *_ in coerced] + [doc for doc, _ in wrong]
    frame = spark.createDataFrame([(i, doc.encode()) for i, doc in enumerate(docs)], "n INT, value BINARY")
    frame = deserialization.bind_json_fields(frame, "value", "value", columns)
    error = deserialization.error_sql("value", "JSON", columns, fields="value")
    rows = {r["n"]: r for r in frame.selectExpr("n", *_json_columns("value", columns), f"{error} AS err").collect()}
    for i, (doc, column, value) in enumerate(coerced):
        assert (rows[i][column], rows[i]["err"]) == (value, None), doc
    for i, (doc, message) in enumerate(wrong, start=len(coerced)):
        assert rows[i]["err"] == message, doc
    # a single JSON key is unwrapped: the key is the value itself, its path "$"
    key = ast.ColumnDef("K", t("INT"), key=True)
    keys = spark.createDataFrame([(b'"12"',), (b"7",), (b'"x"',), (b"true",)], "key BINARY")
    keys = deserialization.bind_json_fields(keys, "key", "key", [key], unwrapped=True)
    key_error = deserialization.error_sql("key", "JSON", [key], unwrapped=True, fields="key")
    got = [(r["k"], r["err"]) for r in keys.selectExpr(f"{deserialization.json_value_sql('key', 0, key)} AS k",
                                                       f"{key_error} AS err").collect()]
    assert got == [(12, None), (7, None), (None, "Can't coerce string to type. targetType: INTEGER, path: $"),
                   (None, "Can't convert type. sourceType: BooleanNode, requiredType: INTEGER, path: $")]


def test_json_structs_are_read_case_insensitively(spark: Any) -> None:
    """The JSON columns' Spark SQL (engine._json_columns) with structs inside: fields matched at
    any depth whatever their case, as ksqlDB's JSON deserializer does (the processing log's
    camelCase ``deserializationError`` into ``DESERIALIZATIONERROR``), inside arrays and map
    values too, a DATE in a struct from its days, a JSON type its field cannot take, null or a
    non-object struct read as null (the processing log's own: the poison-record test above)."""
    from datetime import date

    from kafkalite.sql import ast
    from kafkalite.sql.engine import _json_columns

    def T(name: str, *items: ast.SqlType, fields: tuple[tuple[str, ast.SqlType], ...] = ()) -> ast.SqlType:
        return ast.SqlType(name, items=items, fields=fields)
    item = T("STRUCT", fields=(("X", T("INT")), ("Y", T("STRING"))))
    columns = (ast.ColumnDef("A", T("ARRAY", item)), ast.ColumnDef("M", T("MAP", T("STRING"), T("STRUCT", fields=(
        ("Z", T("DOUBLE")),)))), ast.ColumnDef("S", T("STRUCT", fields=(("D", T("DATE")), ("B", T("BOOLEAN")), (
            "L", T("ARRAY", T("BIGINT")))))))
    rows = ['{"a": [{"x": 1, "y": "q"}, {"X": "2", "Y": 7}], "M": {"k": {"z": 1.5}}, "s": {"d": 19000, "B": true, '
            '"l": [1, 2]}}', '{"s": null, "a": null}', '{"s": 5, "a": [{"x": "no"}]}']

    from kafkalite.sql import deserialization

    values = ", ".join(f"('{r}')" for r in rows)                # one SQL job, no Python worker
    frame = deserialization.bind_json_fields(spark.sql(f"SELECT * FROM VALUES {values} AS t(value)"), "value",
                                             "value", columns)
    got = [r.asDict(recursive=True) for r in frame.selectExpr(*_json_columns("value", columns)).collect()]
    assert got == [
        {"A": [{"X": 1, "Y": "q"}, {"X": 2, "Y": "7"}], "M": {"k": {"Z": 1.5}},
         "S": {"D": date(2022, 1, 8), "B": True, "L": [1, 2]}},
        {"A": None, "M": None, "S": None},
        {"A": [{"X": None, "Y": None}], "M": None, "S": None}]


def test_poison_records_skipped_or_failing_the_query(spark: Any) -> None:
    """``skip_or_fail`` on Spark: by default the poison record is left out (the Arrow logging
    function runs on the executors) and the good ones kept; with
    ``ksql.fail.on.deserialization.error=true`` the job fails with ksqlDB's message."""
    from kafkalite.sql.deserialization import skip_or_fail

    frame = spark.sql("SELECT * FROM VALUES (1, CAST(NULL AS STRING), CAST(NULL AS STRING), 0, 10L, "
                      "CAST(NULL AS BINARY)), (2, 'Invalid JSON: nope', 'value', 0, 11L, X'6E6F7065'), "
                      "(3, NULL, NULL, 0, 12L, NULL) AS t(n, `__deser_error`, `__deser_target`, `ROWPARTITION`, "
                      "`ROWOFFSET`, `__deser_record`)")
    kept = skip_or_fail(frame, "orders", fail=False, include_rows=True)
    assert sorted(r["n"] for r in kept.collect()) == [1, 3] and "__deser_error" not in kept.columns
    with pytest.raises(Exception, match="Failed to deserialize value from topic: orders. Invalid JSON: nope"):
        skip_or_fail(frame, "orders", fail=True, include_rows=False).collect()


def test_the_lenient_avro_key_read_decodes_each_key_once(spark: Any, monkeypatch: Any) -> None:
    """avro_keys.read's key columns and its undecoded flag read the decoding Python function's
    result: Spark calls it once per record (one call in the plan's one BatchEvalPython), through
    the poison check and the skipping that follow as in the engine (a deterministic function was
    pushed into the skipping filter and called again for the columns)."""
    import spark_integration.avro as spark_avro
    from kafkalite.sql import ast, avro_keys, deserialization

    schema = ('{"type": "record", "name": "TKey", "namespace": "io.confluent.ksql.avro_schemas", "fields": ['
              '{"name": "A", "type": ["null", "long"]}, {"name": "B", "type": ["null", "string"]}]}')
    monkeypatch.setattr(spark_avro, "resolve_reader", lambda field, url, subject, version: spark_avro.ReaderSchema(
        field, url, subject, 1, 4321, schema))
    keys = [ast.ColumnDef("A", ast.SqlType("BIGINT"), key=True), ast.ColumnDef("B", ast.SqlType("STRING"), key=True)]
    good = encode(4321, parse_avro(schema), {"A": 7, "B": "x"})
    frame = spark.createDataFrame([(1, good, 0, 10), (2, b"plain", 0, 11), (3, None, 0, 12)],
                                  "n INT, key BINARY, `ROWPARTITION` INT, `ROWOFFSET` BIGINT")
    frame, cols = avro_keys.read(frame, spark, "http://127.0.0.1:9", "t", keys, lenient=True)
    parsed = frame.selectExpr("n", *cols, "key AS `__raw_key`", "`ROWPARTITION`", "`ROWOFFSET`")
    error = deserialization.avro_key_error_sql("`__raw_key`", f"`{avro_keys.UNDECODED}`")
    parsed = parsed.selectExpr("*", f"{error} AS `__deser_error`", "'key' AS `__deser_target`",
                               "`__raw_key` AS `__deser_record`").drop("__raw_key", avro_keys.UNDECODED)
    kept = deserialization.skip_or_fail(parsed, "t", fail=False, include_rows=False)
    assert sorted((r["n"], r["A"], r["B"]) for r in kept.collect()) == [(1, 7, "x"), (3, None, None)]
    plan = kept._jdf.queryExecution().executedPlan().toString()
    evaluations = [line for line in plan.splitlines() if "BatchEvalPython" in line]
    assert sum(line.count("ksql_avro_key_read_4321_lenient(") for line in evaluations) == 1, plan
