"""The broker's periodic housekeeping, scheduled on the broker's :class:`BrokerScheduler`.

Kafka's ``LogManager.startup`` and ``ReplicaManager.startup`` each hand their tasks to the
server's one ``KafkaScheduler``: log retention, producer-id expiry, the high-watermark (and
recovery-point, log-start) checkpoint, ISR shrinking (``isr-expiration``) and the log flusher.
They are listed here once, with the interval property Kafka reads for each, so the composition
root only says "start them"; fsync-bound work (checkpoint files, flushes) runs off the reactor
through the scheduler, one run of each kind at a time.
"""
from __future__ import annotations

from kafkalite.broker.purgatory import Purgatory
from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.runtime import Clock
from kafkalite.broker.scheduler import BrokerScheduler
from kafkalite.config import BrokerConfig
from kafkalite.storage import LogManager

#: ``log.flush.scheduler.interval.ms`` at or above this means "never" (Kafka's default is Long.MaxValue)
NEVER_MS = 2**62


class PeriodicTasks:
    """Schedules the broker's periodic tasks (:meth:`start`); they stop with the scheduler."""

    def __init__(self, config: BrokerConfig, scheduler: BrokerScheduler, clock: Clock, log_manager: LogManager,
                 replica_manager: ReplicaManager, purgatory: Purgatory) -> None:
        self.config = config
        self.scheduler = scheduler
        self.clock = clock
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.purgatory = purgatory

    def start(self) -> None:
        every, config = self.scheduler.every, self.config
        every(config["log.retention.check.interval.ms"], self.retention)
        every(config["producer.id.expiration.check.interval.ms"],
              lambda: self.log_manager.remove_expired_producers(self.clock.now_ms()))
        every(config["replica.high.watermark.checkpoint.interval.ms"],
              lambda: self.scheduler.off_reactor("checkpoint", self.checkpoint))
        every(max(config["replica.lag.time.max.ms"] // 2, 1), self.replica_manager.shrink_isrs)
        flush_interval = config["log.flush.scheduler.interval.ms"]
        if flush_interval < NEVER_MS:
            every(flush_interval, lambda: self.scheduler.off_reactor(
                "flush", lambda: self.log_manager.flush_dirty(self.clock.now_ms())))

    def retention(self) -> None:
        """One retention pass (Kafka's ``kafka-log-retention``)."""
        for key in self.log_manager.cleanup(self.clock.now_ms()):
            # a log start move is news for a follower's fetch session (it adopts the leader's)
            self.purgatory.check(key)

    def checkpoint(self) -> None:
        """Write the checkpoint files (high watermarks, recovery points, log starts)."""
        self.log_manager.checkpoint()
