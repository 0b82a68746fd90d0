"""The Parquet sink: Confluent's file names and partitioners, rotation, and exactly-once files
across a task killed mid-flush (every record in exactly one file after the restart)."""
from __future__ import annotations

import collections

import pyarrow.parquet as pq
import pytest

from kafkalite.connect.connectors import parquet
from kafkalite.connect.connectors.parquet import ParquetSinkConnector, ParquetSinkTask
from kafkalite.connect.data import INT64_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct, Timestamp
from kafkalite.connect.errors import ConfigException, ConnectException
from kafkalite.connect.records import SinkRecord
from kafkalite.client.cluster import TopicPartition
from tests.support.connect_contexts import SinkContext

SCHEMA = (SchemaBuilder.struct().name("position").field("truck", STRING_SCHEMA).field("seq", INT64_SCHEMA)
          .field("at", Timestamp.SCHEMA).build())
BASE = 1_609_459_200_000  # 2021-01-01T00:00:00Z


def record(partition, offset, truck=None, ts=None):
    value = (Struct(SCHEMA).put("truck", truck or f"t{offset % 3}").put("seq", offset)
             .put("at", Timestamp.to_logical(Timestamp.SCHEMA, ts if ts is not None else BASE + offset)))
    return SinkRecord("positions", partition, None, None, SCHEMA, value, offset, ts if ts is not None else BASE + offset)


def start(props, context=None):
    task = ParquetSinkTask()
    context = context or SinkContext(props)
    task.initialize(context)
    task.start(props)
    return task, context


def files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))


def offsets_in_files(root):
    seen = collections.Counter()
    for path in root.rglob("*.parquet"):
        for seq in pq.read_table(path).column("seq").to_pylist():
            seen[(path.name.split("+")[1], seq)] += 1
    return seen


def test_default_partitioner_names_files_as_confluent(tmp_path):
    props = {"store.url": str(tmp_path), "flush.size": "3"}
    task, context = start(props)
    tp = TopicPartition("positions", 0)
    task.open([tp])
    assert context.offsets == {}
    task.put([record(0, i) for i in range(7)])
    assert files(tmp_path) == ["topics/positions/partition=0/positions+0+0000000000.parquet",
                               "topics/positions/partition=0/positions+0+0000000003.parquet"]
    assert task.pre_commit({tp: 7}) == {tp: 6}  # offset 6 is only in memory
    table = pq.read_table(tmp_path / "topics/positions/partition=0/positions+0+0000000003.parquet")
    assert table.column("seq").to_pylist() == [3, 4, 5] and str(table.schema.field("at").type) == "timestamp[ms, tz=UTC]"
    task.close([tp])
    again, context = start(props)
    again.open([tp])
    assert context.offsets == {tp: 6}


def test_field_and_time_partitioners(tmp_path):
    task, _ = start({"store.url": str(tmp_path), "flush.size": "2",
                     "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
                     "partition.field.name": "truck", "topics.dir": "lake"})
    task.put([record(0, 0, "a"), record(0, 1, "b"), record(0, 2, "a")])
    assert files(tmp_path) == ["lake/positions/truck=a/positions+0+0000000000.parquet",
                               "lake/positions/truck=b/positions+0+0000000001.parquet"]
    hourly = tmp_path / "hourly"
    task, _ = start({"store.url": str(hourly), "flush.size": "100", "rotate.interval.ms": "3600000",
                     "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
                     "path.format": "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "partition.duration.ms": "3600000",
                     "timezone": "Europe/Oslo", "timestamp.extractor": "RecordField", "timestamp.field": "at",
                     "locale": "en-US"})
    task.put([record(0, 0, ts=BASE), record(0, 1, ts=BASE + 60_000), record(0, 2, ts=BASE + 3_600_000)])
    assert files(hourly) == ["topics/positions/year=2021/month=01/day=01/hour=01/positions+0+0000000000.parquet"]
    with pytest.raises(ConfigException, match="Timezone cannot be empty"):
        ParquetSinkConnector().start({"store.url": str(tmp_path), "flush.size": "1",
                                      "partitioner.class": "TimeBasedPartitioner", "path.format": "YYYY",
                                      "partition.duration.ms": "1000"})


def test_schemaless_values_and_fsspec_urls(tmp_path):
    task, _ = start({"store.url": "memory://kafkalite-test/sink", "flush.size": "2"})
    task.put([SinkRecord("events", 1, None, None, None, {"kind": "a", "n": i}, i) for i in range(2)])
    fs = parquet.fsspec.filesystem("memory")
    [path] = fs.find("/kafkalite-test/sink")
    assert path.endswith("topics/events/partition=1/events+1+0000000000.parquet")
    with fs.open(path, "rb") as handle:
        assert pq.read_table(handle).to_pylist() == [{"kind": "a", "n": 0}, {"kind": "a", "n": 1}]
    fs.rm("/kafkalite-test", recursive=True)


