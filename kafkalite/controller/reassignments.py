"""Partition reassignment (KIP-455 on the ZooKeeper data model): the controller's part.

The reassignment's state lives in the topic znode: during a move a partition's replicas are
RS = target + original with ``adding_replicas`` and ``removing_replicas``. Requests come from
AlterPartitionReassignments (45) and ``/admin/reassign_partitions``. Each round starts the
requested reassignments (one conditional, fenced topic znode write per topic), takes every move
in progress one step further (:func:`decisions.reassignment_actions`), and deletes a finished
``/admin/reassign_partitions``. The topic znodes this controller wrote are remembered until the
watch shows them (:meth:`Reassignments.topic_znode`), so a round plans from its own writes.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, TypeVar

from twisted.internet import defer

from kafkalite.controller import decisions
from kafkalite.controller.elections import MAX_ELECTION_ATTEMPTS
from kafkalite.controller.requests import ReassignRequest
from kafkalite.coordination.errors import ControllerMovedError, ZkVersionConflictError
from kafkalite.errors import ErrorCode
from kafkalite.metadata import TopicInfo
from kafkalite.metadata.admin_znode import AdminZNode
from zk_schema.admin import ReassignPartitions
from zk_schema.topics import TopicZNode

if TYPE_CHECKING:
    from kafkalite.controller.controller import Controller

log = logging.getLogger(__name__)

Entries = dict[int, decisions.PartitionAssignment]


class TopicAssignment(NamedTuple):
    """A topic znode's partitions with their reassignment fields, at a znode version."""

    version: int
    entries: Entries


class _Seen(NamedTuple):
    assignment: dict[int, list[int]]      #: the watch's dict (replaced on every delivery)
    version: int
    entries: Entries


def topic_znode(info: TopicInfo, entries: Entries) -> TopicZNode:
    """The topic znode for ``info`` with ``entries`` as its partitions and reassignment fields."""
    return TopicZNode({p: e.replicas for p, e in entries.items()},
                      {p: e.adding for p, e in entries.items() if e.adding},
                      {p: e.removing for p, e in entries.items() if e.removing}, info.topic_id)


_V = TypeVar("_V")


def only(assignments: Mapping[str, Mapping[int, _V]], keys: set[tuple[str, int]]) -> dict[str, dict[int, _V]]:
    """The entries of ``keys`` among ``assignments`` (topic -> partition -> entry)."""
    out: dict[str, dict[int, _V]] = {}
    for topic, p in keys:
        entries = assignments.get(topic)
        if entries is not None and p in entries:
            out.setdefault(topic, {})[p] = entries[p]
    return out


