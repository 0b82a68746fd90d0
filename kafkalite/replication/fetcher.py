"""Followers copy their leader's log with Kafka's own Fetch (replica id set), long-polling.

``num.replica.fetchers`` fetchers per leader broker, each with its own connection, serve the
partitions this broker follows from it; a partition goes to fetcher
``Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers``, Kafka's
AbstractFetcherManager.getFetcherId, so a mixed cluster spreads them alike. A partition
that just became a follower first asks its leader where its latest epoch ends
(OffsetForLeaderEpoch, KIP-101) and truncates any divergent tail, so a replica that was leader
and wrote records nobody else has drops them instead of serving them; only then does it fetch.
Each Fetch (v12) also names the epoch of the follower's last batch, and a ``diverging_epoch``
in the answer truncates the same way (KIP-320), for a divergence found while fetching.
Appends keep the leader's offsets and epochs (the storage's follower path). The follower's high
watermark is the leader's, capped by its own log end.

Errors are per partition, as in Kafka's AbstractFetcherThread: a partition the leader answers
with an error, or whose truncation step fails, is delayed by ``replica.fetch.backoff.ms`` on its
own (``PartitionFetchState.delay``) while the others keep fetching at once. The whole fetcher
backs off only when a request itself fails (connection, timeout) or nothing is fetchable, and
then only until the earliest delayed partition is due or a new partition arrives.

Replication throttles (Kafka 2.x, KIP-73): a partition this broker follows that is listed in its
topic's ``follower.replication.throttled.replicas`` and not yet in sync (behind the leader's high
watermark at the last answer) is left out of the Fetch while ``follower.replication.throttled.rate``
is exceeded, and the bytes fetched for throttled partitions are recorded in that rate. A round
where every ready partition is held back waits one back-off, as Kafka's empty fetch does.

Each round truncates the partitions that need it, then fetches, on one connection (Kafka's
order). A partition added while a Fetch is parked at the leader waits for that long poll's
answer before its OffsetForLeaderEpoch goes out; the leader side keeps that wait short
(``broker/replica_manager.py``): taking a leadership answers its in-sync followers' parked
Fetches at once, and their Fetches park only briefly until they have fetched the partition. The
follower usually learns of a new leader epoch from ZooKeeper a moment before the leader does; its
OffsetForLeaderEpoch then waits at the leader until the leader catches up (bounded by
``replica.fetch.wait.max.ms``) instead of being refused into a whole back-off.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol

from twisted.internet import defer
from twisted.python.failure import Failure

from kafkalite.errors import ErrorCode, KafkaStorageError
from kafkalite.group.hashing import java_string_hash, kafka_abs
from kafkalite.net import client
from kafkalite.protocol.api_keys import ApiKey
from kafkalite.protocol.messages_typed import FetchRequest, FetchRequestFetchPartition
from kafkalite.quota.replication import ReplicationQuota
from kafkalite.records.batch import scan_valid_prefix
from kafkalite.replication.fetch_session import FollowerFetchSession
from kafkalite.storage import PartitionLog
from kafkalite.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: Fetch v12 (Kafka 2.7+'s inter-broker level, KIP-320): the follower sends the epoch of its last
#: fetched batch and the leader answers ``diverging_epoch`` when its log went another way. Below
#: ``inter.broker.protocol.version`` 2.7 followers use v11, which every kafkalite leader serves.
FETCH_VERSION = 12
FETCH_VERSION_BEFORE_2_7 = 11


def fetch_version(inter_broker_protocol: str) -> int:
    """The Fetch version followers use at this inter-broker level (Kafka's rule: 2.7-IV1+ -> v12)."""
    m = re.match(r"(\d+)\.(\d+)", inter_broker_protocol)
    if m is None or (int(m.group(1)), int(m.group(2))) >= (2, 7):
        return FETCH_VERSION
    return FETCH_VERSION_BEFORE_2_7
OFFSET_FOR_LEADER_EPOCH_VERSION = 3


class FollowerReplica(Protocol):
    """What the fetcher needs of a replica it keeps in step with the leader
    (``broker.partition.Partition`` in the broker)."""

    topic: str
    index: int
    log: PartitionLog
    high_watermark: int

    @property
    def key(self) -> tuple[str, int]: ...

    @property
    def leader_epoch(self) -> int: ...


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode + partition) % N, in
    Java's 32-bit int arithmetic."""
    h = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    return kafka_abs(h - (1 << 32) if h & 0x80000000 else h) % num_fetchers


