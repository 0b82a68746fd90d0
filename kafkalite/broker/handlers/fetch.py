"""Fetch (key 1): stored batches, unchanged, from each requested partition; long-polls.

The handler is KafkaApis.handleFetchRequest's part, as Redpanda's fetch.cc reads (plan -> read ->
respond): :func:`plan_fetch` (the fetch session, authorization, the reader's message format, the
replication throttle) -> ``ReplicaManager.fetch_messages`` (the follower's progress, the reads,
and the wait: ``broker/fetch_reader.py``, ``broker/delayed_fetch.py``) -> :func:`respond` (the
session's shape of the answer, quotas, metrics).

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

from dataclasses import dataclass

from twisted.internet import defer

from kafkalite.broker.fetch_reader import FetchParams, FetchRead, Wanted
from kafkalite.broker.fetch_session import FetchContext, FetchSession, FetchSessionCache, FetchSessionError
from kafkalite.broker.registry import api
from kafkalite.broker.services import RequestContext
from kafkalite.errors import ErrorCode
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import FetchRequest, FetchResponse, records_size
from kafkalite.records.legacy import fetch_magic
from kafkalite.security.acl import Operation, ResourceType

NO_SESSION = 0


@dataclass
class FetchPlan:
    """What :func:`plan_fetch` decided: the read's parameters, the partitions, the session."""

    params: FetchParams
    wanted: list[Wanted]
    sessions: FetchSessionCache | None = None       #: v7+
    session_ctx: FetchContext | None = None

    @property
    def session(self) -> FetchSession | None:
        return self.session_ctx.session if self.session_ctx is not None else None


@api(ApiKey.FETCH, 0, 12)
def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse | defer.Deferred[FetchResponse]:
    try:
        plan = plan_fetch(ctx, req)
    except FetchSessionError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code), "session_id": NO_SESSION, "responses": []}
    return ctx.replicas.fetch_messages(plan.params, plan.wanted, plan.session if plan.params.tracked else None,
                                       lambda read: respond(ctx, plan, read))


def plan_fetch(ctx: RequestContext, req: FetchRequest) -> FetchPlan:
    """The session (KIP-227: a full fetch opens one, an incremental one names only changes; a
    wrong id or epoch raises FetchSessionError), who may read what, and how to read it."""
    replica_id = req["replica_id"]
    ctx.throttle_exempt = replica_id >= 0        # replication is not a client's traffic
    sessions: FetchSessionCache | None = ctx.fetch_sessions if ctx.api_version >= 7 else None
    session_ctx: FetchContext | None = None
    wanted: list[Wanted] | None = None
    if sessions is not None:
        session_ctx = sessions.new_context(req["session_id"], req["session_epoch"],
                                           req["topics"], req["forgotten_topics_data"],
                                           replica_id >= 0, ctx.now_ms)
    elif req["session_id"] != NO_SESSION:
        raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    else:
        wanted = [(t["topic"], p) for t in req["topics"] for p in t["partitions"]]

    def all_wanted() -> list[Wanted]:
        """The request's partitions; a session's listed only here, when needed: a follower's
        incremental fetch reads what ``FetchSession.split`` lists instead."""
        return session_ctx.wanted if session_ctx is not None else wanted or []
    # Kafka: a follower's fetch (replica id >= 0) needs ClusterAction, or every partition is
    # refused; a consumer's needs Read on each topic
    if replica_id >= 0:
        denied = set() if ctx.authorize(Operation.CLUSTER_ACTION, ResourceType.CLUSTER) else {t for t, _ in all_wanted()}
        ctx.throttle_exempt = not denied        # a refused "follower" is a client, with its quotas
    else:
        denied = {t for t in {t for t, _ in all_wanted()} if not ctx.authorize(Operation.READ, ResourceType.TOPIC, t)}
    leader_quota = ctx.quotas.replication.leader if replica_id >= 0 else None
    session = session_ctx.session if session_ctx is not None else None
    params = FetchParams(
        replica_id=replica_id, isolation=req["isolation_level"],
        max_bytes=min(req["max_bytes"], ctx.config["fetch.max.bytes"]),     # Kafka caps it broker-side
        min_bytes=req["min_bytes"], max_wait_ms=req["max_wait_ms"],
        # Fetch v0-3 readers know message formats v0/v1 only: batches are converted on the way
        # out; any consumer gets batches appended under format v0/v1 in that format
        reader_magic=fetch_magic(ctx.api_version) if ctx.api_version <= 3 and replica_id < 0 else 2,
        # only v12+ requests carry last_fetched_epoch; below v12 it decodes as its default, -1
        check_epochs=ctx.api_version >= 12,
        leader_quota=leader_quota, denied=denied,
        # a follower's incremental fetch skips its session's idle partitions (FetchSession.split);
        # not under a replication throttle, which a rate lifts, not an event
        tracked=(session is not None and replica_id >= 0 and not denied
                 and (leader_quota is None or not leader_quota.throttled)),
        # plaintext TCP: records go by sendfile (net/sendfile.py); a connectionless context copies
        zero_copy=getattr(getattr(ctx, "conn", None), "zero_copy", False))
    # a tracked fetch reads its session's split, not the whole list (ReplicaManager.fetch_messages)
    return FetchPlan(params, [] if params.tracked else all_wanted(), sessions, session_ctx)


