"""A source task's loop (Kafka's ``WorkerSourceTask``): ``poll`` -> transforms -> converters ->
producer. Each record's source offset is staged when it is sent; every
``offset.flush.interval.ms`` the producer is flushed and only then are the staged offsets written
to the offset store, so a committed offset never runs ahead of the acknowledged data.
"""
from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import Future
from typing import Any

from kafkalite.client import ClientError
from kafkalite.connect.connector import SourceTask
from kafkalite.connect.errors import ConnectException, RetriableException
from kafkalite.connect.records import SourceRecord

from .errors import Stage
from .offsets import OffsetStorageReader, OffsetStorageWriter, OffsetStore
from .worker_task import PAUSED, WorkerTask, headers_to_bytes, worker_flush_interval

log = logging.getLogger(__name__)


class WorkerSourceTaskContext:
    def __init__(self, props: dict[str, str], reader: OffsetStorageReader) -> None:
        self._props, self._reader = props, reader

    def configs(self) -> dict[str, str]:
        return dict(self._props)

    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader


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
        # the labelled counter looked up once: it is bumped from every send's callback
        self._written = self.metrics.source_written.labels(*self.labels)

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
            # stages that cannot fail (no transformations, no headers) are not run through the
            # operator: they would only give the record back / an empty list
            transformed = (op.execute(lambda: self.chain.apply(record), Stage.TRANSFORMATION, self.chain)
                           if self.chain.transformations else record)
            if transformed is None:
                self._commit_record(record, None)
                continue
            topic = transformed.topic
            conv = self.converters
            headers = (op.execute(lambda: headers_to_bytes(conv.header, topic, transformed.headers),
                                  Stage.HEADER_CONVERTER, conv.header) if transformed.headers else [])
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
        metadata = fut.result()
        self._written.inc()
        self.topic_used(metadata.topic)
        self._commit_record(record, metadata)

    def _commit_record(self, record: SourceRecord, metadata: Any) -> None:
        task = self.task
        assert isinstance(task, SourceTask)
        try:
            task.commit_record(record, metadata)
        except Exception:  # noqa: BLE001 - Kafka logs and goes on
            log.exception("%s exception thrown while calling task.commit_record()", self.id)

    def stop(self) -> None:
        """Kafka calls ``SourceTask.stop`` from the stopping thread, so a ``poll`` blocked waiting
        for data returns at once."""
        super().stop()
        self.stop_task()

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
        if not self.stopping:
            self.stop_task()                 # the task failed: it still gets its stop()
        try:
            self.producer.close(self.worker.config.offset_flush_timeout_ms / 1000.0)
        except ClientError as exc:
            log.warning("%s closing the producer: %s", self.id, exc)


