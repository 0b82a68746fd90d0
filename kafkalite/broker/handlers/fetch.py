"""Fetch (key 1): stored batches, unchanged, from each requested partition; long-polls.

read_committed consumers (isolation_level 1) read only below the last stable offset and get the
aborted transactions overlapping the returned batches; every response carries the LSO.

Every requested partition appears in the response (kafka-python rejects a sessionless response
whose partition set differs from its request). The first non-empty partition always returns at
least one whole batch even above the byte limits (KIP-74), or a consumer would stall on a large
batch. Fetch v0-3 come from clients that read message format v0 (Fetch v0-1) or v1 (v2-3): their
records are converted down on the way out, zstd ones answer UNSUPPORTED_COMPRESSION_TYPE, as
Kafka 2.x does. Batches appended while the topic's ``message.format.version`` was below 0.11.0
reach every consumer as the v0/v1 message sets Kafka stores (only logs that hold such a batch are
looked at, per batch; followers copy them unchanged). When less than MinBytes is available the
request waits in the purgatory, woken by appends and high-watermark moves on its partitions, until
MaxWaitMs. A wait that began with nothing to read at all answers by reading again only the
partitions an event was about (the others cannot have news); Kafka reads them all.

A follower's Fetch obeys the leader's replication throttle (Kafka 2.x, KIP-73): a partition in
``leader.replication.throttled.replicas`` for this broker whose fetching replica is not in the ISR
is answered without records while ``leader.replication.throttled.rate`` is exceeded (and does not
count towards MinBytes, so the fetch waits instead of spinning); the bytes sent for throttled
partitions are recorded in that rate.

Fetch v12 is flexible and carries each partition's ``last_fetched_epoch``: a fetcher whose log
diverged from the leader's gets ``diverging_epoch`` (KIP-320, see ``diverging``).

Fetch v7+ has sessions (KIP-227, broker/fetch_session.py): a full fetch (epoch 0) opens one when a
slot is free; an incremental fetch reads all the session's partitions but answers only those with
news; a wrong session id / epoch is answered with the error alone and the client starts over.
A follower's incremental fetch goes further than Kafka's: it does not read the session's idle
partitions (answered last time with nothing left to copy, named by no request and checked by no
purgatory event since), only records the follower caught up on them and watches them; an event on
one wakes the fetch, which then reads and answers it too.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from kafkalite.broker.fetch_session import CachedPartition, FetchContext, FetchSessionCache, FetchSessionError
from kafkalite.broker.partition import READ_COMMITTED, FetchOutOfRangeError, Partition
from kafkalite.broker.purgatory import FollowerFetches
from kafkalite.broker.replica_manager import FIRST_FETCH_WAIT_MS
from kafkalite.broker.services import RequestContext
from kafkalite.broker.registry import api
from kafkalite.errors import ErrorCode, KafkaError
from kafkalite.security.acl import Operation, ResourceType
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import FetchRequest
from kafkalite.records.legacy import UnsupportedForMagic, convert_for_reader, cut_to_size, fetch_magic

NO_SESSION = 0


class _Read(NamedTuple):
    """One read of a request's partitions."""

    body: dict[str, Any]
    total: int                      #: record bytes
    had_error: bool
    entries: list[dict[str, Any]]   #: in ``wanted`` order
    #: a follower's session only (empty otherwise), in ``wanted`` order: (key, change count,
    #: leader Partition) of a partition left with nothing to copy, (key, -1, None) otherwise
    #: (FetchSession.split)
    marks: list[tuple[Any, int, Any]]


