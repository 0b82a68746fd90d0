"""Error handling for a task's pipeline (KIP-298): retries with back-off, tolerance, reporters.

Kafka's ``RetryWithToleranceOperator`` runs each stage of a record's journey (conversion,
transformation) and:

* retries a :class:`RetriableException` with exponential back-off (300 ms doubling, capped by
  ``errors.retry.delay.max.ms``) until ``errors.retry.timeout`` has passed (0: no retry, -1:
  forever);
* counts any other failure (or a retriable one out of time) as an error: with
  ``errors.tolerance=none`` the task fails ("Tolerance exceeded in error handler"); with ``all`` the
  record is skipped and the reporters are told.

Reporters: :class:`LogReporter` (``errors.log.enable``, ``errors.log.include.messages``) and, for
sink connectors, :class:`DeadLetterQueueReporter` (``errors.deadletterqueue.topic.name``), which
writes the original record's key and value bytes with Kafka's ``__connect.errors.*`` headers
(``errors.deadletterqueue.context.headers.enable``).
"""
from __future__ import annotations

import enum
import logging
import threading
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence, TypeVar

from kafkalite.connect.errors import ConnectException, RetriableException

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRIES_DELAY_MIN_MS = 300
HEADER_PREFIX = "__connect.errors."
ERROR_HEADER_ORIG_TOPIC = HEADER_PREFIX + "topic"
ERROR_HEADER_ORIG_PARTITION = HEADER_PREFIX + "partition"
ERROR_HEADER_ORIG_OFFSET = HEADER_PREFIX + "offset"
ERROR_HEADER_CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
ERROR_HEADER_TASK_ID = HEADER_PREFIX + "task.id"
ERROR_HEADER_STAGE = HEADER_PREFIX + "stage"
ERROR_HEADER_EXECUTING_CLASS = HEADER_PREFIX + "class.name"
ERROR_HEADER_EXCEPTION = HEADER_PREFIX + "exception.class.name"
ERROR_HEADER_EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
ERROR_HEADER_EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"


class Stage(enum.Enum):
    """Where in the pipeline an operation failed (Kafka's ``Stage``)."""
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


@dataclass(frozen=True)
class ErrorHandlingConfig:
    """A connector's ``errors.*`` settings (Kafka's ConnectorConfig / SinkConnectorConfig)."""
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60000
    tolerance_all: bool = False
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str = ""
    dlq_replication_factor: int = 3
    dlq_context_headers: bool = False

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> "ErrorHandlingConfig":
        """Parse; a bad value raises :class:`ConfigException` naming the property."""
        from kafkalite.connect.errors import ConfigException

        def num(name: str, default: int) -> int:
            raw = str(props.get(name, default)).strip()
            try:
                return int(raw)
            except ValueError:
                raise ConfigException(f"Invalid value {raw} for configuration {name}: "
                                      "Not a number of type LONG") from None

        def flag(name: str) -> bool:
            raw = str(props.get(name, "false")).strip().lower()
            if raw not in ("true", "false"):
                raise ConfigException(f"Invalid value {raw} for configuration {name}: Expected value to be "
                                      "either true or false")
            return raw == "true"

        tolerance = str(props.get("errors.tolerance", "none")).strip().lower()
        if tolerance not in ("none", "all"):
            raise ConfigException(f"Invalid value {tolerance} for configuration errors.tolerance: "
                                  "String must be one of: none, all")
        return cls(retry_timeout_ms=num("errors.retry.timeout", 0),
                   retry_delay_max_ms=num("errors.retry.delay.max.ms", 60000),
                   tolerance_all=tolerance == "all", log_enable=flag("errors.log.enable"),
                   log_include_messages=flag("errors.log.include.messages"),
                   dlq_topic=str(props.get("errors.deadletterqueue.topic.name", "")).strip(),
                   dlq_replication_factor=num("errors.deadletterqueue.topic.replication.factor", 3),
                   dlq_context_headers=flag("errors.deadletterqueue.context.headers.enable"))


@dataclass
class ConsumedRecord:
    """The raw record a sink task consumed (what the dead-letter queue receives unchanged)."""
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None


