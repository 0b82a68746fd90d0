"""The connector API (org.apache.kafka.connect.connector/source/sink): what a plugin implements.

A Connector turns its configuration into task configurations; the runtime starts one Task per
configuration. Tasks see the runtime only through their context (SourceTaskContext,
SinkTaskContext), which the runtime implements; a connector author never imports the runtime.
Partitions are kafkalite.client.cluster.TopicPartition.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping, Protocol, runtime_checkable

from ..client.cluster import TopicPartition
from . import __version__
from .config import ConfigDef, ConfigValue, Config
from .records import SinkRecord, SourceRecord

__all__ = [
    "Connector", "SourceConnector", "SinkConnector", "Task", "SourceTask", "SinkTask", "ConnectorContext",
    "SourceConnectorContext", "SinkConnectorContext", "SourceTaskContext", "SinkTaskContext",
    "OffsetStorageReader", "ErrantRecordReporter", "RecordMetadata", "TopicPartition",
]


# -- contexts the runtime implements ----------------------------------------------------------
@runtime_checkable
class ConnectorContext(Protocol):
    """What a Connector may ask of the runtime."""

    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call task_configs again (the source's table set changed...)."""

    def raise_error(self, exc: BaseException) -> None:
        """Fail the connector with this error (its status turns FAILED with the trace)."""


@runtime_checkable
class OffsetStorageReader(Protocol):
    """Read access to the source offsets committed for this connector."""

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        """The last committed offset of one source partition, None if none."""

    def offsets(self, partitions: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        """Offsets of several partitions, keyed by the partition made hashable (a tuple of sorted items)."""


@runtime_checkable
class SourceConnectorContext(ConnectorContext, Protocol):
    def offset_storage_reader(self) -> OffsetStorageReader: ...


@runtime_checkable
class SinkConnectorContext(ConnectorContext, Protocol):
    pass


@runtime_checkable
class SourceTaskContext(Protocol):
    def configs(self) -> dict[str, str]:
        """The task's configuration as the runtime holds it."""

    def offset_storage_reader(self) -> OffsetStorageReader:
        """Where the task resumes: the committed offsets of its source partitions."""


@runtime_checkable
class ErrantRecordReporter(Protocol):
    """KIP-610: a sink task hands a record it cannot process to the runtime's error handling (DLQ)."""

    def report(self, record: SinkRecord, error: BaseException) -> Any:
        """Report the record; returns a future-like object the task may wait on before committing."""


@runtime_checkable
class SinkTaskContext(Protocol):
    def configs(self) -> dict[str, str]: ...

    def offset(self, offsets: Mapping[TopicPartition, int] | TopicPartition, offset: int | None = None) -> None:
        """Reset consumer positions: ``offset({tp: n, ...})`` or ``offset(tp, n)`` (the task rewinds or skips)."""

    def timeout(self, timeout_ms: int) -> None:
        """After a RetriableException from put, redeliver the same batch after this many ms."""

    def assignment(self) -> set[TopicPartition]: ...

    def pause(self, *partitions: TopicPartition) -> None: ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def request_commit(self) -> None:
        """Ask for an offset commit as soon as possible."""

    def errant_record_reporter(self) -> ErrantRecordReporter | None:
        """The DLQ reporter, None when errors.tolerance is none and no DLQ is set."""


class RecordMetadata(Protocol):
    """What a SourceTask sees of a written record in commit_record (topic, partition, offset)."""

    topic: str
    partition: int
    offset: int


# -- plugins ----------------------------------------------------------------------------------
class Connector(abc.ABC):
    """Base of SourceConnector and SinkConnector: configuration in, task configurations out."""

    def __init__(self) -> None:
        self.context: ConnectorContext | None = None

    def version(self) -> str:
        """The plugin's version, as GET /connector-plugins lists it."""
        return __version__

    def initialize(self, context: ConnectorContext, task_configs: list[dict[str, str]] | None = None) -> None:
        self.context = context

    @abc.abstractmethod
    def start(self, props: dict[str, str]) -> None: ...

    def reconfigure(self, props: dict[str, str]) -> None:
        """A new configuration: by default stop then start, as Kafka's."""
        self.stop()
        self.start(props)

    @abc.abstractmethod
    def task_class(self) -> type["Task"]: ...

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @abc.abstractmethod
    def config(self) -> ConfigDef:
        """The connector's own ConfigDef (its specific properties; the runtime adds the common ones)."""

    def validate(self, props: Mapping[str, str]) -> Config:
        """Validate a configuration against config() (Kafka's Connector.validate)."""
        return Config(self.config().validate(props))


class SourceConnector(Connector):
    """A connector that imports data from another system into Kafka."""


class SinkConnector(Connector):
    """A connector that exports data from Kafka (``topics`` or ``topics.regex``) to another system."""

    TOPICS_CONFIG = "topics"


class Task(abc.ABC):
    """One unit of work; the runtime runs each on its own thread."""

    def version(self) -> str:
        return __version__

    @abc.abstractmethod
    def start(self, props: dict[str, str]) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...


class SourceTask(Task):
    """Produces records: poll() is called in a loop by the runtime's WorkerSourceTask."""

    def __init__(self) -> None:
        self.context: SourceTaskContext | None = None

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """New records, or None/[] when there are none yet (may block briefly; stop() wakes it)."""

    def commit(self) -> None:
        """The runtime committed the offsets of everything polled so far."""

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        """One record was written (metadata None when a transform filtered it out)."""


class SinkTask(Task):
    """Consumes records: put() gets batches, flush()/pre_commit() decide what offsets to commit."""

    def __init__(self) -> None:
        self.context: SinkTaskContext | None = None

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abc.abstractmethod
    def put(self, records: list[SinkRecord]) -> None:
        """Write (or buffer) records; raise RetriableException to get the same batch again."""

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything put so far durable (default: nothing buffered)."""

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offsets safe to commit; by default flush and commit what was consumed.

        Offsets are the NEXT offset to consume, as Kafka commits them.
        """
        self.flush(current_offsets)
        return dict(current_offsets)

    def open(self, partitions: list[TopicPartition]) -> None:
        """Partitions assigned after a rebalance (the task may seek with context.offset)."""

    def close(self, partitions: list[TopicPartition]) -> None:
        """Partitions revoked: release what is held for them (unflushed data may be dropped)."""


__all__ += ["ConfigValue"]
