"""Followers copy their leader's log with Kafka's own Fetch (replica id set), long-polling.

One fetcher per leader broker serves every partition this broker follows from it. A partition
that just became a follower first asks its leader where its latest epoch ends
(OffsetForLeaderEpoch, KIP-101) and truncates any divergent tail, so a replica that was leader
and wrote records nobody else has drops them instead of serving them; only then does it fetch.
Appends keep the leader's offsets and epochs (the storage's follower path). The follower's high
watermark is the leader's, capped by its own log end.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.errors import ErrorCode
from kafkalite.net import client
from kafkalite.records.batch import scan_valid_prefix

log = logging.getLogger(__name__)

FETCH_VERSION = 11
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
OFFSET_FOR_LEADER_EPOCH = 23
FETCH = 1


@dataclass
class FollowedPartition:
    part: Any                   # broker.partition.Partition
    needs_truncation: bool = True
    failed_until: float = 0.0


class ReplicaFetcher:
    def __init__(self, broker_id: int, leader_id: int, reactor: Any, config: Any,
                 endpoint_of: Callable[[int], tuple[str, int] | None]) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.reactor = reactor
        self.config = config
        self.endpoint_of = endpoint_of
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self.conn: client.KafkaClientProtocol | None = None
        self.running = False
        self.loop: defer.Deferred | None = None
        self.wakeup: defer.Deferred | None = None

    # -- membership ------------------------------------------------------------------------------
    def add(self, part: Any) -> None:
        self.partitions[part.key] = FollowedPartition(part)
        if not self.running:
            self.running = True
            self.loop = self._run()
        elif self.wakeup is not None and not self.wakeup.called:
            self.wakeup.callback(None)

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)

    def stop(self) -> None:
        self.running = False
        self.partitions.clear()
        if self.conn is not None:
            self.conn.close()
        if self.wakeup is not None and not self.wakeup.called:
            self.wakeup.callback(None)

    # -- the loop --------------------------------------------------------------------------------
    def _sleep(self, seconds: float) -> defer.Deferred:
        """Back-off that add()/stop() can cut short."""
        d: defer.Deferred = defer.Deferred()
        timer = self.reactor.callLater(seconds, lambda: d.called or d.callback(None))
        d.addBoth(lambda r: (timer.active() and timer.cancel(), r)[1])
        self.wakeup = d
        return d

    @defer.inlineCallbacks
    def _run(self) -> Any:
        backoff = self.config["replica.fetch.backoff.ms"] / 1000.0
        while self.running and self.partitions:
            try:
                if self.conn is None or self.conn.closed:
                    endpoint = self.endpoint_of(self.leader_id)
                    if endpoint is None:
                        yield self._sleep(backoff)
                        continue
                    self.conn = yield client.connect(self.reactor, endpoint[0], endpoint[1],
                                                     f"broker-{self.broker_id}-fetcher",
                                                     self.config["replica.socket.timeout.ms"] / 1000.0)
                if any(f.needs_truncation for f in self.partitions.values()):
                    yield self._truncate()
                fetched = yield self._fetch()
                if not fetched:
                    yield self._sleep(backoff)
            except Exception as exc:  # connection refused/lost, timeouts: back off and retry
                if self.running:
                    log.info("fetcher for leader %d: %s; retrying", self.leader_id, exc)
                    if self.conn is not None:
                        self.conn.close()
                    self.conn = None
                    yield self._sleep(backoff)
        self.running = False

    @defer.inlineCallbacks
    def _truncate(self) -> Any:
        todo = {k: f for k, f in self.partitions.items() if f.needs_truncation}
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), f in todo.items():
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": f.part.leader_epoch,
                "leader_epoch": max(f.part.log.epochs.latest_epoch, 0)})
        body = {"replica_id": self.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
        resp = yield self.conn.request(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body,
                                       self.config["replica.socket.timeout.ms"] / 1000.0)
        for t in resp["topics"]:
            for p in t["partitions"]:
                f = todo.get((t["topic"], p["partition"]))
                if f is None or (t["topic"], p["partition"]) not in self.partitions:
                    continue
                if p["error_code"] != ErrorCode.NONE:
                    log.info("%s-%d: OffsetForLeaderEpoch from leader %d failed with %s", t["topic"],
                             p["partition"], self.leader_id, ErrorCode(p["error_code"]).name)
                    continue
                plog = f.part.log
                if p["end_offset"] < 0:
                    target = f.part.high_watermark        # leader knows no epoch: Kafka's fallback
                else:
                    _, ours = plog.end_offset_for_epoch(p["leader_epoch"])
                    target = min(p["end_offset"], ours if ours >= 0 else plog.log_end_offset)
                if target < plog.log_end_offset:
                    log.info("%s-%d: truncating divergent tail from %d to %d (leader %d epoch %d)", t["topic"],
                             p["partition"], plog.log_end_offset, target, self.leader_id, p["leader_epoch"])
                    plog.truncate_to(target)
                    f.part.high_watermark = min(f.part.high_watermark, plog.log_end_offset)
                f.needs_truncation = False

    @defer.inlineCallbacks
    def _fetch(self) -> Any:
        cfg = self.config
        followed = {k: f for k, f in self.partitions.items() if not f.needs_truncation}
        if not followed:
            return False
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, index), f in followed.items():
            topics.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": f.part.leader_epoch,
                "fetch_offset": f.part.log.log_end_offset, "log_start_offset": f.part.log.log_start_offset,
                "partition_max_bytes": cfg["replica.fetch.max.bytes"]})
        body = {"replica_id": self.broker_id, "max_wait_ms": cfg["replica.fetch.wait.max.ms"],
                "min_bytes": cfg["replica.fetch.min.bytes"], "max_bytes": cfg["replica.fetch.response.max.bytes"],
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": ""}
        timeout = (cfg["replica.fetch.wait.max.ms"] + cfg["replica.socket.timeout.ms"]) / 1000.0
        resp = yield self.conn.request(FETCH, FETCH_VERSION, body, timeout)
        if resp["error_code"] != ErrorCode.NONE:
            return False
        progress = True
        now = int(self.reactor.seconds() * 1000)
        for t in resp["responses"]:
            for p in t["partitions"]:
                key = (t["topic"], p["partition_index"])
                f = self.partitions.get(key)
                if f is None or f.needs_truncation:
                    continue
                progress &= self._apply(f, p, now)
        return progress

    def _apply(self, f: FollowedPartition, p: dict[str, Any], now: int) -> bool:
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
        records = p["records"]
        if records is not None and len(records):
            infos, end = scan_valid_prefix(records)
            if infos:
                plog.append(records[:end] if end < len(records) else records, infos,
                            leader_epoch=part.leader_epoch, now_ms=now, assign_offsets=False)
        part.high_watermark = min(p["high_watermark"], plog.log_end_offset)
        return True


class ReplicaFetcherManager:
    """Which fetcher (leader) each followed partition belongs to."""

    def __init__(self, broker_id: int, reactor: Any, config: Any,
                 endpoint_of: Callable[[int], tuple[str, int] | None]) -> None:
        self.broker_id = broker_id
        self.reactor = reactor
        self.config = config
        self.endpoint_of = endpoint_of
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.leader_of: dict[tuple[str, int], int] = {}
        #: Set by shutdown(): a stopping broker follows nobody any more (a leader must not add it
        #: back to an ISR the controller just took it out of).
        self.closed = False

    def follow(self, part: Any, leader_id: int) -> None:
        """(Re)start following ``part`` from ``leader_id``; always truncates first (new epoch)."""
        self.unfollow(part.key)
        if leader_id < 0 or self.closed:
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.broker_id, leader_id, self.reactor,
                                                                self.config, self.endpoint_of)
        self.leader_of[part.key] = leader_id
        fetcher.add(part)

    def unfollow(self, key: tuple[str, int]) -> None:
        leader = self.leader_of.pop(key, None)
        if leader is not None and leader in self.fetchers:
            fetcher = self.fetchers[leader]
            fetcher.remove(key)
            if not fetcher.partitions:
                fetcher.stop()
                del self.fetchers[leader]

    def shutdown(self) -> None:
        self.closed = True
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self.leader_of.clear()