@dataclass(eq=False)
class FollowedPartition:
    """Kafka's PartitionFetchState: truncating or fetching, and perhaps delayed after an error.

    A new object per follow() (a new leader epoch), so an answer to a request sent for an
    earlier incarnation is recognised by identity and dropped."""
    part: FollowerReplica
    needs_truncation: bool = True
    #: Reactor time before which this partition is neither fetched nor truncated (Kafka's DelayedItem).
    delayed_until: float = 0.0
    #: the leader's high watermark minus our log end at the last answer (None: no answer yet)
    lag: int | None = None
    #: the request entry last built, and the log state it was built from: rebuilt only when
    #: that state moved, so an idle partition costs one tuple compare per round and the
    #: session's comparison with what the leader holds is an identity test
    request: FetchRequestFetchPartition | None = None
    request_state: tuple[int, int, int, int] | None = None

    @property
    def in_sync(self) -> bool:
        """Kafka's PartitionFetchState.isReplicaInSync (a throttle never holds it back)."""
        return self.lag is not None and self.lag <= 0

    def is_delayed(self, now: float) -> bool:
        return now < self.delayed_until

    def ready_for_fetch(self, now: float) -> bool:
        return not self.needs_truncation and not self.is_delayed(now)

    def ready_to_truncate(self, now: float) -> bool:
        return self.needs_truncation and not self.is_delayed(now)


def _fire(d: defer.Deferred) -> None:
    """End a sleep unless something ended it already."""
    if not d.called:
        d.callback(None)


