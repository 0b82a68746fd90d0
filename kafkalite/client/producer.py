"""Producer: records accumulate per partition into batches, a sender thread ships them.

As in Java's KafkaProducer: ``send`` appends to the partition's open batch and returns a
future; a batch is ready when it reaches ``batch_size`` bytes or has waited ``linger_ms``
(or on ``flush``). The sender drains ready batches, one Produce request per leader broker with
every ready partition of that broker, and one request in flight per broker (so per-partition
order holds, also across retries). Retriable errors (leader moved, not enough replicas, ...)
put the batch back at the head of its partition queue, unchanged: with idempotence it keeps
its producer id, epoch and sequence, so the broker detects a duplicate.

Transactions (KIP-98, as Java's TransactionManager): with ``transactional_id`` the producer is
idempotent with acks=all; :meth:`init_transactions` finds the transaction coordinator
(FindCoordinator key type 1) and gets the id's producer id and epoch (fencing older producers of
the id); between :meth:`begin_transaction` and :meth:`commit_transaction` /
:meth:`abort_transaction` every batch is transactional, and the sender adds each partition to
the transaction (AddPartitionsToTxn) before its first batch goes out.
:meth:`send_offsets_to_transaction` adds a consumer group's offsets (AddOffsetsToTxn, then
TxnOffsetCommit to the group coordinator, with the consumer's generation and member from v3).
A failed send makes the transaction abortable only; a fenced producer (PRODUCER_FENCED /
INVALID_PRODUCER_EPOCH) is fatal: every later transactional call raises.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import ProduceRequest
from kafkalite.records import BatchBuilder
from kafkalite.records.compression import Codec, codec_by_name

from .cluster import ConsumerGroupMetadata, TopicPartition
from .core import KafkaClient
from .errors import ClientError
from .partitioner import StickyPartitioner, partition_for_key
from .security import ClientSecurity

log = logging.getLogger(__name__)


_TXN_RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                     ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int             # -1 with acks=0
    timestamp: int          # CreateTime given/assigned, or the broker's LogAppendTime
    serialized_key_size: int
    serialized_value_size: int


@dataclass
class _Batch:
    tp: TopicPartition
    builder: BatchBuilder
    created: float
    futures: list[tuple[Future, int, int, int]] = field(default_factory=list)   # (future, ts, klen, vlen)
    data: bytes | bytearray | None = None
    attempts: int = 0
    retry_at: float = 0.0           # backing off until then after a retriable failure
    reserved: int = 0               # bytes counted against buffer.memory

    @property
    def count(self) -> int:
        return len(self.futures)


def _acks(value: Any) -> int:
    text = str(value).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ClientError(f"invalid acks {value!r} (expected all, -1, 0 or 1)")


class Producer:
    """Kafka-style producer; options take Java's names in snake case (``linger_ms``, ``batch_size``...)."""

    def __init__(self, bootstrap_servers: str | list[str] | None = None, *, client: KafkaClient | None = None,
                 acks: Any = None, linger_ms: int = 0, batch_size: int = 16384, compression_type: str = "none",
                 enable_idempotence: bool = False, max_request_size: int = 1048576,
                 request_timeout_ms: int = 30000, delivery_timeout_ms: int = 120000, retry_backoff_ms: int = 100,
                 buffer_memory: int = 33554432, allow_auto_create_topics: bool = True,
                 client_id: str = "kafkalite-producer", metadata_max_age_ms: int = 300000,
                 transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 security: ClientSecurity | None = None) -> None:
        """``acks`` defaults to 1, or all when idempotent or transactional (Java's rule); ``security``
        (TLS, SASL) is used when the producer makes its own KafkaClient."""
        if transactional_id is not None:
            if not transactional_id:
                raise ClientError("transactional.id must not be empty")
            enable_idempotence = True
        self.acks = _acks(acks if acks is not None else ("all" if enable_idempotence else 1))
        if enable_idempotence and self.acks != -1:
            raise ClientError("enable.idempotence requires acks=all" if transactional_id is None
                              else "a transactional producer requires acks=all")
        try:
            self.codec = Codec.NONE if compression_type in (None, "", "none") else codec_by_name(compression_type)
        except (ValueError, KeyError):
            raise ClientError(f"unknown compression type {compression_type!r} "
                              "(none, gzip, snappy, lz4, zstd)") from None
        self.linger = max(0, linger_ms) / 1000.0
        self.batch_size = max(1, batch_size)
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout = delivery_timeout_ms / 1000.0
        self.retry_backoff = retry_backoff_ms / 1000.0
        self.buffer_memory = buffer_memory
        self.allow_auto_create = allow_auto_create_topics
        self.metadata_max_age = metadata_max_age_ms / 1000.0
        self._own_client = client is None
        self.client = client or KafkaClient(bootstrap_servers, client_id=client_id,
                                            request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                                            security=security)
        self.idempotent = enable_idempotence
        self.producer_id, self.producer_epoch = -1, -1
        self._sequences: dict[TopicPartition, int] = {}
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._txn_state = "uninitialized"         # ready, in_transaction, abortable, fatal
        self._txn_error: ClientError | None = None
        self._txn_partitions: set[TopicPartition] = set()
        self._txn_started = False                  # partitions or offsets added to the transaction
        if enable_idempotence and transactional_id is None:
            self._init_producer_id()
        self._partitions: dict[str, tuple[float, int, list[int]]] = {}   # topic -> (fetched, count, available)
        self._sticky = StickyPartitioner()
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._cond = threading.Condition()
        self._buffered = 0
        self._in_flight = 0
        self._flushing = 0
        self._closed = False
        self._busy_nodes: set[int] = set()
        self._sender = threading.Thread(target=self._run, name="kafkalite-producer-sender", daemon=True)
        self._sender.start()

    # -- idempotence ------------------------------------------------------------------------
    def _init_producer_id(self) -> None:
        def attempt() -> dict:
            resp = self.client.send(None, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                                                     "producer_id": -1, "producer_epoch": -1})
            if resp["error_code"]:
                raise ClientError.from_code(resp["error_code"], "InitProducerId")
            return resp
        resp = self.client._with_retries(attempt, "InitProducerId")
        self.producer_id, self.producer_epoch = resp["producer_id"], resp["producer_epoch"]

    # -- transactions -----------------------------------------------------------------------
    def _txn_call(self, api_key: ApiKey, body: dict[str, Any], error_of: Callable[[dict], int], what: str) -> dict:
        """A request to the transaction coordinator, retried on coordinator moves and
        CONCURRENT_TRANSACTIONS; a fencing error makes the producer fatal."""
        assert self.transactional_id is not None
        try:
            resp = self.client.send_to_coordinator(self.transactional_id, api_key, body, error_of, what, key_type=1,
                                                   retriable=_TXN_RETRIABLE)
        except ClientError as exc:
            if exc.code in _FENCED:
                self._txn_state = "fatal"
                self._txn_error = exc
            raise
        err = error_of(resp)
        if err:
            failure = ClientError.from_code(err, what)
            if err in _FENCED:
                self._txn_state = "fatal"
                self._txn_error = failure
            raise failure
        return resp

    def _require(self, *states: str) -> None:
        if self.transactional_id is None:
            raise ClientError("not a transactional producer (no transactional_id)")
        if self._txn_state == "fatal":
            raise ClientError(f"the producer can no longer be used: {self._txn_error}",
                              self._txn_error.code if self._txn_error else None)
        if self._txn_state not in states:
            raise ClientError(f"invalid transaction state {self._txn_state} (expected {' or '.join(states)})",
                              ErrorCode.INVALID_TXN_STATE)

    def init_transactions(self) -> None:
        """Get the transactional id's producer id and epoch (InitProducerId), fencing any older
        producer of the id and completing (aborting) the transaction it left open."""
        self._require("uninitialized", "ready")
        resp = self._txn_call(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout_ms": self.transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, lambda r: r["error_code"], "InitProducerId")
        with self._cond:
            self.producer_id, self.producer_epoch = resp["producer_id"], resp["producer_epoch"]
            self._sequences.clear()
        self._txn_state = "ready"

    def begin_transaction(self) -> None:
        self._require("ready")
        self._txn_partitions = set()
        self._txn_started = False
        self._txn_error = None
        self._txn_state = "in_transaction"

    def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int],
                                    group: "str | ConsumerGroupMetadata") -> None:
        """Commit ``offsets`` (the next offsets to consume) for the consumer group within this
        transaction: visible to the group once the transaction commits."""
        self._require("in_transaction")
        meta = group if isinstance(group, ConsumerGroupMetadata) else ConsumerGroupMetadata(group)
        assert self.transactional_id is not None
        self._txn_call(ApiKey.ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "group_id": meta.group_id},
            lambda r: r["error_code"], f"AddOffsetsToTxn for group {meta.group_id!r}")
        self._txn_started = True
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                      "committed_leader_epoch": -1, "committed_metadata": ""})
        body = {"transactional_id": self.transactional_id, "group_id": meta.group_id,
                "producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "generation_id": meta.generation_id, "member_id": meta.member_id,
                "group_instance_id": meta.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def err_of(resp: dict) -> int:
            return next((p["error_code"] for t in resp["topics"] for p in t["partitions"] if p["error_code"]), 0)
        what = f"TxnOffsetCommit for group {meta.group_id!r}"
        try:
            resp = self.client.send_to_coordinator(meta.group_id, ApiKey.TXN_OFFSET_COMMIT, body, err_of, what,
                                                   retriable=_TXN_RETRIABLE)
        except ClientError as exc:
            self._abortable(exc)
            raise
        if err_of(resp):
            failure = ClientError.from_code(err_of(resp), what)
            self._abortable(failure)
            raise failure

    def _abortable(self, exc: ClientError) -> None:
        if exc.code in _FENCED:
            self._txn_state = "fatal"
        elif self._txn_state == "in_transaction":
            self._txn_state = "abortable"
        if self._txn_error is None or exc.code in _FENCED:
            self._txn_error = exc

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then EndTxn(commit). A failed send in this transaction raises here and leaves
        the transaction to be aborted."""
        self._require("in_transaction", "abortable")
        try:
            self.flush(timeout)
        except ClientError as exc:
            self._abortable(exc)
        if self._txn_state != "in_transaction":
            raise ClientError(f"the transaction cannot commit, abort it: {self._txn_error}",
                              self._txn_error.code if self._txn_error else None)
        self._end_txn(True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Wait for the batches in flight (their records are aborted too), then EndTxn(abort)."""
        self._require("in_transaction", "abortable")
        try:
            self.flush(timeout)
        except ClientError:
            pass                       # failed or not: the transaction is aborted either way
        self._end_txn(False)

    def _end_txn(self, commit: bool) -> None:
        if self._txn_started or self._txn_partitions:
            assert self.transactional_id is not None
            self._txn_call(ApiKey.END_TXN, {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                                            "producer_epoch": self.producer_epoch, "committed": commit},
                           lambda r: r["error_code"], "EndTxn")
        self._txn_partitions = set()
        self._txn_started = False
        self._txn_error = None
        self._txn_state = "ready"

    def _add_partitions(self, tps: list[TopicPartition]) -> ClientError | None:
        """Sender thread: AddPartitionsToTxn for partitions this transaction has not written yet."""
        assert self.transactional_id is not None
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

        def err_of(resp: dict) -> int:
            return next((p["error_code"] for t in resp["results"] for p in t["results"] if p["error_code"]), 0)
        try:
            self._txn_call(ApiKey.ADD_PARTITIONS_TO_TXN, body, err_of, "AddPartitionsToTxn")
        except ClientError as exc:
            return exc
        self._txn_partitions.update(tps)
        return None

    # -- partitions -------------------------------------------------------------------------
    def partitions_for(self, topic: str) -> tuple[int, list[int]]:
        """(partition count, partitions with a leader), refreshed at most every metadata.max.age."""
        cached = self._partitions.get(topic)
        if cached is not None and time.monotonic() - cached[0] < self.metadata_max_age:
            return cached[1], cached[2]
        return self._refresh_partitions(topic)

    def _refresh_partitions(self, topic: str) -> tuple[int, list[int]]:
        def attempt() -> tuple[int, list[int]]:
            md = self.client._refresh_metadata([topic], self.allow_auto_create)
            t = md.topics.get(topic)
            if t is None or (t.error and t.error != ErrorCode.LEADER_NOT_AVAILABLE) or (
                    t.error == ErrorCode.LEADER_NOT_AVAILABLE and not self.allow_auto_create):
                code = t.error if t is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise ClientError(f"topic {topic!r}: {ErrorCode(code).name}", code,
                                  retriable=code == ErrorCode.LEADER_NOT_AVAILABLE)
            if not t.partitions:
                raise ClientError(f"topic {topic!r} has no partitions yet", ErrorCode.LEADER_NOT_AVAILABLE)
            available = sorted(p for p, pm in t.partitions.items() if pm.leader >= 0)
            return len(t.partitions), available
        count, available = self.client._with_retries(attempt, f"metadata for {topic!r}")
        self._partitions[topic] = (time.monotonic(), count, available)
        return count, available

    # -- send -------------------------------------------------------------------------------
    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Sequence[tuple[str, bytes | None]] = (),
             callback: Callable[[Future], None] | None = None) -> "Future[RecordMetadata]":
        """Queue one record; the future resolves to its RecordMetadata or raises ClientError."""
        if self._closed:
            raise ClientError("producer is closed")
        if self.transactional_id is not None:
            self._require("in_transaction", "abortable")
            if self._txn_state == "abortable":
                raise ClientError(f"the transaction must be aborted: {self._txn_error}",
                                  self._txn_error.code if self._txn_error else None)
        count, available = self.partitions_for(topic)
        if partition is None:
            p = partition_for_key(key, count) if key is not None else self._sticky.partition(topic, available, count)
        else:
            if not 0 <= partition < count:
                raise ClientError(f"partition {partition} of topic {topic!r} does not exist (it has {count})",
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            p = partition
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        size = BatchBuilder.record_size_upper_bound(key, value, headers)
        if size + 61 > self.max_request_size:
            raise ClientError(f"record of {size} bytes is larger than max.request.size {self.max_request_size}",
                              ErrorCode.MESSAGE_TOO_LARGE)
        fut: Future = Future()
        if callback is not None:
            fut.add_done_callback(callback)
        sticky = key is None and partition is None
        with self._cond:
            while self._buffered + size > self.buffer_memory and not self._closed:
                self._cond.wait(0.1)     # back-pressure, as buffer.memory / max.block.ms
            switched = False
            batch: _Batch | None        # assigned on every pass of the loop below before it is read
            while True:
                tp = TopicPartition(topic, p)
                q = self._queues.setdefault(tp, deque())
                batch = q[-1] if q and q[-1].data is None else None
                if batch is not None and batch.count and batch.builder.size_in_bytes + size > self.batch_size:
                    batch.data = b""        # closed: ready to send (built by the sender)
                    batch = None
                if batch is None and sticky and not switched:
                    # KIP-480: a record that needs a new batch moves the sticky partition on
                    switched = True
                    newp = self._sticky.on_new_batch(topic, p, available, count)
                    if newp != p:
                        p = newp
                        continue
                break
            if batch is None:
                # Sequences are given at creation: batches of a partition are created, sent and
                # retried in order, so this batch starts where the previous one ended.
                seq = self._sequences.get(tp, 0) if self.idempotent else -1
                builder = BatchBuilder(compression=self.codec, producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch, base_sequence=seq,
                                       transactional=self.transactional_id is not None)
                batch = _Batch(tp, builder, time.monotonic())
                q.append(batch)
                self._cond.notify_all()     # the sender recomputes when its next linger expires
            batch.builder.append(ts, key, value, headers)
            if self.idempotent:
                self._sequences[tp] = (self._sequences.get(tp, 0) + 1) & 0x7FFFFFFF
            batch.futures.append((fut, ts, len(key) if key is not None else -1, len(value) if value is not None else -1))
            batch.reserved += size
            self._buffered += size
            if batch.builder.size_in_bytes >= self.batch_size or self.linger == 0:
                self._cond.notify_all()
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is acknowledged or failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while any(self._queues.values()) or self._in_flight:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise ClientError("flush timed out", ErrorCode.REQUEST_TIMED_OUT)
                    self._cond.wait(remaining if remaining is not None else 0.5)
            finally:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._sender.join(5)
            if self._own_client:
                self.client.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- sender thread ----------------------------------------------------------------------
    def _ready_batches(self, now: float) -> tuple[list[_Batch], float]:
        """Head batches that are full, lingered enough, retried after backoff, or flushed."""
        ready: list[_Batch] = []
        wake = now + 0.5
        for tp, q in self._queues.items():
            if not q:
                continue
            b = q[0]
            if b.retry_at > now:        # backing off after a failure
                wake = min(wake, b.retry_at)
                continue
            full = b.data is not None or len(q) > 1 or b.builder.size_in_bytes >= self.batch_size
            due = b.created + self.linger
            if full or due <= now or self._flushing or self._closed:
                ready.append(b)
            else:
                wake = min(wake, due)
        return ready, wake

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed and not any(self._queues.values()):
                        return
                    now = time.monotonic()
                    ready, wake = self._ready_batches(now)
                    if ready:
                        break
                    self._cond.wait(max(0.0, wake - now))
                for b in ready:
                    self._queues[b.tp].popleft()
                    self._in_flight += 1
            try:
                self._send_batches(ready)
            except Exception as exc:   # noqa: BLE001 - never let the sender thread die silently
                log.exception("producer sender failed")
                for b in ready:
                    self._fail(b, exc if isinstance(exc, ClientError) else ClientError(str(exc)))
            with self._cond:
                self._cond.notify_all()

    def _build(self, b: _Batch) -> None:
        if not b.data:
            b.data = b.builder.build()

    def _send_batches(self, batches: list[_Batch]) -> None:
        if self.transactional_id is not None:
            new = sorted({b.tp for b in batches} - self._txn_partitions)
            failed = self._add_partitions(new) if new else None
            if failed is not None:
                for b in batches:
                    if b.tp in new:
                        self._fail(b, failed)
                batches = [b for b in batches if b.tp not in new]
        by_node: dict[int, list[_Batch]] = {}
        for b in batches:
            self._build(b)
            try:
                node = self.client.leader_for(b.tp)
            except ClientError as exc:
                self._retry_or_fail(b, exc)
                continue
            by_node.setdefault(node, []).append(b)
        pending = []
        for node, group in by_node.items():
            topics: dict[str, list] = {}
            for b in group:
                topics.setdefault(b.tp.topic, []).append({"index": b.tp.partition, "records": b.data})
            body: ProduceRequest = {"transactional_id": self.transactional_id, "acks": self.acks, "timeout_ms": self.request_timeout_ms,
                                    "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}
            try:
                conn = self.client.connection(node)
                conn.lock.acquire()
                try:
                    corr = conn.send(ApiKey.PRODUCE, conn.version_for(ApiKey.PRODUCE), body, expect_response=self.acks != 0)
                except BaseException:
                    conn.lock.release()
                    raise
            except ClientError as exc:
                for b in group:
                    self._retry_or_fail(b, exc)
                continue
            if self.acks == 0:
                conn.lock.release()
                for b in group:
                    self._complete(b, -1, -1)
                continue
            pending.append((conn, corr, group))
        for conn, corr, group in pending:
            try:
                resp = conn.receive(corr, self.request_timeout_ms / 1000.0 + 5)
            except ClientError as exc:
                for b in group:
                    self._retry_or_fail(b, exc)
                continue
            finally:
                conn.lock.release()
            by_tp = {(t["name"], p["index"]): p for t in resp["responses"] for p in t["partition_responses"]}
            for b in group:
                p = by_tp.get((b.tp.topic, b.tp.partition))
                if p is None:
                    self._retry_or_fail(b, ClientError(f"no Produce answer for {b.tp.topic}-{b.tp.partition}",
                                                       ErrorCode.UNKNOWN_SERVER_ERROR))
                    continue
                err = p["error_code"]
                if err in (0, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._complete(b, p["base_offset"], p.get("log_append_time_ms", -1))
                else:
                    self._retry_or_fail(b, ClientError.from_code(
                        err, f"Produce to {b.tp.topic}-{b.tp.partition}", p.get("error_message")))

    def _retry_or_fail(self, b: _Batch, exc: ClientError) -> None:
        """Put a retriable failure back at the head of its queue after a backoff, else fail it."""
        now = time.monotonic()
        backoff = self.retry_backoff * min(2 ** b.attempts, 10)
        if exc.retriable and now + backoff < b.created + self.delivery_timeout:
            b.attempts += 1
            self.client.note_retriable(exc)
            log.debug("retrying batch for %s after %s", b.tp, exc)
            with self._cond:
                b.retry_at = now + backoff
                self._queues.setdefault(b.tp, deque()).appendleft(b)
                self._in_flight -= 1
            return
        if exc.retriable:
            exc = ClientError(f"{exc} (delivery.timeout.ms expired after {b.attempts + 1} attempts)", exc.code)
        self._fail(b, exc)

    def _finish(self, b: _Batch) -> None:
        with self._cond:
            self._in_flight -= 1
            self._buffered -= b.reserved
            self._cond.notify_all()

    def _complete(self, b: _Batch, base_offset: int, log_append_time: int) -> None:
        self._finish(b)
        for i, (fut, ts, klen, vlen) in enumerate(b.futures):
            offset = base_offset + i if base_offset >= 0 else -1
            fut.set_result(RecordMetadata(b.tp.topic, b.tp.partition, offset,
                                          log_append_time if log_append_time >= 0 else ts, klen, vlen))

    def _fail(self, b: _Batch, exc: ClientError) -> None:
        if self.transactional_id is not None:
            self._abortable(exc)
        self._finish(b)
        for fut, *_ in b.futures:
            if not fut.done():
                fut.set_exception(exc)
