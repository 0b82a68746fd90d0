"""What every task thread shares (Kafka's ``WorkerTask``): its id, its converters and chain, its
state (RUNNING / PAUSED / FAILED with the trace / UNASSIGNED, written to the status store), its
target state (pause and resume) and its error handling operator.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from kafkalite.connect.connector import Task
from kafkalite.connect.records import ConnectHeaders

from . import status as st
from .connector_config import ConnectorConfig
from .errors import LogReporter, RetryWithToleranceOperator
from .status import Status
from .worker_config import WorkerConfig

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger(__name__)

STARTED, PAUSED = "STARTED", "PAUSED"          # target states (Kafka's TargetState)


class ConnectorTaskId(NamedTuple):
    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


class Converters(NamedTuple):
    key: Any
    value: Any
    header: Any


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
        #: resources to release after the task's own close (a dead-letter producer)
        self.on_close: list[Callable[[], None]] = []

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
            if self._stopping.is_set():
                # e.g. a source task's poll() on a stream its stop() just closed: not a failure
                log.info("%s %s ended while stopping: %s", self.kind, self.id, exc)
            else:
                log.error("%s %s threw an uncaught and unrecoverable exception", self.kind, self.id, exc_info=exc)
                self.failed = True
                self._status(st.FAILED, trace_of(exc))
        finally:
            for closer in [self.close, *self.on_close]:
                try:
                    closer()
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
        """Ask the task's thread to finish (it commits and closes on its own thread)."""
        self._stopping.set()
        self.operator.stop()
        with self._state_changed:
            self._state_changed.notify_all()

    def stop_task(self) -> None:
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


def worker_flush_interval(config: WorkerConfig) -> float:
    return max(config.offset_flush_interval_ms, 1) / 1000.0


def headers_to_bytes(converter: Any, topic: str, headers: ConnectHeaders | None) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    return [(h.key, converter.from_connect_header(topic, h.key, h.schema, h.value)) for h in headers]


def headers_from_bytes(converter: Any, topic: str, headers: list[tuple[str, bytes | None]]) -> ConnectHeaders:
    out = ConnectHeaders()
    for key, raw in headers or []:
        sv = converter.to_connect_header(topic, key, raw)
        out.add(key, sv.value, sv.schema)
    return out


def trace_of(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


