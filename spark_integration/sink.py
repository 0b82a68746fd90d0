"""The ``kafkalite`` sink: ``df.write.format("kafkalite")`` and ``df.writeStream.format("kafkalite")``.

Each Spark task writes its rows with kafkalite's own producer (:mod:`kafkalite.client.producer`),
made in the executor from the pickled :class:`~spark_integration.sink_options.SinkOptions`.

**at_least_once** (default): an idempotent producer (acks=all), flushed before the task reports
success, so a task that fails is retried by Spark and a record may be written again, never lost.

**exactly_once**: a micro-batch's share of one Spark task goes out in one Kafka transaction, tied
to the checkpoint the way Kafka Streams ties its output to its input offsets. The task's
transactional id is ``<prefix>-<partition>``, the prefix derived from the query's id, which Spark
keeps in the checkpoint (so the same after a restart), or given as ``transactionalIdPrefix``. In
the same transaction the task commits, for the consumer group named like its transactional id,
the offset ``batchId + 1`` of the marker partition ``_kafkalite-sink-commits``-0: the records and
the marker become visible together or not at all. Before writing, the task fences every older
producer of its id (``init_transactions``, which also aborts what a crashed attempt left open) and
reads the marker with ``require_stable`` (KIP-447): if its batch is already there, Spark is running
a batch again after a crash and the task writes nothing. A micro-batch run again reads the same
offsets (Spark's offset log) and plans the same partitions, so "partition p of batch b" names the
same rows each time; ``read_committed`` consumers see every input record once.
"""
from __future__ import annotations

import datetime
import logging
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kafkalite.client import KafkaClient, TopicPartition
from kafkalite.client.errors import ClientError
from kafkalite.client.producer import Producer
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from spark_integration.sink_options import EXACTLY_ONCE, SinkOptions, parse_sink_options

if TYPE_CHECKING:
    from spark_integration.avro import ReaderSchema

log = logging.getLogger(__name__)

#: Spark's local properties on every task of a micro-batch (MicroBatchExecution, StreamExecution)
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"

