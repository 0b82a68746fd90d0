"""JDBC source and sink against SQLite: every source mode with resumption from offsets, and the
sink's insert/upsert/update/delete, pk modes, auto.create/evolve, retries and errant records."""
from __future__ import annotations

import datetime as dt
import decimal

import pytest
import sqlalchemy as sa

from kafkalite.connect.connectors.jdbc import JdbcSinkConnector, JdbcSinkTask, JdbcSourceConnector, JdbcSourceTask
from kafkalite.connect.connectors.jdbc.dialect import sqlalchemy_url
from kafkalite.connect.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, STRING_SCHEMA, Decimal, SchemaBuilder, Struct
from kafkalite.connect.errors import ConfigException, ConnectException, RetriableException
from kafkalite.connect.records import SinkRecord
from tests.support.connect_contexts import ListReporter, MemoryOffsetReader, SinkContext, SourceContext


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path}/test.db"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE depots (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                             "capacity NUMERIC(10,2), updated TIMESTAMP NOT NULL)"))
        conn.execute(sa.text("CREATE TABLE other (id INTEGER PRIMARY KEY, v TEXT)"))
    yield url, engine
    engine.dispose()


def insert(engine, rows):
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO depots (id, name, capacity, updated) VALUES (:id, :name, :cap, :ts)"), rows)


def source_task(url, reader=None, **props):
    settings = {"connection.url": url, "topic.prefix": "db-", "poll.interval.ms": "1", "tables": "depots",
                **{k.replace("_", "."): v for k, v in props.items()}}
    task = JdbcSourceTask()
    task.initialize(SourceContext(settings, reader))
    task.start(settings)
    return task


def drain(task, reader=None):
    out = []
    for _ in range(50):
        batch = task.poll()
        if batch:
            out.extend(batch)
            if reader is not None:
                reader.commit(batch)
        elif out:
            break
    return out


def ts(hour):
    return f"2021-01-01 {hour:02d}:00:00.000000"


def test_connector_spreads_tables_and_validates(db):
    url, _ = db
    connector = JdbcSourceConnector()
    connector.start({"connection.url": url, "mode": "bulk", "topic.prefix": "db-", "table.poll.interval.ms": "0"})
    assert connector.task_configs(5) == [
        {"connection.url": url, "mode": "bulk", "topic.prefix": "db-", "table.poll.interval.ms": "0", "tables": "depots"},
        {"connection.url": url, "mode": "bulk", "topic.prefix": "db-", "table.poll.interval.ms": "0", "tables": "other"}]
    assert len(connector.task_configs(1)) == 1 and connector.task_configs(1)[0]["tables"] == "depots,other"
    connector.stop()
    errors = {v.name: v.error_messages for v in connector.validate(
        {"connection.url": url, "mode": "timestamp", "table.whitelist": "a", "table.blacklist": "b"}).config_values}
    assert errors["topic.prefix"] and errors["timestamp.column.name"] and errors["table.blacklist"]
    with pytest.raises(ConfigException):
        JdbcSourceConnector().start({"connection.url": url, "mode": "sideways", "topic.prefix": "x"})


def test_bulk_reads_everything_each_time(db):
    url, engine = db
    insert(engine, [{"id": 1, "name": "Oslo", "cap": "10.5", "ts": ts(1)}])
    task = source_task(url, mode="bulk")
    first = drain(task)
    assert len(first) == 1 and first[0].topic == "db-depots" and first[0].source_partition == {"table": "depots"}
    assert first[0].source_offset is None
    value = first[0].value
    assert value.get("name") == "Oslo" and value.get("capacity") == decimal.Decimal("10.50")
    assert first[0].value_schema.name == "depots" and first[0].value_schema.field("capacity").schema.name == Decimal.LOGICAL_NAME
    assert value.get("updated") == dt.datetime(2021, 1, 1, 1, tzinfo=dt.timezone.utc)
    assert len(drain(task)) == 1
    task.stop()


def test_incrementing_resumes_from_committed_offset(db):
    url, engine = db
    insert(engine, [{"id": i, "name": f"d{i}", "cap": None, "ts": ts(1)} for i in range(1, 6)])
    reader = MemoryOffsetReader()
    task = source_task(url, reader, mode="incrementing", incrementing_column_name="id", batch_max_rows="2")
    got = drain(task, reader)
    assert [r.value.get("id") for r in got] == [1, 2, 3, 4, 5]
    assert got[-1].source_offset == {"incrementing": 5}
    task.stop()
    insert(engine, [{"id": 6, "name": "d6", "cap": None, "ts": ts(2)}])
    again = source_task(url, reader, mode="incrementing")  # id found as the integer primary key
    assert [r.value.get("id") for r in drain(again, reader)] == [6]
    again.stop()