class _Sleep:
    """A back-off that membership changes can cut short."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self.pending: defer.Deferred | None = None

    def __call__(self, seconds: float) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        timer = self.reactor.callLater(max(seconds, 0.0), _fire, d)
        d.addBoth(lambda r: (timer.active() and timer.cancel(), r)[1])
        self.pending = d
        return d

    def wake(self) -> None:
        """End the sleep on the next reactor turn, so that partitions added in this one (a batch
        of state changes) go out in one request."""
        d = self.pending
        if d is not None and not d.called:
            self.reactor.callLater(0, _fire, d)


class ReplicaFetcher:
    def __init__(self, broker_id: int, leader_id: int, reactor: Any, config: Any,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 connect: Callable[..., defer.Deferred] = client.connect, fetcher_id: int = 0,
                 quota: ReplicationQuota | None = None) -> None:
        self.broker_id = broker_id
        self.quota = quota
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.reactor = reactor
        self.config = config
        self.endpoint_of = endpoint_of
        self.connect = connect
        self.backoff = config["replica.fetch.backoff.ms"] / 1000.0
        self.fetch_version = fetch_version(config["inter.broker.protocol.version"])
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self.conn: client.KafkaClientProtocol | None = None
        self.running = False
        #: a round is under way or waiting (on the leader or a back-off): add() wakes it
        self.looping = False
        #: inside _next_round, and whether a wait ended within it (see there)
        self.in_round = False
        self.again = False
        self.starting: Any = None           # IDelayedCall that starts the loop
        self.sleep = _Sleep(reactor)
        #: KIP-227 session with this leader (Fetch v7+; every inter-broker version we speak)
        self.session: FollowerFetchSession | None = FollowerFetchSession() if self.fetch_version >= 7 else None

    # -- membership ------------------------------------------------------------------------------
    def add(self, part: FollowerReplica) -> None:
        self.partitions[part.key] = FollowedPartition(part)
        self.running = True
        if self.looping:
            self.sleep.wake()
        elif self.starting is None:       # next turn: this turn's additions share one request
            self.starting = self.reactor.callLater(0, self._start)

    def _start(self) -> None:
        self.starting = None
        if self.running and not self.looping:
            self.looping = True
            self._next_round()

    def remove(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def stop(self) -> None:
        self.running = False
        self.partitions.clear()
        if self.conn is not None:
            self.conn.close()
        self.sleep.wake()

    # -- per-partition state ---------------------------------------------------------------------
    def now(self) -> float:
        return self.reactor.seconds()

    def delay(self, fs: Iterable[FollowedPartition]) -> None:
        """Kafka's delayPartitions: hold these back for one back-off (one already delayed keeps
        its deadline); the others are unaffected."""
        now: float | None = None
        for f in fs:
            if now is None:
                now = self.now()
            if not f.is_delayed(now):
                f.delayed_until = now + self.backoff

    def ready(self, which: Callable[[FollowedPartition, float], bool]) -> dict[TopicPartition, FollowedPartition]:
        now = self.now()
        return {k: f for k, f in self.partitions.items() if which(f, now)}

    def idle_wait(self) -> float:
        """Nothing to send: wait until the earliest delayed partition is due, at most one back-off
        (add() wakes us sooner)."""
        now = self.now()
        return min([self.backoff, *(f.delayed_until - now for f in self.partitions.values() if f.is_delayed(now))])

    def _current(self, key: TopicPartition, f: FollowedPartition) -> bool:
        """Is ``f`` still the state we follow ``key`` with (not removed or re-added meanwhile)?"""
        return self.running and self.partitions.get(key) is f

    def unthrottled(self, ready: dict[TopicPartition, FollowedPartition]) -> dict[TopicPartition, FollowedPartition]:
        """``ready`` without the partitions the follower throttle holds back now."""
        quota = self.quota
        if quota is None or not quota.throttled:
            return ready
        now_ms = int(self.now() * 1000)
        return {k: f for k, f in ready.items() if not quota.should_throttle(k[0], k[1], f.in_sync, now_ms)}

    # -- the loop --------------------------------------------------------------------------------
    # Kafka's AbstractFetcherThread.doWork as plain callbacks: a round connects if needed,
    # truncates what needs it (OffsetForLeaderEpoch), then fetches; each wait on the leader or a
    # back-off ends in the callback that takes the next step, and the next Fetch leaves from the
    # handling of the last one's answer, in the same reactor turn. (Written as nested
    # inlineCallbacks generators it cost a follower two generator resumptions and two more
    # Deferreds per Fetch, the largest part of its handling of an answer.)

    def _next_round(self, _: object = None) -> None:
        """Start rounds until one has to wait; called again by whatever it waits on. A wait that
        ends at once (a Deferred already fired) calls this from inside the round: the loop here
        then goes on, instead of one more level of recursion per round."""
        if self.in_round:
            self.again = True
            return
        self.in_round = True
        try:
            while self.running and self.partitions:
                truncating, fetchable = self._ready_now()
                self.again = False
                if not truncating and not fetchable:
                    # Kafka's "no active partitions": back off, but only until one is due.
                    self.sleep(self.idle_wait()).addCallback(self._next_round)
                elif not self._round(truncating, fetchable):
                    continue
                if not self.again:
                    return
        except Exception:     # a bug here would otherwise stop replication without a word
            log.exception("fetcher for leader %d stopped", self.leader_id)
        finally:
            self.in_round = False
        self._stopped()

    def _round(self, truncating: dict[TopicPartition, FollowedPartition],
               fetchable: dict[TopicPartition, FollowedPartition]) -> bool:
        """One round from its start (True: it waits for something, which goes on with it)."""
        try:
            if self.conn is None or self.conn.closed:
                endpoint = self.endpoint_of(self.leader_id)
                if endpoint is None:
                    raise ConnectionError(f"no endpoint known for broker {self.leader_id}")
                d = self.connect(self.reactor, endpoint[0], endpoint[1],
                                 f"broker-{self.broker_id}-fetcher-{self.fetcher_id}",
                                 self.config["replica.socket.timeout.ms"] / 1000.0)
                d.addCallbacks(self._connected, self._failed, callbackArgs=(truncating,))
                return True
            return self._after_connect(truncating, fetchable)
        except Exception as exc:
            self._failed(exc)
            return True

    def _connected(self, conn: client.KafkaClientProtocol,
                   truncating: dict[TopicPartition, FollowedPartition]) -> None:
        self.conn = conn
        self._go_on(self._after_connect, truncating)

    def _go_on(self, step: Callable[[dict[TopicPartition, FollowedPartition], None], bool],
               truncating: dict[TopicPartition, FollowedPartition]) -> None:
        """Goes on with a round from a callback (connected, truncated): a step that fails ends the
        round as failed; one that neither sent a request nor started a back-off starts the next."""
        try:
            waiting = step(truncating, None)
        except Exception as exc:
            self._failed(exc)
            return
        if not waiting:
            self._next_round()

    def _after_connect(self, truncating: dict[TopicPartition, FollowedPartition],
                       fetchable: dict[TopicPartition, FollowedPartition] | None) -> bool:
        """The truncation step if any partition needs it, else the fetch step."""
        if truncating and self.running:
            self._truncate(truncating).addCallbacks(self._truncated, self._failed, callbackArgs=(truncating,))
            return True
        return self._fetch_step(truncating, fetchable)

    def _truncated(self, _: object, truncating: dict[TopicPartition, FollowedPartition]) -> None:
        self._go_on(self._fetch_step, truncating)

    def _fetch_step(self, truncating: dict[TopicPartition, FollowedPartition],
                    fetchable: dict[TopicPartition, FollowedPartition] | None) -> bool:
        """Fetch the partitions ready for it (``fetchable``, or found anew after a truncation
        step or a connect); True when something was sent or a back-off started."""
        ready = self.ready(FollowedPartition.ready_for_fetch) if fetchable is None else fetchable
        followed = self.unthrottled(ready)
        if followed and self.running:
            self._fetch(followed)
            return True
        if ready and not truncating and self.running:
            self.sleep(self.backoff).addCallback(self._next_round)     # all held back by the throttle
            return True
        return False

    def _failed(self, reason: Failure | Exception) -> None:
        """A request failed (connection refused/lost, timeouts) or handling its answer raised."""
        if not self.running:
            self._stopped()
            return
        exc = reason.value if isinstance(reason, Failure) else reason
        log.info("fetcher for leader %d: %s; retrying", self.leader_id, exc)
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        # Kafka delays every partition of the fetcher and sleeps one back-off; a
        # partition added meanwhile is not delayed and wakes the loop.
        self.delay(self.partitions.values())
        self.sleep(self.backoff).addCallback(self._next_round)

    def _stopped(self) -> None:
        self.looping = False
        if self.conn is not None and not self.running:
            self.conn.close()

    def _ready_now(self) -> tuple[dict[TopicPartition, FollowedPartition], dict[TopicPartition, FollowedPartition]]:
        """(ready to truncate, ready for fetch), in one pass over the partitions."""
        now = self.now()
        truncating: dict[TopicPartition, FollowedPartition] = {}
        fetchable: dict[TopicPartition, FollowedPartition] = {}
        for k, f in self.partitions.items():
            if not f.is_delayed(now):
                (truncating if f.needs_truncation else fetchable)[k] = f
        return truncating, fetchable

    def _truncate(self, todo: dict[TopicPartition, FollowedPartition]) -> defer.Deferred:
        """Send OffsetForLeaderEpoch for ``todo``; the Deferred fires once the answer is applied."""
        topics: dict[str, list[dict[str, Any]]] = {}
        sent: dict[TopicPartition, int] = {}
        for (topic, index), f in todo.items():
            sent[(topic, index)] = f.part.leader_epoch
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": f.part.leader_epoch,
                "leader_epoch": max(f.part.log.epochs.latest_epoch, 0)})
        body = {"replica_id": self.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        assert self.conn is not None  # a round connects first
        d = self.conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body,
                              self.config["replica.socket.timeout.ms"] / 1000.0)
        return d.addCallback(lambda resp: self.handle_epoch_response(todo, sent, resp))

    def handle_epoch_response(self, todo: dict[TopicPartition, FollowedPartition], sent: dict[TopicPartition, int],
                              resp: dict[str, Any]) -> None:
        """Truncate where the leader's answer says; delay exactly the partitions it refused."""
        failed = []
        for t in resp["topics"]:
            for p in t["partitions"]:
                key = (t["topic"], p["partition"])
                f = todo.get(key)
                # Only for the incarnation and leader epoch the request was for (Kafka checks the
                # epoch too: a leadership change meanwhile makes the answer meaningless).
                if f is None or not self._current(key, f) or f.part.leader_epoch != sent[key]:
                    continue
                if p["error_code"] != ErrorCode.NONE:
                    log.info("%s-%d: OffsetForLeaderEpoch from leader %d failed with %s; retrying in %d ms",
                             t["topic"], p["partition"], self.leader_id, ErrorCode(p["error_code"]).name,
                             self.backoff * 1000)
                    failed.append(f)
                    continue
                try:
                    self._truncate_to_leader(f, p["leader_epoch"], p["end_offset"])
                except KafkaStorageError as exc:
                    # its log dir failed: the broker stops following it (on the reactor, soon);
                    # the fetcher's other partitions go on
                    log.warning("%s-%d: %s", t["topic"], p["partition"], exc)
                    failed.append(f)
                    continue
                f.needs_truncation = False
        self.delay(failed)

    def _truncate_to_leader(self, f: FollowedPartition, leader_epoch: int, end_offset: int) -> None:
        """Cut our log where the leader says ``leader_epoch`` ends (an OffsetForLeaderEpoch
        answer, or a Fetch v12 ``diverging_epoch``): at that end, or at our own end of that epoch
        if it is earlier; with no epoch known to the leader, at our high watermark (Kafka's
        fallback)."""
        plog = f.part.log
        if end_offset < 0:
            target = f.part.high_watermark
        else:
            _, ours = plog.end_offset_for_epoch(leader_epoch)
            target = min(end_offset, ours if ours >= 0 else plog.log_end_offset)
        if target < plog.log_end_offset:
            log.info("%s-%d: truncating divergent tail from %d to %d (leader %d epoch %d)", f.part.topic,
                     f.part.index, plog.log_end_offset, target, self.leader_id, leader_epoch)
            plog.truncate_to(target)
            f.part.high_watermark = min(f.part.high_watermark, plog.log_end_offset)

    def _fetch(self, followed: dict[TopicPartition, FollowedPartition]) -> None:
        """Send one Fetch for ``followed``; its answer is applied and the next round starts from it."""
        cfg = self.config
        entries: dict[TopicPartition, FetchRequestFetchPartition] = {}
        sent: dict[TopicPartition, int] = {}
        max_bytes = cfg["replica.fetch.max.bytes"]
        for key, f in followed.items():
            plog = f.part.log
            state = (plog.log_end_offset, plog.log_start_offset, plog.epochs.latest_epoch, f.part.leader_epoch)
            request = f.request
            if request is None or state != f.request_state or request["partition_max_bytes"] != max_bytes:
                request = f.request = {
                    "partition": key[1], "current_leader_epoch": state[3], "fetch_offset": state[0],
                    "log_start_offset": state[1], "last_fetched_epoch": state[2], "partition_max_bytes": max_bytes}
                f.request_state = state
            sent[key] = state[0]
            entries[key] = request
        session_id, epoch = 0, -1
        forgotten: list[Any] = []
        topics: dict[str, list[Any]]
        if self.session is not None:
            # an incremental request names only partitions whose fields changed (KIP-227)
            session_id, epoch, topics, forgotten = self.session.build(entries)
        else:
            topics = {}
            for (topic, _), entry in entries.items():
                topics.setdefault(topic, []).append(entry)
        body: FetchRequest = {
            "replica_id": self.broker_id, "max_wait_ms": cfg["replica.fetch.wait.max.ms"],
            "min_bytes": cfg["replica.fetch.min.bytes"], "max_bytes": cfg["replica.fetch.response.max.bytes"],
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": forgotten, "rack_id": ""}
        timeout = (cfg["replica.fetch.wait.max.ms"] + cfg["replica.socket.timeout.ms"]) / 1000.0
        assert self.conn is not None  # a round connects first
        try:
            d = self.conn.request(ApiKey.FETCH, self.fetch_version, body, timeout)
        except Exception:
            self._session_lost()
            raise
        d.addCallbacks(self._fetched, self._fetch_failed, callbackArgs=(followed, sent))

    def _fetched(self, resp: dict[str, Any], followed: dict[TopicPartition, FollowedPartition],
                 sent: dict[TopicPartition, int]) -> None:
        try:
            self.handle_fetch_response(followed, sent, resp)
        except Exception as exc:
            self._failed(exc)
            return
        self._next_round()

    def _fetch_failed(self, reason: Failure) -> None:
        self._session_lost()
        self._failed(reason)

    def _session_lost(self) -> None:
        if self.session is not None:
            self.session.handle_error()     # the leader may have moved the epoch: start over

    def handle_fetch_response(self, followed: dict[TopicPartition, FollowedPartition], sent: dict[TopicPartition, int],
                              resp: dict[str, Any]) -> None:
        """Apply what the leader answered; delay exactly the partitions it answered with an error."""
        if self.session is not None and not self.session.handle_response(resp) \
                and resp["error_code"] in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            # the leader lost our session (restart, eviction, leader change): the next fetch is full
            log.info("fetch from leader %d: %s; sending a full fetch", self.leader_id,
                     ErrorCode(resp["error_code"]).name)
            return
        if resp["error_code"] != ErrorCode.NONE:
            log.info("fetch from leader %d failed: %s", self.leader_id, ErrorCode(resp["error_code"]).name)
            self.delay(f for k, f in followed.items() if self._current(k, f))
            return
        now = self.now()
        now_ms = int(now * 1000)
        failed = []
        for t in resp["responses"]:
            for p in t["partitions"]:
                key = (t["topic"], p["partition_index"])
                f = followed.get(key)
                # Kafka applies an answer only to the state it was asked for: same incarnation,
                # still fetching, not delayed meanwhile, log end where the request started.
                if (f is None or not self._current(key, f) or not f.ready_for_fetch(now)
                        or f.part.log.log_end_offset != sent[key]):
                    continue
                try:
                    if not self._apply(f, p, now_ms):
                        failed.append(f)
                except KafkaStorageError as exc:
                    log.warning("%s-%d: %s", key[0], key[1], exc)   # its dir failed; see handle_epoch_response
                    failed.append(f)
        self.delay(failed)

    def _apply(self, f: FollowedPartition, p: dict[str, Any], now: int) -> bool:
        """False when the leader answered this partition with an error (retry it after a back-off)."""
        part, plog = f.part, f.part.log
        code = p["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if p["log_start_offset"] > plog.log_end_offset:
                log.info("%s-%d: leader's log starts at %d, past our end %d: restarting there", part.topic,
                         part.index, p["log_start_offset"], plog.log_end_offset)
                plog.truncate_fully_and_start_at(p["log_start_offset"], now)
            else:
                f.needs_truncation = True
            return True
        if code != ErrorCode.NONE:
            log.debug("%s-%d: fetch from leader %d: %s", part.topic, part.index, self.leader_id, ErrorCode(code).name)
            return False
        diverged = p.get("diverging_epoch")
        if diverged is not None and (diverged["epoch"] >= 0 or diverged["end_offset"] >= 0):
            # KIP-320: our last fetched epoch ends earlier in the leader's log; cut there and
            # fetch again from the new end (no records come with this answer)
            self._truncate_to_leader(f, diverged["epoch"], diverged["end_offset"])
            return True
        records = p["records"]
        if records is not None and len(records):
            if self.quota is not None and self.quota.is_throttled(part.topic, part.index):
                self.quota.record(len(records), now)
            infos, end = scan_valid_prefix(records)
            if infos:
                plog.append(records[:end] if end < len(records) else records, infos,
                            leader_epoch=part.leader_epoch, now_ms=now, assign_offsets=False)
        part.high_watermark = min(p["high_watermark"], plog.log_end_offset)
        f.lag = max(0, p["high_watermark"] - plog.log_end_offset)
        # DeleteRecords on the leader: adopt its log start, as far as our high watermark allows
        # (Kafka's follower maybeIncrementLogStartOffset)
        start = min(p["log_start_offset"], part.high_watermark)
        if start > plog.log_start_offset:
            plog.delete_records_before(start, now)
        return True


class ReplicaFetcherManager:
    """Which fetcher (leader broker, fetcher id) each followed partition belongs to."""

    def __init__(self, broker_id: int, reactor: Any, config: Any,
                 endpoint_of: Callable[[int], tuple[str, int] | None],
                 connect: Callable[..., defer.Deferred] = client.connect,
                 quota: ReplicationQuota | None = None) -> None:
        self.broker_id = broker_id
        self.quota = quota
        self.reactor = reactor
        self.config = config
        self.endpoint_of = endpoint_of
        self.connect = connect
        self.num_fetchers = config["num.replica.fetchers"]
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}     # (leader id, fetcher id)
        self.leader_of: dict[tuple[str, int], tuple[int, int]] = {}
        #: Set by shutdown(): a stopping broker follows nobody any more (a leader must not add it
        #: back to an ISR the controller just took it out of).
        self.closed = False

    def follow(self, part: FollowerReplica, leader_id: int) -> None:
        """(Re)start following ``part`` from ``leader_id``; always truncates first (new epoch)."""
        self.unfollow(part.key)
        if leader_id < 0 or self.closed:
            return
        key = (leader_id, fetcher_id(part.key[0], part.key[1], self.num_fetchers))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(self.broker_id, leader_id, self.reactor, self.config,
                                                          self.endpoint_of, self.connect, fetcher_id=key[1],
                                                          quota=self.quota)
        self.leader_of[part.key] = key
        fetcher.add(part)

    def unfollow(self, key: tuple[str, int]) -> None:
        which = self.leader_of.pop(key, None)
        if which is not None and which in self.fetchers:
            fetcher = self.fetchers[which]
            fetcher.remove(key)
            if not fetcher.partitions:
                fetcher.stop()
                del self.fetchers[which]

    def shutdown(self) -> None:
        self.closed = True
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self.leader_of.clear()
