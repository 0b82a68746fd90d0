"""The active controller: elected through ``/controller``, it keeps partition state right.

After every metadata change it runs :func:`decisions.plan` over its view of the cluster and
executes the resulting writes one by one through ``KafkaZkClient``'s one fenced write path: each
is conditional on the znode version it was computed from and on ``/controller_epoch`` still being
at the version our election produced, so a deposed controller cannot overwrite its successor
(zookeeper-layout.md §2). A fenced write raises ControllerMovedError and the controller resigns; a
write that loses on the znode version (ZkVersionConflictError) is recomputed when the watch
delivers the newer state.

The view is the broker's metadata cache (what the watches say), read only, under the
controller's own :class:`ControllerContext`: the states it wrote itself, kept until the watches
show them, so the next round does not plan them again (Kafka's controller context does the same).

Controlled shutdown (ControlledShutdown API 7, or a local call when the stopping broker is the
controller itself) adds the broker to ``shutting_down`` and answers once a reconciliation round
that started afterwards has written the new leaders, with the replicated partitions it still
leads. Auto leader rebalance runs every ``leader.imbalance.check.interval.seconds`` inside the
same serialised rounds, so all controller writes go through one fenced path.

Offline replicas (a broker's failed log dir). A broker whose dir fails writes
``/log_dir_event_notification/log_dir_event_<seq>`` naming itself; the controller watches those,
asks each broker named for its log dirs (DescribeLogDirs, through the injected
``describe_log_dirs``), and when one is offline (KAFKA_STORAGE_ERROR) counts every replica
assigned to that broker and listed under none of its online dirs as offline. It keeps them per
broker until that broker's epoch (registration czxid) changes, passes them to ``plan`` (their
leadership moves, they leave the ISR) and then deletes the notifications it consumed, fenced. A
new controller deletes every pending notification and asks every live broker instead: Kafka's
controller learns offline replicas from its LeaderAndIsr responses, which kafkalite does not send.

Requested elections (ElectLeaders, API 43, and the ZooKeeper-era
``/admin/preferred_replica_election`` znode) are queued and decided at the end of a round, from
the states that round left (:func:`decisions.elect_leaders`), and written through the same fenced
path. A write that loses a version race is decided again in the round the newer state's watch
starts; the znode is deleted, fenced, once its election has been written (as Kafka does).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, TypeVar

from twisted.internet import defer, task
from twisted.python.failure import Failure

from kafkalite.controller import decisions
from kafkalite.controller.context import ControllerContext
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.election import ControllerFence
from kafkalite.coordination.errors import (ClientClosedError, ControllerMovedError, NoNodeError,
                                           NodeExistsError, ZkVersionConflictError)
from kafkalite.errors import ErrorCode
from kafkalite.metadata import MetadataCache, TopicInfo
from zk_schema.topics import TopicZNode

log = logging.getLogger(__name__)

#: Seconds before a broker whose election attempt failed (not lost) tries again.
ELECTION_RETRY_S = 1.0


def topic_znode(info: TopicInfo, entries: dict[int, decisions.PartitionAssignment]) -> TopicZNode:
    """The topic znode for ``info`` with ``entries`` as its partitions and reassignment fields."""
    return TopicZNode({p: e.replicas for p, e in entries.items()},
                      {p: e.adding for p, e in entries.items() if e.adding},
                      {p: e.removing for p, e in entries.items() if e.removing}, info.topic_id)

#: Tries of DescribeLogDirs to one broker for one batch of log-dir events, and the pause between.
DESCRIBE_LOG_DIRS_ATTEMPTS = 3
DESCRIBE_LOG_DIRS_BACKOFF_S = 1.0

#: A version race lost this often in a row ends the partition's election with REQUEST_TIMED_OUT.
MAX_ELECTION_ATTEMPTS = 10


@dataclass
class ElectionRequest:
    """One ElectLeaders request (or the znode's) still being decided."""

    election_type: int
    remaining: list[tuple[str, int]]
    znode_version: int | None = None          # set when it came from /admin/preferred_replica_election
    results: dict[tuple[str, int], decisions.ElectionResult] = field(default_factory=dict)
    deferred: defer.Deferred = field(default_factory=defer.Deferred)
    attempts: int = 0

    def finish(self) -> None:
        if not self.deferred.called:
            self.deferred.callback(self.results)

    def fail(self, code: ErrorCode, message: str) -> None:
        for key in self.remaining:
            self.results[key] = (code, message, -1)
        self.remaining = []
        self.finish()


@dataclass
class ReassignRequest:
    """One AlterPartitionReassignments request (or the znode's): target replicas per partition,
    None to cancel. Answered per partition once its topic znode write is done."""

    targets: dict[tuple[str, int], tuple[int, ...] | None]
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = field(default_factory=dict)
    deferred: defer.Deferred = field(default_factory=defer.Deferred)
    attempts: int = 0

    def finish(self) -> None:
        if not self.deferred.called:
            self.deferred.callback(self.results)

    def fail(self, code: ErrorCode, message: str) -> None:
        for key in self.targets:
            self.results.setdefault(key, (code, message))
        self.targets = {}
        self.finish()


#: Partition-state writes the controller has in flight at once (one ZooKeeper session).
MAX_PIPELINED_WRITES = 500


def _pipelined(actions: list[decisions.Action]) -> Iterable[list[decisions.Action]]:
    """``actions`` in order, grouped: runs of partition-state writes (create or update) for
    distinct partitions form one group, up to :data:`MAX_PIPELINED_WRITES`; any other action is a
    group of its own."""
    batch: list[decisions.Action] = []
    keys: set[tuple[str, int]] = set()
    for action in actions:
        if isinstance(action, (decisions.CreateState, decisions.UpdateState)):
            key = (action.topic, action.partition)
            if key in keys or len(batch) >= MAX_PIPELINED_WRITES:
                yield batch
                batch, keys = [], set()
            batch.append(action)
            keys.add(key)
            continue
        if batch:
            yield batch
            batch, keys = [], set()
        yield [action]
    if batch:
        yield batch


_V = TypeVar("_V")


def _only(assignments: Mapping[str, Mapping[int, _V]], keys: set[tuple[str, int]]) -> dict[str, dict[int, _V]]:
    """The entries of ``keys`` among ``assignments`` (topic -> partition -> entry)."""
    out: dict[str, dict[int, _V]] = {}
    for topic, p in keys:
        entries = assignments.get(topic)
        if entries is not None and p in entries:
            out.setdefault(topic, {})[p] = entries[p]
    return out


class Controller:
    def __init__(self, broker_id: int, kafka_zk: KafkaZkClient, cache: MetadataCache,
                 deleting: Callable[[], set[str]], unclean: Callable[[str], bool], *,
                 config: Any = None, reactor: Any = None,
                 broker_epochs: Callable[[], dict[int, int]] = dict,
                 describe_log_dirs: Callable[[int], defer.Deferred] | None = None,
                 preferred_election: Callable[[], Any] = lambda: None,
                 reassign_request: Callable[[], Any] = lambda: None) -> None:
        self.broker_id = broker_id
        self.kafka_zk = kafka_zk      # election and the fenced write path
        self.cache = cache            # the watches' view: read, never written
        self.context = ControllerContext()
        self.deleting = deleting
        self.unclean = unclean
        self.active = False
        self.fence = ControllerFence(-1, -1)
        self.running = False
        self.dirty = False
        #: what the next round plans: every partition, or only these (their state changed)
        self._plan_all = True
        self._plan_keys: set[tuple[str, int]] = set()
        self.electing = False
        self.config = config
        self.reactor = reactor
        self.broker_epochs = broker_epochs     # broker id -> czxid of its registration (its epoch)
        #: Brokers in controlled shutdown -> their broker epoch when they asked (-1 unknown); an
        #: entry goes when that registration does (the broker stopped, or came back as a new epoch).
        self.shutting_down: dict[int, int] = {}
        self.rebalance_due = False
        self.rebalance_loop: task.LoopingCall | None = None
        self._next_round: list[defer.Deferred] = []     # waiting for a round not yet started
        self._this_round: list[defer.Deferred] = []     # waiting for the running round
        #: ``describe_log_dirs(broker_id)`` fires [(log dir, error code, {(topic, partition)})].
        self.describe_log_dirs = describe_log_dirs
        #: Broker -> (its broker epoch when asked, its offline replicas as (topic, partition, broker)).
        self.offline_replicas: dict[int, tuple[int, frozenset[decisions.OfflineReplica]]] = {}
        self._log_dir_watch: Any = None
        self._log_dir_term = 0                          # which controllership a watch belongs to
        self._log_dir_busy = False
        self._log_dir_again: list[int] | None = None      # notifications that arrived meanwhile
        self._log_dir_again_everyone = False
        #: ``/admin/preferred_replica_election`` as the watch has it: (PreferredReplicaElection,
        #: version, mzxid) or None
        self.preferred_election = preferred_election
        self._elections: list[ElectionRequest] = []
        self._znode_done: int | None = None      # mzxid of the znode request already written
        #: ``/admin/reassign_partitions`` as the watch has it: (ReassignPartitions, version) or None
        self.reassign_request = reassign_request
        self._reassignments: list[ReassignRequest] = []
        self._reassign_znode_started: int | None = None   # version of the znode request started
        self._reassign_znode_failed: set[tuple[str, int]] = set()   # its entries that were refused
        #: topic -> (znode version, partitions) this controller wrote, until the watch shows them
        self._topics_written: dict[str, tuple[int, dict[int, decisions.PartitionAssignment]]] = {}
        #: topic -> (the watch's assignment dict, its znode version, the entries built from them)
        self._entries_seen: dict[str, tuple[dict[int, list[int]], int, dict[int, decisions.PartitionAssignment]]] = {}

    # -- election --------------------------------------------------------------------------------
    @defer.inlineCallbacks
    def maybe_elect(self) -> Any:
        """Called when /controller is empty: try to become controller."""
        if self.electing or self.active:
            return
        self.electing = True
        try:
            result = yield self.kafka_zk.elect_controller(self.broker_id)
        except ClientClosedError:
            return                      # this broker is stopping
        except Exception as exc:
            # Nothing else would try again: the /controller watch fires only on a change, and
            # with every broker's attempt failed alike there is none.
            log.warning("controller election failed, trying again in %.1f s: %s", ELECTION_RETRY_S, exc)
            if self.reactor is not None:
                self.reactor.callLater(ELECTION_RETRY_S, self._elect_if_vacant)
            return
        finally:
            self.electing = False
        if result.won:
            self.active, self.fence = True, result.fence
            self.context.clear()
            log.info("broker %d is the controller (epoch %d)", self.broker_id, result.epoch)
            self._start_rebalance_loop()
            self._watch_log_dir_events()
            self.reconcile()

    def _elect_if_vacant(self) -> None:
        if self.cache.controller_id == -1 and not self.active:
            self.maybe_elect()

    def on_controller_changed(self) -> None:
        if self.cache.controller_id == -1:
            if self.active:
                self.resign("the /controller znode vanished")
            self.maybe_elect()
        elif self.cache.controller_id != self.broker_id and self.active:
            self.resign(f"broker {self.cache.controller_id} is now the controller")

    def resign(self, why: str) -> None:
        if self.active:
            log.info("broker %d resigns as controller: %s", self.broker_id, why)
        self.active = False
        self.context.clear()
        self._plan_keys.clear()
        self.shutting_down.clear()
        self.offline_replicas.clear()
        self._log_dir_term += 1
        if self._log_dir_watch is not None:
            self._log_dir_watch.cancel()
            self._log_dir_watch = None
        if self.rebalance_loop is not None and self.rebalance_loop.running:
            self.rebalance_loop.stop()
        self.rebalance_loop = None
        waiting, self._next_round = self._next_round, []
        for d in waiting:
            d.callback(None)
        pending, self._elections = self._elections, []
        for req in pending:
            req.fail(ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller")
        self._znode_done = None
        waiting_moves, self._reassignments = self._reassignments, []
        for move in waiting_moves:
            move.fail(ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller")
        self._reassign_znode_started = None
        self._topics_written.clear()

    # -- controlled shutdown ---------------------------------------------------------------------
    @defer.inlineCallbacks
    def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> Any:
        """Move ``broker_id``'s leaderships away and take it out of every ISR (Kafka's
        ``doControlledShutdown``); fires (error code, [(topic, partition)] it still leads)."""
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        if broker_id not in self.cache.brokers and broker_id != self.broker_id:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        known = self.broker_epochs().get(broker_id, -1)
        if broker_epoch >= 0 and known >= 0 and broker_epoch < known:
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down[broker_id] = broker_epoch if broker_epoch >= 0 else known
        log.info("controlled shutdown of broker %d requested", broker_id)
        yield self.next_round()
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        remaining = sorted(k for k, s in self.context.states(self.cache).items()
                           if s.leader == broker_id and k[0] in self.cache.topics
                           and len(self.cache.topics[k[0]].assignment.get(k[1], ())) > 1)
        log.info("controlled shutdown of broker %d: %d replicated partition(s) still led by it",
                 broker_id, len(remaining))
        return ErrorCode.NONE, remaining

    def next_round(self) -> defer.Deferred:
        """Fires when a reconciliation round that starts after this call has finished."""
        d: defer.Deferred = defer.Deferred()
        self._next_round.append(d)
        self.reconcile()
        return d

    def _forget_stopped(self) -> None:
        """Drop shutting-down brokers whose registration is gone or is a newer epoch."""
        epochs = self.broker_epochs()
        for b, epoch in list(self.shutting_down.items()):
            if b == self.broker_id:
                continue
            if b not in self.cache.brokers or (epoch >= 0 and epochs.get(b, epoch) != epoch):
                del self.shutting_down[b]

    # -- offline replicas (log-dir failures) -------------------------------------------------------
    def _watch_log_dir_events(self) -> None:
        if self.describe_log_dirs is None:
            return
        term = self._log_dir_term
        first = {"call": True}

        def changed(sequences: list[int]) -> None:
            if term != self._log_dir_term or not self.active:
                return
            if first["call"]:
                # a new controller: what earlier notifications said is not known here; ask
                # every live broker and drop them all (Kafka deletes them all at failover)
                first["call"] = False
                self._consume_log_dir_events(sequences, everyone=True)
            else:
                self._consume_log_dir_events(sequences)

        def installed(watch: Any) -> None:
            if term != self._log_dir_term:
                watch.cancel()
            else:
                self._log_dir_watch = watch

        d = self.kafka_zk.watch_log_dir_events(changed)
        d.addCallbacks(installed, lambda f: log.error("cannot watch log dir events: %s", f.value))

    def _consume_log_dir_events(self, sequences: list[int], everyone: bool = False) -> None:
        """One batch at a time; notifications arriving meanwhile make one more batch."""
        if self._log_dir_busy:
            self._log_dir_again = sorted(set(self._log_dir_again or []) | set(sequences))
            self._log_dir_again_everyone |= everyone
            return
        if not sequences and not everyone:
            return
        self._log_dir_busy = True
        d = self._handle_log_dir_events(sequences, everyone)

        def done(result: Any) -> None:
            self._log_dir_busy = False
            if isinstance(result, Failure):
                log.error("handling log dir events failed: %s", result.getTraceback())
            again, self._log_dir_again = self._log_dir_again, None
            everyone_again, self._log_dir_again_everyone = self._log_dir_again_everyone, False
            if (again or everyone_again) and self.active:
                self._consume_log_dir_events(again or [], everyone_again)
        d.addBoth(done)

    @defer.inlineCallbacks
    def _handle_log_dir_events(self, sequences: list[int], everyone: bool) -> Any:
        term = self._log_dir_term
        if everyone:
            brokers: Iterable[int] = set(self.cache.brokers) | {self.broker_id}
        else:
            brokers = yield self.kafka_zk.get_broker_ids_from_log_dir_events(sequences)
        asked = sorted(set(brokers))
        # in parallel: one broker that does not answer (dying, session not yet expired) must not
        # hold up what the others say
        answers = yield defer.gatherResults([self._offline_replicas_of(b) for b in asked])
        if term != self._log_dir_term:
            return
        changed = False
        for b, learned in zip(asked, answers):
            if learned is not None and self.offline_replicas.get(b, (learned[0], frozenset())) != learned:
                self.offline_replicas[b] = learned
                changed = True
                log.info("broker %d (epoch %d): %d offline replica(s): %s", b, learned[0], len(learned[1]),
                         ", ".join(f"{t}-{p}" for t, p, _ in sorted(learned[1])))
        if changed:
            yield self.next_round()
        if term != self._log_dir_term or not self.active:
            return
        try:
            yield self.kafka_zk.delete_log_dir_event_notifications(None if everyone else sequences, self.fence)
        except ControllerMovedError:
            self.resign("the controller epoch moved on (another controller was elected)")

    @defer.inlineCallbacks
    def _offline_replicas_of(self, broker_id: int) -> Any:
        """(broker epoch, offline replicas) from the broker's DescribeLogDirs, None if it could not
        be asked (not alive, no answer): a replica assigned to it that no online dir lists is
        offline once some dir answers KAFKA_STORAGE_ERROR."""
        assert self.describe_log_dirs is not None
        if broker_id not in self.cache.brokers and broker_id != self.broker_id:
            return None
        epoch = self.broker_epochs().get(broker_id, -1)
        dirs = None
        for attempt in range(1, DESCRIBE_LOG_DIRS_ATTEMPTS + 1):
            try:
                dirs = yield self.describe_log_dirs(broker_id)
                break
            except Exception as exc:
                log.warning("DescribeLogDirs to broker %d failed (attempt %d of %d): %s", broker_id, attempt,
                            DESCRIBE_LOG_DIRS_ATTEMPTS, exc)
            if attempt < DESCRIBE_LOG_DIRS_ATTEMPTS and self.reactor is not None:
                yield task.deferLater(self.reactor, DESCRIBE_LOG_DIRS_BACKOFF_S, lambda: None)
        if dirs is None or (broker_id not in self.cache.brokers and broker_id != self.broker_id):
            return None
        if not any(code == ErrorCode.KAFKA_STORAGE_ERROR for _, code, _ in dirs):
            return (epoch, frozenset())
        online: set[tuple[str, int]] = set()
        for _, code, partitions in dirs:
            if code == ErrorCode.NONE:
                online |= partitions
        offline = frozenset((t, p, broker_id) for t, info in self.cache.topics.items()
                            for p, replicas in info.assignment.items()
                            if broker_id in replicas and (t, p) not in online)
        return (epoch, offline)

    def _forget_offline(self) -> None:
        """A broker's offline replicas hold for its epoch only: a restarted broker reports anew."""
        epochs = self.broker_epochs()
        for b, (epoch, _) in list(self.offline_replicas.items()):
            if b not in self.cache.brokers and b != self.broker_id:
                del self.offline_replicas[b]
            elif epoch >= 0 and epochs.get(b, epoch) != epoch:
                del self.offline_replicas[b]

    def all_offline_replicas(self) -> set[decisions.OfflineReplica]:
        return {r for _, replicas in self.offline_replicas.values() for r in replicas}

    # -- requested elections (ElectLeaders, /admin/preferred_replica_election) ---------------------
    def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]]) -> defer.Deferred:
        """Fires {(topic, partition): (code, message, expected leader)} once every partition is
        decided and its write done (Kafka's ``electLeaders``); NOT_CONTROLLER when not active."""
        req = ElectionRequest(election_type, list(dict.fromkeys(partitions)))
        if not self.active:
            req.fail(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            return req.deferred
        self._elections.append(req)
        self.reconcile()
        return req.deferred

    @defer.inlineCallbacks
    def _run_elections(self) -> Any:
        requests, self._elections = self._elections, []
        znode = self.preferred_election()
        znode_mzxid = None
        if znode is not None and znode[2] != self._znode_done:
            znode_mzxid = znode[2]
            requests.append(ElectionRequest(decisions.PREFERRED, list(znode[0].partitions), znode_version=znode[1]))
        retry: list[ElectionRequest] = []
        for i, req in enumerate(requests):
            if not self.active:             # resigned meanwhile (resign() answered the queued ones)
                for left in requests[i:] + retry:
                    left.fail(ErrorCode.NOT_CONTROLLER, "this broker is no longer the controller")
                return
            live = set(self.cache.brokers) | {self.broker_id}
            assignments = {t: info.assignment for t, info in self.cache.topics.items()}
            actions, results = decisions.elect_leaders(
                req.election_type, req.remaining, live, assignments, self.context.states(self.cache),
                self.deleting(), self.fence.epoch, set(self.shutting_down), self.all_offline_replicas())
            lost: list[tuple[str, int]] = []
            for action in actions:
                key = (action.topic, action.partition)
                try:
                    yield self._execute(action)
                except ControllerMovedError:
                    self._elections = requests[i:] + retry + self._elections
                    self.resign("the controller epoch moved on (another controller was elected)")
                    return
                except ZkVersionConflictError:
                    lost.append(key)              # decided again when the newer state arrives
                    del results[key]
                except Exception as exc:
                    log.warning("election write %s failed: %s", action, exc)
                    results[key] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc), -1)
            req.results.update(results)
            req.remaining = lost
            req.attempts += 1
            if lost and req.attempts < MAX_ELECTION_ATTEMPTS:
                retry.append(req)
            elif lost:
                req.fail(ErrorCode.REQUEST_TIMED_OUT, "the partition state kept changing during the election")
            else:
                req.finish()
            if req.znode_version is not None:
                self._znode_done = znode_mzxid
                done = {k: ErrorCode(v[0]).name for k, v in req.results.items()}
                log.info("preferred replica election from %s: %s", "/admin/preferred_replica_election", done)
                try:
                    yield self.kafka_zk.delete_preferred_replica_election(self.fence, req.znode_version)
                except ControllerMovedError:
                    self._elections = retry + self._elections
                    self.resign("the controller epoch moved on (another controller was elected)")
                    return
        self._elections = retry + self._elections

    # -- partition reassignment (KIP-455 on the ZooKeeper data model) ---------------------------------
    def assignment_entries(self, topic: str) -> dict[int, decisions.PartitionAssignment]:
        """The topic znode's partitions with their reassignment fields: as the watch has them,
        or as this controller last wrote them while the watch has not caught up."""
        return dict(self._topic_znode(topic)[1])

    def _topic_znode(self, topic: str) -> tuple[int, dict[int, decisions.PartitionAssignment]]:
        """Read-only; :meth:`assignment_entries` gives a copy to change."""
        info = self.cache.topics[topic]
        mine = self._topics_written.get(topic)
        if mine is not None and mine[0] > info.zk_version:
            return mine
        self._topics_written.pop(topic, None)
        # Every round reads every topic's entries: built once per topic znode the watch delivered
        # (the watch replaces info.assignment with a new dict each time), not once per round.
        cached = self._entries_seen.get(topic)
        if cached is not None and cached[0] is info.assignment and cached[1] == info.zk_version:
            return cached[1], cached[2]
        entries = {p: decisions.PartitionAssignment(tuple(r), tuple(info.adding_replicas.get(p, ())),
                                                    tuple(info.removing_replicas.get(p, ())))
                   for p, r in info.assignment.items()}
        self._entries_seen[topic] = (info.assignment, info.zk_version, entries)
        return info.zk_version, entries

    @defer.inlineCallbacks
    def _write_topic(self, topic: str, entries: dict[int, decisions.PartitionAssignment]) -> Any:
        """The conditional, fenced topic znode write; remembered until the watch shows it."""
        version, _ = self._topic_znode(topic)
        written = yield self.kafka_zk.write_topic_assignment(topic, topic_znode(self.cache.topics[topic], entries),
                                                             version, self.fence)
        self._topics_written[topic] = (written, dict(entries))

    def reassign(self, targets: dict[tuple[str, int], tuple[int, ...] | None]) -> defer.Deferred:
        """Start (target replicas) or cancel (None) reassignments; fires {(topic, partition):
        (error code, message)} once each partition's topic znode is written (Kafka's
        ``alterPartitionReassignments``); NOT_CONTROLLER when not active."""
        req = ReassignRequest(dict(targets))
        if not self.active:
            req.fail(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            return req.deferred
        self._reassignments.append(req)
        self.reconcile()
        return req.deferred

    def ongoing_reassignments(self) -> dict[tuple[str, int], decisions.PartitionAssignment]:
        """ListPartitionReassignments: every partition whose topic znode shows a reassignment."""
        out: dict[tuple[str, int], decisions.PartitionAssignment] = {}
        for topic in sorted(self.cache.topics):
            for p, entry in sorted(self.assignment_entries(topic).items()):
                if entry.reassigning:
                    out[(topic, p)] = entry
        return out

    def _validate_target(self, key: tuple[str, int], target: tuple[int, ...] | None,
                         entries: dict[int, decisions.PartitionAssignment] | None) -> tuple[ErrorCode, str] | None:
        topic, p = key
        if entries is None or p not in entries or topic in self.deleting():
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown topic-partition {topic}-{p}"
        if target is None:
            if not entries[p].reassigning:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No reassignment in progress for {topic}-{p}"
            return None
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
        if any(r < 0 for r in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica assignment: {list(target)}"
        live = set(self.cache.brokers) | {self.broker_id}
        missing = sorted(set(target) - live)
        if missing:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, live broker list: {sorted(live)}"
        return None

    @defer.inlineCallbacks
    def _run_reassignments(self, planned: list[decisions.Action], keys: set[tuple[str, int]] | None = None) -> Any:
        """Start the requested reassignments (one conditional topic znode write per topic), then
        take every reassignment in progress one step further, then delete a finished
        ``/admin/reassign_partitions``."""
        znode = self.reassign_request()
        if znode is not None and znode[1] != self._reassign_znode_started:
            self._reassign_znode_started = znode[1]
            self._reassign_znode_failed = set()
            targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
            for key, target in znode[0].reassignments.items():
                entry = self.assignment_entries(key[0]).get(key[1]) if key[0] in self.cache.topics else None
                if entry is None or entry.target != target:
                    targets[key] = target
            log.info("%s asks for %d reassignment(s)", "/admin/reassign_partitions", len(targets))
            if targets:
                from_znode = ReassignRequest(targets)
                failed = self._reassign_znode_failed

                def answered(results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> None:
                    for key, (code, message) in results.items():
                        if code != ErrorCode.NONE:
                            log.warning("%s: %s-%d not reassigned: %s", "/admin/reassign_partitions",
                                        key[0], key[1], message)
                            failed.add(key)
                from_znode.deferred.addCallback(answered)
                self._reassignments.append(from_znode)
        requests, self._reassignments = self._reassignments, []
        retry: list[ReassignRequest] = []
        for req in requests:
            by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
            for key, target in req.targets.items():
                entries = self.assignment_entries(key[0]) if key[0] in self.cache.topics else None
                error = self._validate_target(key, target, entries)
                if error is not None:
                    req.results[key] = error
                else:
                    by_topic.setdefault(key[0], {})[key[1]] = target
            lost: dict[tuple[str, int], tuple[int, ...] | None] = {}
            for topic, wanted in sorted(by_topic.items()):
                entries = self.assignment_entries(topic)
                for p, target in wanted.items():
                    entries[p] = decisions.start_reassignment(entries[p], target)
                try:
                    yield self._write_topic(topic, entries)
                except ControllerMovedError:
                    self._reassignments = [req] + retry + self._reassignments
                    self.resign("the controller epoch moved on (another controller was elected)")
                    return
                except ZkVersionConflictError:
                    lost.update({(topic, p): t for p, t in wanted.items()})
                    continue
                except Exception as exc:
                    log.warning("reassignment of %s failed: %s", topic, exc)
                    req.results.update({(topic, p): (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) for p in wanted})
                    continue
                for p, target in sorted(wanted.items()):
                    log.info("%s-%d: %s (replicas %s, adding %s, removing %s)", topic, p,
                             "reassignment cancelled" if target is None else f"reassigning to {list(target)}",
                             list(entries[p].replicas), list(entries[p].adding), list(entries[p].removing))
                    req.results[(topic, p)] = (ErrorCode.NONE, None)
            req.targets = lost
            req.attempts += 1
            if lost and req.attempts < MAX_ELECTION_ATTEMPTS:
                retry.append(req)           # decided again when the newer topic znode arrives
            elif lost:
                req.fail(ErrorCode.REQUEST_TIMED_OUT, "the topic's assignment kept changing")
            else:
                req.finish()
        self._reassignments = retry + self._reassignments

        touched = {(a.topic, a.partition) for a in planned if not isinstance(a, decisions.DeleteTopic)}
        live = set(self.cache.brokers) | {self.broker_id}
        for gone in set(self._entries_seen) - set(self.cache.topics):
            del self._entries_seen[gone]
        assignments = {t: self._topic_znode(t)[1] for t in self.cache.topics}
        steps = decisions.reassignment_actions(live, assignments if keys is None else _only(assignments, keys),
                                               self.context.states(self.cache), self.deleting(), self.fence.epoch,
                                               set(self.shutting_down))
        for step in steps:
            if not self.active:
                return
            if (step.topic, step.partition) in touched:
                continue
            self._replan([step])     # the next step plans from this one's write
            try:
                yield self._execute(step)
            except ControllerMovedError:
                self.resign("the controller epoch moved on (another controller was elected)")
                return
            except ZkVersionConflictError as exc:
                log.info("reassignment step %s lost a race: %s", step, exc)
            except Exception as exc:
                log.warning("reassignment step %s failed: %s", step, exc)
                self.dirty = self._plan_all = True

        def finished(key: tuple[str, int], target: tuple[int, ...]) -> bool:
            entry = assignments.get(key[0], {}).get(key[1])
            return (key in self._reassign_znode_failed or entry is None
                    or (not entry.reassigning and entry.replicas == target))
        if znode is not None and self.active and not self._reassignments and all(
                finished(key, target) for key, target in znode[0].reassignments.items()):
            try:
                deleted = yield self.kafka_zk.delete_reassign_partitions(self.fence, znode[1])
            except ControllerMovedError:
                self.resign("the controller epoch moved on (another controller was elected)")
                return
            if deleted:
                log.info("%s done: deleted", "/admin/reassign_partitions")

    # -- auto leader rebalance -------------------------------------------------------------------
    def _start_rebalance_loop(self) -> None:
        if self.config is None or self.reactor is None or not self.config["auto.leader.rebalance.enable"]:
            return
        loop = task.LoopingCall(self._rebalance_tick)
        loop.clock = self.reactor
        loop.start(self.config["leader.imbalance.check.interval.seconds"], now=False).addErrback(
            lambda f: log.error("leader rebalance check failed: %s", f.value))
        self.rebalance_loop = loop

    def _rebalance_tick(self) -> None:
        self.rebalance_due = True
        self.reconcile()

    # -- reconciliation --------------------------------------------------------------------------
    def on_state_changed(self, topic: str, partition: int) -> None:
        """A partition's state znode changed: plan again, unless the change is this controller's
        own write coming back through the watch (the round after a write plans from it already).
        A topic of 1,000 partitions otherwise set off a round over every partition for each."""
        state = self.cache.states.get((topic, partition))
        if self.active and state is not None and self.context.is_own_write((topic, partition), state):
            return
        self.reconcile({(topic, partition)})

    def reconcile(self, keys: set[tuple[str, int]] | None = None) -> None:
        """Run plan() and its writes; changes arriving meanwhile trigger one more round.

        ``keys``: only these partitions' states changed, so only they are planned again (each
        partition's decision depends on its own state and on inputs whose changes come here
        without ``keys``). A failover changes thousands of states one watch at a time; planning
        every partition for each made the controller's work grow with the square of the count.
        """
        if not self.active:
            return                             # winning the election starts with a full round
        if keys is None:
            self._plan_all = True
        else:
            self._plan_keys |= keys
        if self.running:
            self.dirty = True
            return
        self.running = True
        self.dirty = False
        self._this_round, self._next_round = self._next_round, []
        plan_all, keys = self._plan_all, self._plan_keys
        self._plan_all, self._plan_keys = False, set()
        d = self._round(None if plan_all or self.rebalance_due else keys)

        def done(result: Any) -> None:
            self.running = False
            waiting, self._this_round = self._this_round, []
            for w in waiting:
                w.callback(None)
            if isinstance(result, Failure):
                log.error("controller round failed: %s", result.getTraceback())
            if (self.dirty or self._next_round) and self.active:
                self.reconcile(set())    # what is left to plan was noted: all, or some keys
        d.addBoth(done)

    def _replan(self, actions: list[Any]) -> None:
        """The next round plans again the partitions these actions wrote (everything for other writes)."""
        self.dirty = True
        for action in actions:
            if isinstance(action, (decisions.CreateState, decisions.UpdateState, decisions.CompleteReassignment)):
                self._plan_keys.add((action.topic, action.partition))
            else:
                self._plan_all = True

    @defer.inlineCallbacks
    def _round(self, keys: set[tuple[str, int]] | None) -> Any:
        """One round over every partition (``keys`` None) or over ``keys`` only."""
        states = self.context.states(self.cache)
        # An active controller is alive by definition, even while its own re-registration after
        # a new ZooKeeper session has not reached the watch yet.
        live = set(self.cache.brokers) | {self.broker_id}
        self._forget_stopped()
        self._forget_offline()
        offline = self.all_offline_replicas()
        assignments = {t: i.assignment for t, i in self.cache.topics.items()}
        if keys is not None:
            assignments = _only(assignments, keys)
        actions: list[decisions.Action] = decisions.plan(live, assignments, states, self.deleting(),
                                                         self.fence.epoch, self.unclean, set(self.shutting_down),
                                                         offline_replicas=offline)
        if self.rebalance_due:
            self.rebalance_due = False
            touched = {(a.topic, a.partition) for a in actions if not isinstance(a, decisions.DeleteTopic)}
            # partitions being reassigned are left alone (Kafka skips them too)
            touched |= {(t, p) for t, info in self.cache.topics.items()
                        for p in set(info.adding_replicas) | set(info.removing_replicas)}
            actions += decisions.preferred_leader_actions(
                live, assignments, states, self.deleting(), self.fence.epoch, set(self.shutting_down),
                self.config["leader.imbalance.per.broker.percentage"], touched, offline_replicas=offline)
        for batch in _pipelined(actions):
            if not self.active:
                return
            # Partition-state writes of distinct partitions go out together, as Kafka's
            # controller pipelines its ZooKeeper requests: one round trip each in a row made a
            # 1,000-partition topic wait ~30 s for its leaders.
            outcomes = yield defer.DeferredList([self._execute(action) for action in batch], consumeErrors=True)
            self._replan(batch)      # plan once more from what was written (its echo does not trigger a round)
            for action, (ok, result) in zip(batch, outcomes):
                if not ok and not self._settle_failed_write(action, result.value):
                    return
        if self.active:
            yield self._run_reassignments(actions, keys)
        znode = self.preferred_election()
        if self.active and (self._elections or (znode is not None and znode[2] != self._znode_done)):
            yield self._run_elections()

    def _settle_failed_write(self, action: decisions.Action, exc: BaseException) -> bool:
        """Log a failed write; False when this controller was replaced (it resigns)."""
        if isinstance(exc, ControllerMovedError):
            if self.active:
                self.resign("the controller epoch moved on (another controller was elected)")
            return False
        if isinstance(exc, ZkVersionConflictError):
            log.info("controller write %s lost a race: %s", action, exc)
        elif isinstance(exc, (NodeExistsError, NoNodeError)):
            log.info("controller write %s skipped: %s", action, exc)
        else:
            log.warning("controller write %s failed: %s", action, exc)
            self.dirty = self._plan_all = True
        return True

    @defer.inlineCallbacks
    def _execute(self, action: decisions.Action) -> Any:
        if isinstance(action, decisions.CreateState):
            written = yield self.kafka_zk.create_leader_and_isr(action.topic, action.partition, action.state,
                                                                self.fence)
            self.context.wrote(action.topic, action.partition, written)
            log.info("%s-%d: created with leader %d, ISR %s", action.topic, action.partition,
                     written.leader, list(written.isr))
        elif isinstance(action, decisions.UpdateState):
            written = yield self.kafka_zk.update_leader_and_isr(
                action.topic, action.partition, action.state.with_version(action.expected_version), self.fence)
            self.context.wrote(action.topic, action.partition, written)
            log.info("%s-%d: leader %d, ISR %s, epoch %d (%s)", action.topic, action.partition, written.leader,
                     list(written.isr), written.leader_epoch, action.reason)
        elif isinstance(action, decisions.CompleteReassignment):
            entries = self.assignment_entries(action.topic)
            entries[action.partition] = decisions.PartitionAssignment(action.replicas)
            yield self._write_topic(action.topic, entries)
            log.info("%s-%d: reassignment completed, replicas %s", action.topic, action.partition,
                     list(action.replicas))
        elif isinstance(action, decisions.DeleteTopic):
            yield self.kafka_zk.delete_topic(action.topic, self.fence)
            self.context.forget_topic(action.topic)
            self._topics_written.pop(action.topic, None)
            log.info("deleted topic %s", action.topic)