def test_timestamp_and_timestamp_incrementing(db):
    url, engine = db
    insert(engine, [{"id": 1, "name": "a", "cap": None, "ts": ts(1)}, {"id": 2, "name": "b", "cap": None, "ts": ts(1)},
                    {"id": 3, "name": "c", "cap": None, "ts": ts(2)}])
    reader = MemoryOffsetReader()
    task = source_task(url, reader, mode="timestamp+incrementing", timestamp_column_name="updated",
                       incrementing_column_name="id")
    got = drain(task, reader)
    assert [r.value.get("id") for r in got] == [1, 2, 3]
    ms = int(dt.datetime(2021, 1, 1, 2, tzinfo=dt.timezone.utc).timestamp() * 1000)
    assert got[-1].source_offset == {"incrementing": 3, "timestamp": ms, "timestamp_nanos": 0}
    task.stop()
    with engine.begin() as conn:  # an update moves a row's timestamp forward: it is read again
        conn.execute(sa.text("UPDATE depots SET name='a2', updated=:t WHERE id=1"), {"t": ts(3)})
    resumed = source_task(url, reader, mode="timestamp+incrementing", timestamp_column_name="updated",
                          incrementing_column_name="id")
    assert [(r.value.get("id"), r.value.get("name")) for r in drain(resumed, reader)] == [(1, "a2")]
    resumed.stop()
    plain = source_task(url, MemoryOffsetReader(), mode="timestamp", timestamp_column_name="updated")
    assert sorted(r.value.get("id") for r in drain(plain)) == [1, 2, 3]
    plain.stop()


def test_custom_query_mode(db):
    url, engine = db
    insert(engine, [{"id": 1, "name": "a", "cap": None, "ts": ts(1)}, {"id": 2, "name": "b", "cap": None, "ts": ts(1)}])
    task = source_task(url, mode="incrementing", query="SELECT id, upper(name) AS name FROM depots",
                       incrementing_column_name="id", topic_prefix="depots-upper")
    got = drain(task)
    assert [(r.topic, r.value.get("name")) for r in got] == [("depots-upper", "A"), ("depots-upper", "B")]
    assert got[0].source_partition == {"query": "query"} and got[-1].source_offset == {"incrementing": 2}
    task.stop()


def test_source_connection_failure_is_retriable(tmp_path):
    task = JdbcSourceTask()
    settings = {"connection.url": f"sqlite:///{tmp_path}/missing/dir/x.db", "mode": "bulk", "topic.prefix": "p",
                "tables": "t"}
    task.initialize(SourceContext(settings))
    task.start(settings)
    with pytest.raises(RetriableException):
        task.poll()
    task.stop()


# -- sink ------------------------------------------------------------------------------------
VALUE = (SchemaBuilder.struct().name("order").field("id", INT64_SCHEMA).field("item", STRING_SCHEMA)
         .field("note", OPTIONAL_STRING_SCHEMA).build())


def order(i, item="pen", note=None):
    return Struct(VALUE).put("id", i).put("item", item).put("note", note)


def sink_task(url, reporter=None, **props):
    settings = {"connection.url": url, **{k.replace("_", "."): v for k, v in props.items()}}
    task = JdbcSinkTask()
    context = SinkContext(settings, reporter)
    task.initialize(context)
    task.start(settings)
    return task, context


def rows(engine, sql):
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text(sql))]


def rec(value, offset, key=None, key_schema=None, topic="orders", schema=VALUE):
    return SinkRecord(topic, 0, key_schema, key, schema if value is not None else None, value, offset)


def test_sink_auto_create_insert_and_evolve(db):
    url, engine = db
    task, _ = sink_task(url, auto_create="true", auto_evolve="true")
    task.put([rec(order(1), 0), rec(order(2, "ink"), 1)])
    assert rows(engine, "SELECT id, item, note FROM orders ORDER BY id") == [(1, "pen", None), (2, "ink", None)]
    wider = (SchemaBuilder.struct().name("order").field("id", INT64_SCHEMA).field("item", STRING_SCHEMA)
             .field("qty", SchemaBuilder.int32().optional().build()).build())
    task.put([rec(Struct(wider).put("id", 3).put("item", "cap").put("qty", 4), 2, schema=wider)])
    assert rows(engine, "SELECT id, qty FROM orders WHERE id = 3") == [(3, 4)]
    strict = SchemaBuilder.struct().field("id", INT64_SCHEMA).field("must", STRING_SCHEMA).build()
    with pytest.raises(RetriableException):  # Confluent retries any SQL/DDL failure up to max.retries
        task.put([rec(Struct(strict).put("id", 9).put("must", "x"), 3, schema=strict)])
    task.stop()
    plain, _ = sink_task(url, max_retries="0")
    with pytest.raises(ConnectException, match="missing and auto-creation is disabled"):
        plain.put([rec(order(1), 0, topic="nowhere")])
    plain.stop()


