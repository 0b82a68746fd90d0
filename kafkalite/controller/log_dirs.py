"""Offline replicas: the controller's view of brokers' failed log dirs.

A broker whose dir fails writes ``/log_dir_event_notification/log_dir_event_<seq>`` naming
itself; the controller watches those, asks each broker named for its log dirs (DescribeLogDirs,
through the injected ``describe_log_dirs``), and when one is offline (KAFKA_STORAGE_ERROR) counts
every replica assigned to that broker and listed under none of its online dirs as offline. It
keeps them per broker until that broker's epoch (registration czxid) changes, passes them to
``plan`` (their leadership moves, they leave the ISR) and then deletes the notifications it
consumed, fenced. A new controller deletes every pending notification and asks every live broker
instead: Kafka's controller learns offline replicas from its LeaderAndIsr responses, which
kafkalite does not send. One batch of notifications is handled at a time; notifications arriving
meanwhile make one more batch.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

from twisted.internet import defer, task
from twisted.python.failure import Failure

from kafkalite.controller import decisions
from kafkalite.errors import ErrorCode

if TYPE_CHECKING:
    from kafkalite.controller.controller import Controller

log = logging.getLogger(__name__)

#: Tries of DescribeLogDirs to one broker for one batch of log-dir events, and the pause between.
DESCRIBE_LOG_DIRS_ATTEMPTS = 3
DESCRIBE_LOG_DIRS_BACKOFF_S = 1.0


class BrokerOfflineReplicas(NamedTuple):
    """What one broker's DescribeLogDirs said, valid for that broker epoch only."""

    epoch: int                                            #: its registration czxid when asked
    replicas: frozenset[decisions.OfflineReplica]         #: (topic, partition, broker)