def run(root, props, tps, total, committed, kill_on_write=None, batch=5):
    """A minimal stand-in for the runtime: seek where the task says (else the committed offset),
    deliver batches, commit what pre_commit returns; ``kill_on_write`` makes the n-th file write die."""
    task, context = start(props)
    writes = {"n": 0}
    if kill_on_write is not None:
        real = task.store.write

        def dying(path, table, metadata):
            writes["n"] += 1
            if writes["n"] == kill_on_write:
                (root / "topics/positions").mkdir(parents=True, exist_ok=True)
                (root / "topics/positions" / f".{path.rsplit('/', 1)[1]}.dead.tmp").write_bytes(b"half a file")
                raise OSError("killed mid-file")
            return real(path, table, metadata)
        task.store.write = dying
    task.open(tps)
    positions = {tp: context.offsets.get(tp, committed.get(tp, 0)) for tp in tps}
    try:
        while any(positions[tp] < total for tp in tps):
            for tp in tps:
                chunk = [record(tp.partition, o) for o in range(positions[tp], min(positions[tp] + batch, total))]
                task.put(chunk)
                positions[tp] += len(chunk)
            committed.update(task.pre_commit(dict(positions)))
    except ConnectException:
        return False
    task.close(tps)
    return True


@pytest.mark.parametrize("partitioner", ["DefaultPartitioner", "FieldPartitioner"])
def test_killed_mid_file_then_restarted_writes_every_record_once(tmp_path, partitioner):
    props = {"store.url": str(tmp_path), "flush.size": "4", "partitioner.class": partitioner,
             "partition.field.name": "truck"}
    tps = [TopicPartition("positions", 0), TopicPartition("positions", 1)]
    committed: dict[TopicPartition, int] = {}
    assert run(tmp_path, props, tps, 60, committed, kill_on_write=5) is False  # dies during a flush
    assert list(tmp_path.rglob("*.tmp"))
    assert run(tmp_path, props, tps, 60, committed) is True
    assert not list(tmp_path.rglob("*.tmp"))
    seen = offsets_in_files(tmp_path)
    assert set(seen.values()) == {1}, [k for k, v in seen.items() if v > 1]
    store = parquet.ParquetStore({**parquet.AbstractConfig(parquet.config_def(), props).values})
    for tp in tps:
        flushed = store.recover(tp)
        assert flushed is not None and flushed >= 60 - 3 * 4
        assert sorted(o for (p, o) in seen if p == str(tp.partition)) == list(range(flushed))
        assert committed[tp] == flushed


def test_recovery_removes_an_incomplete_flush(tmp_path):
    props = {"store.url": str(tmp_path), "flush.size": "3", "partitioner.class": "FieldPartitioner",
             "partition.field.name": "truck"}
    tp = TopicPartition("positions", 0)
    task, _ = start(props)
    task.open([tp])
    task.put([record(0, i) for i in range(7)])  # t0 gets 0,3,6 -> flush of 3 files (t0, t1, t2)
    written = files(tmp_path)
    assert len(written) == 3
    (tmp_path / written[-1]).unlink()  # as if the task died before the last file of the flush
    again, context = start(props)
    again.open([tp])
    assert context.offsets == {} and files(tmp_path) == []



def test_records_already_in_files_are_not_written_again_without_a_seek(tmp_path):
    props = {"store.url": str(tmp_path), "flush.size": "2"}
    tp = TopicPartition("positions", 0)
    task, _ = start(props)
    task.open([tp])
    task.put([record(0, i) for i in range(4)])
    again, _ = start(props)
    again.open([tp])
    again.put([record(0, i) for i in range(6)])  # a runtime that ignored the seek redelivers 0..5
    assert sorted(offsets_in_files(tmp_path).items()) == [(("0", i), 1) for i in range(6)]


def test_records_without_the_partition_field_go_to_the_errant_record_reporter(tmp_path):
    from tests.support.connect_contexts import ListReporter
    from kafkalite.connect.errors import DataException
    props = {"store.url": str(tmp_path), "flush.size": "2", "partitioner.class": "FieldPartitioner",
             "partition.field.name": "depot"}
    reporter = ListReporter()
    task, _ = start(props, SinkContext(props, reporter))
    task.put([SinkRecord("t", 0, None, None, None, {"depot": "a", "n": 1}, 0),
              SinkRecord("t", 0, None, None, None, {"n": 2}, 1),
              SinkRecord("t", 0, None, None, None, {"depot": "a", "n": 3}, 2)])
    assert [r.kafka_offset for r, _ in reporter.reported] == [1]
    assert files(tmp_path) == ["topics/t/depot=a/t+0+0000000000.parquet"]
    assert task.pre_commit({TopicPartition("t", 0): 3}) == {TopicPartition("t", 0): 3}
    strict, _ = start(props)
    with pytest.raises(DataException, match="depot not found"):
        strict.put([SinkRecord("t", 0, None, None, None, {"n": 2}, 1)])
