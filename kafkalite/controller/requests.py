"""Requests the controller answers after one or more rounds: ElectLeaders and
AlterPartitionReassignments (or their ``/admin`` znodes). Each carries its Deferred and is
answered exactly once: when decided, or NOT_CONTROLLER when this broker resigns meanwhile.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from twisted.internet import defer

from kafkalite.controller.decisions import ElectionResult
from kafkalite.errors import ErrorCode


@dataclass
class ElectionRequest:
    """One ElectLeaders request (or the znode's) still being decided."""

    election_type: int
    remaining: list[tuple[str, int]]
    znode_version: int | None = None          # set when it came from /admin/preferred_replica_election
    results: dict[tuple[str, int], ElectionResult] = field(default_factory=dict)
    deferred: defer.Deferred = field(default_factory=defer.Deferred)
    attempts: int = 0

    def finish(self) -> None:
        if not self.deferred.called:
            self.deferred.callback(self.results)

    def fail(self, code: ErrorCode, message: str) -> None:
        for key in self.remaining:
            self.results[key] = ElectionResult(code, message, -1)
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
