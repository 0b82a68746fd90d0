"""Broker-side fetch sessions (KIP-227, Kafka 2.8's FetchSession.scala rules): no I/O.

A fetcher (consumer or follower) names its partitions once in a full fetch (session epoch 0);
the broker keeps them, with the offsets and the high watermark / log start / last stable offset
it last answered, in a session with a random non-zero id. Later requests (epoch 1, 2, ...) carry
only partitions whose fetch offset changed, plus ``forgotten_topics_data`` to drop; the answer
carries only partitions with records, a changed offset, an error or a diverging epoch.

Slots are limited (``max.incremental.fetch.session.cache.slots``). A new session may evict,
as Kafka does: first the least recently used session idle longer than
``min.incremental.fetch.session.eviction.ms``; else the "smallest" evictable session (consumers
before followers, then fewer partitions) if the newcomer is not smaller. A follower's session
can evict a consumer's at any age; any session can be evicted once older than the eviction time.
"""
from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.protocol.messages_typed import FetchResponseFetchableTopicResponse, FetchResponsePartitionData, records_size
from kafkalite.topic_partition import TopicPartition

#: session id 0: no session (Kafka's INVALID_SESSION_ID)
INVALID_SESSION_ID = 0
#: epoch 0 opens a session (full fetch); -1 closes one / asks for a sessionless full fetch
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 1, 2, ... wrapping to 1; a negative epoch stays final."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class CachedPartition:
    """One partition of a session: the fetcher's last request fields and what we last answered."""

    __slots__ = ("topic", "request", "high_watermark", "log_start_offset", "last_stable_offset",
                 "idle_since", "leader")

    def __init__(self, topic: str, request: dict[str, Any]) -> None:
        self.topic = topic
        #: the partition's request entry (fetch_offset, partition_max_bytes, epochs...): reused as is
        self.request = request
        self.high_watermark = -1
        self.log_start_offset = -1
        self.last_stable_offset = -1
        #: a follower's session only: the partition's change count (``Purgatory.events``) when it
        #: was last answered with nothing left to copy, -1 if it was not. While the count and the
        #: request stay the same, there is nothing to read or answer (see :meth:`FetchSession.split`)
        self.idle_since = -1
        #: the leader's Partition at that answer (the same object while the count stays)
        self.leader: Any = None

    def must_respond(self, entry: Mapping[str, Any], update: bool = True) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: does an incremental answer carry this
        partition? Records, an error, a diverging epoch, a preferred read replica, or a changed
        high watermark / log start offset / last stable offset. ``update`` stores what is sent."""
        respond = bool(entry["error_code"]) or records_size(entry["records"]) > 0 \
            or entry.get("diverging_epoch") is not None or entry.get("preferred_read_replica", -1) >= 0
        hw, lso, lst = entry["high_watermark"], entry["log_start_offset"], entry["last_stable_offset"]
        if hw != self.high_watermark or lso != self.log_start_offset \
                or (lst >= 0 and lst != self.last_stable_offset):
            respond = True
            if update:
                self.high_watermark, self.log_start_offset = hw, lso
                if lst >= 0:
                    self.last_stable_offset = lst
        return respond


@dataclass
class FetchSession:
    """A session: its partitions in answer order (partitions that returned records move last,
    so others get the byte budget next time, as Kafka's IncrementalFetchContext does)."""

    id: int
    privileged: bool
    creation_ms: int
    last_used_ms: int
    epoch: int = 1
    partitions: "OrderedDict[TopicPartition, CachedPartition]" = field(default_factory=OrderedDict)

    def size(self) -> int:
        return len(self.partitions)

    def evict_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey order: consumers before followers, then fewer partitions, then id."""
        return (self.privileged, len(self.partitions), self.id)

    def wanted(self) -> list[tuple[str, dict[str, Any]]]:
        """The partitions to read, in the session's order (the request entries kept)."""
        return [(c.topic, c.request) for c in self.partitions.values()]

    def split(self, events: Mapping[Any, int], replica_id: int, now_ms: int
              ) -> tuple[list[tuple[str, dict[str, Any]]], dict[TopicPartition, CachedPartition]]:
        """A follower's incremental fetch: the partitions to read (session order), and the idle
        ones: answered last time with nothing left to copy, not named again since, and unchanged
        since (their count in ``events`` did not move). An idle partition has nothing to answer;
        the leader records follower ``replica_id`` as caught up on it at ``now_ms`` (Kafka's
        ``Replica.updateFetchState`` for a fetch at the log end it already had) and watches it,
        nothing more. One that lapsed (no longer led, the follower out of the ISR) is read after
        the others, by the full path (``Partition.record_follower_fetch``), which decides (ISR
        expansion, lost leadership). Kafka reads every partition of a session each time; a
        follower's holds every partition the leader leads for it, mostly idle.

        One pass over the session does the split and the recording, with the recording inlined
        (it was a Partition method): per idle partition of every follower Fetch, these were
        three passes and two calls (callgrind: 3.4 % of a leader's instructions per acks=all
        cycle with 50 idle partitions, the inlining alone)."""
        wanted: list[tuple[str, dict[str, Any]]] = []
        idle: dict[TopicPartition, CachedPartition] = {}
        lapsed: list[tuple[str, dict[str, Any]]] = []
        get = events.get
        for key, c in self.partitions.items():
            if get(key, 0) == c.idle_since:          # never for -1 (not idle): counts start at 0
                part = c.leader
                # still led here, the follower in the ISR: caught up now (else the full path decides)
                follower = part.followers.get(replica_id)
                state = part.state
                if follower is None or part.offline or state is None or state.leader != part.broker_id \
                        or replica_id not in state.isr:
                    lapsed.append((c.topic, c.request))
                    continue
                follower.last_caught_up_ms = now_ms
                follower.last_fetch_leader_log_end = follower.log_end_offset
                follower.last_fetch_ms = now_ms
                idle[key] = c
            else:
                wanted.append((c.topic, c.request))
        wanted += lapsed
        return wanted, idle

    def update(self, topics: Iterable[Mapping[str, Any]], forgotten: Iterable[Mapping[str, Any]]) -> None:
        """An incremental request: new or changed partitions replace their cached request fields
        (a new one starts with unknown offsets, so the next answer carries it); forgotten ones go."""
        for t in topics:
            for p in t["partitions"]:
                key = (t["topic"], p["partition"])
                cached = self.partitions.get(key)
                if cached is None:
                    self.partitions[key] = CachedPartition(t["topic"], p)
                else:
                    cached.request = p
                    cached.idle_since = -1
        for t in forgotten:
            for index in t["partitions"]:
                self.partitions.pop((t["topic"], index), None)


class FetchSessionError(Exception):
    """A request naming an unknown session or the wrong epoch: answered with ``code`` alone."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class FetchContext:
    """What one Fetch request reads and how its answer is shaped (Kafka's FetchContext kinds).

    ``session`` set: an incremental fetch on it. ``create``: a full fetch that opens a session
    once answered (if a slot is free). Neither: sessionless, every requested partition answered.

    An incremental context's ``wanted`` (every partition of the session) is listed only when
    asked: a follower's incremental fetch never asks (``FetchSession.split`` lists what it reads),
    and listing its session's hundreds of mostly idle partitions was per-request waste.
    """

    __slots__ = ("_wanted", "session", "create", "privileged")

    def __init__(self, wanted: list[tuple[str, Any]] | None, session: FetchSession | None = None,
                 create: bool = False, privileged: bool = False) -> None:
        #: None: the session's partitions, listed on first use (the same request's turn)
        self._wanted = wanted
        self.session = session
        self.create = create
        self.privileged = privileged

    @property
    def wanted(self) -> list[tuple[str, Any]]:
        if self._wanted is None:
            self._wanted = self.session.wanted() if self.session is not None else []
        return self._wanted


class FetchSessionCache:
    """All sessions of a broker; the broker's clock passes ``now_ms`` in."""

    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120000,
                 rng: Callable[[int, int], int] | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.SystemRandom().randint
        #: least recently used first
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.evictions = 0
        self.incremental_fetches = 0

    # -- metrics (Kafka's FetchSessionCache gauges) ------------------------------------------------
    def __len__(self) -> int:
        return len(self._sessions)

    def num_partitions(self) -> int:
        """NumIncrementalFetchPartitionsCached: summed when asked (a gauge), not per request."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    # -- the request path --------------------------------------------------------------------------
    def new_context(self, session_id: int, epoch: int, topics: Sequence[Mapping[str, Any]],
                    forgotten: Sequence[Mapping[str, Any]], privileged: bool,
                    now_ms: int) -> FetchContext:
        """Kafka's FetchManager.newContext. A full fetch (epoch 0 or -1) closes the session it
        names; epoch 0 asks for a new one. An incremental fetch must name a live session at its
        current epoch (else FetchSessionError), which then advances."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            wanted = [(t["topic"], p) for t in topics for p in t["partitions"]]
            return FetchContext(wanted, create=epoch == INITIAL_EPOCH, privileged=privileged)
        session = self._sessions.get(session_id)
        if session is None:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            raise FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.update(topics, forgotten)
        if not session.partitions:
            # Kafka: a session emptied by forgotten topics is closed; the answer is sessionless
            self.remove(session_id)
            return FetchContext([])
        self._touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        self.incremental_fetches += 1
        return FetchContext(None, session=session)

    def create(self, ctx: FetchContext, responses: list[FetchResponseFetchableTopicResponse], now_ms: int) -> int:
        """A full fetch answered: open its session if a slot is free (or one can be evicted);
        the cached offsets are the ones just sent. Returns the id, 0 when none (sessionless)."""
        if not ctx.wanted or not self._make_room(ctx.privileged, len(ctx.wanted), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, ctx.privileged, now_ms, now_ms, epoch=next_epoch(INITIAL_EPOCH))
        for topic, p in ctx.wanted:
            session.partitions[(topic, p["partition"])] = CachedPartition(topic, p)
        for t in responses:
            for entry in t["partitions"]:
                cached = session.partitions.get((t["topic"], entry["partition_index"]))
                if cached is not None:
                    cached.must_respond(entry)
        self._sessions[session_id] = session
        return session_id

    def incremental_responses(self, session: FetchSession,
                              responses: list[FetchResponseFetchableTopicResponse],
                              ) -> list[FetchResponseFetchableTopicResponse]:
        """Keep only the partitions an incremental answer carries (updating the cached offsets);
        partitions that returned records move to the end of the session's order."""
        kept: list[FetchResponseFetchableTopicResponse] = []
        for t in responses:
            topic = t["topic"]
            parts: list[FetchResponsePartitionData] = []
            for entry in t["partitions"]:
                key = (topic, entry["partition_index"])
                cached = session.partitions.get(key)
                if cached is None or cached.must_respond(entry):
                    parts.append(entry)
                    if cached is not None and records_size(entry["records"]):
                        session.partitions.move_to_end(key)
            if parts:
                kept.append({"topic": topic, "partitions": parts})
        return kept

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    # -- internals ---------------------------------------------------------------------------------
    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session.id)

    def _new_id(self) -> int:
        while True:
            candidate = self._rng(1, _MAX_EPOCH)
            if candidate not in self._sessions:
                return candidate

    def _make_room(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's FetchSessionCache.tryEvict (when the cache is full)."""
        if len(self._sessions) < self.max_slots:
            return True
        if self.max_slots <= 0:
            return False
        oldest = next(iter(self._sessions.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest.id)
            return True
        # Kafka: sessions older than the eviction time are evictable by anyone; a follower
        # (privileged) may also evict any consumer session, whatever its age
        candidates = [s for s in self._sessions.values()
                      if now_ms - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evict_key)
        if (privileged, size, INVALID_SESSION_ID) < victim.evict_key():
            return False                # a newcomer no bigger than the victim does not displace it
        self._evict(victim.id)
        return True

    def _evict(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)
        self.evictions += 1
