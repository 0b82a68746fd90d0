"""The JDBC connectors against a real PostgreSQL (Debian's, started by the fixture): Confluent's
source modes and offsets, the sink's DDL and upserts, and a server restart under the sink."""
from __future__ import annotations

import datetime as dt
import decimal

import pytest

from kafkalite.connect.connectors.jdbc import JdbcSinkTask, JdbcSourceConnector, JdbcSourceTask
from kafkalite.connect.data import INT64_SCHEMA, STRING_SCHEMA, Decimal, SchemaBuilder, Struct, Timestamp
from kafkalite.connect.errors import RetriableException
from kafkalite.connect.records import SinkRecord
from tests.support.connect_contexts import MemoryOffsetReader, SinkContext, SourceContext


def poll_all(task, reader):
    out = []
    for _ in range(100):
        batch = task.poll()
        if batch:
            out.extend(batch)
            reader.commit(batch)
        elif out:
            break
    return out


def test_source_modes_and_sink_upserts_on_postgres(postgres):
    postgres.execute("CREATE TABLE depots (id SERIAL PRIMARY KEY, name TEXT NOT NULL, capacity NUMERIC(8,2), "
                     "opened DATE, ratio NUMERIC, load REAL, updated TIMESTAMP NOT NULL DEFAULT now() - interval '1 minute')")
    postgres.execute("INSERT INTO depots (name, capacity, opened, ratio, load) VALUES "
                     "('Oslo', 10.5, '2020-02-03', 0.125, 0.5), ('Bergen', NULL, NULL, NULL, NULL)")
    connector = JdbcSourceConnector()
    connector.start({"connection.url": postgres.jdbc_url, "mode": "timestamp+incrementing", "topic.prefix": "pg-",
                     "timestamp.column.name": "updated", "incrementing.column.name": "id",
                     "table.poll.interval.ms": "0"})
    [task_config] = connector.task_configs(4)
    connector.stop()
    assert task_config["tables"] == "depots"
    reader = MemoryOffsetReader()
    task = JdbcSourceTask()
    task.initialize(SourceContext(task_config, reader))
    task.start({**task_config, "poll.interval.ms": "1"})
    records = poll_all(task, reader)
    task.stop()
    assert [r.value.get("name") for r in records] == ["Oslo", "Bergen"]
    first = records[0]
    assert first.topic == "pg-depots" and first.source_partition == {"table": "depots"}
    assert first.value.get("capacity") == decimal.Decimal("10.50") and first.value.get("opened") == dt.date(2020, 2, 3)
    assert first.value_schema.field("id").schema.type.name == "INT32"
    assert first.value.get("ratio") == 0.125 and first.value_schema.field("ratio").schema.type.name == "FLOAT64"
    assert first.value_schema.field("load").schema.type.name == "FLOAT32"
    assert set(records[-1].source_offset) == {"incrementing", "timestamp", "timestamp_nanos"}

    postgres.execute("INSERT INTO depots (name) VALUES ('Trondheim')")
    again = JdbcSourceTask()
    again.initialize(SourceContext(task_config, reader))
    again.start({**task_config, "poll.interval.ms": "1"})
    assert [r.value.get("name") for r in poll_all(again, reader)] == ["Trondheim"]
    again.stop()

    sink = JdbcSinkTask()
    props = {"connection.url": postgres.url, "auto.create": "true", "insert.mode": "upsert", "pk.mode": "kafka",
             "table.name.format": "copy_${topic}"}
    sink.initialize(SinkContext(props))
    sink.start(props)
    sinkable = [SinkRecord(r.topic, 0, None, None, r.value_schema, r.value, i) for i, r in enumerate(records)]
    sink.put(sinkable)
    sink.put(sinkable)  # redelivered: still one row per offset
    sink.stop()
    rows = postgres.execute('SELECT __connect_offset, name, capacity FROM "copy_pg-depots" ORDER BY 1')
    assert rows == [(0, "Oslo", decimal.Decimal("10.50")), (1, "Bergen", None)]
    columns = dict(postgres.execute("SELECT column_name, data_type FROM information_schema.columns "
                                    "WHERE table_name = 'copy_pg-depots'"))
    assert columns["capacity"] == "numeric" and columns["updated"] == "timestamp without time zone"
    assert columns["opened"] == "date" and columns["__connect_offset"] == "bigint"


def test_sink_retries_across_a_postgres_restart(postgres):
    schema = (SchemaBuilder.struct().name("position").field("truck", STRING_SCHEMA).field("seq", INT64_SCHEMA)
              .field("price", Decimal.schema(2)).field("at", Timestamp.SCHEMA).build())

    def record(offset):
        value = (Struct(schema).put("truck", f"t{offset % 3}").put("seq", offset).put("price", decimal.Decimal("1.25"))
                 .put("at", dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)))
        return SinkRecord("positions", 0, None, None, schema, value, offset)

    props = {"connection.url": postgres.url, "auto.create": "true", "insert.mode": "upsert", "pk.mode": "kafka",
             "max.retries": "5", "retry.backoff.ms": "100"}
    task = JdbcSinkTask()
    context = SinkContext(props)
    task.initialize(context)
    task.start(props)
    task.put([record(i) for i in range(5)])
    postgres.stop()
    batch = [record(i) for i in range(5, 10)]
    with pytest.raises(RetriableException):
        task.put(batch)
    assert context.timeouts == [100]
    postgres.start()
    task.put(batch)  # the runtime redelivers the same batch after the timeout
    task.stop()
    rows = postgres.execute("SELECT __connect_offset, truck, price FROM positions ORDER BY 1")
    assert [r[0] for r in rows] == list(range(10)) and rows[7] == (7, "t1", decimal.Decimal("1.25"))
