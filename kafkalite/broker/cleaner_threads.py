"""``log.cleaner.threads`` periodic compaction passes (the thread management of Kafka's
``LogCleaner``), reconfigured at run time like Kafka's ``LogCleaner.reconfigure``.

Cleaner passes run in worker threads (the broker's scheduler, one run per thread index at a
time); their one mutation, the segment swap, runs on the reactor (the logs' owner thread) through
``blockingCallFromThread``. A dynamic change of the threads, the back-off or the dedupe buffer
restarts the loops: a pass already running finishes, its successor waits for it.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

from twisted.internet import task, threads

from kafkalite.broker.scheduler import BrokerScheduler
from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.storage import LogManager
from kafkalite.storage.cleaner import LogCleaner


class CleanerThreads:
    """The log cleaner and its periodic passes; a reconfigurable of the dynamic broker config."""

    reconfigurable_configs = frozenset(("log.cleaner.threads", "log.cleaner.backoff.ms",
                                        "log.cleaner.dedupe.buffer.size"))

    def __init__(self, config: BrokerConfig, reactor: Any, log_manager: LogManager, now_ms: Callable[[], int],
                 scheduler: BrokerScheduler) -> None:
        self.config = config
        self.reactor = reactor
        self.log_manager = log_manager
        self.now_ms = now_ms
        self.scheduler = scheduler
        self.cleaner: LogCleaner | None = None
        self.loops: list[task.LoopingCall] = []
        self.started = False
        if config["log.cleaner.enable"] and config["log.cleaner.threads"] > 0:
            self.cleaner = self._new_cleaner(config["log.cleaner.threads"])

    def _new_cleaner(self, count: int) -> LogCleaner:
        return LogCleaner(self.log_manager, dedupe_buffer_size=self.config["log.cleaner.dedupe.buffer.size"],
                          threads=count, clock=self.now_ms,
                          owner_call=lambda fn: threads.blockingCallFromThread(self.reactor, fn))

    def start(self) -> None:
        """Start (or restart) ``log.cleaner.threads`` periodic passes."""
        self.started = True
        self._stop_loops()
        count = self.config["log.cleaner.threads"]
        if not self.config["log.cleaner.enable"] or count <= 0 or self.scheduler.stopping():
            return
        if self.cleaner is None:
            self.cleaner = self._new_cleaner(count)
        cleaner = self.cleaner
        cleaner.map_memory = self.config["log.cleaner.dedupe.buffer.size"] // count
        for i in range(count):
            self.loops.append(self.scheduler.loop(max(self.config["log.cleaner.backoff.ms"], 1),
                                                  partial(self.scheduler.off_reactor, f"cleaner-{i}", cleaner.run)))

    def validate_reconfiguration(self, new: BrokerConfig) -> None:
        """Kafka's LogCleaner.validateReconfiguration: the thread count moves by at most a factor
        of two each way (Kafka registers the cleaner only when it is enabled: so is this check)."""
        if not self.config["log.cleaner.enable"]:
            return
        threads, current = new["log.cleaner.threads"], self.config["log.cleaner.threads"]
        if threads < 1:
            raise ConfigError("Log cleaner threads should be at least 1")
        if threads < current // 2:
            raise ConfigError(f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if threads > current * 2:
            raise ConfigError(f"Log cleaner threads cannot be increased to more than double the current value {current}")

    def reconfigure(self, changed: set[str]) -> None:
        if self.started:         # before start-up's loops: start() reads the new values
            self.start()

    def _stop_loops(self) -> None:
        for loop in self.loops:
            if loop.running:
                loop.stop()
        self.loops = []

    def stop(self) -> None:
        """A running pass stops at its next batch; no further pass starts."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
        for loop in self.loops:
            if loop.running:
                loop.stop()
