"""The read half of a Fetch (Kafka's ``ReplicaManager.readFromLocalLog``, with the follower
bookkeeping of ``updateFollowerFetchState``): what one Fetch asks (:class:`FetchParams`), its
partitions read into response entries (:class:`FetchReader`, :class:`FetchRead`), and the
offsets-only "is there news?" check its delayed form re-runs (``delayed_fetch.py``).

Per partition, never per record: a read returns whole stored batches; only logs that hold
batches of message format v0/v1, and readers of Fetch v0-3, look at batch headers
(``records/legacy.py``). The first non-empty partition returns at least one whole batch even
above the byte limits (KIP-74). Entries are plain dicts in the Fetch response's shape, since
they go to the codec as they are.

A follower's Fetch v12 names each partition's ``last_fetched_epoch``: a fetcher whose log
diverged from the leader's gets ``diverging_epoch`` (KIP-320, :meth:`FetchReader.diverging`).
A follower's fetch obeys the leader's replication throttle (KIP-73, :meth:`FetchReader.held_back`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from kafkalite.broker.partition import READ_COMMITTED, FetchOutOfRangeError, Partition
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages_typed import (FetchResponse, FetchResponseEpochEndOffset,
                                               FetchResponseFetchableTopicResponse, FetchResponsePartitionData)
from kafkalite.quota.replication import ReplicationQuota
from kafkalite.records.file_region import FileRegion
from kafkalite.records.legacy import UnsupportedForMagic, convert_for_reader, cut_to_size

if TYPE_CHECKING:
    from kafkalite.broker.fetch_session import CachedPartition
    from kafkalite.broker.replica_manager import ReplicaManager

#: a partition as a Fetch names it: (topic, its request entry: partition, fetch_offset,
#: partition_max_bytes, current_leader_epoch, last_fetched_epoch, log_start_offset)
Wanted = tuple[str, Any]
#: a follower's session only: (key, change count, leader Partition) of a partition left with
#: nothing to copy, (key, -1, None) otherwise (``FetchSession.split``)
IdleMark = tuple[Any, int, Any]


@dataclass
class FetchParams:
    """What one Fetch request asks, decided once by the handler (Kafka's ``FetchParams``)."""

    replica_id: int                 #: >= 0: a follower broker
    isolation: int                  #: 0 read_uncommitted, 1 read_committed
    #: the response's byte budget: the request's MaxBytes capped by ``fetch.max.bytes``
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    reader_magic: int               #: 2, or 0/1 for Fetch v0-3 consumers (converted on the way out)
    check_epochs: bool              #: v12+: ``last_fetched_epoch`` is meaningful
    #: the leader's replication throttle (followers only)
    leader_quota: ReplicationQuota | None
    #: topics this request may not read (TOPIC_AUTHORIZATION_FAILED per partition)
    denied: set[str]
    #: a follower's incremental session: skip its idle partitions (``FetchSession.split``)
    tracked: bool
    #: the connection sends file regions with os.sendfile (a plaintext listener): records are
    #: read as regions of their segment files, not into Python (``kafkalite.net.sendfile``)
    zero_copy: bool = False

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def read_committed(self) -> bool:
        return self.replica_id < 0 and self.isolation == READ_COMMITTED

    def held_back(self, topic: str, index: int, part: Partition, now_ms: int) -> bool:
        """Kafka's shouldLeaderThrottle: a throttled, out-of-sync replica while the rate is exceeded."""
        quota = self.leader_quota
        return (quota is not None and quota.is_throttled(topic, index)
                and quota.should_throttle(topic, index, self.replica_id in part.isr, now_ms))


class FetchRead(NamedTuple):
    """One read of a request's partitions."""

    body: FetchResponse
    total: int                      #: record bytes
    had_error: bool
    entries: list[FetchResponsePartitionData]   #: in ``wanted`` order
    #: a follower's session only (empty otherwise), in ``wanted`` order (see :data:`IdleMark`)
    marks: list[IdleMark]


class FetchReader:
    """Reads one Fetch's partitions, as often as its delayed form needs. ``wanted`` and ``idle``
    are the request's partitions to read and a follower's idle ones (which a purgatory event
    moves into ``wanted``, ``DelayedFetch._wake_idle``; ``FetchSession.split`` already recorded
    the follower caught up on them)."""

    def __init__(self, replicas: "ReplicaManager", params: FetchParams, wanted: list[Wanted],
                 idle: "dict[Any, CachedPartition]") -> None:
        self.replicas = replicas
        self.params = params
        self.wanted = wanted
        self.idle = idle
        #: wanted index -> its Partition, while the request's first call stack runs (recording a
        #: follower's offsets, the first read, the purgatory's own try): leadership changes only
        #: in a later reactor turn, so one lookup serves all three (None afterwards: look up again)
        self.resolved: dict[int, Partition] | None = {}
        #: wanted indexes whose :meth:`diverging` said None on that same first stack: it stays
        #: None there (an older epoch's end is fixed; the current epoch's end is the log end,
        #: which only grows), so it is asked once instead of three times (None afterwards)
        self.not_diverged: set[int] | None = set()

    def leader_of(self, i: int | None, topic: str, p: Mapping[str, Any]) -> Partition:
        resolved = self.resolved
        if resolved is not None and i is not None and i in resolved:
            return resolved[i]
        part = self.replicas.leader(topic, p["partition"], p.get("current_leader_epoch", -1))
        if resolved is not None and i is not None:
            resolved[i] = part
        return part

    def diverging(self, part: Partition, p: Mapping[str, Any], i: int | None = None
                  ) -> FetchResponseEpochEndOffset | None:
        """Fetch v12 (KIP-320 for followers, Kafka's Partition.readRecords): the fetcher's
        ``last_fetched_epoch`` ended earlier in this leader's log than its fetch offset (or the
        leader knows only older epochs): answer where that epoch ends, with no records, and the
        fetcher truncates there instead of asking OffsetForLeaderEpoch. ``part`` comes from the
        caller's leader lookup (once per partition per pass: a follower's session can hold hundreds
        of idle partitions). Raises OFFSET_OUT_OF_RANGE for an epoch the leader cannot place (above
        all it knows), as Kafka 2.8's Partition.readRecords. ``i``: its index in ``wanted``, for
        the first stack's memo (:attr:`not_diverged`)."""
        last = p.get("last_fetched_epoch", -1)
        if not self.params.check_epochs or last < 0:
            return None
        memo = self.not_diverged
        if memo is not None and i is not None and i in memo:
            return None
        epoch, end = part.log.end_offset_for_epoch(last)
        if epoch < 0 or end < 0:
            raise FetchOutOfRangeError(f"Could not determine the end offset of the last fetched epoch {last}",
                                       part.log_start_offset, part.high_watermark)
        if end < p["fetch_offset"] or epoch < last:
            return {"epoch": epoch, "end_offset": end}
        if memo is not None and i is not None:
            memo.add(i)
        return None

    # -- the follower's progress ---------------------------------------------------------------
    def record_follower_progress(self) -> None:
        """A follower's fetch offsets say how far it has copied: record them BEFORE the first read.
        That bookkeeping can move the high watermark, which answers acks=all produces, whose
        connections then start their next request at once (same call stack) and append to these
        very partitions. Reading afterwards sees those appends; reading first would miss them, the
        fetch would be watched only after their purgatory check, and sleep its whole max_wait_ms
        with data waiting (replication stalled ~500 ms per round under a steady acks=all load)."""
        denied = self.params.denied
        replica_id = self.params.replica_id
        record = self.replicas.record_follower_fetch
        for i, (topic, p) in enumerate(self.wanted):
            if topic in denied:
                continue
            try:
                part = self.leader_of(i, topic, p)
                if self.diverging(part, p, i) is not None:
                    continue                  # its fetch offset is past the common prefix: not progress
            except KafkaError:
                continue                      # read() reports it in the partition's entry
            record(part, replica_id, p["fetch_offset"], p.get("log_start_offset", -1))

    # -- reading -------------------------------------------------------------------------------
    def read(self, reuse: FetchRead | None = None, only: set[Any] | None = None) -> FetchRead:
        """Read every wanted partition. With ``reuse`` (an earlier read of this request) only
        the partitions in ``only`` are read again."""
        params = self.params
        replica_id, isolation = params.replica_id, params.isolation
        denied, tracked, leader_quota = params.denied, params.tracked, params.leader_quota
        read_committed, reader_magic = params.read_committed, params.reader_magic
        # down-conversion (Fetch v0-3) must look at the bytes: it keeps the copying read
        as_region = params.zero_copy and reader_magic >= 2
        replicas = self.replicas
        events = replicas.purgatory.events
        budget = params.max_bytes
        total = 0
        had_error = False
        responses: list[FetchResponseFetchableTopicResponse] = []
        by_topic: dict[str, list[FetchResponsePartitionData]] = {}
        entries: list[FetchResponsePartitionData] = []
        marks: list[IdleMark] = []

        def add(topic: str, entry: FetchResponsePartitionData, mark: IdleMark | None = None) -> None:
            if topic not in by_topic:
                by_topic[topic] = []
                responses.append({"topic": topic, "partitions": by_topic[topic]})
            by_topic[topic].append(entry)
            entries.append(entry)
            if tracked:                       # only a follower's session keeps them
                marks.append(mark or ((topic, entry["partition_index"]), -1, None))
        for i, (topic, p) in enumerate(self.wanted):
            if reuse is not None and only is not None and (topic, p["partition"]) not in only:
                add(topic, reuse.entries[i], reuse.marks[i] if tracked else None)
                continue
            entry: FetchResponsePartitionData = {"partition_index": p["partition"], "error_code": 0, "high_watermark": -1,
                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                     "preferred_read_replica": -1,
                     # never null, errors included (Kafka sends MemoryRecords.EMPTY): librdkafka
                     # fails the whole response on MessageSetSize -1 ("invalid MessageSetSize"),
                     # so a consumer never saw e.g. OFFSET_OUT_OF_RANGE and never reset
                     "records": b""}
            try:
                if topic in denied:
                    raise KafkaError(f"not authorized to read {topic}", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                part = self.leader_of(i, topic, p)
                diverged = self.diverging(part, p, i)
                if diverged is not None:
                    entry["diverging_epoch"], entry["high_watermark"] = diverged, part.high_watermark
                    entry["last_stable_offset"], entry["log_start_offset"] = (part.last_stable_offset,
                                                                              part.log_start_offset)
                    had_error = True          # answer at once, as Kafka's DelayedFetch does
                    add(topic, entry)
                    continue
                limit = min(p["partition_max_bytes"], max(budget - total, 0))
                first = total == 0
                if leader_quota is not None and topic in leader_quota.throttled \
                        and params.held_back(topic, p["partition"], part, replicas.clock.now_ms()):
                    limit, first = 0, False       # offsets still checked, no records
                if as_region:
                    res = replicas.read_from(part, p["fetch_offset"], limit, replica_id, isolation,
                                             min_one_batch=first, as_region=True)
                else:
                    res = replicas.read_from(part, p["fetch_offset"], limit, replica_id, isolation, min_one_batch=first)
                entry["high_watermark"] = part.high_watermark
                entry["last_stable_offset"] = part.last_stable_offset
                entry["log_start_offset"] = part.log_start_offset
                if read_committed:
                    # Kafka answers a list (maybe empty) to read_committed consumers, null otherwise
                    aborted = res.aborted_transactions if res is not None else None
                    entry["aborted_transactions"] = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                                                     for t in aborted or ()]
                if res is not None and len(res.records):
                    records: Any = res.records
                    if reader_magic < 2 or (res.old_formats and replica_id < 0):
                        if isinstance(records, FileRegion):     # v0/v1 batches to convert: copy them
                            region, records = records, memoryview(records.read())
                            region.close()
                        converted = convert_for_reader(records, reader_magic, fetch_offset=p["fetch_offset"])
                        if converted is not records:
                            records = cut_to_size(converted, limit)
                    entry["records"] = records
                    total += len(records)
                elif tracked and p["fetch_offset"] >= part.fetch_upper_bound(replica_id, isolation) \
                        and replica_id in part.isr:
                    key = (topic, p["partition"])
                    add(topic, entry, (key, events.get(key, 0), part))
                    continue
            except UnsupportedForMagic:
                entry["error_code"] = int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                had_error = True
            except FetchOutOfRangeError as exc:
                entry["error_code"] = int(exc.code)
                entry["log_start_offset"] = exc.log_start_offset     # a follower restarts its log there
                entry["high_watermark"] = exc.high_watermark
                had_error = True
            except KafkaError as exc:
                entry["error_code"] = int(exc.code)
                had_error = True
            add(topic, entry)
        body: FetchResponse = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
        return FetchRead(body, total, had_error, entries, marks)

    def news(self, topic: str, p: Mapping[str, Any], i: int | None = None) -> bool | None:
        """Offsets only, no read (Kafka's DelayedFetch.tryComplete per partition). True: answer
        now (an error, a divergence, an offset out of range); None: records are available; False:
        nothing new. ``i``: its index in ``wanted``, for the first stack's lookups."""
        try:
            part = self.leader_of(i, topic, p)
            if self.diverging(part, p, i) is not None:
                return True
        except KafkaError:
            return True                   # answered with the partition's error
        offset = p["fetch_offset"]
        if offset > part.log_end_offset or offset < part.log_start_offset:
            return True                   # OFFSET_OUT_OF_RANGE (truncated or deleted meanwhile)
        params = self.params
        if offset < part.fetch_upper_bound(params.replica_id, params.isolation) \
                and not params.held_back(topic, p["partition"], part, self.replicas.clock.now_ms()):
            return None
        return False