#: (topic, key, value, headers, partition, timestamp_ms): a None timestamp is the producer's clock
Record = tuple[str, "bytes | None", "bytes | None", "list[tuple[str, bytes | None]]", "int | None", "int | None"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task did: its partition, the records it wrote, and whether it found its batch
    already committed (a batch Spark ran again)."""

    partition: int
    records: int
    skipped: bool = False


@dataclass(frozen=True)
class TaskInfo:
    partition: int
    attempt: int
    batch_id: int | None
    query_id: str | None


def task_info() -> TaskInfo:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:                                     # called outside a Spark task (unit tests)
        return TaskInfo(0, 0, None, None)
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    return TaskInfo(ctx.partitionId(), ctx.attemptNumber(), int(batch) if batch is not None else None,
                    ctx.getLocalProperty(QUERY_ID_PROPERTY))


# -- rows to records ----------------------------------------------------------------------------
def record_encoder(opts: SinkOptions, avro: Sequence[ReaderSchema] = ()) -> Callable[[Any], Record]:
    """A function from an input Row to (topic, key, value, headers, partition, timestamp_ms); a
    key or value with a subject in ``avro`` is encoded with that schema in Confluent's framing."""
    i_topic, i_key, i_value = opts.index("topic"), opts.index("key"), opts.index("value")
    i_headers, i_partition, i_timestamp = opts.index("headers"), opts.index("partition"), opts.index("timestamp")
    assert i_value is not None                        # parse_sink_options insists on it
    by_field = {r.field: r for r in avro}
    encode_key = _avro_encoder(by_field["key"]) if "key" in by_field else _bytes
    encode_value = _avro_encoder(by_field["value"]) if "value" in by_field else _bytes

    def encode(row: Any) -> Record:
        topic = opts.topic if opts.topic is not None else row[i_topic]
        if topic is None:
            raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
        headers = [] if i_headers is None or row[i_headers] is None else \
            [(h[0], None if h[1] is None else bytes(h[1])) for h in row[i_headers]]
        return (topic, None if i_key is None else encode_key(row[i_key]), encode_value(row[i_value]), headers,
                None if i_partition is None else row[i_partition],
                None if i_timestamp is None else timestamp_ms(row[i_timestamp]))
    return encode


def timestamp_ms(value: Any) -> int | None:
    """A ``timestamp`` column's value as a CreateTime in epoch milliseconds (None: the producer's
    clock). PySpark hands a TimestampType over as a naive local datetime (an aware one when the
    value came from elsewhere); both convert exactly, without a float in between."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        ms = (value.astimezone(datetime.timezone.utc) - _EPOCH) // _MS
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise ValueError(f"timestamp must be a timestamp or epoch milliseconds, found {type(value).__name__}")
    if ms < 0:
        raise ValueError(f"timestamp {value!r} is before 1970-01-01: Kafka record timestamps are not negative")
    return ms


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _avro_encoder(schema: ReaderSchema) -> Callable[[Any], bytes | None]:
    """Confluent-framed Avro with the schema resolved on the driver (no registry call here)."""
    from kafkalite.registry.serde import encode, parse_avro

    parsed = parse_avro(schema.schema, schema.dependencies)

    def to_avro(value: Any) -> bytes | None:
        if value is None:
            return None
        datum = value.asDict(recursive=True) if hasattr(value, "asDict") else value
        return encode(schema.schema_id, parsed, datum)
    return to_avro


def writer_schemas(opts: SinkOptions) -> tuple[ReaderSchema, ...]:
    """The subjects' schemas, asked of the registry once, on the driver."""
    from spark_integration.avro import resolve_reader

    out = []
    for subject in (opts.key_avro, opts.value_avro):
        if subject is not None:
            assert opts.schema_registry_url is not None    # _avro_options insists on it
            out.append(resolve_reader(subject.field, opts.schema_registry_url, subject.subject, subject.version))
    return tuple(out)


# -- producing ----------------------------------------------------------------------------------
def make_producer(opts: SinkOptions, transactional_id: str | None = None) -> Producer:
    return Producer(opts.bootstrap_servers, acks=opts.acks, linger_ms=opts.linger_ms, batch_size=opts.batch_size,
                    compression_type=opts.compression_type, enable_idempotence=opts.acks == "all",
                    max_request_size=opts.max_request_size, request_timeout_ms=opts.request_timeout_ms,
                    delivery_timeout_ms=opts.delivery_timeout_ms, client_id=opts.client_id,
                    transactional_id=transactional_id, transaction_timeout_ms=opts.transaction_timeout_ms,
                    allow_auto_create_topics=False, security=opts.security)


def _send_all(producer: Producer, records: Iterable[Record], *, check_every: int = 10000) -> int:
    """Send every record; a failed delivery raises (checked as futures complete and at the end)."""
    pending: list[Future] = []
    n = 0
    for topic, key, value, headers, partition, ts in records:
        pending.append(producer.send(topic, value, key, partition=partition, timestamp_ms=ts, headers=headers))
        n += 1
        if len(pending) >= check_every:
            _raise_failed(p for p in pending if p.done())
            pending = [p for p in pending if not p.done()]
    producer.flush()
    _raise_failed(pending)
    return n


def _raise_failed(futures: Iterable[Future]) -> None:
    for fut in futures:
        exc = fut.exception()
        if exc is not None:
            raise exc


def write_at_least_once(opts: SinkOptions, rows: Iterator[Any], avro: Sequence[ReaderSchema] = ()) -> int:
    encode = record_encoder(opts, avro)
    producer = make_producer(opts)
    try:
        return _send_all(producer, (encode(r) for r in rows))
    finally:
        producer.close(5)


def transactional_id(prefix: str, partition: int) -> str:
    return f"{prefix}-{partition}"


def written_batch(client: KafkaClient, group: str, marker: TopicPartition, timeout_s: float = 60.0) -> int:
    """The last batch id the group's marker records (-1: none), waiting while a transactional
    commit of it is still pending (OffsetFetch v7 ``require_stable``, KIP-447)."""
    body = {"group_id": group, "require_stable": True,
            "topics": [{"name": marker.topic, "partition_indexes": [marker.partition]}]}

    def err_of(resp: dict) -> int:
        if resp.get("error_code"):
            return int(resp["error_code"])
        return next((p["error_code"] for t in resp["topics"] for p in t["partitions"] if p["error_code"]), 0)
    deadline = time.monotonic() + timeout_s
    while True:
        resp = client.send_to_coordinator(group, ApiKey.OFFSET_FETCH, body, err_of, f"OffsetFetch for group {group!r}")
        err = err_of(resp)
        if err == ErrorCode.UNSTABLE_OFFSET_COMMIT and time.monotonic() < deadline:
            time.sleep(0.1)
            continue
        if err:
            raise ClientError.from_code(err, f"OffsetFetch for group {group!r}")
        offset = next((p["committed_offset"] for t in resp["topics"] for p in t["partitions"]), -1)
        return offset - 1 if offset > 0 else -1


def write_exactly_once(opts: SinkOptions, rows: Iterator[Any], task: TaskInfo, prefix: str,
                       avro: Sequence[ReaderSchema] = ()) -> SinkCommitMessage:
    """One transaction for this task's rows. In a micro-batch it carries the batch's marker, and
    nothing is written when the marker shows the batch was already committed; in a batch write
    (no batch id) a retried task only fences its earlier attempt."""
    tid = transactional_id(prefix, task.partition)
    marker = TopicPartition(opts.commit_topic, 0)
    producer = make_producer(opts, tid)
    try:
        producer.init_transactions()          # fences older attempts and aborts what they left open
        if task.batch_id is not None:
            done = written_batch(producer.client, tid, marker)
            if done >= task.batch_id:
                skipped = sum(1 for _ in rows)
                log.info("%s: batch %d already committed (marker at %d); %d rows not written again",
                         tid, task.batch_id, done, skipped)
                return SinkCommitMessage(task.partition, 0, skipped=True)
        encode = record_encoder(opts, avro)
        producer.begin_transaction()
        try:
            n = _send_all(producer, (encode(r) for r in rows))
            if task.batch_id is not None:
                producer.send_offsets_to_transaction({marker: task.batch_id + 1}, tid)
            producer.commit_transaction()
        except BaseException:
            if producer._txn_state in ("in_transaction", "abortable"):
                try:
                    producer.abort_transaction(10)
                except ClientError as exc:
                    log.warning("%s: abort after a failure failed too: %s", tid, exc)
            raise
        return SinkCommitMessage(task.partition, n)
    finally:
        producer.close(5)


def ensure_commit_topic(opts: SinkOptions) -> None:
    """The one-partition topic whose offsets mark committed batches (created on first use)."""
    from kafkalite.client.admin import Admin, NewTopic

    with Admin(opts.bootstrap_servers, security=opts.security) as admin:
        if opts.commit_topic in admin.list_topics(include_internal=True):
            return
        errors = admin.create_topics([NewTopic(opts.commit_topic, 1, -1, configs={"cleanup.policy": "compact"})])
        err = errors.get(opts.commit_topic)
        if err is not None and getattr(err, "code", None) != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise err


# -- the Spark writers --------------------------------------------------------------------------
class _Writer:
    def __init__(self, opts: SinkOptions, prefix: str | None, avro: tuple[ReaderSchema, ...]) -> None:
        self.opts = opts
        self.prefix = prefix
        self.avro = avro

    def _write(self, rows: Iterator[Any]) -> SinkCommitMessage:
        task = task_info()
        if self.opts.batch_id is not None:
            task = TaskInfo(task.partition, task.attempt, self.opts.batch_id, task.query_id)
        if self.opts.guarantee != EXACTLY_ONCE:
            return SinkCommitMessage(task.partition, write_at_least_once(self.opts, rows, self.avro))
        prefix = self.prefix or f"kafkalite-sink-{task.query_id}"
        return write_exactly_once(self.opts, rows, task, prefix, self.avro)


class KafkaliteBatchWriter(_Writer, DataSourceWriter):
    """``df.write.format("kafkalite")``: each task writes and flushes (exactly_once: in one
    transaction per task; a task retried by Spark fences its earlier attempt)."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        log.info("kafkalite sink: %d records written", _total(messages))


class KafkaliteStreamWriter(_Writer, DataSourceStreamWriter):
    """``df.writeStream.format("kafkalite")``: the tasks of a micro-batch write and commit their
    own transactions; the driver's commit only reports, as the batch is durable by then."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        skipped = sum(1 for m in messages if isinstance(m, SinkCommitMessage) and m.skipped)
        log.info("kafkalite sink: batch %d, %d records written%s", batchId, _total(messages),
                 f", {skipped} task(s) found it already committed" if skipped else "")

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("kafkalite sink: batch %d aborted; its tasks' transactions are aborted or fenced on the "
                    "next attempt", batchId)


def _total(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


def batch_writer(options: Any, schema: StructType) -> KafkaliteBatchWriter:
    opts = parse_sink_options(options, schema)
    # a batch write has no checkpoint: without a prefix each write gets its own ids
    prefix = opts.transactional_id_prefix or f"kafkalite-sink-{uuid.uuid4()}"
    if opts.batch_id is not None:
        ensure_commit_topic(opts)
    return KafkaliteBatchWriter(opts, prefix, writer_schemas(opts))


def stream_writer(options: Any, schema: StructType) -> KafkaliteStreamWriter:
    opts = parse_sink_options(options, schema)
    if opts.guarantee == EXACTLY_ONCE:
        ensure_commit_topic(opts)
    return KafkaliteStreamWriter(opts, opts.transactional_id_prefix, writer_schemas(opts))
