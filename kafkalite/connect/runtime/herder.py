"""What every herder answers (Kafka's ``Herder`` and ``AbstractHerder``): the REST API's
operations over the connector configurations, task configurations, target states and statuses.

The standalone herder keeps :class:`ClusterConfigState` in memory; the distributed herder
rebuilds it from the config topic. Both share the read side and validation here; writes are
theirs. Errors are typed (:class:`NotFoundException`, :class:`AlreadyExistsException`,
:class:`BadRequestException`, :class:`RebalanceNeededException`, :class:`NotLeaderException`) and
the REST layer maps each to Connect's status code.
"""
from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from kafkalite.connect.errors import (AlreadyExistsException, ConfigException, ConnectException,
                                      NotFoundException)

from . import status as st
from .connector_config import CONNECTOR_CLASS, NAME, ConnectorConfig, connector_config_def, validate_name, \
    validate_sink_topics
from .status import MemoryStatusStore
from .worker import STARTED, ConnectorTaskId, Worker, load_class

log = logging.getLogger(__name__)

__all__ = ["AlreadyExistsException", "BadRequestException", "ClusterConfigState", "Herder", "NotFoundException",
           "NotLeaderException", "RebalanceNeededException"]


class BadRequestException(ConnectException):
    """400: an invalid request (a bad configuration, a name mismatch)."""


class RebalanceNeededException(ConnectException):
    """409: the group is rebalancing; the request may be retried."""


class NotLeaderException(ConnectException):
    """The request must be served by the leader (``leader_url``; None while unknown)."""

    def __init__(self, message: str, leader_url: str | None) -> None:
        super().__init__(message)
        self.leader_url = leader_url


@dataclass
class ClusterConfigState:
    """Connector configs, task configs and target states (Kafka's ClusterConfigState);
    ``offset`` is the config topic position they reflect (-1 standalone)."""
    offset: int = -1
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)

    def task_ids(self, connector: str) -> list[ConnectorTaskId]:
        return [ConnectorTaskId(connector, i) for i in range(len(self.tasks.get(connector, [])))]

    def all_task_ids(self) -> list[ConnectorTaskId]:
        return [t for c in sorted(self.connectors) for t in self.task_ids(c)]

    def target(self, connector: str) -> str:
        return self.targets.get(connector, STARTED)

    def snapshot(self) -> "ClusterConfigState":
        return copy.deepcopy(self)


