"""The Worker: runs connectors and tasks on this process, each task on its own thread (Kafka's
``Worker``, ``WorkerConnector``, ``WorkerTask``, ``WorkerSourceTask``, ``WorkerSinkTask``).

The herder decides what runs here; the worker starts and stops it and reports states to the status
store. A task's thread runs its loop until stopped:

* :class:`WorkerSourceTask`: ``poll`` -> transforms -> converters -> producer; each record's source
  offset is staged when it is sent, and every ``offset.flush.interval.ms`` the staged offsets are
  written to the offset store once the producer has every record sent so far acknowledged (so a
  committed offset never runs ahead of the data).
* :class:`WorkerSinkTask`: a consumer in group ``connect-<name>``; records -> converters ->
  transforms -> ``put``; every ``offset.flush.interval.ms`` ``pre_commit`` (by default ``flush``)
  says which offsets are safe and the consumer commits them. A ``RetriableException`` from ``put``
  pauses consumption and redelivers the same batch after a back-off (``context.timeout`` or
  exponential), so nothing is lost; a rebalance calls ``close`` (after a last commit) and ``open``.

Errors in conversion and transformation go through the task's
:class:`~kafkalite.connect.runtime.errors.RetryWithToleranceOperator`.
"""
from __future__ import annotations

import functools
import inspect
import logging
import re
import threading
import time
import traceback
from concurrent.futures import Future
from typing import Any, Callable, Mapping, NamedTuple, Protocol

from kafkalite.client import ClientError, Consumer, ConsumerRecord, Producer, TopicPartition
from kafkalite.connect.connector import Connector, SinkConnector, SinkTask, SourceConnector, SourceTask, Task
from kafkalite.connect.errors import ConnectException, RetriableException
from kafkalite.connect.records import ConnectHeaders, SinkRecord, SourceRecord, TimestampType

from . import status as st
from .connector_config import TASK_CLASS, ConnectorConfig
from .errors import (ConsumedRecord, DeadLetterQueueReporter, ErrorHandlingConfig, LogReporter,
                     RetryWithToleranceOperator, Stage)
from .metrics import ConnectMetrics
from .offsets import OffsetStorageReader, OffsetStorageWriter, OffsetStore
from .status import MemoryStatusStore, Status
from .worker_config import WorkerConfig

log = logging.getLogger(__name__)

STARTED, PAUSED = "STARTED", "PAUSED"          # target states (Kafka's TargetState)


class ConnectorTaskId(NamedTuple):
    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


# -- plugins and clients ----------------------------------------------------------------------
def load_class(name: str) -> type:
    """A plugin class by name: an alias or Java class name known to the plugin registry, or a
    Python ``module.Class`` / ``module:Class`` path (modules under ``plugin.path`` included)."""
    from kafkalite.connect import plugins
    try:
        return plugins.load_class(name)
    except plugins.PluginError as exc:
        raise ConnectException(f"Class {name} could not be found: {exc}") from None


