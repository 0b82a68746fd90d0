"""In-memory stand-ins for the brokers, so the worker, its task loops and the herders run in one
process without a network: topics are lists of records, groups keep committed offsets."""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

from kafkalite.client import ConsumerRecord, RecordMetadata, TopicPartition
from kafkalite.connect.runtime.worker_config import WorkerConfig


class FakeBroker:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.topics: dict[str, list[list[ConsumerRecord]]] = {}
        self.committed: dict[str, dict[TopicPartition, int]] = {}
        self.created: dict[str, tuple[int, int, dict[str, str]]] = {}

    def partitions(self, topic: str, create: int = 1) -> list[list[ConsumerRecord]]:
        with self.lock:
            return self.topics.setdefault(topic, [[] for _ in range(create)])

    def append(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None,
               headers: Any = (), timestamp: int | None = None) -> RecordMetadata:
        with self.lock:
            parts = self.partitions(topic)
            p = partition or 0
            offset = len(parts[p])
            ts = timestamp if timestamp is not None else int(time.time() * 1000)
            parts[p].append(ConsumerRecord(topic, p, offset, ts, 0, key, value, list(headers)))
            self.lock.notify_all()
            return RecordMetadata(topic, p, offset, ts, -1, -1)

    def values(self, topic: str) -> list[bytes | None]:
        with self.lock:
            return [r.value for part in self.topics.get(topic, []) for r in part]

    def records(self, topic: str) -> list[ConsumerRecord]:
        with self.lock:
            return [r for part in self.topics.get(topic, []) for r in part]


class FakeProducer:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.closed = False

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = (), callback: Any = None) -> Future:
        fut: Future = Future()
        fut.set_result(self.broker.append(topic, value, key, partition, headers, timestamp_ms))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        pass

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class FakeConsumer:
    """One member holding every partition of its topics (no other members)."""

    def __init__(self, broker: FakeBroker, group_id: str) -> None:
        self.broker = broker
        self.group_id = group_id
        self.listener: Any = None
        self.topics: list[str] = []
        self._assignment: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self.joined = False
        self.closed = False

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        if self.joined and self.listener is not None:
            self.listener.on_partitions_revoked(list(self._assignment))
        self.topics, self.listener, self.joined = list(topics), listener, False

    @property
    def client(self) -> Any:
        broker = self.broker

        class Metadata:
            @property
            def topics(self) -> dict[str, Any]:
                return dict(broker.topics)

        class Client:
            def metadata(self, topics: Any = None) -> Metadata:
                return Metadata()
        return Client()

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        if not self.joined:
            self.joined = True
            self._assignment = [TopicPartition(t, p) for t in self.topics
                                for p in range(len(self.broker.partitions(t)))]
            committed = self.broker.committed.get(self.group_id, {})
            self.positions = {tp: committed.get(tp, 0) for tp in self._assignment}
            if self.listener is not None:
                self.listener.on_partitions_assigned(list(self._assignment))
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self.broker.lock:
            while True:
                out = []
                for tp in self._assignment:
                    if tp in self._paused:
                        continue
                    part = self.broker.topics[tp.topic][tp.partition]
                    new = part[self.positions[tp]:self.positions[tp] + 100]
                    out.extend(new)
                    self.positions[tp] += len(new)
                remaining = deadline - time.monotonic()
                if out or remaining <= 0:
                    return out
                self.broker.lock.wait(min(remaining, 0.05))

    def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        self.broker.committed.setdefault(self.group_id, {}).update(offsets or dict(self.positions))

    def pause(self, partitions: Any) -> None:
        self._paused.update(partitions)

    def resume(self, partitions: Any) -> None:
        self._paused.difference_update(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def close(self, autocommit: bool = True) -> None:
        self.closed = True


class FakeClients:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.consumers: list[FakeConsumer] = []

    def producer(self, client_id: str, overrides: Any = None) -> FakeProducer:
        return FakeProducer(self.broker)

    def consumer(self, group_id: str, client_id: str, overrides: Any = None) -> FakeConsumer:
        c = FakeConsumer(self.broker, group_id)
        self.consumers.append(c)
        return c

    def ensure_topic(self, topic: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
        self.broker.created[topic] = (partitions, replication_factor, configs)
        self.broker.partitions(topic, partitions)


def worker_config(tmp: Any, **extra: str) -> WorkerConfig:
    props = {"bootstrap.servers": "127.0.0.1:1", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
             "value.converter": "org.apache.kafka.connect.json.JsonConverter",
             "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
             "offset.storage.file.filename": str(tmp / "connect.offsets"), "offset.flush.interval.ms": "100",
             "listeners": "http://127.0.0.1:0"}
    props.update(extra)
    return WorkerConfig.parse(props, distributed=False)
