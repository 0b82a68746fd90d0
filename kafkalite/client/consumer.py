"""Consumer: manual assignment or group subscription, positions, poll, commit.

Like Java's KafkaConsumer in its blocking shape: ``poll`` (re)joins the group when needed,
initialises positions from committed offsets or ``auto_offset_reset``, fetches from every
partition leader in one round, hands out at most ``max_poll_records`` records and auto-commits
every ``auto_commit_interval_ms``. Heartbeats run in a background thread (KIP-62).
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Iterable, NamedTuple, Protocol

from kafkalite.errors import ErrorCode
from kafkalite.records import iter_batches
from kafkalite.records.legacy import as_v2_batches
from kafkalite.records.control import AbortedTransactionFilter

from .cluster import ConsumerGroupMetadata, TopicPartition
from .core import KafkaClient
from .errors import ClientError
from .group import GroupMember
from .security import ClientSecurity

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int          # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RebalanceListener(Protocol):
    """Java's ConsumerRebalanceListener: called from :meth:`Consumer.poll`'s thread."""

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...


class Consumer:
    def __init__(self, bootstrap_servers: str | list[str] | None = None, *, client: KafkaClient | None = None,
                 group_id: str | None = None, auto_offset_reset: str = "latest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, max_poll_records: int = 500, fetch_max_wait_ms: int = 500,
                 fetch_min_bytes: int = 1, max_partition_fetch_bytes: int = 1048576, isolation_level: str = "read_uncommitted",
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000, max_poll_interval_ms: int = 300000,
                 partition_assignment_strategy: Iterable[str] = ("range", "roundrobin"), request_timeout_ms: int = 30000,
                 client_id: str = "kafkalite-consumer", check_crcs: bool = True,
                 security: ClientSecurity | None = None, metadata_max_age_ms: int = 300000) -> None:
        """``security`` (TLS, SASL) is used when the consumer makes its own KafkaClient."""
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ClientError(f"invalid auto.offset.reset {auto_offset_reset!r} (earliest, latest, none)")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ClientError(f"invalid isolation.level {isolation_level!r}")
        self._own = client is None
        self.client = client or KafkaClient(bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
                                            security=security)
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000.0
        self.max_poll_records = max_poll_records
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation = 1 if isolation_level == "read_committed" else 0
        self.check_crcs = check_crcs
        self._member = (GroupMember(self.client, group_id, session_timeout_ms=session_timeout_ms,
                                    rebalance_timeout_ms=max_poll_interval_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                                    assignors=list(partition_assignment_strategy))
                        if group_id is not None else None)
        self._subscription: list[str] | None = None
        self._listener: RebalanceListener | None = None
        self._paused: set[TopicPartition] = set()
        #: partitions per subscribed topic when the group last assigned (0: the topic did not exist)
        self._subscribed_counts: dict[str, int] = {}
        self._metadata_checked = 0.0
        self.metadata_max_age = metadata_max_age_ms / 1000.0
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._buffer: deque[ConsumerRecord] = deque()
        self._last_commit = time.monotonic()
        self._closed = False

    # -- assignment ---------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment (no group membership; a group id is still used for commits)."""
        if self._subscription is not None:
            raise ClientError("assign() after subscribe(): use one or the other")
        self._assignment = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        self._positions = {tp: off for tp, off in self._positions.items() if tp in self._assignment}
        self._buffer.clear()

    def subscribe(self, topics: Iterable[str], listener: "RebalanceListener | None" = None) -> None:
        """Join the group for ``topics``; ``listener`` (Java's ConsumerRebalanceListener) is told
        the partitions revoked before each rejoin and those assigned after it."""
        if self._member is None:
            raise ClientError("subscribe() needs a group id (group.id)")
        if self._assignment and self._subscription is None:
            raise ClientError("subscribe() after assign(): use one or the other")
        self._subscription = sorted(set(topics))
        self._listener = listener
        self._member.needs_rejoin = True

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching from ``partitions`` (positions kept) until :meth:`resume`."""
        for tp in partitions:
            self._check_assigned(tp)
            self._paused.add(tp)
            self._drop_buffered(tp)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._paused.difference_update(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    @property
    def generation(self) -> int:
        return self._member.generation if self._member else -1

    @property
    def member_id(self) -> str:
        return self._member.member_id if self._member else ""

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member for Producer.send_offsets_to_transaction."""
        if self.group_id is None:
            raise ClientError("the consumer has no group.id")
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id)

    # -- positions ----------------------------------------------------------------------------
    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned(tp)
        self._positions[tp] = offset
        self._drop_buffered(tp)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(list(partitions or self._assignment), EARLIEST)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(list(partitions or self._assignment), LATEST)

    def position(self, tp: TopicPartition) -> int:
        self._check_assigned(tp)
        if tp not in self._positions:
            self._init_positions([tp])
        return self._positions[tp]

    def committed(self, tp: TopicPartition) -> int | None:
        if self.group_id is None:
            raise ClientError("committed() needs a group id")
        off, _ = self.client.offset_fetch(self.group_id, [tp]).get(tp, (-1, ""))
        return off if off >= 0 else None

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self.client.list_offsets({tp: LATEST for tp in partitions}, self.isolation).items()}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self.client.list_offsets({tp: EARLIEST for tp in partitions}).items()}

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self.client.list_offsets(times, self.isolation).items()}

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise ClientError(f"partition {tp.topic}-{tp.partition} is not assigned to this consumer")

    def _drop_buffered(self, tp: TopicPartition) -> None:
        self._buffer = deque(r for r in self._buffer if (r.topic, r.partition) != tp)

    def _reset(self, tps: list[TopicPartition], which: int) -> None:
        if not tps:
            return
        for tp in tps:
            self._check_assigned(tp)
            self._drop_buffered(tp)
        for tp, (off, _) in self.client.list_offsets({tp: which for tp in tps}, self.isolation).items():
            self._positions[tp] = off

    def _init_positions(self, tps: list[TopicPartition]) -> None:
        """Committed offsets first (group), then auto.offset.reset."""
        missing = list(tps)
        if self.group_id is not None and missing:
            committed = self.client.offset_fetch(self.group_id, missing)
            for tp in list(missing):
                off = committed.get(tp, (-1, ""))[0]
                if off >= 0:
                    self._positions[tp] = off
                    missing.remove(tp)
        if missing:
            if self.auto_offset_reset == "none":
                raise ClientError(f"no committed offset for {missing[0].topic}-{missing[0].partition} "
                                  "and auto.offset.reset is none", ErrorCode.OFFSET_OUT_OF_RANGE)
            self._reset(missing, EARLIEST if self.auto_offset_reset == "earliest" else LATEST)

    # -- poll ---------------------------------------------------------------------------------
    def _partition_counts(self) -> dict[str, int]:
        assert self._subscription is not None
        md = self.client.metadata(self._subscription)
        return {t: (len(md.topics[t].partitions) if t in md.topics and not md.topics[t].error else 0)
                for t in self._subscription}

    def _check_subscribed_metadata(self) -> None:
        """Rejoin when a subscribed topic appears or gains partitions, as Java's consumer does
        (its metadata is refreshed every second while a subscribed topic is missing, else every
        ``metadata.max.age.ms``), so the group's assignment covers them."""
        if self._member is None or self._subscription is None or self._member.needs_rejoin:
            return
        missing = any(c == 0 for c in self._subscribed_counts.values())
        now = time.monotonic()
        if now - self._metadata_checked < (1.0 if missing else self.metadata_max_age):
            return
        self._metadata_checked = now
        try:
            counts = self._partition_counts()
        except ClientError as exc:
            log.debug("metadata refresh for the subscription failed: %s", exc)
            return
        if counts != self._subscribed_counts:
            log.info("subscribed topics changed (%s -> %s): rejoining group %s", self._subscribed_counts, counts,
                     self.group_id)
            self._member.needs_rejoin = True

    def _ensure_group(self, deadline: float) -> None:
        if self._member is None or self._subscription is None:
            return
        self._check_subscribed_metadata()
        if not self._member.needs_rejoin:
            return
        if self.enable_auto_commit and self._member.generation >= 0 and self._positions:
            try:
                self.commit()
            except ClientError as exc:
                log.info("commit before rebalance failed: %s", exc)
        if self._listener is not None and self._member.generation >= 0:
            self._listener.on_partitions_revoked(list(self._assignment))
        try:
            self._subscribed_counts = self._partition_counts()      # what this assignment is made from
        except ClientError as exc:
            log.debug("metadata for the subscription failed: %s", exc)
        self._metadata_checked = time.monotonic()
        assignment = self._member.join(self._subscription, max(deadline, time.monotonic() + 60))
        self._assignment = assignment
        self._positions = {}
        self._paused &= set(assignment)
        self._buffer.clear()
        if self._listener is not None:
            self._listener.on_partitions_assigned(list(assignment))

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions; waits up to ``timeout_ms`` when none are there."""
        if self._closed:
            raise ClientError("consumer is closed")
        limit = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            self._ensure_group(deadline)
            self._maybe_auto_commit()
            if self._buffer:
                out: list[ConsumerRecord] = []
                while self._buffer and len(out) < limit:
                    out.append(self._buffer.popleft())
                return out
            missing = [tp for tp in self._assignment if tp not in self._positions]
            if missing:
                self._init_positions(missing)
            remaining = deadline - time.monotonic()
            if not self._assignment:
                if remaining <= 0:
                    return []
                time.sleep(min(remaining, 0.1))
                continue
            wait = int(max(0.0, min(remaining, self.fetch_max_wait_ms / 1000.0)) * 1000)
            self._fetch_once(wait)
            if not self._buffer and time.monotonic() >= deadline:
                return []

    def _fetch_once(self, max_wait_ms: int) -> None:
        requests = {tp: self._positions[tp] for tp in self._assignment
                    if tp in self._positions and tp not in self._paused}
        if not requests:
            time.sleep(min(max_wait_ms, 100) / 1000.0)      # every partition paused: do not spin
            return
        fetched = self.client.fetch_many(requests, max_bytes=self.max_partition_fetch_bytes,
                                         max_wait_ms=max_wait_ms, min_bytes=self.fetch_min_bytes,
                                         isolation_level=self.isolation)
        for tp, f in fetched.items():
            if self._positions.get(tp) != requests[tp]:
                continue            # seeked meanwhile
            if f.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                if self.auto_offset_reset == "none":
                    raise ClientError(f"offset {requests[tp]} is out of range for {tp.topic}-{tp.partition}",
                                      ErrorCode.OFFSET_OUT_OF_RANGE)
                log.info("offset %d out of range for %s, resetting to %s", requests[tp], tp, self.auto_offset_reset)
                self._reset([tp], EARLIEST if self.auto_offset_reset == "earliest" else LATEST)
                continue
            position = requests[tp]
            upper = f.last_stable_offset if self.isolation and f.last_stable_offset >= 0 else f.high_watermark
            aborted = AbortedTransactionFilter(f.aborted_transactions) if self.isolation else None
            data = as_v2_batches(f.records)       # v0/v1 entries of topics on an older message format
            for info, records in iter_batches(data, verify_crc=self.check_crcs):
                if aborted is not None and aborted.skip(data, info) and info.next_offset > position:
                    position = info.next_offset           # an aborted transaction's batch, or a marker
                    continue
                if info.next_offset <= position:
                    continue
                if info.is_control:
                    position = info.next_offset
                    continue
                ts_type = 1 if info.is_log_append_time else 0
                for r in records:
                    if r.offset < position or (upper >= 0 and r.offset >= upper):
                        continue
                    self._buffer.append(ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, ts_type,
                                                       r.key, r.value, r.headers))
                position = max(position, info.next_offset)
            self._positions[tp] = position

    # -- commits ------------------------------------------------------------------------------
    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) for the group, synchronously."""
        if self.group_id is None:
            raise ClientError("commit() needs a group id (group.id)")
        if offsets is None:
            offsets = {tp: self._positions[tp] for tp in self._assignment if tp in self._positions}
            # records handed out are consumed; records still buffered are not
            for r in self._buffer:
                tp = TopicPartition(r.topic, r.partition)
                offsets[tp] = min(offsets.get(tp, r.offset), r.offset)
        if not offsets:
            return
        gen, member = (self._member.generation, self._member.member_id) if (
            self._member is not None and self._subscription is not None) else (-1, "")
        try:
            self.client.offset_commit(self.group_id, offsets, generation_id=gen, member_id=member)
        except ClientError as exc:
            if exc.code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION,
                            ErrorCode.UNKNOWN_MEMBER_ID) and self._member is not None:
                self._member.needs_rejoin = True
            raise
        self._last_commit = time.monotonic()

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval:
            try:
                self.commit()
            except ClientError as exc:
                log.warning("auto-commit failed: %s", exc)
                self._last_commit = time.monotonic()

    def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        try:
            if autocommit and self.enable_auto_commit and self._positions:
                try:
                    self.commit()
                except ClientError as exc:
                    log.warning("final commit failed: %s", exc)
            if self._member is not None:
                self._member.leave()
        finally:
            self._closed = True
            if self._own:
                self.client.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
