"""Connector and task states (Kafka's ``AbstractStatus.State``) and where they are recorded.

States: UNASSIGNED (not running anywhere: before start and after a worker stops it), RUNNING,
PAUSED, FAILED (with the failure's trace), RESTARTING (KIP-745, while a restart request is under
way) and DESTROYED (the connector was deleted; Kafka writes a tombstone). A status record says
which worker holds the connector or task and in which generation of the group, so a stale worker's
late write is ignored (:meth:`MemoryStatusStore.put` keeps the newer generation).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, DESTROYED = (
    "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "DESTROYED")
STATES = (UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING, DESTROYED)


@dataclass(frozen=True)
class Status:
    """One connector's (``task`` None) or task's state."""
    connector: str
    task: int | None
    state: str
    worker_id: str
    generation: int
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The status topic's value (Kafka's KafkaStatusBackingStore schema)."""
        return {"state": self.state, "trace": self.trace, "worker_id": self.worker_id, "generation": self.generation}

    def rest(self) -> dict[str, Any]:
        """The REST API's form: state, worker_id and the trace only when there is one."""
        out: dict[str, Any] = {"state": self.state, "worker_id": self.worker_id}
        if self.trace:
            out["trace"] = self.trace
        return out


def status_key(connector: str, task: int | None) -> str:
    return f"status-connector-{connector}" if task is None else f"status-task-{connector}-{task}"


class MemoryStatusStore:
    """Latest status per connector and task; the Kafka store writes through to the status topic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[tuple[str, int], Status] = {}
        self._topics: dict[str, dict[str, dict[str, Any]]] = {}     # connector -> topic -> record
        self.listeners: list[Callable[[Status], None]] = []

    def put(self, status: Status) -> None:
        self._apply(status)
        self._write(status)

    def _apply(self, status: Status | None, key: tuple[str, int | None] | None = None) -> None:
        with self._lock:
            if status is None:
                assert key is not None
                if key[1] is None:
                    self._connectors.pop(key[0], None)
                else:
                    self._tasks.pop((key[0], key[1]), None)
                return
            if status.task is None:
                self._connectors[status.connector] = status
            else:
                self._tasks[(status.connector, status.task)] = status
        for listener in self.listeners:
            listener(status)

    def _write(self, status: Status) -> None:
        pass

    def delete(self, connector: str) -> None:
        """The connector is gone: forget it and its tasks (tombstones in the Kafka store)."""
        with self._lock:
            tasks = [t for (c, t) in self._tasks if c == connector]
            self._connectors.pop(connector, None)
            for t in tasks:
                self._tasks.pop((connector, t), None)
        self._delete(connector, tasks)

    def _delete(self, connector: str, tasks: list[int]) -> None:
        pass

    def get(self, connector: str) -> Status | None:
        with self._lock:
            return self._connectors.get(connector)

    def get_task(self, connector: str, task: int) -> Status | None:
        with self._lock:
            return self._tasks.get((connector, task))

    def tasks(self, connector: str) -> list[Status]:
        with self._lock:
            return sorted((s for (c, _), s in self._tasks.items() if c == connector), key=lambda s: s.task or 0)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    # -- active topics (KIP-558) --------------------------------------------------------------
    def put_topic(self, connector: str, topic: str, task: int, now_ms: int) -> None:
        """A task used ``topic`` (first use only is recorded)."""
        with self._lock:
            if topic in self._topics.get(connector, {}):
                return
            value = {"name": topic, "connector": connector, "task": task, "discoverTimestamp": now_ms}
            self._topics.setdefault(connector, {})[topic] = value
        self._write_topic(connector, topic, value)

    def _apply_topic(self, connector: str, topic: str, value: dict[str, Any] | None) -> None:
        with self._lock:
            if value is None:
                self._topics.get(connector, {}).pop(topic, None)
            else:
                self._topics.setdefault(connector, {})[topic] = value

    def _write_topic(self, connector: str, topic: str, value: dict[str, Any] | None) -> None:
        pass

    def topics(self, connector: str) -> list[str]:
        with self._lock:
            return sorted(self._topics.get(connector, {}))

    def delete_topics(self, connector: str) -> None:
        with self._lock:
            topics = list(self._topics.pop(connector, {}))
        for topic in topics:
            self._write_topic(connector, topic, None)

    def flush(self) -> None:
        pass