class Reassignments:
    def __init__(self, controller: "Controller",
                 znode: Callable[[], AdminZNode[ReassignPartitions] | None]) -> None:
        """``znode()``: ``/admin/reassign_partitions`` as the watch has it."""
        self.controller = controller
        self.znode = znode
        self.queued: list[ReassignRequest] = []
        #: taken by the running round, not all answered yet
        self.in_flight: list[ReassignRequest] = []
        self._znode_started: int | None = None           # version of the znode request started
        self._znode_failed: set[tuple[str, int]] = set()  # its entries that were refused
        #: topic -> what this controller wrote, until the watch shows it
        self._written: dict[str, TopicAssignment] = {}
        #: topic -> the entries built from the watch's last delivery
        self._seen: dict[str, _Seen] = {}

    # -- the topic znodes --------------------------------------------------------------------------
    def assignment_entries(self, topic: str) -> Entries:
        """The topic znode's partitions with their reassignment fields: as the watch has them,
        or as this controller last wrote them while the watch has not caught up."""
        return dict(self.topic_znode(topic).entries)

    def topic_znode(self, topic: str) -> TopicAssignment:
        """Read-only; :meth:`assignment_entries` gives a copy to change."""
        info = self.controller.cache.topics[topic]
        mine = self._written.get(topic)
        if mine is not None and mine.version > info.zk_version:
            return mine
        self._written.pop(topic, None)
        # Every round reads every topic's entries: built once per topic znode the watch delivered
        # (the watch replaces info.assignment with a new dict each time), not once per round.
        cached = self._seen.get(topic)
        if cached is not None and cached.assignment is info.assignment and cached.version == info.zk_version:
            return TopicAssignment(cached.version, cached.entries)
        entries = {p: decisions.PartitionAssignment(tuple(r), tuple(info.adding_replicas.get(p, ())),
                                                    tuple(info.removing_replicas.get(p, ())))
                   for p, r in info.assignment.items()}
        self._seen[topic] = _Seen(info.assignment, info.zk_version, entries)
        return TopicAssignment(info.zk_version, entries)

    @defer.inlineCallbacks
    def write_topic(self, topic: str, entries: Entries) -> Any:
        """The conditional, fenced topic znode write; remembered until the watch shows it."""
        ctl = self.controller
        version = self.topic_znode(topic).version
        written = yield ctl.kafka_zk.write_topic_assignment(topic, topic_znode(ctl.cache.topics[topic], entries),
                                                            version, ctl.fence)
        self._written[topic] = TopicAssignment(written, dict(entries))

    def forget_topic(self, topic: str) -> None:
        self._written.pop(topic, None)

    # -- requests ----------------------------------------------------------------------------------
    def request(self, targets: dict[tuple[str, int], tuple[int, ...] | None]) -> defer.Deferred:
        req = ReassignRequest(dict(targets))
        if not self.controller.active:
            req.fail(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            return req.deferred
        self.queued.append(req)
        self.controller.reconcile()
        return req.deferred

    def ongoing(self) -> dict[tuple[str, int], decisions.PartitionAssignment]:
        """ListPartitionReassignments: every partition whose topic znode shows a reassignment."""
        out: dict[tuple[str, int], decisions.PartitionAssignment] = {}
        for topic in sorted(self.controller.cache.topics):
            for p, entry in sorted(self.assignment_entries(topic).items()):
                if entry.reassigning:
                    out[(topic, p)] = entry
        return out

    def fail_all(self, message: str) -> None:
        """Resigned: every request not yet answered gets NOT_CONTROLLER."""
        pending, self.in_flight, self.queued = self.in_flight + self.queued, [], []
        for move in pending:
            move.fail(ErrorCode.NOT_CONTROLLER, message)
        self._znode_started = None
        self._written.clear()

    def _validate_target(self, key: tuple[str, int], target: tuple[int, ...] | None,
                         entries: Entries | None) -> tuple[ErrorCode, str] | None:
        ctl = self.controller
        topic, p = key
        if entries is None or p not in entries or topic in ctl.deleting():
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
        live = set(ctl.cache.brokers) | {ctl.broker_id}
        missing = sorted(set(target) - live)
        if missing:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, live broker list: {sorted(live)}"
        return None

    # -- the round's job ---------------------------------------------------------------------------
    @defer.inlineCallbacks
    def run(self, planned: list[decisions.Action], keys: set[tuple[str, int]] | None = None) -> Any:
        """Start the requested reassignments (one conditional topic znode write per topic), then
        take every reassignment in progress one step further, then delete a finished
        ``/admin/reassign_partitions``."""
        ctl = self.controller
        znode = self.znode()
        if znode is not None and znode.version != self._znode_started:
            self._take_znode_request(znode)
        yield self._start_requested()
        if not ctl.active:
            return
        assignments = yield self._step(planned, keys)
        if assignments is None:
            return

        def finished(key: tuple[str, int], target: tuple[int, ...]) -> bool:
            entry = assignments.get(key[0], {}).get(key[1])
            return (key in self._znode_failed or entry is None
                    or (not entry.reassigning and entry.replicas == target))
        if znode is not None and ctl.active and not self.queued and all(
                finished(key, target) for key, target in znode.request.reassignments.items()):
            deleted = yield ctl.kafka_zk.delete_reassign_partitions(ctl.fence, znode.version)
            if deleted:
                log.info("%s done: deleted", "/admin/reassign_partitions")

    def _take_znode_request(self, znode: AdminZNode[ReassignPartitions]) -> None:
        """Queue what ``/admin/reassign_partitions`` asks beyond what the topic znodes show."""
        ctl = self.controller
        self._znode_started = znode.version
        self._znode_failed = set()
        targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
        for key, target in znode.request.reassignments.items():
            entry = self.assignment_entries(key[0]).get(key[1]) if key[0] in ctl.cache.topics else None
            if entry is None or entry.target != target:
                targets[key] = target
        log.info("%s asks for %d reassignment(s)", "/admin/reassign_partitions", len(targets))
        if targets:
            from_znode = ReassignRequest(targets)
            failed = self._znode_failed

            def answered(results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> None:
                for key, (code, message) in results.items():
                    if code != ErrorCode.NONE:
                        log.warning("%s: %s-%d not reassigned: %s", "/admin/reassign_partitions",
                                    key[0], key[1], message)
                        failed.add(key)
            from_znode.deferred.addCallback(answered)
            self.queued.append(from_znode)

    @defer.inlineCallbacks
    def _start_requested(self) -> Any:
        ctl = self.controller
        requests, self.queued = self.queued, []
        self.in_flight = requests
        retry: list[ReassignRequest] = []
        for req in requests:
            by_topic: dict[str, dict[int, tuple[int, ...] | None]] = {}
            for key, target in req.targets.items():
                entries = self.assignment_entries(key[0]) if key[0] in ctl.cache.topics else None
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
                    yield self.write_topic(topic, entries)
                except ControllerMovedError:
                    raise                          # Controller.job_failed resigns
                except ZkVersionConflictError:
                    lost.update({(topic, p): t for p, t in wanted.items()})
                    continue
                except Exception as exc:
                    log.warning("reassignment of %s failed: %s", topic, exc)
                    req.results.update({(topic, p): (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) for p in wanted})
                    continue
                if not ctl.active:
                    return                         # resigned meanwhile: fail_all answered them
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
        self.queued = retry + self.queued
        self.in_flight = []

    @defer.inlineCallbacks
    def _step(self, planned: list[decisions.Action], keys: set[tuple[str, int]] | None) -> Any:
        """Every move in progress one step on; returns the assignments it planned from (None:
        this broker resigned meanwhile)."""
        ctl = self.controller
        touched = {(a.topic, a.partition) for a in planned if not isinstance(a, decisions.DeleteTopic)}
        live = set(ctl.cache.brokers) | {ctl.broker_id}
        for gone in set(self._seen) - set(ctl.cache.topics):
            del self._seen[gone]
        assignments = {t: self.topic_znode(t).entries for t in ctl.cache.topics}
        steps = decisions.reassignment_actions(live, assignments if keys is None else only(assignments, keys),
                                               ctl.context.states(ctl.cache), ctl.deleting(), ctl.fence.epoch,
                                               set(ctl.shutting_down))
        for step in steps:
            if not ctl.active:
                return None
            if (step.topic, step.partition) in touched:
                continue
            ctl.events.replan([step])     # the next step plans from this one's write
            try:
                yield ctl.execute(step)
            except ControllerMovedError:
                raise                      # Controller.job_failed resigns
            except ZkVersionConflictError as exc:
                log.info("reassignment step %s lost a race: %s", step, exc)
            except Exception as exc:
                log.warning("reassignment step %s failed: %s", step, exc)
                ctl.events.replan_everything()
        return assignments