def test_sink_upsert_with_kafka_keys_is_idempotent(db):
    url, engine = db
    task, _ = sink_task(url, auto_create="true", insert_mode="upsert", pk_mode="kafka")
    batch = [rec(order(1), 10), rec(order(2), 11)]
    task.put(batch)
    task.put(batch)  # a redelivery after a crash: the same rows, not new ones
    assert rows(engine, "SELECT __connect_topic, __connect_partition, __connect_offset, id FROM orders "
                        "ORDER BY __connect_offset") == [("orders", 0, 10, 1), ("orders", 0, 11, 2)]
    task.stop()


def test_sink_record_key_upsert_update_and_delete(db):
    url, engine = db
    task, _ = sink_task(url, auto_create="true", insert_mode="upsert", pk_mode="record_key", pk_fields="id",
                        delete_enabled="true")
    task.put([rec(order(1), 0, key=1, key_schema=INT64_SCHEMA), rec(order(2), 1, key=2, key_schema=INT64_SCHEMA),
              rec(order(1, "pencil"), 2, key=1, key_schema=INT64_SCHEMA)])
    assert rows(engine, "SELECT id, item FROM orders ORDER BY id") == [(1, "pencil"), (2, "pen")]
    task.put([rec(None, 3, key=2, key_schema=INT64_SCHEMA)])
    assert rows(engine, "SELECT id FROM orders") == [(1,)]
    task.stop()
    updater, _ = sink_task(url, insert_mode="update", pk_mode="record_value", pk_fields="id")
    updater.put([rec(order(1, "marker"), 4)])
    assert rows(engine, "SELECT id, item FROM orders") == [(1, "marker")]
    updater.stop()
    with pytest.raises(ConfigException, match="record_key"):
        sink_task(url, delete_enabled="true", pk_mode="kafka")


def test_sink_schemaless_maps(db):
    url, engine = db
    task, _ = sink_task(url, auto_create="true", pk_mode="record_value", pk_fields="id", insert_mode="upsert")
    task.put([SinkRecord("events", 0, None, None, None, {"id": 1, "kind": "a", "score": 1.5}, 0)])
    assert rows(engine, "SELECT id, kind, score FROM events") == [(1, "a", 1.5)]
    task.stop()


def test_sink_retries_lost_connections_then_fails(tmp_path):
    url = f"sqlite:///{tmp_path}/gone/x.db"
    task, context = sink_task(url, max_retries="2", retry_backoff_ms="7")
    for _ in range(2):
        with pytest.raises(RetriableException):
            task.put([rec(order(1), 0)])
    assert context.timeouts == [7, 7]
    with pytest.raises(ConnectException, match="Exceeded max.retries"):
        task.put([rec(order(1), 0)])
    task.stop()


def test_sink_reports_refused_records_and_writes_the_rest(db):
    url, engine = db
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, note TEXT)"))
    reporter = ListReporter()
    task, _ = sink_task(url, reporter)
    task.put([rec(order(1), 0), rec(order(1, "dup"), 1), rec(order(2), 2)])  # offset 1 violates the key
    assert rows(engine, "SELECT id, item FROM orders ORDER BY id") == [(1, "pen"), (2, "pen")]
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    task.stop()


def test_jdbc_urls_are_translated():
    pg = sqlalchemy_url("jdbc:postgresql://db.example:5433/shop?user=ann&password=pw&sslmode=require")
    assert (pg.drivername, pg.host, pg.port, pg.database, pg.username, pg.password) == \
        ("postgresql+psycopg", "db.example", 5433, "shop", "ann", "pw")
    assert pg.query == {"sslmode": "require"}
    assert str(sqlalchemy_url("jdbc:sqlite:/tmp/x.db")) == "sqlite:////tmp/x.db"
    assert sqlalchemy_url("postgresql://h/d", "u", "p").drivername == "postgresql+psycopg"
    with pytest.raises(ConnectException, match="Unsupported JDBC URL"):
        sqlalchemy_url("jdbc:oracle:thin:@x")
    assert JdbcSinkConnector().task_configs  # the connector exists under its Confluent name


def test_stop_from_another_thread_wakes_poll_and_releases_connections(db):
    import threading
    url, engine = db
    insert(engine, [{"id": 1, "name": "a", "cap": None, "ts": ts(1)}])
    task = source_task(url, mode="bulk", poll_interval_ms="600000")
    assert len(drain(task)) == 1
    done = []
    poller = threading.Thread(target=lambda: done.append(task.poll()))
    poller.start()
    task.stop()
    poller.join(timeout=30)
    assert not poller.is_alive() and done == [None]
    assert all(not q.querying for q in task.queriers)