@dataclass
class ProcessingContext:
    """What failed where: the stage, the class doing it, the record and the error."""
    connector: str
    task_id: int
    stage: Stage | None = None
    executing_class: str = ""
    consumed: ConsumedRecord | None = None
    source_record: Any = None
    error: BaseException | None = None
    attempt: int = 0

    def describe(self, include_messages: bool) -> str:
        where = f"Error encountered in task {self.connector}-{self.task_id}. Executing stage " \
                f"'{self.stage.value if self.stage else '?'}' with class '{self.executing_class}'"
        if include_messages and self.consumed is not None:
            c = self.consumed
            where += f", where consumed record is {{topic='{c.topic}', partition={c.partition}, offset={c.offset}, " \
                     f"timestamp={c.timestamp}}}"
        elif include_messages and self.source_record is not None:
            where += f", where source record is = {self.source_record!r}"
        return where + "."


class ErrorReporter(Protocol):
    def report(self, context: ProcessingContext) -> "Future[None]": ...

    def close(self) -> None: ...


def _done() -> "Future[None]":
    f: Future[None] = Future()
    f.set_result(None)
    return f


class LogReporter:
    """``errors.log.enable``: one log line per failure, with the record's coordinates if
    ``errors.log.include.messages``."""

    def __init__(self, config: ErrorHandlingConfig, on_error: Callable[[], None] | None = None) -> None:
        self.config = config
        self.on_error = on_error

    def report(self, context: ProcessingContext) -> "Future[None]":
        if self.config.log_enable and context.error is not None:
            log.error("%s", context.describe(self.config.log_include_messages), exc_info=context.error)
        return _done()

    def close(self) -> None:
        pass


class DlqProducer(Protocol):
    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
             headers: Sequence[tuple[str, bytes | None]] = ()) -> "Future[Any]": ...


class DeadLetterQueueReporter:
    """Writes a failed sink record's original key/value (and headers) to the dead-letter topic."""

    def __init__(self, config: ErrorHandlingConfig, producer: DlqProducer,
                 on_dead_letter: Callable[[], None] | None = None) -> None:
        self.config = config
        self.producer = producer
        self.on_dead_letter = on_dead_letter

    def report(self, context: ProcessingContext) -> "Future[None]":
        c = context.consumed
        if c is None or not self.config.dlq_topic:
            return _done()            # only records consumed by sink tasks go to the queue
        headers = list(c.headers)
        if self.config.dlq_context_headers:
            headers.extend(error_headers(context))
        fut = self.producer.send(self.config.dlq_topic, c.value, c.key, headers=headers)
        if self.on_dead_letter is not None:
            self.on_dead_letter()
        out: Future[None] = Future()

        def done(f: "Future[Any]") -> None:
            exc = f.exception()
            if exc is not None:
                log.error("Could not produce message to dead letter queue. topic=%s: %s", self.config.dlq_topic, exc)
                out.set_exception(exc)
            else:
                out.set_result(None)
        fut.add_done_callback(done)
        return out

    def close(self) -> None:
        pass


def error_headers(context: ProcessingContext) -> list[tuple[str, bytes | None]]:
    """Kafka's ``__connect.errors.*`` headers (UTF-8 strings; numbers in decimal)."""
    c = context.consumed
    out: list[tuple[str, bytes | None]] = []
    if c is not None:
        out += [(ERROR_HEADER_ORIG_TOPIC, c.topic.encode()), (ERROR_HEADER_ORIG_PARTITION, str(c.partition).encode()),
                (ERROR_HEADER_ORIG_OFFSET, str(c.offset).encode())]
    out += [(ERROR_HEADER_CONNECTOR_NAME, context.connector.encode()),
            (ERROR_HEADER_TASK_ID, str(context.task_id).encode()),
            (ERROR_HEADER_STAGE, (context.stage.value if context.stage else "").encode()),
            (ERROR_HEADER_EXECUTING_CLASS, context.executing_class.encode())]
    err = context.error
    if err is not None:
        out += [(ERROR_HEADER_EXCEPTION, exception_class_name(err).encode()),
                (ERROR_HEADER_EXCEPTION_MESSAGE, str(err).encode()),
                (ERROR_HEADER_EXCEPTION_STACK_TRACE,
                 "".join(traceback.format_exception(type(err), err, err.__traceback__)).encode())]
    return out


def exception_class_name(err: BaseException) -> str:
    cls = type(err)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


