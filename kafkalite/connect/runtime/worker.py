"""The Worker: runs connectors and tasks in this process (Kafka's ``Worker`` and
``WorkerConnector``); the herder decides what runs here. Each task runs on its own thread:
:mod:`.source_task` and :mod:`.sink_task` hold the loops, :mod:`.worker_task` what they share.
The worker reaches the brokers through :class:`WorkerClients` (Kafka clients configured from the
worker properties; tests give an in-memory stand-in).
"""
from __future__ import annotations

import inspect
import logging
import threading
import time
from typing import Any, Callable, Mapping, Protocol

from kafkalite.client import Consumer, Producer
from kafkalite.connect.connector import Connector, SinkConnector, SinkTask, SourceConnector, SourceTask
from kafkalite.connect.errors import ConnectException

from . import status as st
from .connector_config import TASK_CLASS, ConnectorConfig
from .errors import DeadLetterQueueReporter, ErrorHandlingConfig
from .metrics import ConnectMetrics
from .offsets import OffsetStorageReader, OffsetStore
from .sink_task import WorkerSinkTask
from .source_task import WorkerSourceTask
from .status import MemoryStatusStore, Status
from .worker_config import WorkerConfig
from .worker_task import PAUSED, STARTED, ConnectorTaskId, Converters, WorkerTask, trace_of

__all__ = ["PAUSED", "STARTED", "ConnectorTaskId", "Converters", "Worker", "WorkerClients", "KafkaWorkerClients",
           "WorkerConnector", "ensure_topic", "load_class"]

log = logging.getLogger(__name__)


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
            self._status(st.FAILED, trace_of(exc))
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
        #: called (on the connector's thread) when a connector asks for new task configs
        self.reconfiguration_listener = on_reconfiguration_request
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
        if self.reconfiguration_listener is not None:
            self.reconfiguration_listener(name)

    def connector_failed(self, name: str, exc: BaseException) -> None:
        wc = self.connectors.get(name)
        if wc is not None:
            wc.failed = True
            wc._status(st.FAILED, trace_of(exc))

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
                self.put_status(Status(name, None, st.FAILED, self.worker_id, self.generation(), trace_of(exc)))
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
                producer = self.clients.producer(f"connector-producer-{task_id}", cfg.client_overrides("producer"))
                worker_task: WorkerTask = WorkerSourceTask(self, task_id, task, task_props, cfg, converters, chain,
                                                           target_state, producer=producer,
                                                           offset_store=self.offset_store)
            elif isinstance(task, SinkTask):
                consumer = self.clients.consumer(f"connect-{task_id.connector}", f"connector-consumer-{task_id}",
                                                 cfg.client_overrides("consumer"))
                worker_task = WorkerSinkTask(self, task_id, task, task_props, cfg, converters, chain, target_state,
                                             consumer=consumer)
                self._add_dlq(worker_task, cfg.errors)
            else:
                raise ConnectException(f"{task_props[TASK_CLASS]} is neither a SourceTask nor a SinkTask")
        except Exception as exc:  # noqa: BLE001 - a task that cannot start is FAILED with the reason
            log.error("failed to start task %s: %s", task_id, exc, exc_info=exc)
            self.put_status(Status(task_id.connector, task_id.task, st.FAILED, self.worker_id, self.generation(),
                                   trace_of(exc)))
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
        task.on_close.append(lambda: producer.close(5))

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

    def producer(self, client_id: str, overrides: Mapping[str, str] | None = None) -> Any: ...

    def consumer(self, group_id: str, client_id: str, overrides: Mapping[str, str] | None = None) -> Any: ...

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None: ...


class KafkaWorkerClients:
    """The worker's clients, configured from the worker properties: the security settings, then
    the ``producer.`` / ``consumer.`` / ``admin.`` prefixed ones (Kafka's names, e.g.
    ``consumer.max.poll.records``). Producers send with acks=all and retry until delivered, as
    Kafka's worker configures them; consumers start at the earliest offset and never auto-commit."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config

    def producer(self, client_id: str, overrides: Mapping[str, str] | None = None) -> Producer:
        """``overrides``: the connector's ``producer.override.*`` settings (KIP-458)."""
        props = {"acks": "all", "linger.ms": "0", "delivery.timeout.ms": "2147483647", "client.id": client_id}
        props.update(self.config.client_props("producer."))
        props.update(overrides or {})
        kwargs = _kwargs_for(Producer.__init__, props)
        return Producer(self.config.bootstrap_servers, security=_security(props), **kwargs)

    def consumer(self, group_id: str, client_id: str, overrides: Mapping[str, str] | None = None) -> Consumer:
        """``overrides``: the connector's ``consumer.override.*`` settings (KIP-458)."""
        props = {"auto.offset.reset": "earliest", "client.id": client_id}
        props.update(self.config.client_props("consumer."))
        props.update(overrides or {})
        kwargs = _kwargs_for(Consumer.__init__, props)
        kwargs["enable_auto_commit"] = False
        kwargs.pop("group_id", None)
        return Consumer(self.config.bootstrap_servers, group_id=group_id, security=_security(props), **kwargs)

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        ensure_topic(self.config, topic, partitions, replication_factor, configs)


def _security(props: Mapping[str, str]) -> Any:
    from kafkalite.client import ClientError
    from kafkalite.client.security import ClientSecurity
    try:
        return ClientSecurity.from_properties(props)
    except ClientError as exc:
        raise ConnectException(str(exc)) from None


def ensure_topic(config: WorkerConfig, topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, str], timeout: float = 30.0) -> None:
    """Create ``topic`` unless it exists (e.g. a dead-letter topic) and wait until it is led; the
    replication factor is capped by the live brokers (a one-broker development cluster with Kafka's
    default of 3 still works) with a warning."""
    from kafkalite.client import KafkaClient
    from kafkalite.client.topic_log import TopicLogError
    from kafkalite.client.topic_log import ensure_topic as ensure_led_topic
    with KafkaClient(config.bootstrap_servers, security=config.client_security("admin.")) as client:
        try:
            ensure_led_topic(client, topic, partitions, replication_factor, configs, time.monotonic() + timeout)
        except TopicLogError as exc:
            raise ConnectException(f"Unable to create topic {topic}: {exc}") from None
