"""A sink task's loop (Kafka's ``WorkerSinkTask``): a consumer in group ``connect-<name>``;
records -> converters -> transforms -> ``put``. Every ``offset.flush.interval.ms`` (or when the
task asks) ``pre_commit`` (by default ``flush``) says which offsets are safe and the consumer
commits them. A ``RetriableException`` from ``put`` pauses consumption and redelivers the same
batch after a back-off (``context.timeout`` or exponential), so nothing is lost; a rebalance
commits and ``close``s the revoked partitions, then ``open``s the assigned ones.
"""
from __future__ import annotations

import logging
import re
import time
from concurrent.futures import Future
from typing import Any, Mapping

from kafkalite.client import ClientError, ConsumerRecord, TopicPartition
from kafkalite.connect.connector import SinkTask
from kafkalite.connect.errors import ConnectException, RetriableException
from kafkalite.connect.records import ConnectHeaders, SinkRecord, TimestampType

from .errors import ConsumedRecord, Stage
from .worker_task import PAUSED, WorkerTask, headers_from_bytes, worker_flush_interval

log = logging.getLogger(__name__)

#: seconds between two matches of ``topics.regex`` against the cluster's topics
REGEX_REFRESH = 5.0


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
        self._subscribed: list[str] | None = None
        self._last_regex_check = 0.0

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
        """Subscribe to ``topics``, or to the topics matching ``topics.regex`` now; the regex is
        matched again every ``REGEX_REFRESH`` seconds, so new matching topics are picked up (as
        Java's consumer does at each metadata refresh)."""
        self._last_regex_check = time.monotonic()
        if self.config.topics_regex:
            pattern = re.compile(self.config.topics_regex)
            md = self.consumer.client.metadata()
            topics = sorted(t for t in md.topics if pattern.fullmatch(t) and not t.startswith("__"))
        else:
            topics = list(self.config.topics)
        if topics != self._subscribed:
            self._subscribed = topics
            self.consumer.subscribe(topics, listener=self)

    def iteration(self) -> None:
        now = time.monotonic()
        if self.config.topics_regex and now - self._last_regex_check >= REGEX_REFRESH:
            self._subscribe()
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
        # stages that cannot fail (no headers, no transformations) are not run through the operator
        headers = (op.execute(lambda: headers_from_bytes(conv.header, r.topic, r.headers),
                              Stage.HEADER_CONVERTER, conv.header) if r.headers else ConnectHeaders())
        if op.failed or key is None or value is None:
            return None
        ts_type = TimestampType.LOG_APPEND_TIME if r.timestamp_type == 1 else TimestampType.CREATE_TIME
        record = SinkRecord(r.topic, r.partition, key.schema, key.value, value.schema, value.value, r.offset,
                            r.timestamp if r.timestamp >= 0 else None, ts_type, headers)
        if not self.chain.transformations:
            return record
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
        """On the task's thread, after its loop: a last commit, ``close`` of the partitions, then
        ``SinkTask.stop`` (never concurrently with ``put``, as Kafka's WorkerSinkTask)."""
        if self._opened and not self.failed:
            try:
                self.commit_offsets()
                task = self.task
                assert isinstance(task, SinkTask)
                task.close(list(self.assignment))
            except Exception:  # noqa: BLE001
                log.exception("%s closing partitions", self.id)
        self.stop_task()
        try:
            self.consumer.close(autocommit=False)
        except ClientError as exc:
            log.warning("%s closing the consumer: %s", self.id, exc)