class OfflineReplicas:
    def __init__(self, controller: "Controller",
                 describe_log_dirs: Callable[[int], defer.Deferred] | None) -> None:
        """``describe_log_dirs(broker_id)`` fires [(log dir, error code, {(topic, partition)})]."""
        self.controller = controller
        self.describe_log_dirs = describe_log_dirs
        self.by_broker: dict[int, BrokerOfflineReplicas] = {}
        self._watch: Any = None
        self._term = 0                                # which controllership a watch belongs to
        self._busy = False
        self._again: list[int] | None = None          # notifications that arrived meanwhile
        self._again_everyone = False

    def all(self) -> set[decisions.OfflineReplica]:
        return {r for learned in self.by_broker.values() for r in learned.replicas}

    def start(self) -> None:
        """This broker became the controller: watch the notifications (the first delivery asks
        every live broker)."""
        if self.describe_log_dirs is None:
            return
        term = self._term
        first = {"call": True}

        def changed(sequences: list[int]) -> None:
            if term != self._term or not self.controller.active:
                return
            if first["call"]:
                # a new controller: what earlier notifications said is not known here; ask
                # every live broker and drop them all (Kafka deletes them all at failover)
                first["call"] = False
                self._consume(sequences, everyone=True)
            else:
                self._consume(sequences)

        def installed(watch: Any) -> None:
            if term != self._term:
                watch.cancel()
            else:
                self._watch = watch

        d = self.controller.kafka_zk.watch_log_dir_events(changed)
        d.addCallbacks(installed, lambda f: log.error("cannot watch log dir events: %s", f.value))

    def stop(self) -> None:
        """Resigned: forget everything, stop watching."""
        self.by_broker.clear()
        self._term += 1
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def forget_stale(self) -> None:
        """A broker's offline replicas hold for its epoch only: a restarted broker reports anew."""
        ctl = self.controller
        epochs = ctl.broker_epochs()
        for b, learned in list(self.by_broker.items()):
            epoch = learned.epoch
            if b not in ctl.cache.brokers and b != ctl.broker_id:
                del self.by_broker[b]
            elif epoch >= 0 and epochs.get(b, epoch) != epoch:
                del self.by_broker[b]

    def _consume(self, sequences: list[int], everyone: bool = False) -> None:
        if self._busy:
            self._again = sorted(set(self._again or []) | set(sequences))
            self._again_everyone |= everyone
            return
        if not sequences and not everyone:
            return
        self._busy = True
        d = self._handle(sequences, everyone)

        def done(result: Any) -> None:
            self._busy = False
            if isinstance(result, Failure):
                self.controller.job_failed(result, "handling log dir events")
            again, self._again = self._again, None
            everyone_again, self._again_everyone = self._again_everyone, False
            if (again or everyone_again) and self.controller.active:
                self._consume(again or [], everyone_again)
        d.addBoth(done)

    @defer.inlineCallbacks
    def _handle(self, sequences: list[int], everyone: bool) -> Any:
        ctl = self.controller
        term = self._term
        if everyone:
            brokers: Iterable[int] = set(ctl.cache.brokers) | {ctl.broker_id}
        else:
            brokers = yield ctl.kafka_zk.get_broker_ids_from_log_dir_events(sequences)
        asked = sorted(set(brokers))
        # in parallel: one broker that does not answer (dying, session not yet expired) must not
        # hold up what the others say
        answers = yield defer.gatherResults([self._offline_replicas_of(b) for b in asked])
        if term != self._term:
            return
        changed = False
        for b, learned in zip(asked, answers):
            if learned is not None and self.by_broker.get(b, BrokerOfflineReplicas(learned.epoch, frozenset())) != learned:
                self.by_broker[b] = learned
                changed = True
                log.info("broker %d (epoch %d): %d offline replica(s): %s", b, learned.epoch, len(learned.replicas),
                         ", ".join(f"{t}-{p}" for t, p, _ in sorted(learned.replicas)))
        if changed:
            yield ctl.next_round()
        if term != self._term or not ctl.active:
            return
        yield ctl.kafka_zk.delete_log_dir_event_notifications(None if everyone else sequences, ctl.fence)

    @defer.inlineCallbacks
    def _offline_replicas_of(self, broker_id: int) -> Any:
        """The broker's offline replicas from its DescribeLogDirs, None if it could not
        be asked (not alive, no answer): a replica assigned to it that no online dir lists is
        offline once some dir answers KAFKA_STORAGE_ERROR."""
        assert self.describe_log_dirs is not None
        ctl = self.controller
        if broker_id not in ctl.cache.brokers and broker_id != ctl.broker_id:
            return None
        epoch = ctl.broker_epochs().get(broker_id, -1)
        dirs = None
        for attempt in range(1, DESCRIBE_LOG_DIRS_ATTEMPTS + 1):
            try:
                dirs = yield self.describe_log_dirs(broker_id)
                break
            except Exception as exc:
                log.warning("DescribeLogDirs to broker %d failed (attempt %d of %d): %s", broker_id, attempt,
                            DESCRIBE_LOG_DIRS_ATTEMPTS, exc)
            if attempt < DESCRIBE_LOG_DIRS_ATTEMPTS and ctl.reactor is not None:
                yield task.deferLater(ctl.reactor, DESCRIBE_LOG_DIRS_BACKOFF_S, lambda: None)
        if dirs is None or (broker_id not in ctl.cache.brokers and broker_id != ctl.broker_id):
            return None
        if not any(code == ErrorCode.KAFKA_STORAGE_ERROR for _, code, _ in dirs):
            return BrokerOfflineReplicas(epoch, frozenset())
        online: set[tuple[str, int]] = set()
        for _, code, partitions in dirs:
            if code == ErrorCode.NONE:
                online |= partitions
        offline = frozenset((t, p, broker_id) for t, info in ctl.cache.topics.items()
                            for p, replicas in info.assignment.items()
                            if broker_id in replicas and (t, p) not in online)
        return BrokerOfflineReplicas(epoch, offline)
