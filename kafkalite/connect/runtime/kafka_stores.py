"""A distributed worker's three compacted topics, with Kafka's keys and JSON values
(``KafkaConfigBackingStore``, ``KafkaOffsetBackingStore``, ``KafkaStatusBackingStore``), so a
restarted or added worker rebuilds everything from them (and Kafka's workers could share them).

Config topic (one partition; keys are strings)::

    connector-<name>         {"properties": {...}}          (null: deleted)
    task-<name>-<n>          {"properties": {...}}          (applied only once committed)
    commit-<name>            {"tasks": <count>}             (the task configs written before it)
    target-state-<name>      {"state": "STARTED" | "PAUSED"}
    restart-connector-<name> {"include-tasks": bool, "only-failed": bool}   (KIP-745)
    session-key              {"key": <base64>, "algorithm": "HmacSHA256", "creation-timestamp": <ms>}  (KIP-507)

Offsets topic (``offset.storage.partitions``): key ``["<connector>", {partition}]``, value the
offset map (null: reset). Status topic (``status.storage.partitions``)::

    status-connector-<name>, status-task-<name>-<n>   {"state", "trace", "worker_id", "generation"}
    status-topic-<topic>:connector-<name>             {"topic": {"name", "connector", "task", "discoverTimestamp"}}

A DESTROYED status is written as a tombstone, as Kafka does.
"""
from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, Callable, Mapping

from . import status as st
from .herder import ClusterConfigState
from .kafka_log import KafkaBasedLog
from .offsets import MemoryOffsetStore
from .signing import SESSION_KEY_KEY, SessionKey
from .status import MemoryStatusStore, Status
from .worker_config import WorkerConfig

log = logging.getLogger(__name__)

_TASK_KEY = re.compile(r"^task-(.+)-(\d+)$")
_STATUS_TASK = re.compile(r"^status-task-(.+)-(\d+)$")
_STATUS_TOPIC = re.compile(r"^status-topic-(.+):connector-(.+)$")


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return _BAD


_BAD = object()


class KafkaConfigStore:
    """The config topic replayed into a :class:`ClusterConfigState`; ``on_update`` is told what
    changed (connector names whose config, tasks or target state changed; restart requests)."""

    def __init__(self, config: WorkerConfig, on_update: Callable[["ConfigUpdate"], None]) -> None:
        self.state = ClusterConfigState()
        self._pending_tasks: dict[str, dict[int, dict[str, str]]] = {}
        #: the latest session key read (KIP-507), None before the leader has written one
        self.session_key: SessionKey | None = None
        self.lock = threading.RLock()
        self.on_update = on_update
        self.log = KafkaBasedLog(config, config.config_topic, 1, config.config_replication_factor, self._apply,
                                 "config.storage.topic")

    def start(self) -> None:
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def snapshot(self) -> ClusterConfigState:
        with self.lock:
            return self.state.snapshot()

    # -- replay -----------------------------------------------------------------------------
    def _apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        name = (key or b"").decode("utf-8", "replace")
        data = _load(value)
        update = ConfigUpdate()
        with self.lock:
            self.state.offset = offset + 1
            if data is _BAD:
                log.error("unreadable record %s in the config topic at offset %d", name, offset)
                return
            if name.startswith("connector-"):
                connector = name[len("connector-"):]
                if data is None:
                    self.state.connectors.pop(connector, None)
                    self.state.tasks.pop(connector, None)
                    self.state.targets.pop(connector, None)
                    self._pending_tasks.pop(connector, None)
                    update.removed.add(connector)
                else:
                    self.state.connectors[connector] = {str(k): str(v) for k, v in
                                                        (data.get("properties") or {}).items()}
                    update.configs.add(connector)
            elif name.startswith("task-"):
                m = _TASK_KEY.match(name)
                if m and data is not None:
                    self._pending_tasks.setdefault(m.group(1), {})[int(m.group(2))] = {
                        str(k): str(v) for k, v in (data.get("properties") or {}).items()}
            elif name.startswith("commit-"):
                connector = name[len("commit-"):]
                count = int((data or {}).get("tasks", 0))
                pending = self._pending_tasks.pop(connector, {})
                if all(i in pending for i in range(count)):
                    self.state.tasks[connector] = [pending[i] for i in range(count)]
                    update.tasks.add(connector)
                else:
                    log.error("commit of %d task configs for %s without all of them; ignored", count, connector)
            elif name.startswith("target-state-"):
                connector = name[len("target-state-"):]
                state = (data or {}).get("state", "STARTED")
                if data is None:
                    self.state.targets.pop(connector, None)
                else:
                    self.state.targets[connector] = state
                update.targets.add(connector)
            elif name == SESSION_KEY_KEY:
                if data is None:
                    log.error("Ignoring session key because it is unexpectedly null")
                else:
                    session_key = SessionKey.from_json(data)
                    if session_key is not None:
                        self.session_key = update.session_key = session_key
            elif name.startswith("restart-connector-") and data is not None:
                update.restarts.append((name[len("restart-connector-"):], bool(data.get("include-tasks")),
                                        bool(data.get("only-failed"))))
        if update:
            self.on_update(update)

    # -- writes -----------------------------------------------------------------------------
    def put_connector_config(self, name: str, props: Mapping[str, str]) -> None:
        self.log.send(f"connector-{name}".encode(), _json({"properties": dict(props)}))
        self.log.read_to_end()

    def remove_connector_config(self, name: str) -> None:
        self.log.send(f"connector-{name}".encode(), None)
        self.log.send(f"target-state-{name}".encode(), None)
        self.log.read_to_end()

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        records: list[tuple[bytes | None, bytes | None]] = [
            (f"task-{name}-{i}".encode(), _json({"properties": c})) for i, c in enumerate(configs)]
        records.append((f"commit-{name}".encode(), _json({"tasks": len(configs)})))
        self.log.send_many(records)
        self.log.read_to_end()

    def put_target_state(self, name: str, state: str) -> None:
        self.log.send(f"target-state-{name}".encode(), _json({"state": state}))
        self.log.read_to_end()

    def put_restart_request(self, name: str, include_tasks: bool, only_failed: bool) -> None:
        self.log.send(f"restart-connector-{name}".encode(),
                      _json({"include-tasks": include_tasks, "only-failed": only_failed}))
        self.log.read_to_end()

    def put_session_key(self, key: SessionKey) -> None:
        self.log.send(SESSION_KEY_KEY.encode(), _json(key.to_json()))
        self.log.read_to_end()

    def refresh(self, timeout: float = 30.0) -> None:
        self.log.read_to_end(timeout)


