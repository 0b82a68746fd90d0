"""Requested elections: ElectLeaders (API 43) and the ZooKeeper-era
``/admin/preferred_replica_election`` znode.

Requests are queued and decided at the end of a round, from the states that round left
(:func:`decisions.elect_leaders`), and written through the controller's fenced path. A write
that loses a version race is decided again in the round the newer state's watch starts (up to
:data:`MAX_ELECTION_ATTEMPTS` times); the znode is deleted, fenced, once its election has been
written (as Kafka does). Every request is answered once: with its results, or NOT_CONTROLLER
when this broker resigns (fenced or not) before they are decided.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer

from kafkalite.controller import decisions
from kafkalite.controller.requests import ElectionRequest
from kafkalite.coordination.errors import ControllerMovedError, ZkVersionConflictError
from kafkalite.errors import ErrorCode
from kafkalite.metadata.admin_znode import AdminZNode
from zk_schema.admin import PreferredReplicaElection

if TYPE_CHECKING:
    from kafkalite.controller.controller import Controller

log = logging.getLogger(__name__)

#: A version race lost this often in a row ends the partition's election with REQUEST_TIMED_OUT.
MAX_ELECTION_ATTEMPTS = 10


class RequestedElections:
    def __init__(self, controller: "Controller",
                 znode: Callable[[], AdminZNode[PreferredReplicaElection] | None]) -> None:
        """``znode()``: ``/admin/preferred_replica_election`` as the watch has it."""
        self.controller = controller
        self.znode = znode
        self.queued: list[ElectionRequest] = []
        #: taken by the running round, not all answered yet
        self.in_flight: list[ElectionRequest] = []
        self._znode_done: int | None = None      # mzxid of the znode request already written

    def request(self, election_type: int, partitions: list[tuple[str, int]]) -> defer.Deferred:
        req = ElectionRequest(election_type, list(dict.fromkeys(partitions)))
        if not self.controller.active:
            req.fail(ErrorCode.NOT_CONTROLLER, "this broker is not the controller")
            return req.deferred
        self.queued.append(req)
        self.controller.reconcile()
        return req.deferred

    def due(self) -> bool:
        znode = self.znode()
        return bool(self.queued) or (znode is not None and znode.mzxid != self._znode_done)

    def fail_all(self, message: str) -> None:
        """Resigned: every request not yet answered gets NOT_CONTROLLER."""
        pending, self.in_flight, self.queued = self.in_flight + self.queued, [], []
        for req in pending:
            req.fail(ErrorCode.NOT_CONTROLLER, message)
        self._znode_done = None

    @defer.inlineCallbacks
    def run(self) -> Any:
        """Decide and write every queued request (a round's last job)."""
        ctl = self.controller
        requests, self.queued = self.queued, []
        znode = self.znode()
        znode_mzxid = None
        if znode is not None and znode.mzxid != self._znode_done:
            znode_mzxid = znode.mzxid
            requests.append(ElectionRequest(decisions.PREFERRED, list(znode.request.partitions),
                                            znode_version=znode.version))
        self.in_flight = requests
        retry: list[ElectionRequest] = []
        for req in requests:
            if not ctl.active:             # resigned meanwhile: fail_all answered them
                return
            live = set(ctl.cache.brokers) | {ctl.broker_id}
            assignments = {t: info.assignment for t, info in ctl.cache.topics.items()}
            actions, results = decisions.elect_leaders(
                req.election_type, req.remaining, live, assignments, ctl.context.states(ctl.cache),
                ctl.deleting(), ctl.fence.epoch, set(ctl.shutting_down), ctl.all_offline_replicas())
            lost: list[tuple[str, int]] = []
            for action in actions:
                key = (action.topic, action.partition)
                try:
                    yield ctl.execute(action)
                except ControllerMovedError:
                    raise                          # Controller.job_failed resigns
                except ZkVersionConflictError:
                    lost.append(key)              # decided again when the newer state arrives
                    del results[key]
                except Exception as exc:
                    log.warning("election write %s failed: %s", action, exc)
                    results[key] = decisions.ElectionResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc), -1)
            if not ctl.active:
                return
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
                done = {k: ErrorCode(v.code).name for k, v in req.results.items()}
                log.info("preferred replica election from %s: %s", "/admin/preferred_replica_election", done)
                yield ctl.kafka_zk.delete_preferred_replica_election(ctl.fence, req.znode_version)
        self.queued = retry + self.queued
        self.in_flight = []
