"""A Parquet sink to a directory tree (local or any fsspec URL) with Confluent's storage-sink config.

Layout and names are Confluent's storage sinks' (S3/HDFS):
``<store.url>/<topics.dir>/<topic>/<encoded partition>/<topic>+<kafkaPartition>+<startOffset>.parquet``
with the start offset zero-padded (``filename.offset.zero.pad.width``); the encoded partition comes
from ``partitioner.class`` (Default: ``partition=<n>``; Field: ``<field>=<value>`` per
``partition.field.name``; TimeBased/Daily/Hourly: ``path.format`` of the record's time per
``timestamp.extractor``, floored to ``partition.duration.ms`` in ``timezone``).

Exactly once across task restarts, without a log of its own:

- records are buffered per Kafka partition; a *flush* of that partition writes one file per
  encoded partition and happens on ``flush.size`` (records in one file), ``rotate.interval.ms``
  (record time since the file's first record), ``rotate.schedule.interval.ms`` (wall clock), or a
  schema change. So the files of a Kafka partition always hold a contiguous prefix of its offsets;
- each file is written whole to a temporary name then renamed (an object store gets one atomic
  PUT), and its Parquet footer records the flush it belongs to (first and next offset, number of
  files); a flush cut short by a crash is recognised by its missing files, and its files removed;
- ``open(partitions)`` finds the last complete flush from the footers, seeks there with
  ``context.offset(...)``, and ``pre_commit`` only commits offsets up to the last flush. Records
  buffered when the task died are consumed again and land in files named as they would have been.
"""
from __future__ import annotations

import datetime as _dt
import io
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import AbstractConfig, ConfigDef, ConfigException, Importance, Range, Type as ConfigType, Width
from ..connector import SinkConnector, SinkTask, Task, TopicPartition
from ..data import Date, Decimal, Schema, Struct, Time, Timestamp, Type
from ..errors import ConnectException, DataException
from ..java_time import format_utc, validate_pattern
from ..records import SinkRecord

log = logging.getLogger(__name__)

STORE_URL = "store.url"
TOPICS_DIR = "topics.dir"
FLUSH_SIZE = "flush.size"
ROTATE_INTERVAL = "rotate.interval.ms"
ROTATE_SCHEDULE_INTERVAL = "rotate.schedule.interval.ms"
PARTITIONER_CLASS = "partitioner.class"
PARTITION_FIELD_NAME = "partition.field.name"
PATH_FORMAT = "path.format"
PARTITION_DURATION = "partition.duration.ms"
LOCALE = "locale"
TIMEZONE = "timezone"
TIMESTAMP_EXTRACTOR = "timestamp.extractor"
TIMESTAMP_FIELD = "timestamp.field"
DIRECTORY_DELIM = "directory.delim"
FILE_DELIM = "file.delim"
ZERO_PAD_WIDTH = "filename.offset.zero.pad.width"
PARQUET_CODEC = "parquet.codec"

PARTITIONERS = ("DefaultPartitioner", "FieldPartitioner", "TimeBasedPartitioner", "DailyPartitioner",
                "HourlyPartitioner")
_META_PREFIX = b"kafkalite.connect."
EXTENSION = ".parquet"