class RetryWithToleranceOperator:
    """Runs pipeline stages with retries and tolerance; counts errors; tells the reporters."""

    def __init__(self, config: ErrorHandlingConfig, connector: str, task_id: int, *,
                 sleep: Callable[[float], bool] | None = None, clock: Callable[[], float] = time.monotonic,
                 on_error: Callable[[], None] | None = None, on_retry: Callable[[], None] | None = None) -> None:
        self.config = config
        self.connector, self.task_id = connector, task_id
        self.reporters: list[ErrorReporter] = []
        self._stopping = threading.Event()
        self._sleep = sleep or (lambda s: self._stopping.wait(s))
        self._clock = clock
        self.on_error, self.on_retry = on_error, on_retry
        self.total_failures = 0
        self.total_errors_skipped = 0
        self.context = ProcessingContext(connector, task_id)

    def reset(self, consumed: ConsumedRecord | None = None, source_record: Any = None) -> None:
        """Start a new record."""
        self.context = ProcessingContext(self.connector, self.task_id, consumed=consumed, source_record=source_record)

    def stop(self) -> None:
        """Wake a back-off early: the task is stopping."""
        self._stopping.set()

    @property
    def failed(self) -> bool:
        return self.context.error is not None

    def execute(self, operation: Callable[[], T], stage: Stage, executing: Any) -> T | None:
        """Run ``operation``; its result, or None if it failed and the failure is tolerated."""
        self.context.stage = stage
        self.context.executing_class = _class_name(executing)
        try:
            return self._exec_and_retry(operation)
        except ConnectException as exc:
            if isinstance(exc, _ToleranceExceeded):
                raise
            return self._handle(exc)
        except Exception as exc:  # noqa: BLE001 - any failure of a stage is an error to handle
            return self._handle(exc)

    def _exec_and_retry(self, operation: Callable[[], T]) -> T:
        start = self._clock()
        attempt = 0
        while True:
            attempt += 1
            self.context.attempt = attempt
            try:
                return operation()
            except RetriableException as exc:
                log.debug("retriable error in stage %s, attempt %d: %s", self.context.stage, attempt, exc)
                if not self._may_retry(start):
                    raise
                if self.on_retry is not None:
                    self.on_retry()
                self._backoff(attempt, start)
                if self._stopping.is_set():
                    raise

    def _may_retry(self, start: float) -> bool:
        timeout = self.config.retry_timeout_ms
        if timeout < 0:
            return True
        return (self._clock() - start) * 1000 < timeout

    def _backoff(self, attempt: int, start: float) -> None:
        delay = min(RETRIES_DELAY_MIN_MS * (2 ** (attempt - 1)), max(self.config.retry_delay_max_ms, 0))
        if self.config.retry_timeout_ms >= 0:
            remaining = self.config.retry_timeout_ms - (self._clock() - start) * 1000
            delay = min(delay, max(0.0, remaining))
        self._sleep(delay / 1000.0)

    def _handle(self, exc: BaseException) -> Any:
        self.total_failures += 1
        self.context.error = exc
        if self.on_error is not None:
            self.on_error()
        futures = [r.report(self.context) for r in self.reporters]
        if not self.config.tolerance_all:
            raise _ToleranceExceeded("Tolerance exceeded in error handler", exc)
        for f in futures:
            f.result(timeout=30)        # a record is dead-lettered before its offset is committed
        self.total_errors_skipped += 1
        return None

    def report_errant(self, consumed: ConsumedRecord, error: BaseException, executing: Any) -> "Future[None]":
        """KIP-610's ErrantRecordReporter.report: the task says a record failed in put."""
        context = ProcessingContext(self.connector, self.task_id, Stage.TASK_PUT, _class_name(executing),
                                    consumed=consumed, error=error)
        self.total_failures += 1
        if self.on_error is not None:
            self.on_error()
        futures = [r.report(context) for r in self.reporters]
        if not self.config.tolerance_all:
            raise _ToleranceExceeded("Tolerance exceeded in error handler", error)
        self.total_errors_skipped += 1
        out: Future[None] = Future()
        pending = list(futures)

        def one_done(_: "Future[None]") -> None:
            if all(f.done() for f in pending) and not out.done():
                bad = next((f.exception() for f in pending if f.exception() is not None), None)
                if bad is not None:
                    out.set_exception(bad)
                else:
                    out.set_result(None)
        if not pending:
            out.set_result(None)
        for f in pending:
            f.add_done_callback(one_done)
        return out

    def close(self) -> None:
        for r in self.reporters:
            r.close()


class _ToleranceExceeded(ConnectException):
    """The task fails: an error happened and ``errors.tolerance`` is ``none``."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.__cause__ = cause


#: class -> its Java-style qualified name; looked up for every stage of every record
_CLASS_NAMES: dict[type, str] = {}


def _class_name(executing: Any) -> str:
    if isinstance(executing, str):
        return executing
    cls = executing if isinstance(executing, type) else type(executing)
    name = _CLASS_NAMES.get(cls)
    if name is None:
        name = _CLASS_NAMES[cls] = f"{cls.__module__}.{cls.__qualname__}"
    return name