class ConfigUpdate:
    def __init__(self) -> None:
        self.configs: set[str] = set()
        self.removed: set[str] = set()
        self.tasks: set[str] = set()
        self.targets: set[str] = set()
        self.restarts: list[tuple[str, bool, bool]] = []
        self.session_key: SessionKey | None = None

    def __bool__(self) -> bool:
        return bool(self.configs or self.removed or self.tasks or self.targets or self.restarts
                    or self.session_key)


class KafkaOffsetStore(MemoryOffsetStore):
    """Source offsets in the offsets topic, cached in memory (replayed at start)."""

    def __init__(self, config: WorkerConfig) -> None:
        super().__init__()
        self.log = KafkaBasedLog(config, config.offset_topic, config.offset_partitions,
                                 config.offset_replication_factor, self._replay, "offset.storage.topic")

    def _replay(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if key is not None:
            with self._lock:
                self._apply({key: value})

    def start(self) -> None:
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def get(self, keys: list[bytes]) -> dict[bytes, bytes | None]:
        """Read the topic to its end first (as Kafka's store does), so a task taking over from a
        dead worker resumes from that worker's last commit."""
        try:
            self.log.read_to_end()
        except Exception as exc:  # noqa: BLE001 - answer from what was read rather than fail the task
            log.warning("reading the offsets topic to its end: %s", exc)
        return super().get(keys)

    def set(self, values: Mapping[bytes, bytes | None]) -> None:
        self.log.send_many(list(values.items()))
        with self._lock:
            self._apply(values)


class KafkaStatusStore(MemoryStatusStore):
    """Statuses in the status topic. A write from an older generation than the one recorded (a
    worker that has not yet learned it lost the task) is ignored, as Kafka's store does."""

    def __init__(self, config: WorkerConfig) -> None:
        super().__init__()
        self.log = KafkaBasedLog(config, config.status_topic, config.status_partitions,
                                 config.status_replication_factor, self._replay, "status.storage.topic")

    def start(self) -> None:
        self.log.start()

    def stop(self) -> None:
        self.log.stop()

    def put(self, status: Status) -> None:
        if status.state == st.DESTROYED:
            self._write(status)
            return
        current = self.get(status.connector) if status.task is None else self.get_task(status.connector, status.task)
        if current is not None and current.generation > status.generation and current.worker_id != status.worker_id:
            log.debug("ignoring stale status %s (recorded generation %d)", status, current.generation)
            return
        super().put(status)

    def _write(self, status: Status) -> None:
        key = st.status_key(status.connector, status.task).encode()
        value = None if status.state == st.DESTROYED else _json(status.to_json())
        try:
            self.log.send(key, value)
        except Exception as exc:  # noqa: BLE001 - a status write is retried by the next change
            log.warning("writing %s to the status topic failed: %s", key.decode(), exc)

    def _delete(self, connector: str, tasks: list[int]) -> None:
        records: list[tuple[bytes | None, bytes | None]] = [(st.status_key(connector, None).encode(), None)]
        records += [(st.status_key(connector, t).encode(), None) for t in tasks]
        self.log.send_many(records)

    def _write_topic(self, connector: str, topic: str, value: dict[str, Any] | None) -> None:
        key = f"status-topic-{topic}:connector-{connector}".encode()
        self.log.send(key, None if value is None else _json({"topic": value}))

    def _replay(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        name = (key or b"").decode("utf-8", "replace")
        data = _load(value)
        if data is _BAD:
            return
        m = _STATUS_TOPIC.match(name)
        if m:
            self._apply_topic(m.group(2), m.group(1), (data or {}).get("topic") if data else None)
            return
        connector: str
        task: int | None
        if name.startswith("status-connector-"):
            connector, task = name[len("status-connector-"):], None
        else:
            mt = _STATUS_TASK.match(name)
            if not mt:
                return
            connector, task = mt.group(1), int(mt.group(2))
        if data is None:
            self._apply(None, (connector, task))
            return
        status = Status(connector, task, str(data.get("state")), str(data.get("worker_id")),
                        int(data.get("generation", 0)), data.get("trace"))
        current = self.get(connector) if task is None else self.get_task(connector, task)
        if current is not None and current.generation > status.generation and current.worker_id != status.worker_id:
            return
        self._apply(status)