class _SimpleNameIn:
    """A class name whose simple name is one of ``names`` (Confluent's package or none)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def ensure_valid(self, name: str, value: Any) -> None:
        if _simple(str(value)) not in self.names:
            raise ConfigException(name, value, "must be one of " + ", ".join(self.names))

    def __str__(self) -> str:
        return ", ".join(self.names)


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1].rsplit("$", 1)[-1]


class _Zone:
    def ensure_valid(self, name: str, value: Any) -> None:
        if value:
            try:
                ZoneInfo(str(value))
            except (ZoneInfoNotFoundError, ValueError):
                raise ConfigException(name, value, "Invalid timezone") from None

    def __str__(self) -> str:
        return "a time zone ID (UTC, Europe/Oslo...)"


def config_def() -> ConfigDef:
    storage, partitioner, connector = "Storage", "Partitioner", "Connector"
    return (ConfigDef()
            .define(STORE_URL, ConfigType.STRING, ConfigDef.NO_DEFAULT_VALUE, None, Importance.HIGH,
                    "Where the files go: a local directory or any fsspec URL (file:///data, s3://bucket/prefix, "
                    "memory://...).", storage, 1, Width.LONG, "Store URL")
            .define(TOPICS_DIR, ConfigType.STRING, "topics", None, Importance.HIGH,
                    "Top level directory to store the data ingested from Kafka.", storage, 2, Width.SHORT,
                    "Topics directory")
            .define(DIRECTORY_DELIM, ConfigType.STRING, "/", None, Importance.MEDIUM, "Directory delimiter pattern",
                    storage, 3, Width.SHORT, "Directory Delimiter")
            .define(FILE_DELIM, ConfigType.STRING, "+", None, Importance.MEDIUM, "File delimiter pattern", storage,
                    4, Width.SHORT, "File Delimiter")
            .define(ZERO_PAD_WIDTH, ConfigType.INT, 10, Range.at_least(0), Importance.LOW,
                    "Width to zero-pad offsets in store's filenames if offsets are too short in order to provide "
                    "fixed-width filenames that can be ordered by simple lexicographic sorting.", storage, 5,
                    Width.SHORT, "Filename Offset Zero Pad Width")
            .define(PARQUET_CODEC, ConfigType.STRING, "snappy", None, Importance.LOW,
                    "The Parquet compression codec: none, snappy, gzip, brotli, lz4, zstd.", storage, 6,
                    Width.SHORT, "Parquet Compression Codec")
            .define(FLUSH_SIZE, ConfigType.INT, ConfigDef.NO_DEFAULT_VALUE, Range.at_least(1), Importance.HIGH,
                    "Number of records written to store before invoking file commits.", connector, 1, Width.SHORT,
                    "Flush Size")
            .define(ROTATE_INTERVAL, ConfigType.LONG, -1, None, Importance.HIGH,
                    "The time interval in milliseconds to invoke file commits, measured on the timestamps the "
                    "timestamp.extractor gives the records.", connector, 2, Width.SHORT, "Rotate Interval (ms)")
            .define(ROTATE_SCHEDULE_INTERVAL, ConfigType.LONG, -1, None, Importance.MEDIUM,
                    "The time interval in milliseconds to periodically invoke file commits, on the wall clock.",
                    connector, 3, Width.SHORT, "Rotate Schedule Interval (ms)")
            .define(PARTITIONER_CLASS, ConfigType.STRING,
                    "io.confluent.connect.storage.partitioner.DefaultPartitioner", _SimpleNameIn(PARTITIONERS),
                    Importance.HIGH, "The partitioner to use when writing data to the store: DefaultPartitioner, "
                    "FieldPartitioner, TimeBasedPartitioner, DailyPartitioner, HourlyPartitioner.", partitioner, 1,
                    Width.LONG, "Partitioner Class")
            .define(PARTITION_FIELD_NAME, ConfigType.LIST, "", None, Importance.MEDIUM,
                    "The name of the partitioning field when FieldPartitioner is used.", partitioner, 2,
                    Width.LONG, "Partition Field Name")
            .define(PARTITION_DURATION, ConfigType.LONG, -1, None, Importance.MEDIUM,
                    "The duration of a partition milliseconds used by TimeBasedPartitioner.", partitioner, 3,
                    Width.LONG, "Partition Duration (ms)")
            .define(PATH_FORMAT, ConfigType.STRING, "", None, Importance.MEDIUM,
                    "This configuration is used to set the format of the data directories when partitioning "
                    "with TimeBasedPartitioner, e.g. 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", partitioner, 4,
                    Width.LONG, "Path Format")
            .define(LOCALE, ConfigType.STRING, "", None, Importance.MEDIUM,
                    "The locale to use when partitioning with TimeBasedPartitioner (names are written in "
                    "English).", partitioner, 5, Width.LONG, "Locale")
            .define(TIMEZONE, ConfigType.STRING, "", _Zone(), Importance.MEDIUM,
                    "The timezone to use when partitioning with TimeBasedPartitioner.", partitioner, 6, Width.LONG,
                    "Timezone")
            .define(TIMESTAMP_EXTRACTOR, ConfigType.STRING, "Wallclock",
                    _SimpleNameIn(("Wallclock", "Record", "RecordField", "WallclockTimestampExtractor",
                                   "RecordTimestampExtractor", "RecordFieldTimestampExtractor")), Importance.MEDIUM,
                    "The extractor that gets the timestamp for records when partitioning with "
                    "TimeBasedPartitioner: Wallclock, Record or RecordField.", partitioner, 7, Width.LONG,
                    "Timestamp Extractor")
            .define(TIMESTAMP_FIELD, ConfigType.STRING, "timestamp", None, Importance.MEDIUM,
                    "The record field to be used as timestamp by the timestamp extractor.", partitioner, 8,
                    Width.LONG, "Record Field for Timestamp Extractor"))


# -- partitioners -----------------------------------------------------------------------------
def _field_value(record: SinkRecord, name: str) -> Any:
    value = record.value
    for part in name.split("."):
        if isinstance(value, Struct):
            if value.schema.field(part) is None:
                raise DataException(f"Error encoding partition: field {name} not found in the record value")
            value = value.get(part)
        elif isinstance(value, dict):
            if part not in value:
                raise DataException(f"Error encoding partition: field {name} not found in the record value")
            value = value[part]
        else:
            raise DataException(f"Error encoding partition: the value of type {type(value).__name__} has no "
                                f"field {name}")
    return value


def timestamp_extractor(settings: Mapping[str, Any]) -> Callable[[SinkRecord], int]:
    kind = _simple(str(settings[TIMESTAMP_EXTRACTOR])).replace("TimestampExtractor", "")
    if kind == "Record":
        def from_record(record: SinkRecord) -> int:
            if record.timestamp is None:
                raise DataException("Unable to determine timestamp using timestamp.extractor Record: the record "
                                    "has no timestamp")
            return record.timestamp
        return from_record
    if kind == "RecordField":
        field_name = str(settings[TIMESTAMP_FIELD])

        def from_field(record: SinkRecord) -> int:
            value = _field_value(record, field_name)
            if isinstance(value, _dt.datetime):
                return Timestamp.from_logical(Timestamp.SCHEMA, value)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                try:
                    parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
                except ValueError:
                    raise DataException(f"Unable to parse the timestamp field {field_name}: {value!r}") from None
                return Timestamp.from_logical(Timestamp.SCHEMA, parsed)
            raise DataException(f"Unsupported type {type(value).__name__} for the timestamp field {field_name}")
        return from_field
    return lambda record: int(time.time() * 1000)


class Partitioner:
    """Confluent's partitioners: the directory a record's file goes in."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.kind = _simple(str(settings[PARTITIONER_CLASS]))
        self.delim = str(settings[DIRECTORY_DELIM])
        self.fields: list[str] = list(settings[PARTITION_FIELD_NAME])
        self.extract = timestamp_extractor(settings)
        zone_name = str(settings[TIMEZONE] or "")
        self.path_format = str(settings[PATH_FORMAT] or "")
        self.duration = int(settings[PARTITION_DURATION])
        if self.kind == "DailyPartitioner":
            self.path_format, self.duration = "'year'=YYYY/'month'=MM/'day'=dd", 86_400_000
        elif self.kind == "HourlyPartitioner":
            self.path_format, self.duration = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", 3_600_000
        if self.kind == "FieldPartitioner" and not self.fields:
            raise ConfigException(PARTITION_FIELD_NAME, "", "FieldPartitioner needs partition.field.name")
        if self.kind in ("TimeBasedPartitioner", "DailyPartitioner", "HourlyPartitioner"):
            if not zone_name:
                raise ConfigException(TIMEZONE, "", "Timezone cannot be empty when using TimeBasedPartitioner")
            if not self.path_format:
                raise ConfigException(PATH_FORMAT, "", "Path format cannot be empty.")
            if self.duration <= 0:
                raise ConfigException(PARTITION_DURATION, self.duration, "Partition duration needs to be a "
                                                                         "positive.")
            validate_pattern(self.path_format)
        self.zone = ZoneInfo(zone_name) if zone_name else ZoneInfo("UTC")

    @property
    def time_based(self) -> bool:
        return self.kind in ("TimeBasedPartitioner", "DailyPartitioner", "HourlyPartitioner")

    def encode(self, record: SinkRecord) -> str:
        if self.kind == "FieldPartitioner":
            return self.delim.join(f"{name}={_field_value(record, name)}" for name in self.fields)
        if self.time_based:
            ms = self.extract(record)
            local = Timestamp.to_logical(Timestamp.SCHEMA, ms).astimezone(self.zone)
            offset_ms = int((local.utcoffset() or _dt.timedelta(0)).total_seconds() * 1000)
            floored = ((ms + offset_ms) // self.duration) * self.duration - offset_ms
            return format_utc(Timestamp.to_logical(Timestamp.SCHEMA, floored), self.path_format, self.zone)
        return f"partition={record.kafka_partition}"


# -- Connect -> Arrow -------------------------------------------------------------------------
def arrow_type(schema: Schema) -> Any:
    name = schema.name
    if name == Decimal.LOGICAL_NAME:
        return pa.decimal128(38, Decimal.scale(schema))
    if name == Date.LOGICAL_NAME:
        return pa.date32()
    if name == Time.LOGICAL_NAME:
        return pa.time32("ms")
    if name == Timestamp.LOGICAL_NAME:
        return pa.timestamp("ms", tz="UTC")
    simple = {Type.INT8: pa.int8(), Type.INT16: pa.int16(), Type.INT32: pa.int32(), Type.INT64: pa.int64(),
              Type.FLOAT32: pa.float32(), Type.FLOAT64: pa.float64(), Type.BOOLEAN: pa.bool_(),
              Type.STRING: pa.string(), Type.BYTES: pa.binary()}
    if schema.type in simple:
        return simple[schema.type]
    if schema.type is Type.ARRAY:
        return pa.list_(arrow_field("item", schema.value_schema))
    if schema.type is Type.MAP:
        return pa.map_(arrow_type(schema.key_schema), arrow_type(schema.value_schema))
    return pa.struct([arrow_field(f.name, f.schema) for f in schema.fields])


def arrow_field(name: str, schema: Schema) -> Any:
    return pa.field(name, arrow_type(schema), nullable=schema.optional)


def arrow_value(schema: Schema | None, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Struct):
        return {f.name: arrow_value(f.schema, value.get(f)) for f in value.schema.fields}
    if schema is not None and schema.type is Type.MAP:
        return [(arrow_value(schema.key_schema, k), arrow_value(schema.value_schema, v)) for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        element = schema.value_schema if schema is not None and schema.type is Type.ARRAY else None
        return [arrow_value(element, v) for v in value]
    if isinstance(value, dict):
        return {k: arrow_value(None, v) for k, v in value.items()}
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def records_table(records: list[SinkRecord]) -> Any:
    """The records' values as an Arrow table: struct fields as columns, anything else as ``value``."""
    schema = records[0].value_schema
    if schema is not None and schema.type is Type.STRUCT:
        arrow_schema = pa.schema([arrow_field(f.name, f.schema) for f in schema.fields])
        rows = [arrow_value(schema, r.value) for r in records]
        return pa.Table.from_pylist(rows, schema=arrow_schema)
    if schema is not None:
        arrow_schema = pa.schema([arrow_field("value", schema)])
        return pa.Table.from_pylist([{"value": arrow_value(schema, r.value)} for r in records], schema=arrow_schema)
    if all(isinstance(r.value, dict) for r in records):
        rows = [arrow_value(None, r.value) for r in records]
        try:
            return pa.Table.from_pylist(rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataException(f"Schemaless records with incompatible field types: {exc}") from exc
    return pa.Table.from_pylist([{"value": json.dumps(arrow_value(None, r.value), default=str)
                                  if not isinstance(r.value, (str, bytes)) else r.value} for r in records])


# -- the files --------------------------------------------------------------------------------
@dataclass
class FileInfo:
    path: str
    start: int
    end: int
    flush_start: int
    flush_next: int
    flush_files: int


@dataclass
class PartitionState:
    """What a task holds for one Kafka partition between flushes."""

    buffers: dict[str, list[SinkRecord]] = field(default_factory=dict)
    last_offset: int | None = None
    base_timestamp: int | None = None
    schema_key: Any = None
    committed: int | None = None

    @property
    def buffered(self) -> int:
        return sum(len(b) for b in self.buffers.values())


class ParquetStore:
    """Files of the sink on an fsspec filesystem: naming, atomic writes, recovery."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        url = str(settings[STORE_URL])
        self.fs, root = fsspec.core.url_to_fs(url)
        self.root = str(root).rstrip("/")
        self.topics_dir = str(settings[TOPICS_DIR]).strip("/")
        self.dir_delim = str(settings[DIRECTORY_DELIM])
        self.file_delim = str(settings[FILE_DELIM])
        self.pad = int(settings[ZERO_PAD_WIDTH])
        codec = str(settings[PARQUET_CODEC]).lower()
        self.codec = None if codec in ("none", "uncompressed") else codec
        protocols = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        self.local = any(p in ("file", "local") for p in protocols)

    def topic_dir(self, topic: str) -> str:
        return "/".join(p for p in (self.root, self.topics_dir, topic) if p)

    def file_name(self, tp: TopicPartition, start: int) -> str:
        return f"{tp.topic}{self.file_delim}{tp.partition}{self.file_delim}{start:0{self.pad}d}{EXTENSION}"

    def path(self, tp: TopicPartition, encoded: str, start: int) -> str:
        return f"{self.topic_dir(tp.topic)}/{encoded.replace(self.dir_delim, '/')}/{self.file_name(tp, start)}"

    def write(self, path: str, table: Any, metadata: dict[bytes, bytes]) -> None:
        """The whole file under a temporary name, then renamed (local) or put in one request (object stores)."""
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression=self.codec)
        data = buffer.getvalue()
        directory = path.rsplit("/", 1)[0]
        self.fs.makedirs(directory, exist_ok=True)
        if self.local:
            tmp = f"{directory}/.{path.rsplit('/', 1)[1]}.{uuid.uuid4().hex}.tmp"
            with self.fs.open(tmp, "wb") as out:
                out.write(data)
                out.flush()
                try:
                    import os
                    os.fsync(out.fileno())
                except (AttributeError, OSError, io.UnsupportedOperation):
                    pass
            self.fs.mv(tmp, path)
        else:
            self.fs.pipe_file(path, data)

    def _files(self, tp: TopicPartition) -> list[tuple[int, str]]:
        base = self.topic_dir(tp.topic)
        if not self.fs.exists(base):
            return []
        prefix = f"{tp.topic}{self.file_delim}{tp.partition}{self.file_delim}"
        found = []
        for path in self.fs.find(base):
            name = str(path).rsplit("/", 1)[-1]
            if name.startswith(prefix) and name.endswith(EXTENSION):
                digits = name[len(prefix):-len(EXTENSION)]
                if digits.isdigit():
                    found.append((int(digits), str(path)))
        return sorted(found)

    def remove_temporaries(self, tp: TopicPartition) -> None:
        base = self.topic_dir(tp.topic)
        if not self.fs.exists(base):
            return
        prefix = f".{tp.topic}{self.file_delim}{tp.partition}{self.file_delim}"
        for path in self.fs.find(base):
            name = str(path).rsplit("/", 1)[-1]
            if name.startswith(prefix) and name.endswith(".tmp"):
                log.info("Removing %s, left by a task that stopped while writing it", path)
                self.fs.rm(path)

    def info(self, path: str, start: int) -> FileInfo:
        with self.fs.open(path, "rb") as handle:
            meta = pq.ParquetFile(handle).schema_arrow.metadata or {}

        def number(key: str, default: int) -> int:
            raw = meta.get(_META_PREFIX + key.encode())
            return int(raw) if raw is not None else default
        end = number("file.end", start)
        return FileInfo(path, start, end, number("flush.start", start), number("flush.next", end + 1),
                        number("flush.files", 1))

    def recover(self, tp: TopicPartition) -> int | None:
        """The offset after the last complete flush of ``tp`` (None: no files); files of an
        incomplete flush (a crash between its files) are removed, they will be written again."""
        files = self._files(tp)
        while files:
            start, path = files[-1]
            last = self.info(path, start)
            group = [(s, p) for s, p in files if s >= last.flush_start]
            if len(group) >= last.flush_files:
                return last.flush_next
            log.warning("Flush of %s from offset %d is incomplete (%d of %d files): removing its files", tp,
                        last.flush_start, len(group), last.flush_files)
            for _, stale in group:
                self.fs.rm(stale)
            files = [(s, p) for s, p in files if s < last.flush_start]
        return None


class ParquetSinkConnector(SinkConnector):
    """Writes topics to Parquet files; one task per tasks.max, partitions spread by the runtime."""

    def __init__(self) -> None:
        super().__init__()
        self.props: dict[str, str] = {}

    def config(self) -> ConfigDef:
        return config_def()

    def start(self, props: dict[str, str]) -> None:
        settings = AbstractConfig(config_def(), props).values
        Partitioner(settings)  # a bad partitioner configuration fails the connector, not each task
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return ParquetSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class ParquetSinkTask(SinkTask):
    def __init__(self) -> None:
        super().__init__()
        self.settings: dict[str, Any] = {}
        self.store: ParquetStore | None = None
        self.partitioner: Partitioner | None = None
        self.states: dict[TopicPartition, PartitionState] = {}
        self.flush_size = 1
        self.rotate_interval = -1
        self.schedule_interval = -1
        self.next_schedule: float | None = None
        self.record_time: Callable[[SinkRecord], int] = lambda r: r.timestamp or 0

    def start(self, props: dict[str, str]) -> None:
        self.settings = AbstractConfig(config_def(), props).values
        self.store = ParquetStore(self.settings)
        self.partitioner = Partitioner(self.settings)
        self.flush_size = int(self.settings[FLUSH_SIZE])
        self.rotate_interval = int(self.settings[ROTATE_INTERVAL])
        self.schedule_interval = int(self.settings[ROTATE_SCHEDULE_INTERVAL])
        self.record_time = (timestamp_extractor(self.settings) if self.partitioner.time_based
                            else lambda r: r.timestamp if r.timestamp is not None else int(time.time() * 1000))
        self._schedule_next()

    def _schedule_next(self) -> None:
        if self.schedule_interval > 0:
            interval = self.schedule_interval / 1000.0
            self.next_schedule = (time.time() // interval + 1) * interval

    # -- assignment --------------------------------------------------------------------------
    def open(self, partitions: list[TopicPartition]) -> None:
        assert self.store is not None
        for tp in partitions:
            self.store.remove_temporaries(tp)
            next_offset = self.store.recover(tp)
            state = PartitionState(committed=next_offset)
            self.states[tp] = state
            if next_offset is not None and self.context is not None:
                log.info("Resuming %s at offset %d from the files present", tp, next_offset)
                self.context.offset(tp, next_offset)

    def close(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            state = self.states.pop(tp, None)
            if state is not None and state.buffered:
                log.info("Dropping %d unwritten records of %s: they will be consumed again", state.buffered, tp)

    # -- records -----------------------------------------------------------------------------
    def put(self, records: list[SinkRecord]) -> None:
        assert self.partitioner is not None
        for record in records:
            tp = TopicPartition(record.original_topic, record.original_kafka_partition)
            state = self.states.setdefault(tp, PartitionState())
            offset = record.original_kafka_offset
            if state.last_offset is not None and offset <= state.last_offset:
                continue  # redelivered after a rewind: already buffered or written
            if state.committed is not None and offset < state.committed:
                continue  # already in a file (a runtime that delivered from before the recovered position)
            if record.value is None:
                state.last_offset = offset
                continue
            schema_key = record.value_schema
            if state.buffered and schema_key != state.schema_key:
                self._flush(tp, state)
            try:
                timestamp = self.record_time(record) if self.rotate_interval > 0 else None
                encoded = self.partitioner.encode(record)
            except DataException as exc:
                self._report(record, exc)
                state.last_offset = offset
                continue
            if (state.buffered and timestamp is not None and state.base_timestamp is not None
                    and timestamp - state.base_timestamp >= self.rotate_interval):
                self._flush(tp, state)
            if not state.buffered:
                state.base_timestamp = timestamp
                state.schema_key = schema_key
            bucket = state.buffers.setdefault(encoded, [])
            bucket.append(record)
            state.last_offset = offset
            if len(bucket) >= self.flush_size:
                self._flush(tp, state)
        self._rotate_on_schedule()

    def _report(self, record: SinkRecord, error: DataException) -> None:
        """A record no file can take (no partition field...): to the errant record reporter (the
        dead-letter topic) when the connector has one, else the task fails as Confluent's does."""
        reporter = self.context.errant_record_reporter() if self.context is not None else None
        if reporter is None:
            raise error
        log.warning("Reporting record %s-%s@%s: %s", record.topic, record.kafka_partition, record.kafka_offset, error)
        future = reporter.report(record, error)
        if hasattr(future, "result"):
            future.result()

    def _rotate_on_schedule(self) -> None:
        if self.next_schedule is None or time.time() < self.next_schedule:
            return
        for tp, state in list(self.states.items()):
            if state.buffered:
                self._flush(tp, state)
        self._schedule_next()

    def _flush(self, tp: TopicPartition, state: PartitionState) -> None:
        """Write every buffered record of ``tp``: one file per encoded partition, one flush."""
        assert self.store is not None and state.last_offset is not None
        buckets = [(encoded, records) for encoded, records in state.buffers.items() if records]
        flush_start = min(records[0].original_kafka_offset for _, records in buckets)
        flush_next = state.last_offset + 1
        for encoded, records in sorted(buckets, key=lambda b: b[1][0].original_kafka_offset):
            start = records[0].original_kafka_offset
            metadata = {_META_PREFIX + b"file.end": str(records[-1].original_kafka_offset).encode(),
                        _META_PREFIX + b"flush.start": str(flush_start).encode(),
                        _META_PREFIX + b"flush.next": str(flush_next).encode(),
                        _META_PREFIX + b"flush.files": str(len(buckets)).encode()}
            path = self.store.path(tp, encoded, start)
            try:
                self.store.write(path, records_table(records), metadata)
            except (OSError, pa.ArrowException) as exc:
                raise ConnectException(f"Failed to write {path}: {exc}") from exc
            log.debug("Wrote %d records of %s to %s", len(records), tp, path)
        state.buffers = {}
        state.base_timestamp = None
        state.committed = flush_next

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Nothing to force: files are written on rotation; pre_commit commits what is written."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offsets up to the last written flush of each partition (never records only in memory)."""
        self._rotate_on_schedule()
        out: dict[TopicPartition, int] = {}
        for tp in current_offsets:
            state = self.states.get(tp)
            if state is not None and state.committed is not None:
                if not state.buffered and state.last_offset is not None:
                    state.committed = max(state.committed, state.last_offset + 1)
                out[tp] = state.committed
        return out

    def stop(self) -> None:
        self.states.clear()


