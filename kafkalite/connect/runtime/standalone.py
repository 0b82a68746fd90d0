"""The standalone herder (Kafka's ``StandaloneHerder``): one worker, configurations in memory
(from the command line and the REST API), source offsets in ``offset.storage.file.filename``.

Every write runs under the herder's lock, so REST requests and a connector's request for new task
configurations are applied one at a time.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from kafkalite.connect.errors import AlreadyExistsException, ConnectException, NotFoundException

from . import status as st
from .connector_config import ConnectorConfig
from .herder import Herder
from .worker import PAUSED, STARTED, ConnectorTaskId

log = logging.getLogger(__name__)


class StandaloneHerder(Herder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a connector asks for new task configs from its own thread, maybe while a REST write
        # holds the lock and waits for it: apply the request on a thread of its own
        self.worker.reconfiguration_listener = lambda name: threading.Thread(
            target=self.request_task_reconfiguration, args=(name,), name=f"reconfigure-{name}", daemon=True).start()

    def start(self) -> None:
        log.info("standalone herder started (worker %s)", self.worker.worker_id)

    def stop(self) -> None:
        with self.lock:
            self.worker.stop()
        log.info("standalone herder stopped")

    # -- writes -----------------------------------------------------------------------------
    def put_connector_config(self, name: str, props: Mapping[str, Any], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        """(created, connector info); AlreadyExists (409) when it exists and ``allow_replace`` is off."""
        config = self.check_config(name, props)
        with self.lock:
            exists = name in self.state.connectors
            if exists and not allow_replace:
                raise AlreadyExistsException(f"Connector {name} already exists")
            if exists:
                self._stop_connector(name)
            self.state.connectors[name] = config
            self.state.targets.setdefault(name, STARTED)
            if not self.worker.start_connector(name, config, self.state.target(name)):
                # Kafka's standalone herder answers the failure (its status says FAILED, with the trace)
                raise ConnectException(f"Failed to start connector: {name}")
            self._update_tasks(name)
            return not exists, self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        with self.lock:
            self._config(name)
            self._stop_connector(name)
            self.state.connectors.pop(name, None)
            self.state.tasks.pop(name, None)
            self.state.targets.pop(name, None)
            self.status_store.delete(name)
            self.status_store.delete_topics(name)

    def _stop_connector(self, name: str) -> None:
        self.worker.stop_tasks(self.worker.task_ids(name))
        self.worker.stop_connector(name)

    def _update_tasks(self, name: str) -> None:
        """Ask the connector for task configs; restart the tasks if they changed."""
        if not self.worker.is_running(name):
            return
        cfg = ConnectorConfig.parse(self.state.connectors[name])
        new = self.worker.connector_task_configs(name, cfg.tasks_max)
        if new == self.state.tasks.get(name) and self.worker.task_ids(name):
            return
        self.worker.stop_tasks(self.worker.task_ids(name))
        self.state.tasks[name] = new
        self._start_tasks(name)

    def _start_tasks(self, name: str) -> None:
        for i, props in enumerate(self.state.tasks.get(name, [])):
            self.worker.start_task(ConnectorTaskId(name, i), self.state.connectors[name], props,
                                   self.state.target(name))

    def request_task_reconfiguration(self, name: str) -> None:
        with self.lock:
            if name in self.state.connectors:
                self._update_tasks(name)

    def pause_connector(self, name: str) -> None:
        self._set_target(name, PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, STARTED)

    def _set_target(self, name: str, target: str) -> None:
        with self.lock:
            self._config(name)
            self.state.targets[name] = target
            self.worker.set_target_state(name, target)

    def restart_connector(self, name: str, include_tasks: bool = False, only_failed: bool = False
                          ) -> dict[str, Any] | None:
        """KIP-745: the plain restart (None: 204) restarts the connector only; otherwise the
        connector and/or tasks chosen by the flags, answering their status as RESTARTING."""
        with self.lock:
            self._config(name)
            connector, tasks = self.restart_plan(name, include_tasks, only_failed)
            answer = self.restarting_status(name, connector, tasks) if (include_tasks or only_failed) else None
            if connector:
                self.worker.stop_connector(name)
                if self.worker.start_connector(name, self.state.connectors[name], self.state.target(name)):
                    if not self.state.tasks.get(name):
                        self._update_tasks(name)
            for t in tasks:
                self._restart_task(name, t)
            return answer

    def put_task_configs(self, name: str, configs: list[dict[str, str]], signature: Any = None) -> None:
        """The distributed workers' internal endpoint; Kafka's standalone herder refuses it."""
        raise ConnectException("Kafka Connect in standalone mode does not support externally setting task "
                               "configurations.")

    def restart_task(self, name: str, task: int) -> None:
        with self.lock:
            self._config(name)
            if task < 0 or task >= len(self.state.tasks.get(name, [])):
                raise NotFoundException(f"Task {name}-{task} not found")
            self._restart_task(name, task)

    def _restart_task(self, name: str, task: int) -> None:
        tid = ConnectorTaskId(name, task)
        self.worker.stop_tasks([tid])
        self.worker.put_status(st.Status(name, task, st.RESTARTING, self.worker.worker_id, 0))
        self.worker.start_task(tid, self.state.connectors[name], self.state.tasks[name][task],
                               self.state.target(name))