def respond(ctx: RequestContext, plan: FetchPlan, read: FetchRead) -> FetchResponse:
    """The answer, shaped once when it is sent: for the session, then quotas, then metrics."""
    body = read.body
    _shape_for_session(ctx, plan, read)
    _apply_quotas(ctx, plan.params, body)
    metrics = ctx.metrics
    follower = plan.params.is_follower
    for t in body["responses"]:
        for entry in t["partitions"]:
            if entry["error_code"]:
                metrics.fetch_failed(t["topic"])
            else:
                metrics.fetched(t["topic"], records_size(entry["records"]), follower)
    return body


def _shape_for_session(ctx: RequestContext, plan: FetchPlan, read: FetchRead) -> None:
    """An incremental answer keeps only partitions with news (updating the session's cached
    offsets, and a follower's idle marks); a full one opens its session."""
    sessions, session_ctx, session = plan.sessions, plan.session_ctx, plan.session
    if session_ctx is None or sessions is None:
        return
    body = read.body
    if session is not None:
        body["responses"] = sessions.incremental_responses(session, body["responses"])
        body["session_id"] = session.id
        if plan.params.tracked:
            for key, changes, leader in read.marks:
                cached = session.partitions.get(key)
                if cached is not None:
                    cached.idle_since, cached.leader = changes, leader
    elif session_ctx.create:
        body["session_id"] = sessions.create(session_ctx, body["responses"], ctx.now_ms)


def _apply_quotas(ctx: RequestContext, params: FetchParams, body: FetchResponse) -> None:
    """The answer's bytes, counted once when it is sent (per partition, no record). A
    consumer's bytes count against its consumer_byte_rate (a follower's do not); a consumer over
    it gets, as from Kafka 2.x (KIP-219), an answer without records carrying the throttle time,
    and those bytes are taken back out of its rate: it reads them after the throttle. A
    follower's bytes of throttled partitions count in the leader's replication rate (KIP-73)."""
    leader_quota = params.leader_quota
    if not params.is_follower:
        size = sum(records_size(entry["records"]) for t in body["responses"] for entry in t["partitions"])
        who = (ctx.quota_user, ctx.client_id or "")
        throttle = ctx.quotas.fetch.record(*who, size, ctx.now_ms)
        if throttle > 0:
            ctx.quotas.fetch.unrecord(*who, size, ctx.now_ms)
            for t in body["responses"]:
                for entry in t["partitions"]:
                    entry["records"] = b""
            ctx.throttle(throttle)
    elif leader_quota is not None and leader_quota.throttled:
        leader_quota.record(sum(records_size(entry["records"]) for t in body["responses"] for entry in t["partitions"]
                                if leader_quota.is_throttled(t["topic"], entry["partition_index"])), ctx.now_ms)
