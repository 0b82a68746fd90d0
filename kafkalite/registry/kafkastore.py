"""``_schemas`` on kafkalite, through the project's client (Confluent's "kafkastore").

* :meth:`KafkaStore.start` (blocking, before the reactor runs, so before anything is served):
  creates the topic if missing (1 partition, ``cleanup.policy=compact``, replication
  min(``kafkastore.topic.replication.factor``, live brokers)), refuses a topic that is not
  compacted or has more than one partition (as Confluent does), then reads it from the beginning
  to its end offset and applies every record to the state.
* A reader thread keeps polling from there and hands each batch of records to the reactor
  (``callFromThread``), where the state is changed and writers waiting for an offset are woken.
* :meth:`append` produces with acks=all (in the reactor's thread pool: the client blocks) and
  fires once the reader has applied the last record written, so the state already holds it.
* :meth:`sync` writes a NOOP record and waits for it (a new primary's catch-up);
  :meth:`catch_up` waits for the current end offset without writing (followers).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from twisted.internet import defer, threads

from kafkalite.client import ClientError, Consumer, KafkaClient, Producer, TopicPartition
from kafkalite.client.topic_log import TopicLogError, cleanup_policy, ensure_topic, is_compacted
from kafkalite.errors import ErrorCode

from . import errors
from . import records as rec
from .operations import Records
from .state import RegistryState

log = logging.getLogger(__name__)


class StoreStartError(RuntimeError):
    """The store cannot be used (no broker, wrong topic); str() is the one-line reason."""


class OffsetWaiters:
    """Deferreds waiting until the replay has applied an offset, each bounded by ``timeout``."""

    def __init__(self, clock: Any, timeout: float, topic: str) -> None:
        self.clock = clock
        self.timeout = timeout
        self.topic = topic
        self.position = 0                          # next offset to be applied
        self._waiting: list[tuple[int, defer.Deferred[None]]] = []

    def advance(self, position: int) -> None:
        self.position = max(self.position, position)
        ready = [d for off, d in self._waiting if off < self.position]
        self._waiting = [(off, d) for off, d in self._waiting if off >= self.position and not d.called]
        for d in ready:
            if not d.called:            # a waiter that timed out has already answered
                d.callback(None)

    def wait_for(self, offset: int) -> defer.Deferred[None]:
        """Fires when the record at ``offset`` is applied; 50002 after the timeout."""
        if offset < self.position:
            return defer.succeed(None)
        d: defer.Deferred[None] = defer.Deferred()
        self._waiting.append((offset, d))

        def timed_out(failure: Any) -> Any:
            failure.trap(defer.TimeoutError, defer.CancelledError)
            raise errors.operation_timeout(f"Replay of {self.topic} did not reach offset {offset} within "
                                           f"{self.timeout * 1000:.0f} ms")
        d.addTimeout(self.timeout, self.clock)
        d.addErrback(timed_out)
        return d

    def __len__(self) -> int:
        return len(self._waiting)


class KafkaStore:
    def __init__(self, reactor: Any, state: RegistryState, bootstrap: str, topic: str = "_schemas", *,
                 replication_factor: int = 3, timeout_ms: int = 10000, init_timeout_ms: int = 60000,
                 client_id: str = "kafkalite-schema-registry") -> None:
        self.reactor = reactor
        self.state = state
        self.topic = topic
        self.tp = TopicPartition(topic, 0)
        self.replication_factor = replication_factor
        self.timeout = timeout_ms / 1000.0
        self.init_timeout = init_timeout_ms / 1000.0
        # Two clients: the reader thread's long-polling fetches and the writers' produce/list-offsets
        # calls must not share a broker connection (one request/response exchange at a time each).
        self.client = KafkaClient(bootstrap, client_id=client_id, request_timeout_ms=max(timeout_ms, 5000))
        self.read_client = KafkaClient(bootstrap, client_id=f"{client_id}-reader",
                                       request_timeout_ms=max(timeout_ms, 5000))
        self.waiters = OffsetWaiters(reactor, self.timeout, topic)
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None

    # -- start-up (blocking; before the reactor runs) --------------------------------------------
    def start(self) -> None:
        deadline = time.monotonic() + self.init_timeout
        self._ensure_topic(deadline)
        consumer = Consumer(client=self.read_client, auto_offset_reset="earliest", enable_auto_commit=False,
                            fetch_max_wait_ms=200)
        consumer.assign([self.tp])
        consumer.seek_to_beginning([self.tp])
        end = consumer.end_offsets([self.tp])[self.tp]
        while consumer.position(self.tp) < end:
            if time.monotonic() > deadline:
                raise StoreStartError(f"reading {self.topic} to its end offset {end} took longer than "
                                      f"kafkastore.init.timeout.ms")
            for r in consumer.poll(timeout_ms=500):
                self.state.apply_raw(r.key, r.value, r.offset)
        self.waiters.advance(consumer.position(self.tp))
        log.info("replayed %s up to offset %d: %d subjects, max id %d", self.topic, self.position,
                 len(self.state.subjects), self.state.max_id)
        self._consumer = consumer
        self._producer = Producer(client=self.client, acks="all", linger_ms=0, allow_auto_create_topics=False,
                                  delivery_timeout_ms=int(self.timeout * 1000), request_timeout_ms=int(self.timeout * 1000))

    def _ensure_topic(self, deadline: float) -> None:
        try:
            partitions = ensure_topic(self.client, self.topic, 1, max(1, self.replication_factor),
                                      {"cleanup.policy": "compact"}, deadline)
        except TopicLogError as exc:
            raise StoreStartError(str(exc)) from None
        if partitions > 1:
            raise StoreStartError(f"topic {self.topic} has {partitions} partitions; "
                                  "the schema registry's store must have exactly 1")
        policy = cleanup_policy(self.client, self.topic)
        if not is_compacted(policy):
            raise StoreStartError(f"the retention policy of the schema topic {self.topic} is incorrect: "
                                  f"cleanup.policy={policy!r}, expected compact")

    # -- the reader thread --------------------------------------------------------------------
    def start_reader(self) -> None:
        """Keep replaying on a thread; call once the reactor is about to run."""
        self._reader = threading.Thread(target=self._read_loop, name="kafkastore-reader", daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            try:
                batch = self._consumer.poll(timeout_ms=500)
                position = self._consumer.position(self.tp)
            except ClientError as exc:
                log.warning("reading %s: %s", self.topic, exc)
                self._stop.wait(0.5)
                continue
            if batch or position != self.position:
                items = [(r.key, r.value, r.offset) for r in batch]
                self.reactor.callFromThread(self._applied, items, position)

    def _applied(self, items: list[tuple[bytes | None, bytes | None, int]], position: int) -> None:
        """On the reactor: apply a batch, then wake writers whose offsets are now applied."""
        for key, value, offset in items:
            self.state.apply_raw(key, value, offset)
        self.waiters.advance(position)

    @property
    def position(self) -> int:
        """The next offset the replay will apply."""
        return self.waiters.position

    def wait_for(self, offset: int) -> defer.Deferred[None]:
        return self.waiters.wait_for(offset)

    # -- writes -------------------------------------------------------------------------------
    def _produce(self, records: Records) -> int:
        """Blocking (thread pool): write ``records`` in order, acks=all; the last offset."""
        assert self._producer is not None
        futures = []
        for r in records:
            key, value = r.encode()
            futures.append(self._producer.send(self.topic, value, key, partition=0))
        self._producer.flush(self.timeout)
        return max(f.result(timeout=self.timeout).offset for f in futures)

    async def _append(self, records: Records) -> None:
        try:
            # blocking client call: in the reactor's thread pool, never on the reactor thread
            last = await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._produce, records)
        except errors.RegistryError:
            raise
        except Exception as exc:  # noqa: BLE001 - any client failure is a store error
            if isinstance(exc, ClientError) and exc.code == ErrorCode.MESSAGE_TOO_LARGE:
                raise errors.schema_too_large("Write failed because schema is too large") from None
            raise errors.store_error(f"Error while writing to the Kafka store {self.topic}: {exc}") from None
        await self.wait_for(last)

    def append(self, records: Records) -> defer.Deferred[None]:
        return defer.Deferred.fromCoroutine(self._append(records))

    def sync(self) -> defer.Deferred[None]:
        return self.append([rec.Record(rec.Key(rec.NOOP), None)])

    def _end_offset(self) -> int:
        return self.client.list_offsets({self.tp: -1})[self.tp][0]

    async def _catch_up(self) -> None:
        # blocking client call: in the reactor's thread pool
        end = await threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._end_offset)
        if end > 0:
            await self.wait_for(end - 1)

    def catch_up(self) -> defer.Deferred[None]:
        return defer.Deferred.fromCoroutine(self._catch_up())

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(2)
        if self._producer is not None:
            self._producer.close(2)
        self.client.close()
        self.read_client.close()