def _kwargs_for(target: Callable[..., Any], props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka client properties (``max.poll.records``) as our client's keyword arguments
    (``max_poll_records``), typed by each parameter's default; unknown properties are ignored."""
    params = inspect.signature(target).parameters
    out: dict[str, Any] = {}
    for key, raw in props.items():
        name = key.replace(".", "_").replace("-", "_")
        if name not in params or name in ("client", "security", "bootstrap_servers"):
            continue
        default = params[name].default
        try:
            if isinstance(default, bool):
                out[name] = str(raw).strip().lower() == "true"
            elif isinstance(default, int):
                out[name] = int(raw)
            elif isinstance(default, float):
                out[name] = float(raw)
            else:
                out[name] = raw
        except ValueError:
            raise ConnectException(f"Invalid value {raw} for client configuration {key}") from None
    return out


class Converters(NamedTuple):
    key: Any
    value: Any
    header: Any


# -- contexts -----------------------------------------------------------------------------------
class WorkerConnectorContext:
    """What a running connector may ask: new task configs, or to fail."""

    def __init__(self, worker: "Worker", name: str, reader: OffsetStorageReader | None) -> None:
        self.worker, self.name, self._reader = worker, name, reader

    def request_task_reconfiguration(self) -> None:
        self.worker.on_reconfiguration_request(self.name)

    def raise_error(self, exc: BaseException) -> None:
        self.worker.connector_failed(self.name, exc)

    def offset_storage_reader(self) -> OffsetStorageReader:
        if self._reader is None:
            raise ConnectException("a sink connector has no offset storage reader")
        return self._reader


class WorkerSourceTaskContext:
    def __init__(self, props: dict[str, str], reader: OffsetStorageReader) -> None:
        self._props, self._reader = props, reader

    def configs(self) -> dict[str, str]:
        return dict(self._props)

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader


class WorkerSinkTaskContext:
    """A sink task's view of its consumer: rewinds, pause/resume, commit requests, the errant
    record reporter."""

    def __init__(self, owner: "WorkerSinkTask") -> None:
        self.owner = owner
        self.offsets: dict[TopicPartition, int] = {}
        self.timeout_ms = -1
        self.commit_requested = False
        self.paused: set[TopicPartition] = set()

    def configs(self) -> dict[str, str]:
        return dict(self.owner.task_props)

    def offset(self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None) -> None:
        if isinstance(offsets, TopicPartition):
            if offset is None:
                raise ConnectException("offset(tp, n) needs the offset")
            self.offsets[offsets] = offset
        else:
            self.offsets.update(offsets)

    def timeout(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms

    def assignment(self) -> set[TopicPartition]:
        return set(self.owner.assignment)

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            if tp not in self.owner.assignment:
                raise ConnectException(f"Cannot pause partition {tp.topic}-{tp.partition}: it is not assigned")
        self.paused.update(partitions)
        self.owner.apply_pauses()

    def resume(self, *partitions: TopicPartition) -> None:
        self.paused.difference_update(partitions)
        self.owner.apply_pauses()

    def request_commit(self) -> None:
        self.commit_requested = True

    def errant_record_reporter(self) -> "ErrantRecordReporter":
        return ErrantRecordReporter(self.owner)


class ErrantRecordReporter:
    """KIP-610: a sink task reports a record it could not write; it goes to the reporters
    (log, dead-letter queue) as the consumed bytes, and the task goes on (tolerance all)."""

    def __init__(self, owner: "WorkerSinkTask") -> None:
        self.owner = owner

    def report(self, record: SinkRecord, error: BaseException) -> "Future[None]":
        raw = self.owner.raw_of(record)
        return self.owner.operator.report_errant(raw, error, self.owner.task)


# -- tasks --------------------------------------------------------------------------------------
class WorkerTask:
    """A task's thread and its state: RUNNING / PAUSED / FAILED (with the trace) / UNASSIGNED."""

    kind = "task"

    def __init__(self, worker: "Worker", task_id: ConnectorTaskId, task: Task, task_props: dict[str, str],
                 connector_config: ConnectorConfig, converters: Converters, chain: Any,
                 target_state: str) -> None:
        self.worker = worker
        self.id = task_id
        self.task = task
        self.task_props = task_props
        self.config = connector_config
        self.converters = converters
        self.chain = chain
        self.target_state = target_state
        self.labels = (task_id.connector, str(task_id.task))
        self.metrics = worker.metrics
        self.operator = RetryWithToleranceOperator(
            connector_config.errors, task_id.connector, task_id.task,
            on_error=lambda: self.metrics.record_errors.labels(*self.labels).inc(),
            on_retry=lambda: self.metrics.retries.labels(*self.labels).inc())
        self.operator.reporters.append(LogReporter(connector_config.errors))
        self._stopping = threading.Event()
        self._state_changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"task-{task_id}", daemon=True)
        self.failed = False
        self._topics_seen: set[str] = set()

    def topic_used(self, topic: str) -> None:
        """Record the topic as one of the connector's active topics (KIP-558), once."""
        if topic not in self._topics_seen:
            self._topics_seen.add(topic)
            try:
                self.worker.status_store.put_topic(self.id.connector, topic, self.id.task, int(time.time() * 1000))
            except Exception:  # noqa: BLE001 - bookkeeping must not fail the task
                log.exception("recording active topic %s", topic)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            self.execute()
        except BaseException as exc:  # noqa: BLE001 - a task's failure is its FAILED status
            if not self._stopping.is_set() or not isinstance(exc, ClientError):
                log.error("%s %s threw an uncaught and unrecoverable exception", self.kind, self.id, exc_info=exc)
                self.failed = True
                self._status(st.FAILED, _trace(exc))
        finally:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - closing must not hide the status
                log.exception("closing %s %s", self.kind, self.id)
            if not self.failed:
                self._status(st.UNASSIGNED)

    def _status(self, state: str, trace: str | None = None) -> None:
        self.worker.put_status(Status(self.id.connector, self.id.task, state, self.worker.worker_id,
                                      self.worker.generation(), trace))

    def running_state(self) -> None:
        self._status(st.PAUSED if self.target_state == PAUSED else st.RUNNING)

    def transition_to(self, target: str) -> None:
        with self._state_changed:
            if target == self.target_state:
                return
            self.target_state = target
            self._state_changed.notify_all()
        if not self.failed and self.thread.is_alive():
            self.running_state()

    def await_unpaused(self) -> bool:
        """Block while paused; False once stopping."""
        with self._state_changed:
            while self.target_state == PAUSED and not self._stopping.is_set():
                self._state_changed.wait(0.5)
        return not self._stopping.is_set()

    def stop(self) -> None:
        self._stopping.set()
        self.operator.stop()
        with self._state_changed:
            self._state_changed.notify_all()
        try:
            self.task.stop()
        except Exception:  # noqa: BLE001 - a connector's bug must not keep the worker from stopping
            log.exception("stopping task %s", self.id)

    def await_stop(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class WorkerSourceTask(WorkerTask):
    kind = "source task"

    def __init__(self, *args: Any, producer: Any, offset_store: OffsetStore, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.producer = producer
        self.reader = OffsetStorageReader(offset_store, self.id.connector)
        self.writer = OffsetStorageWriter(offset_store, self.id.connector)
        self._send_error: BaseException | None = None
        self._last_commit = time.monotonic()
        self.flush_interval = worker_flush_interval(self.worker.config)

    def execute(self) -> None:
        task = self.task
        assert isinstance(task, SourceTask)
        task.initialize(WorkerSourceTaskContext(self.task_props, self.reader))
        task.start(self.task_props)
        log.info("%s source task finished initialization and start", self.id)
        self.running_state()
        while not self.stopping:
            if self.target_state == PAUSED:
                self.commit_offsets()
                if not self.await_unpaused():
                    break
                continue
            if self._send_error is not None:
                raise ConnectException(f"Unrecoverable exception from producer send callback: {self._send_error}") \
                    from self._send_error
            try:
                records = task.poll()
            except RetriableException as exc:
                log.warning("%s retriable exception from poll: %s", self.id, exc)
                records = None
            if records:
                self.metrics.source_polled.labels(*self.labels).inc(len(records))
                self.send_records(records)
            if time.monotonic() - self._last_commit >= self.flush_interval:
                self.commit_offsets()
        self.commit_offsets()

    def send_records(self, records: list[SourceRecord]) -> None:
        for record in records:
            if self.stopping:
                return
            op = self.operator
            op.reset(source_record=record)
            transformed = op.execute(lambda: self.chain.apply(record), Stage.TRANSFORMATION, self.chain)
            if transformed is None:
                self._commit_record(record, None)
                continue
            topic = transformed.topic
            conv = self.converters
            headers = op.execute(lambda: _headers_to_bytes(conv.header, topic, transformed.headers),
                                 Stage.HEADER_CONVERTER, conv.header)
            key = op.execute(lambda: conv.key.from_connect_data(topic, transformed.key_schema, transformed.key),
                             Stage.KEY_CONVERTER, conv.key)
            value = op.execute(lambda: conv.value.from_connect_data(topic, transformed.value_schema,
                                                                    transformed.value),
                               Stage.VALUE_CONVERTER, conv.value)
            if op.failed:
                self._commit_record(record, None)
                continue
            self.writer.offset(record.source_partition, record.source_offset)
            fut = self.producer.send(topic, value, key, partition=transformed.kafka_partition,
                                     timestamp_ms=transformed.timestamp, headers=headers or [])
            fut.add_done_callback(functools.partial(self._on_sent, record))

    def _on_sent(self, record: SourceRecord, fut: "Future[Any]") -> None:
        exc = fut.exception()
        if exc is not None:
            log.error("%s failed to send record to %s: %s", self.id, record.topic, exc)
            self._send_error = exc
            return
        self.metrics.source_written.labels(*self.labels).inc()
        self.topic_used(fut.result().topic)
        self._commit_record(record, fut.result())

    def _commit_record(self, record: SourceRecord, metadata: Any) -> None:
        task = self.task
        assert isinstance(task, SourceTask)
        try:
            task.commit_record(record, metadata)
        except Exception:  # noqa: BLE001 - Kafka logs and goes on
            log.exception("%s exception thrown while calling task.commit_record()", self.id)

    def commit_offsets(self) -> bool:
        """Flush the producer, then write the offsets staged before the flush (Kafka's
        ``commitOffsets``); on a timeout the offsets stay staged for the next attempt."""
        self._last_commit = time.monotonic()
        offsets = self.writer.take()
        start = time.monotonic()
        try:
            self.producer.flush(self.worker.config.offset_flush_timeout_ms / 1000.0)
        except ClientError as exc:
            log.error("%s failed to flush, timed out while waiting for producer to flush outstanding messages: %s",
                      self.id, exc)
            self.writer.restore(offsets)
            self.metrics.commit_failures.labels(*self.labels).inc()
            return False
        if self._send_error is not None:
            return False
        try:
            self.writer.flush(offsets)
        except Exception as exc:  # noqa: BLE001 - a store failure is retried at the next commit
            log.error("%s failed to commit offsets: %s", self.id, exc)
            self.writer.restore(offsets)
            self.metrics.commit_failures.labels(*self.labels).inc()
            return False
        self.metrics.commit_latency.labels(*self.labels).observe(time.monotonic() - start)
        if offsets:
            log.debug("%s committed %d source offsets", self.id, len(offsets))
        task = self.task
        assert isinstance(task, SourceTask)
        try:
            task.commit()
        except Exception:  # noqa: BLE001
            log.exception("%s exception thrown while calling task.commit()", self.id)
        return True

    def close(self) -> None:
        try:
            self.producer.close(self.worker.config.offset_flush_timeout_ms / 1000.0)
        except ClientError as exc:
            log.warning("%s closing the producer: %s", self.id, exc)


class WorkerSinkTask(WorkerTask):
    kind = "sink task"

    def __init__(self, *args: Any, consumer: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.consumer = consumer
        self.context = WorkerSinkTaskContext(self)
        self.assignment: list[TopicPartition] = []
        self.current_offsets: dict[TopicPartition, int] = {}
        self.last_committed: dict[TopicPartition, int] = {}
        self._batch: list[SinkRecord] = []
        self._batch_offsets: dict[TopicPartition, int] = {}
        self._raw: dict[tuple[str, int, int], ConsumerRecord] = {}
        self._retry_attempt = 0
        self._last_commit = time.monotonic()
        self.flush_interval = worker_flush_interval(self.worker.config)
        self._opened = False

    # -- the loop ---------------------------------------------------------------------------
    def execute(self) -> None:
        task = self.task
        assert isinstance(task, SinkTask)
        task.initialize(self.context)
        task.start(self.task_props)
        self._subscribe()
        log.info("%s sink task finished initialization and start", self.id)
        self.running_state()
        while not self.stopping:
            if self.target_state == PAUSED:
                self.apply_pauses()
                self.consumer.poll(timeout_ms=200)          # keeps group membership current
                continue
            self.iteration()

    def _subscribe(self) -> None:
        if self.config.topics_regex:
            pattern = re.compile(self.config.topics_regex)
            md = self.consumer.client.metadata()
            topics = [t for t in md.topics if pattern.fullmatch(t)]
        else:
            topics = list(self.config.topics)
        self.consumer.subscribe(topics, listener=self)

    def iteration(self) -> None:
        now = time.monotonic()
        if self.context.commit_requested or now - self._last_commit >= self.flush_interval:
            self.context.commit_requested = False
            self.commit_offsets()
        if self._batch:
            self._retry_put()
            return
        records = self.consumer.poll(timeout_ms=500)
        self._apply_rewinds()
        if not records:
            if self._opened:
                self._deliver([], {})
            return
        self.metrics.sink_read.labels(*self.labels).inc(len(records))
        self._raw = {(r.topic, r.partition, r.offset): r for r in records}
        batch: list[SinkRecord] = []
        offsets: dict[TopicPartition, int] = {}
        for r in records:
            offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
            self.topic_used(r.topic)
            converted = self._convert_and_transform(r)
            if converted is not None:
                batch.append(converted)
        self._deliver(batch, offsets)

    def _convert_and_transform(self, r: ConsumerRecord) -> SinkRecord | None:
        op = self.operator
        op.reset(consumed=ConsumedRecord(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers),
                                         r.timestamp))
        conv = self.converters
        key = op.execute(lambda: conv.key.to_connect_data(r.topic, r.key), Stage.KEY_CONVERTER, conv.key)
        value = op.execute(lambda: conv.value.to_connect_data(r.topic, r.value), Stage.VALUE_CONVERTER, conv.value)
        headers = op.execute(lambda: _headers_from_bytes(conv.header, r.topic, r.headers),
                             Stage.HEADER_CONVERTER, conv.header)
        if op.failed or key is None or value is None:
            return None
        ts_type = TimestampType.LOG_APPEND_TIME if r.timestamp_type == 1 else TimestampType.CREATE_TIME
        record = SinkRecord(r.topic, r.partition, key.schema, key.value, value.schema, value.value, r.offset,
                            r.timestamp if r.timestamp >= 0 else None, ts_type, headers)
        result = op.execute(lambda: self.chain.apply(record), Stage.TRANSFORMATION, self.chain)
        return None if op.failed else result

    def _deliver(self, batch: list[SinkRecord], offsets: dict[TopicPartition, int]) -> None:
        self._batch, self._batch_offsets = batch, offsets
        self._retry_put()

    def _retry_put(self) -> None:
        task = self.task
        assert isinstance(task, SinkTask)
        batch = self._batch
        try:
            task.put(list(batch))
        except RetriableException as exc:
            self._retry_attempt += 1
            delay_ms = self.context.timeout_ms if self.context.timeout_ms > 0 else min(
                300 * 2 ** (self._retry_attempt - 1), max(self.config.errors.retry_delay_max_ms, 300))
            log.warning("%s RetriableException from SinkTask (attempt %d); redelivering %d records in %d ms: %s",
                        self.id, self._retry_attempt, len(batch), delay_ms, exc)
            self.metrics.retries.labels(*self.labels).inc()
            self.consumer.pause(self.assignment)               # keep the group, take nothing new
            deadline = time.monotonic() + delay_ms / 1000.0
            while not self.stopping and time.monotonic() < deadline:
                self.consumer.poll(timeout_ms=int(min(200, max(1, (deadline - time.monotonic()) * 1000))))
                if not self._batch:
                    return                                     # a rebalance dropped the batch
            return
        except Exception as exc:
            raise ConnectException(f"Exiting WorkerSinkTask due to unrecoverable exception: {exc}") from exc
        if self._retry_attempt:
            log.info("%s put succeeded after %d retries", self.id, self._retry_attempt)
        self._retry_attempt = 0
        self.context.timeout_ms = -1
        if batch:
            self.metrics.sink_sent.labels(*self.labels).inc(len(batch))
        self.current_offsets.update(self._batch_offsets)
        self._batch, self._batch_offsets = [], {}
        self.apply_pauses()

    def apply_pauses(self) -> None:
        """The consumer's paused set: everything while the connector is paused or a batch is
        being retried, else what the task paused."""
        if not self.assignment:
            return
        if self.target_state == PAUSED or self._batch:
            want = set(self.assignment)
        else:
            want = self.context.paused & set(self.assignment)
        current = self.consumer.paused()
        self.consumer.resume(current - want)
        self.consumer.pause(want - current)

    def _apply_rewinds(self) -> None:
        if not self.context.offsets:
            return
        rewinds, self.context.offsets = self.context.offsets, {}
        for tp, off in rewinds.items():
            if tp in self.assignment:
                log.debug("%s rewinding %s to %d", self.id, tp, off)
                self.consumer.seek(tp, off)
                self.current_offsets[tp] = off

    # -- commits ----------------------------------------------------------------------------
    def commit_offsets(self, partitions: list[TopicPartition] | None = None) -> None:
        self._last_commit = time.monotonic()
        current = {tp: off for tp, off in self.current_offsets.items()
                   if partitions is None or tp in partitions}
        if not current:
            return
        task = self.task
        assert isinstance(task, SinkTask)
        start = time.monotonic()
        try:
            committable = task.pre_commit(dict(current))
        except Exception as exc:  # noqa: BLE001 - Kafka rewinds to the last commit and goes on
            log.error("%s offset commit failed, rewinding to last committed offsets: %s", self.id, exc)
            for tp, off in self.last_committed.items():
                if tp in self.assignment and (partitions is None or tp in partitions):
                    self.consumer.seek(tp, off)
                    self.current_offsets[tp] = off
            self.metrics.commit_failures.labels(*self.labels).inc()
            return
        to_commit = {tp: off for tp, off in (committable or {}).items()
                     if tp in current and self.last_committed.get(tp) != off}
        if not to_commit:
            return
        try:
            self.consumer.commit(to_commit)
        except ClientError as exc:
            log.warning("%s commit of offsets failed: %s", self.id, exc)
            self.metrics.commit_failures.labels(*self.labels).inc()
            return
        self.last_committed.update(to_commit)
        self.metrics.commit_latency.labels(*self.labels).observe(time.monotonic() - start)

    # -- the rebalance listener (called inside consumer.poll) --------------------------------
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        if not partitions or not self._opened:
            return
        log.info("%s partitions revoked: %s", self.id, partitions)
        self._batch, self._batch_offsets = [], {}           # not put: consumed again from the commit
        self.commit_offsets(partitions)
        task = self.task
        assert isinstance(task, SinkTask)
        task.close(list(partitions))
        for tp in partitions:
            self.current_offsets.pop(tp, None)
            self.last_committed.pop(tp, None)
        self._opened = False

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        log.info("%s partitions assigned: %s", self.id, partitions)
        self.assignment = list(partitions)
        self.context.paused &= set(partitions)
        for tp in partitions:
            pos = self.consumer.position(tp)
            self.current_offsets[tp] = pos
            self.last_committed[tp] = pos
        task = self.task
        assert isinstance(task, SinkTask)
        task.open(list(partitions))
        self._opened = True
        self._apply_rewinds()
        self.apply_pauses()

    def raw_of(self, record: SinkRecord) -> ConsumedRecord:
        """The consumed bytes behind a record (for the dead-letter queue)."""
        r = self._raw.get((record.original_topic, record.original_kafka_partition or 0,
                           record.original_kafka_offset))
        if r is not None:
            return ConsumedRecord(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers), r.timestamp)
        conv = self.converters
        return ConsumedRecord(record.original_topic, record.original_kafka_partition or 0,
                              record.original_kafka_offset,
                              conv.key.from_connect_data(record.topic, record.key_schema, record.key),
                              conv.value.from_connect_data(record.topic, record.value_schema, record.value))

    def close(self) -> None:
        if self._opened and not self.failed:
            try:
                self.commit_offsets()
                task = self.task
                assert isinstance(task, SinkTask)
                task.close(list(self.assignment))
            except Exception:  # noqa: BLE001
                log.exception("%s closing partitions", self.id)
        try:
            self.consumer.close(autocommit=False)
        except ClientError as exc:
            log.warning("%s closing the consumer: %s", self.id, exc)


def worker_flush_interval(config: WorkerConfig) -> float:
    return max(config.offset_flush_interval_ms, 1) / 1000.0


def _headers_to_bytes(converter: Any, topic: str, headers: ConnectHeaders | None) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    return [(h.key, converter.from_connect_header(topic, h.key, h.schema, h.value)) for h in headers]


def _headers_from_bytes(converter: Any, topic: str, headers: list[tuple[str, bytes | None]]) -> ConnectHeaders:
    out = ConnectHeaders()
    for key, raw in headers or []:
        sv = converter.to_connect_header(topic, key, raw)
        out.add(key, sv.value, sv.schema)
    return out


def _trace(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


# -- connectors -----------------------------------------------------------------------------------
class WorkerConnector:
    """A connector instance: started, paused (Kafka stops a paused connector's task generation
    only; the instance keeps running), failed or stopped."""

    def __init__(self, worker: "Worker", name: str, connector: Connector, props: dict[str, str]) -> None:
        self.worker, self.name, self.connector, self.props = worker, name, connector, props
        self.target_state = STARTED
        self.failed = False

    def _status(self, state: str, trace: str | None = None) -> None:
        self.worker.put_status(Status(self.name, None, state, self.worker.worker_id, self.worker.generation(), trace))

    def start(self, target_state: str) -> bool:
        reader = (OffsetStorageReader(self.worker.offset_store, self.name)
                  if isinstance(self.connector, SourceConnector) else None)
        try:
            self.connector.initialize(WorkerConnectorContext(self.worker, self.name, reader))
            self.connector.start(dict(self.props))
        except Exception as exc:  # noqa: BLE001 - the connector's failure is its FAILED status
            log.error("%s failed to start: %s", self.name, exc, exc_info=exc)
            self.failed = True
            self._status(st.FAILED, _trace(exc))
            return False
        self.target_state = target_state
        self._status(st.PAUSED if target_state == PAUSED else st.RUNNING)
        return True

    def transition_to(self, target: str) -> None:
        if self.failed or target == self.target_state:
            return
        self.target_state = target
        self._status(st.PAUSED if target == PAUSED else st.RUNNING)

    def stop(self) -> None:
        try:
            self.connector.stop()
        except Exception:  # noqa: BLE001
            log.exception("%s stopping the connector", self.name)
        if not self.failed:
            self._status(st.UNASSIGNED)


# -- the worker -----------------------------------------------------------------------------------
class Worker:
    """Runs connectors and tasks in this process; herders tell it what to run."""

    def __init__(self, worker_id: str, config: WorkerConfig, offset_store: OffsetStore,
                 status_store: MemoryStatusStore, *, metrics: ConnectMetrics | None = None,
                 on_reconfiguration_request: Callable[[str], None] | None = None,
                 clients: "WorkerClients | None" = None) -> None:
        self.worker_id = worker_id
        self.config = config
        self.offset_store = offset_store
        self.status_store = status_store
        self.metrics = metrics or ConnectMetrics()
        self.clients: WorkerClients = clients or KafkaWorkerClients(config)
        self._reconfigure = on_reconfiguration_request
        self.connectors: dict[str, WorkerConnector] = {}
        self.tasks: dict[ConnectorTaskId, WorkerTask] = {}
        self._lock = threading.RLock()
        self.generation: Callable[[], int] = lambda: 0
        config.add_plugin_path()

    # -- status -----------------------------------------------------------------------------
    def put_status(self, status: Status) -> None:
        try:
            self.status_store.put(status)
        except Exception:  # noqa: BLE001 - a status write must never kill a task thread
            log.exception("writing status %s", status)

    def on_reconfiguration_request(self, name: str) -> None:
        if self._reconfigure is not None:
            self._reconfigure(name)

    def connector_failed(self, name: str, exc: BaseException) -> None:
        wc = self.connectors.get(name)
        if wc is not None:
            wc.failed = True
            wc._status(st.FAILED, _trace(exc))

    # -- plugins ----------------------------------------------------------------------------
    def new_connector(self, class_name: str) -> Connector:
        cls = load_class(class_name)
        if not (isinstance(cls, type) and issubclass(cls, Connector)):
            raise ConnectException(f"{class_name} is not a Connector")
        return cls()

    @staticmethod
    def is_sink(connector: Connector) -> bool:
        return isinstance(connector, SinkConnector)

    def converters(self, cfg: ConnectorConfig) -> Converters:
        """The connector's converters: its own ``key.converter``... overrides, else the worker's."""
        from kafkalite.connect.converters import new_converter, new_header_converter

        def spec(role: str) -> tuple[str, dict[str, str]]:
            return cfg.converter(role) or self.config.converter_config(role)
        return Converters(new_converter(*spec("key.converter"), True), new_converter(*spec("value.converter"), False),
                          new_header_converter(*spec("header.converter")))

    @staticmethod
    def transformation_chain(cfg: ConnectorConfig) -> Any:
        """The connector's ``transforms`` (with their ``predicates``) as one chain."""
        from kafkalite.connect.transforms import TransformationChain
        return TransformationChain.from_config(cfg.props)

    # -- connectors -------------------------------------------------------------------------
    def start_connector(self, name: str, props: dict[str, str], target_state: str) -> bool:
        with self._lock:
            if name in self.connectors:
                raise ConnectException(f"Connector {name} already running on this worker")
            try:
                cfg = ConnectorConfig.parse(props)
                connector = self.new_connector(cfg.connector_class)
            except Exception as exc:  # noqa: BLE001 - an unloadable class is the connector's FAILED state
                log.error("%s failed to load: %s", name, exc)
                self.put_status(Status(name, None, st.FAILED, self.worker_id, self.generation(), _trace(exc)))
                return False
            wc = WorkerConnector(self, name, connector, dict(props))
            self.connectors[name] = wc
        log.info("starting connector %s (%s)", name, cfg.connector_class)
        return wc.start(target_state)

    def is_running(self, name: str) -> bool:
        wc = self.connectors.get(name)
        return wc is not None and not wc.failed

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        """The connector's task configurations, each with ``task.class`` (and a sink's topics)."""
        wc = self.connectors.get(name)
        if wc is None or wc.failed:
            raise ConnectException(f"Connector {name} is not running on this worker")
        task_cls = wc.connector.task_class()
        out = []
        for tc in wc.connector.task_configs(max_tasks)[:max_tasks]:
            props = {str(k): str(v) for k, v in tc.items()}
            props[TASK_CLASS] = f"{task_cls.__module__}.{task_cls.__qualname__}"
            if isinstance(wc.connector, SinkConnector):
                for key in ("topics", "topics.regex"):
                    if wc.props.get(key):
                        props[key] = wc.props[key]
            out.append(props)
        return out

    def stop_connector(self, name: str) -> None:
        with self._lock:
            wc = self.connectors.pop(name, None)
        if wc is not None:
            log.info("stopping connector %s", name)
            wc.stop()

    def set_target_state(self, name: str, target: str) -> None:
        wc = self.connectors.get(name)
        if wc is not None:
            wc.transition_to(target)
        for tid, task in list(self.tasks.items()):
            if tid.connector == name:
                task.transition_to(target)

    # -- tasks ------------------------------------------------------------------------------
    def start_task(self, task_id: ConnectorTaskId, connector_props: dict[str, str], task_props: dict[str, str],
                   target_state: str) -> bool:
        with self._lock:
            if task_id in self.tasks:
                raise ConnectException(f"Task already exists in this worker: {task_id}")
        log.info("starting task %s", task_id)
        try:
            cfg = ConnectorConfig.parse(connector_props)
            task_cls = load_class(task_props[TASK_CLASS])
            task = task_cls()
            converters = self.converters(cfg)
            chain = self.transformation_chain(cfg)
            if isinstance(task, SourceTask):
                producer = self.clients.producer(f"connector-producer-{task_id}")
                worker_task: WorkerTask = WorkerSourceTask(self, task_id, task, task_props, cfg, converters, chain,
                                                           target_state, producer=producer,
                                                           offset_store=self.offset_store)
            elif isinstance(task, SinkTask):
                consumer = self.clients.consumer(f"connect-{task_id.connector}", f"connector-consumer-{task_id}")
                worker_task = WorkerSinkTask(self, task_id, task, task_props, cfg, converters, chain, target_state,
                                             consumer=consumer)
                self._add_dlq(worker_task, cfg.errors)
            else:
                raise ConnectException(f"{task_props[TASK_CLASS]} is neither a SourceTask nor a SinkTask")
        except Exception as exc:  # noqa: BLE001 - a task that cannot start is FAILED with the reason
            log.error("failed to start task %s: %s", task_id, exc, exc_info=exc)
            self.put_status(Status(task_id.connector, task_id.task, st.FAILED, self.worker_id, self.generation(),
                                   _trace(exc)))
            return False
        with self._lock:
            self.tasks[task_id] = worker_task
        worker_task.start()
        return True

    def _add_dlq(self, task: WorkerSinkTask, errors: ErrorHandlingConfig) -> None:
        if not errors.dlq_topic:
            return
        self.clients.ensure_topic(errors.dlq_topic, 1, errors.dlq_replication_factor, {})
        producer = self.clients.producer(f"connector-dlq-producer-{task.id}")
        labels = task.labels
        task.operator.reporters.append(DeadLetterQueueReporter(
            errors, producer, on_dead_letter=lambda: self.metrics.dead_lettered.labels(*labels).inc()))
        original_close = task.close

        def close() -> None:
            original_close()
            producer.close(5)
        task.close = close  # type: ignore[method-assign]

    def stop_tasks(self, ids: list[ConnectorTaskId]) -> None:
        """Stop and wait (``task.shutdown.graceful.timeout.ms`` in all)."""
        with self._lock:
            stopping = [self.tasks.pop(i) for i in ids if i in self.tasks]
        for t in stopping:
            log.info("stopping task %s", t.id)
            t.stop()
        deadline = time.monotonic() + self.config.task_shutdown_graceful_timeout_ms / 1000.0
        for t in stopping:
            if not t.await_stop(max(0.0, deadline - time.monotonic())):
                log.error("graceful stop of task %s failed", t.id)

    def task_ids(self, connector: str | None = None) -> list[ConnectorTaskId]:
        return sorted(t for t in self.tasks if connector is None or t.connector == connector)

    def stop(self) -> None:
        self.stop_tasks(list(self.tasks))
        for name in list(self.connectors):
            self.stop_connector(name)


class WorkerClients(Protocol):
    """How a worker reaches the brokers (tests give an in-memory stand-in)."""

    def producer(self, client_id: str) -> Any: ...

    def consumer(self, group_id: str, client_id: str) -> Any: ...

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None: ...


class KafkaWorkerClients:
    """The worker's clients, configured from the worker properties: the security settings, then
    the ``producer.`` / ``consumer.`` / ``admin.`` prefixed ones (Kafka's names, e.g.
    ``consumer.max.poll.records``). Producers send with acks=all and retry until delivered, as
    Kafka's worker configures them; consumers start at the earliest offset and never auto-commit."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config

    def producer(self, client_id: str) -> Producer:
        props = {"acks": "all", "linger.ms": "0", "delivery.timeout.ms": "2147483647", "client.id": client_id}
        props.update(self.config.client_props("producer."))
        kwargs = _kwargs_for(Producer.__init__, props)
        return Producer(self.config.bootstrap_servers, security=self.config.client_security("producer."), **kwargs)

    def consumer(self, group_id: str, client_id: str) -> Consumer:
        props = {"auto.offset.reset": "earliest", "client.id": client_id}
        props.update(self.config.client_props("consumer."))
        kwargs = _kwargs_for(Consumer.__init__, props)
        kwargs["enable_auto_commit"] = False
        kwargs.pop("group_id", None)
        return Consumer(self.config.bootstrap_servers, group_id=group_id,
                        security=self.config.client_security("consumer."), **kwargs)

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        ensure_topic(self.config, topic, partitions, replication_factor, configs)


def ensure_topic(config: WorkerConfig, topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, str]) -> None:
    """Create ``topic`` unless it exists; the replication factor is capped by the live brokers
    (a one-broker development cluster with Kafka's default of 3 still works) with a warning."""
    from kafkalite.client import Admin, NewTopic
    from kafkalite.errors import ErrorCode
    with Admin(config.bootstrap_servers, security=config.client_security("admin.")) as admin:
        md = admin.client.metadata([topic])
        t = md.topics.get(topic)
        if t is not None and not t.error:
            return
        rf = replication_factor if replication_factor > 0 else 3
        if rf > len(md.brokers):
            log.warning("topic %s: replication factor %d is more than the %d live brokers; using %d", topic, rf,
                        len(md.brokers), len(md.brokers))
            rf = max(1, len(md.brokers))
        err = admin.create_topics([NewTopic(topic, partitions, rf, configs=configs)]).get(topic)
        if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise ConnectException(f"Unable to create topic {topic}: {err}")
        log.info("created topic %s (%d partitions, replication factor %d, %s)", topic, partitions, rf, configs)