class Herder:
    """The shared read side and validation; subclasses implement the writes."""

    def __init__(self, worker: Worker, status_store: MemoryStatusStore, kafka_cluster_id: str) -> None:
        self.worker = worker
        self.status_store = status_store
        self.kafka_cluster_id = kafka_cluster_id
        self.lock = threading.RLock()
        self.state = ClusterConfigState()
        self._types: dict[str, str] = {}

    # -- reads ------------------------------------------------------------------------------
    def connectors(self) -> list[str]:
        with self.lock:
            return sorted(self.state.connectors)

    def _config(self, name: str) -> dict[str, str]:
        with self.lock:
            cfg = self.state.connectors.get(name)
            if cfg is None:
                raise NotFoundException(f"Connector {name} not found")
            return dict(cfg)

    def connector_config(self, name: str) -> dict[str, str]:
        return self._config(name)

    def connector_type(self, props: Mapping[str, str]) -> str:
        """"source", "sink" or "unknown" (a class that cannot be loaded)."""
        cls_name = props.get(CONNECTOR_CLASS, "")
        if cls_name not in self._types:
            from kafkalite.connect.plugins import plugin_type_of
            try:
                self._types[cls_name] = plugin_type_of(load_class(cls_name)).value
            except Exception:  # noqa: BLE001 - an unknown class is Kafka's "unknown" type
                return "unknown"
        return self._types[cls_name]

    def connector_info(self, name: str) -> dict[str, Any]:
        cfg = self._config(name)
        with self.lock:
            tasks = [{"connector": name, "task": t.task} for t in self.state.task_ids(name)]
        return {"name": name, "config": cfg, "tasks": tasks, "type": self.connector_type(cfg)}

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._config(name)
        with self.lock:
            return [{"id": {"connector": name, "task": i}, "config": dict(c)}
                    for i, c in enumerate(self.state.tasks.get(name, []))]

    def connector_status(self, name: str) -> dict[str, Any]:
        """Kafka's ``AbstractHerder.connectorStatus``: the status topic's word, so a connector
        that no worker has reported on yet (just created, or its worker not yet assigned) is a
        404 "No status found", as it is for a name nobody knows."""
        status = self.status_store.get(name)
        if status is None:
            raise NotFoundException(f"No status found for connector {name}")
        with self.lock:
            cfg = self.state.connectors.get(name)
            count = len(self.state.tasks.get(name, []))
        tasks = []
        for s in self.status_store.tasks(name):
            if s.task is not None and s.task < count:
                tasks.append({"id": s.task, **s.rest()})
        tasks.sort(key=lambda t: t["id"])
        return {"name": name, "connector": status.rest(), "tasks": tasks,
                "type": self.connector_type(cfg) if cfg is not None else "unknown"}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        """Kafka's ``AbstractHerder.taskStatus``: 404 "No status found for task <name>-<id>"
        when the status topic has nothing for it (whether or not the connector exists)."""
        s = self.status_store.get_task(name, task)
        if s is None:
            raise NotFoundException(f"No status found for task {name}-{task}")
        return {"id": task, **s.rest()}

    def active_topics(self, name: str) -> dict[str, Any]:
        self._config(name)
        return {name: {"topics": self.status_store.topics(name)}}

    def reset_active_topics(self, name: str) -> None:
        self._config(name)
        self.status_store.delete_topics(name)

    def server_info(self) -> dict[str, Any]:
        from kafkalite.connect import __version__
        return {"version": str(__version__), "commit": "kafkalite", "kafka_cluster_id": self.kafka_cluster_id}

    # -- validation -------------------------------------------------------------------------
    def validate(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Kafka's ``validateConnectorConfig``: the common keys and the connector's own, as the
        config/validate answer (ConfigInfos JSON)."""
        from kafkalite.connect.config import ConfigValue, config_infos
        cls_name = str(props.get(CONNECTOR_CLASS) or "")
        if not cls_name:
            raise BadRequestException("Connector config " + str(dict(props)) + " contains no connector type")
        try:
            connector = self.worker.new_connector(cls_name)
        except Exception as exc:  # noqa: BLE001 - an unknown plugin is a bad request
            raise BadRequestException(f"Failed to find any class that implements Connector and which name matches "
                                      f"{cls_name}: {exc}") from None
        sink = self.worker.is_sink(connector)
        from kafkalite.connect.transforms.chain import enrich
        common = enrich(connector_config_def(sink), props)      # + each transform's and predicate's keys
        values = common.validate(props)
        by_name = {v.name: v for v in values}
        try:
            parsed = ConnectorConfig.parse(props)
            if sink:
                validate_sink_topics(parsed)
        except ConfigException as exc:
            target = getattr(exc, "config_name", None) or ("topics" if sink else CONNECTOR_CLASS)
            value = by_name.setdefault(target, ConfigValue(target, props.get(target)))
            if not value.error_messages:             # the ConfigDef may have said it already
                value.add_error_message(str(exc))
        for name, message in self._override_errors(props):
            by_name.setdefault(name, ConfigValue(name, props.get(name))).add_error_message(message)
        own = connector.config()
        result = connector.validate({k: v for k, v in props.items()})
        keys = dict(common.config_keys)
        keys.update(own.config_keys)
        groups = common.groups() + [g for g in own.groups() if g not in common.groups()]
        own_values = list(result.config_values)
        return config_infos(_plugin_name(cls_name, connector), keys,
                            list(by_name.values()) + own_values, groups)

    def _override_errors(self, props: Mapping[str, Any]) -> list[tuple[str, str]]:
        """KIP-458: ``producer.override.*`` / ``consumer.override.*`` / ``admin.override.*`` as the
        worker's ``connector.client.config.override.policy`` (None, Principal, All) allows."""
        policy = self.worker.config.props.get("connector.client.config.override.policy", "None")
        out = []
        for key in sorted(props):
            kind, _, rest = key.partition(".override.")
            if kind not in ("producer", "consumer", "admin") or not rest:
                continue
            if policy == "All" or (policy == "Principal" and rest in _PRINCIPAL_KEYS):
                continue
            out.append((key, f"The '{policy}' policy does not allow '{rest}' to be overridden in the connector "
                             "configuration."))
        return out

    def check_config(self, name: str, props: Mapping[str, str]) -> dict[str, str]:
        """Refuse an invalid configuration with Kafka's 400 message; the config with ``name``."""
        validate_name(name)
        config = {str(k): str(v) for k, v in props.items()}
        if config.get(NAME, name) != name:
            raise BadRequestException(f"Connector name configuration ({config[NAME]}) doesn't match connector "
                                      f"name in the URL ({name})")
        config[NAME] = name
        infos = self.validate(config)
        if infos["error_count"]:
            messages = [e for c in infos["configs"] if c["value"]
                        for e in c["value"]["errors"]]
            raise BadRequestException(
                f"Connector configuration is invalid and contains the following {infos['error_count']} error(s):\n"
                + "\n".join(messages) + "\nYou can also find the above list of errors at the endpoint "
                f"`/connector-plugins/{{connectorType}}/config/validate`")
        return config

    # -- restarts (KIP-745) -----------------------------------------------------------------
    def restart_plan(self, name: str, include_tasks: bool, only_failed: bool) -> tuple[bool, list[int]]:
        """(restart the connector?, task ids to restart)."""
        status = self.status_store.get(name)
        restart_connector = not only_failed or (status is not None and status.state == st.FAILED)
        tasks: list[int] = []
        if include_tasks:
            with self.lock:
                count = len(self.state.tasks.get(name, []))
            for t in range(count):
                ts = self.status_store.get_task(name, t)
                if not only_failed or (ts is not None and ts.state == st.FAILED):
                    tasks.append(t)
        return restart_connector, tasks

    def restarting_status(self, name: str, connector: bool, tasks: list[int]) -> dict[str, Any]:
        """KIP-745's answer; without a status there is no restart plan (Kafka's 404)."""
        if self.status_store.get(name) is None:
            raise NotFoundException(f"Status for connector {name} not found")
        out = self.connector_status(name)
        if connector:
            out["connector"] = {"state": st.RESTARTING, "worker_id": out["connector"].get("worker_id")}
        for t in out["tasks"]:
            if t["id"] in tasks:
                t["state"] = st.RESTARTING
                t.pop("trace", None)
        return out


_PRINCIPAL_KEYS = ("sasl.jaas.config", "sasl.mechanism", "security.protocol")


def _plugin_name(cls_name: str, connector: Any) -> str:
    """The name a config/validate answer reports: the connector class as configured (Kafka's
    ConfigInfos name is the connector's class name)."""
    cls = type(connector)
    from kafkalite.connect.plugins import BUILTIN
    for java, (target, _) in BUILTIN.items():
        if target == f"{cls.__module__}:{cls.__qualname__}":
            return java
    return f"{cls.__module__}.{cls.__qualname__}"
