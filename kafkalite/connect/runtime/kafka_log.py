"""A compacted topic read from the beginning and kept up to date (Kafka's ``KafkaBasedLog``):
the common part of the config, offset and status stores of a distributed worker.

:meth:`KafkaBasedLog.start` creates the topic if missing (``cleanup.policy=compact``, the
configured partitions and replication factor, the latter capped by the live brokers), reads it to
its end (blocking) and then keeps reading on a thread, handing every record to ``apply``.
:meth:`read_to_end` waits until everything written before the call has been applied, which is how
a worker makes sure it sees its own write (or the leader's) before acting on it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kafkalite.client import ClientError, Consumer, KafkaClient, Producer, TopicPartition
from kafkalite.client.topic_log import TopicLogError, cleanup_policy, ensure_topic, is_compacted
from kafkalite.connect.errors import ConnectException

from .worker_config import WorkerConfig

log = logging.getLogger(__name__)

Apply = Callable[[bytes | None, bytes | None, int, int], None]      # key, value, partition, offset


class KafkaBasedLog:
    def __init__(self, config: WorkerConfig, topic: str, partitions: int, replication_factor: int,
                 apply: Apply, name: str) -> None:
        self.config = config
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.apply = apply
        self.name = name
        self._client: KafkaClient | None = None
        self._read_client: KafkaClient | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._tps: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 60.0) -> None:
        security = self.config.client_security("admin.")
        self._client = KafkaClient(self.config.bootstrap_servers, client_id=f"{self.name}-writer", security=security)
        self._read_client = KafkaClient(self.config.bootstrap_servers, client_id=f"{self.name}-reader",
                                        security=self.config.client_security("consumer."))
        self._ensure_topic(time.monotonic() + timeout)
        self._tps = [TopicPartition(self.topic, p) for p in self._client.partitions_for(self.topic)]
        consumer = Consumer(client=self._read_client, auto_offset_reset="earliest", enable_auto_commit=False,
                            fetch_max_wait_ms=200)
        consumer.assign(self._tps)
        consumer.seek_to_beginning(self._tps)
        self._consumer = consumer
        self._producer = Producer(client=self._client, acks="all", linger_ms=0, allow_auto_create_topics=False)
        self._read_once_to_end(time.monotonic() + timeout)
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-reader", daemon=True)
        self._thread.start()

    def _ensure_topic(self, deadline: float) -> None:
        assert self._client is not None
        try:
            ensure_topic(self._client, self.topic, self.partitions, self.replication_factor,
                         {"cleanup.policy": "compact"}, deadline)
        except TopicLogError as exc:
            raise ConnectException(str(exc)) from None
        policy = cleanup_policy(self._client, self.topic)
        if not is_compacted(policy):
            raise ConnectException(f"Topic '{self.topic}' supplied via the '{self.name}' property is required to "
                                   f"have 'cleanup.policy=compact' to guarantee consistency and durability of "
                                   f"connector configurations, but found the topic currently has "
                                   f"'cleanup.policy={policy}'.")

    def _end_offsets(self) -> dict[TopicPartition, int]:
        assert self._client is not None
        return {tp: off for tp, (off, _) in self._client.list_offsets({tp: -1 for tp in self._tps}).items()}

    def _poll_once(self) -> None:
        assert self._consumer is not None
        records = self._consumer.poll(timeout_ms=200)
        for r in records:
            try:
                self.apply(r.key, r.value, r.partition, r.offset)
            except Exception:  # noqa: BLE001 - one bad record must not stop the store
                log.exception("%s: applying record at %d/%d", self.topic, r.partition, r.offset)
        positions = {tp: self._consumer.position(tp) for tp in self._tps}
        with self._cond:
            self._positions = positions
            self._cond.notify_all()

    def _read_once_to_end(self, deadline: float) -> None:
        end = self._end_offsets()
        while any(self._positions.get(tp, -1) < off for tp, off in end.items()):
            if time.monotonic() > deadline:
                raise ConnectException(f"reading {self.topic} to its end timed out")
            self._poll_once()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll_once()
            except ClientError as exc:
                log.warning("reading %s: %s", self.topic, exc)
                self._stop.wait(0.5)

    def read_to_end(self, timeout: float = 30.0) -> None:
        """Wait until every record written before this call has been applied."""
        end = self._end_offsets()
        deadline = time.monotonic() + timeout
        with self._cond:
            while any(self._positions.get(tp, -1) < off for tp, off in end.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConnectException(f"timed out reading {self.topic} to its end")
                self._cond.wait(min(remaining, 0.5))

    def send(self, key: bytes | None, value: bytes | None, partition: int | None = None) -> None:
        """Write one record and wait for its acknowledgement."""
        assert self._producer is not None
        fut = self._producer.send(self.topic, value, key, partition=partition)
        self._producer.flush(30)
        fut.result(timeout=30)

    def send_many(self, records: list[tuple[bytes | None, bytes | None]]) -> None:
        assert self._producer is not None
        futures = [self._producer.send(self.topic, v, k) for k, v in records]
        self._producer.flush(30)
        for f in futures:
            f.result(timeout=30)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._producer is not None:
            try:
                self._producer.close(5)
            except ClientError:
                pass
        for c in (self._client, self._read_client):
            if c is not None:
                c.close()