@api(ApiKey.FETCH, 0, 12)
def handle_fetch(ctx: RequestContext, req: FetchRequest) -> Any:
    ctx.throttle_exempt = req["replica_id"] >= 0        # replication is not a client's traffic
    replica_id = req["replica_id"]
    isolation = req.get("isolation_level", 0)
    read_committed = replica_id < 0 and isolation == READ_COMMITTED
    sessions: FetchSessionCache | None = ctx.fetch_sessions if ctx.api_version >= 7 else None
    session_ctx: FetchContext | None = None
    wanted: list[tuple[str, Any]]
    if sessions is not None:
        try:
            session_ctx = sessions.new_context(req.get("session_id", NO_SESSION), req.get("session_epoch", -1),
                                               req["topics"], req.get("forgotten_topics_data") or [],
                                               replica_id >= 0, ctx.now_ms)
        except FetchSessionError as exc:
            return {"throttle_time_ms": 0, "error_code": int(exc.code), "session_id": NO_SESSION, "responses": []}
        wanted = session_ctx.wanted
    elif req.get("session_id", NO_SESSION) != NO_SESSION:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                "session_id": NO_SESSION, "responses": []}
    else:
        wanted = [(t["topic"], p) for t in req["topics"] for p in t["partitions"]]
    # Fetch v0-3 readers know message formats v0/v1 only: batches are converted on the way out;
    # any consumer gets batches appended under format v0/v1 in that format (records/legacy.py)
    reader_magic = fetch_magic(ctx.api_version) if ctx.api_version <= 3 and replica_id < 0 else 2
    leader_quota = ctx.quotas.replication.leader if replica_id >= 0 else None

    def held_back(topic: str, index: int, part: Any) -> bool:
        """Kafka's shouldLeaderThrottle: a throttled, out-of-sync replica while the rate is exceeded."""
        return (leader_quota is not None and leader_quota.is_throttled(topic, index)
                and leader_quota.should_throttle(topic, index, replica_id in part.isr, ctx.now_ms))
    # Kafka: a follower's fetch (replica id >= 0) needs ClusterAction, or every partition is
    # refused; a consumer's needs Read on each topic
    if replica_id >= 0:
        denied = set() if ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER) else {t for t, _ in wanted}
        ctx.throttle_exempt = not denied        # a refused "follower" is a client, with its quotas
    else:
        denied = {t for t in {t for t, _ in wanted} if not ctx.authorize(Operation.READ, ResourceType.TOPIC, t)}
    # only v12+ requests carry the field; below v12 it decodes as its default, -1
    check_epochs = ctx.api_version >= 12
    session = session_ctx.session if session_ctx is not None else None
    #: a follower's incremental fetch skips its session's idle partitions (FetchSession.split);
    #: not under a replication throttle, which a rate lifts, not an event
    tracked = (session is not None and replica_id >= 0 and not denied
               and (leader_quota is None or not leader_quota.throttled))
    idle: dict[Any, CachedPartition] = {}
    events: Mapping[Any, int] = ctx.replicas.purgatory.events if tracked else {}
    events_at_start = ctx.replicas.purgatory.total_events if tracked else 0
    if session is not None and tracked:
        wanted, idle = session.split(events)
        now_ms = ctx.now_ms
        lapsed = [key for key, cached in idle.items() if not cached.leader.record_idle_follower_fetch(replica_id, now_ms)]
        for key in lapsed:                    # the full path decides (ISR expansion, lost leadership)
            cached = idle.pop(key)
            wanted.append((cached.topic, cached.request))
    #: wanted index -> its Partition, while the request's first call stack runs (recording a
    #: follower's offsets, the first read, the purgatory's own try): leadership changes only in a
    #: later reactor turn, so one lookup serves all three (None afterwards: look up again)
    phase: dict[str, dict[int, Partition] | None] = {"resolved": {}}

    def leader_of(i: int | None, topic: str, p: Mapping[str, Any]) -> Partition:
        resolved = phase["resolved"]
        if resolved is not None and i is not None and i in resolved:
            return resolved[i]
        part = ctx.replicas.leader(topic, p["partition"], p.get("current_leader_epoch", -1))
        if resolved is not None and i is not None:
            resolved[i] = part
        return part

    def diverging(part: Partition, p: Mapping[str, Any]) -> dict[str, int] | None:
        """Fetch v12 (KIP-320 for followers, Kafka's Partition.readRecords): the fetcher's
        ``last_fetched_epoch`` ended earlier in this leader's log than its fetch offset (or the
        leader knows only older epochs): answer where that epoch ends, with no records, and the
        fetcher truncates there instead of asking OffsetForLeaderEpoch. ``part`` comes from the
        caller's leader lookup (once per partition per pass: a follower's session can hold hundreds
        of idle partitions). Raises OFFSET_OUT_OF_RANGE for an epoch the leader cannot place (above
        all it knows), as Kafka 2.8's Partition.readRecords."""
        last = p.get("last_fetched_epoch", -1)
        if not check_epochs or last < 0:
            return None
        epoch, end = part.log.end_offset_for_epoch(last)
        if epoch < 0 or end < 0:
            raise FetchOutOfRangeError(f"Could not determine the end offset of the last fetched epoch {last}",
                                       part.log_start_offset, part.high_watermark)
        if end < p["fetch_offset"] or epoch < last:
            return {"epoch": epoch, "end_offset": end}
        return None

    def read_all(reuse: _Read | None = None, only: set[Any] | None = None) -> _Read:
        """Read every wanted partition. With ``reuse`` (an earlier read of this request) only
        the partitions in ``only`` are read again."""
        budget = min(req["max_bytes"], ctx.config["fetch.max.bytes"])   # Kafka caps it broker-side
        total = 0
        had_error = False
        responses: list[dict[str, Any]] = []
        by_topic: dict[str, list[dict[str, Any]]] = {}
        entries: list[dict[str, Any]] = []
        marks: list[tuple[Any, int, Any]] = []

        def add(topic: str, entry: dict[str, Any], mark: tuple[Any, int, Any] | None = None) -> None:
            if topic not in by_topic:
                by_topic[topic] = []
                responses.append({"topic": topic, "partitions": by_topic[topic]})
            by_topic[topic].append(entry)
            entries.append(entry)
            if tracked:                       # only a follower's session keeps them
                marks.append(mark or ((topic, entry["partition_index"]), -1, None))
        for i, (topic, p) in enumerate(wanted):
            if reuse is not None and only is not None and (topic, p["partition"]) not in only:
                add(topic, reuse.entries[i], reuse.marks[i] if tracked else None)
                continue
            entry: dict[str, Any] = {"partition_index": p["partition"], "error_code": 0, "high_watermark": -1,
                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                     "preferred_read_replica": -1,
                     # never null, errors included (Kafka sends MemoryRecords.EMPTY): librdkafka
                     # fails the whole response on MessageSetSize -1 ("invalid MessageSetSize"),
                     # so a consumer never saw e.g. OFFSET_OUT_OF_RANGE and never reset
                     "records": b""}
            try:
                if topic in denied:
                    raise KafkaError(f"not authorized to read {topic}", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                part = leader_of(i, topic, p)
                diverged = diverging(part, p)
                if diverged is not None:
                    entry.update(diverging_epoch=diverged, high_watermark=part.high_watermark,
                                 last_stable_offset=part.last_stable_offset, log_start_offset=part.log_start_offset)
                    had_error = True          # answer at once, as Kafka's DelayedFetch does
                    add(topic, entry)
                    continue
                limit = min(p["partition_max_bytes"], max(budget - total, 0))
                first = total == 0
                if leader_quota is not None and topic in leader_quota.throttled and held_back(topic, p["partition"], part):
                    limit, first = 0, False       # offsets still checked, no records
                res = ctx.replicas.read_from(part, p["fetch_offset"], limit, replica_id, isolation, min_one_batch=first)
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
        body = {"throttle_time_ms": 0, "error_code": 0, "session_id": NO_SESSION, "responses": responses}
        return _Read(body, total, had_error, entries, marks)

    def note_follower_progress() -> None:
        """A follower's fetch offsets say how far it has copied: record them BEFORE the first read.
        That bookkeeping can move the high watermark, which answers acks=all produces, whose
        connections then start their next request at once (same call stack) and append to these
        very partitions. Reading afterwards sees those appends; reading first would miss them, the
        fetch would be watched only after their purgatory check, and sleep its whole max_wait_ms
        with data waiting (replication stalled ~500 ms per round under a steady acks=all load)."""
        for i, (topic, p) in enumerate(wanted):
            if topic in denied:
                continue
            try:
                part = leader_of(i, topic, p)
                if diverging(part, p) is not None:
                    continue                  # its fetch offset is past the common prefix: not progress
            except KafkaError:
                continue                      # read_all reports it in the partition's entry
            ctx.replicas.record_follower_fetch(part, replica_id, p["fetch_offset"], p.get("log_start_offset", -1))

    def count(read: _Read) -> dict[str, Any]:
        """The answer's bytes per topic, counted once when it is sent (per partition, no record).
        A consumer's bytes count against its consumer_byte_rate (a follower's do not); a consumer
        over it gets, as from Kafka 2.x (KIP-219), an answer without records carrying the throttle
        time, and those bytes are taken back out of its rate: it reads them after the throttle.
        In a session, the answer is shaped here, once: an incremental one keeps only partitions
        with news (updating the session's cached offsets), a full one opens its session."""
        body = read.body
        if session_ctx is not None and sessions is not None:
            if session is not None:
                body["responses"] = sessions.incremental_responses(session, body["responses"])
                body["session_id"] = session.id
                if tracked:
                    for key, changes, leader in read.marks:
                        cached = session.partitions.get(key)
                        if cached is not None:
                            cached.idle_since, cached.leader = changes, leader
            elif session_ctx.create:
                body["session_id"] = sessions.create(session_ctx, body["responses"], ctx.now_ms)
        if replica_id < 0:
            size = sum(len(entry["records"]) for t in body["responses"] for entry in t["partitions"])
            who = (ctx.quota_user, ctx.client_id or "")
            throttle = ctx.quotas.fetch.record(*who, size, ctx.now_ms)
            if throttle > 0:
                ctx.quotas.fetch.unrecord(*who, size, ctx.now_ms)
                for t in body["responses"]:
                    for entry in t["partitions"]:
                        entry["records"] = b""
                ctx.throttle(throttle)
        elif leader_quota is not None and leader_quota.throttled:
            leader_quota.record(sum(len(entry["records"]) for t in body["responses"] for entry in t["partitions"]
                                    if leader_quota.is_throttled(t["topic"], entry["partition_index"])), ctx.now_ms)
        metrics = ctx.metrics
        for t in body["responses"]:
            for entry in t["partitions"]:
                if entry["error_code"]:
                    metrics.fetch_failed(t["topic"])
                else:
                    metrics.fetched(t["topic"], len(entry["records"]), replica_id >= 0)
        return body

    if replica_id >= 0:
        note_follower_progress()
    first = read_all()
    if req["max_wait_ms"] <= 0 or first.total >= req["min_bytes"] or first.had_error or not (wanted or idle):
        return count(first)

    #: "read": the answer a readiness check already read (min_bytes > 1); "full": the purgatory's
    #: own try found news, which no key names, so the answer reads every partition again
    state: dict[str, Any] = {"read": None, "full": False}
    #: the partitions a purgatory check was about while the fetch waited. Kafka reads every
    #: partition again when a delayed fetch completes; when the first read found nothing (and no
    #: replication throttle, which a rate and not an event lifts, held records back), a partition
    #: no check was about still has nothing new (appends, high watermark, log start and role
    #: changes all check), so the answer reuses its first entry. An idle follower's session holds
    #: hundreds of partitions; an acks=all append wakes it for one.
    touched: set[Any] = set()
    reusable = first.total == 0 and (leader_quota is None or not leader_quota.throttled)

    def wake_idle(key: Any) -> None:
        """An idle partition of a follower's session changed: read and answer it too."""
        cached = idle.pop(key, None)
        if cached is not None:
            wanted.append((cached.topic, cached.request))
            touched.add(key)

    def ready() -> bool:
        """Kafka's DelayedFetch.tryComplete: offsets only, no read. Called on every append and
        high-watermark move of a watched partition; reading (and building a response for) every
        partition of the request each time was most of a leader's CPU under acks=all, and grew
        with the number of partitions a follower fetches (latency p99 rose with each topic)."""
        state["read"] = None
        if idle and ctx.replicas.purgatory.total_events != events_at_start:
            # this request's own stack changed some partition (recording the follower's offsets
            # moved a high watermark, an acks=all producer appended at once): idle ones included
            for key in [k for k, c in idle.items() if events.get(k, 0) != c.idle_since]:
                wake_idle(key)
        available = False
        for i, (topic, p) in enumerate(wanted):
            news = partition_news(topic, p, i)
            if news is True:
                state["full"] = True
                return True
            available = available or news is None
        state["full"] = available
        return available and enough()

    def partition_news(topic: str, p: Mapping[str, Any], i: int | None = None) -> bool | None:
        """True: answer now (an error, a divergence, an offset out of range); None: records are
        available; False: nothing new. ``i``: its index in ``wanted``, for the first stack's lookups."""
        try:
            part = leader_of(i, topic, p)
            if diverging(part, p) is not None:
                return True
        except KafkaError:
            return True                   # answered with the partition's error
        offset = p["fetch_offset"]
        if offset > part.log_end_offset or offset < part.log_start_offset:
            return True                   # OFFSET_OUT_OF_RANGE (truncated or deleted meanwhile)
        if offset < part.fetch_upper_bound(replica_id, isolation) and not held_back(topic, p["partition"], part):
            return None
        return False

    by_key: dict[Any, list[Mapping[str, Any]]] = {}
    for topic, p in wanted:
        by_key.setdefault((topic, p["partition"]), []).append(p)
    for key, cached in idle.items():
        by_key[key] = [cached.request]

    def ready_key(key: Any) -> bool:
        """:func:`ready` for the one partition a purgatory check is about: the fetch was not ready
        before, so another partition cannot have made it so."""
        state["read"] = None
        if isinstance(key, FollowerFetches):
            return True                   # we lead a partition it follows: let it ask again now
        touched.add(key)
        wake_idle(key)
        news = [partition_news(key[0], p) for p in by_key.get(key, ())]
        if True in news:
            return True
        return None in news and enough()

    def enough() -> bool:
        if req["min_bytes"] <= 1:
            return True
        fresh = read_all()
        state["read"] = fresh
        return fresh.total >= req["min_bytes"] or fresh.had_error

    def finish(timed_out: bool) -> dict[str, Any]:
        if not timed_out and state["read"] is not None:
            return count(state["read"])
        if reusable and not state["full"]:
            return count(read_all(first, touched))
        return count(read_all())

    keys: list[Any] = list(by_key)
    max_wait_ms = req["max_wait_ms"]
    if replica_id >= 0:
        keys.append(FollowerFetches(replica_id))
        if ctx.replicas.awaits_first_fetch(replica_id):
            max_wait_ms = min(max_wait_ms, FIRST_FETCH_WAIT_MS)
    waiting = ctx.replicas.purgatory.watch(keys, max_wait_ms, ready, finish, ready_key)
    phase["resolved"] = None            # later checks run in later reactor turns: look up afresh
    return waiting
