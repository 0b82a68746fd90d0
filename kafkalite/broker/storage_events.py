"""Storage's calls into the broker, from whatever thread storage runs on (Kafka's
``LogDirFailureChannel`` and ``ReplicaManager.handleLogDirFailure``, plus the hand-over of
storage's deferred file work).

Storage reports a failed log dir from the thread that met the error; the broker hops to the
reactor, takes that dir's replicas offline (they answer KAFKA_STORAGE_ERROR, are no longer
followed, their acks=all waiters are answered), writes ``/log_dir_event_notification`` so the
controller moves their leadership, and keeps serving its other dirs, still registered. With no
dir left it stops (``fatal`` says why, for the exit code). Storage's deferred file work (unlinks,
epoch checkpoints) goes to the blocking runner, handed over on the reactor.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafkalite.broker.replica_manager import ReplicaManager
from kafkalite.broker.runtime import BlockingRunner
from kafkalite.coordination import KafkaZkClient
from kafkalite.storage import LogManager

log = logging.getLogger(__name__)


class StorageEvents:
    """``replicas``, ``broker_id``, ``broker_epoch`` and ``stopping`` are read when an event
    arrives (storage is wired before the replica manager exists and before registration)."""

    def __init__(self, reactor: Any, blocking: BlockingRunner, log_manager: LogManager,
                 replicas: Callable[[], ReplicaManager], kafka_zk: Callable[[], KafkaZkClient],
                 broker_id: Callable[[], int], broker_epoch: Callable[[], int], stopping: Callable[[], bool]) -> None:
        self.reactor = reactor
        self.blocking = blocking
        self.log_manager = log_manager
        self.replicas = replicas
        self.kafka_zk = kafka_zk
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.stopping = stopping
        #: Why the broker stopped by itself (every log dir offline), for the exit code.
        self.fatal: str | None = None
        # from now on storage's deferred file work runs in the blocking runner; jobs handed over
        # before the reactor runs wait for it
        log_manager.background = self._storage_background
        log_manager.add_failure_listener(lambda log_dir, reason: self._on_reactor(self._log_dir_failed, log_dir))

    def _on_reactor(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` on the reactor thread (from any thread; queued until the reactor runs). A
        memory reactor (in-process tests) has one thread only: run it now."""
        call_from_thread = getattr(self.reactor, "callFromThread", None)
        if call_from_thread is None:
            fn(*args)
        else:
            call_from_thread(fn, *args)

    def _storage_background(self, job: Callable[[], None]) -> None:
        """LogManager's ``background``: the job goes to the blocking runner, handed over on the
        reactor (storage may call this from a flush or cleaner thread)."""
        def submit() -> None:
            self.blocking.run(job).addErrback(lambda f: log.error("storage background job failed: %s", f.value))
        self._on_reactor(submit)

    def offline_at_start(self) -> None:
        """Dirs that failed at start-up or before we registered: their replicas go offline and
        the controller is told now."""
        if self.log_manager.offline_dirs:
            self.replicas().take_offline(self.log_manager.offline_partitions())
            self.report()

    def _log_dir_failed(self, log_dir: str) -> None:
        """Reactor thread, once per failed dir: its replicas go offline here, the controller is
        told, and the broker goes on serving its other dirs (stopping when none is left)."""
        self.log_manager.handle_dir_failures()
        self.replicas().take_offline(self.log_manager.partitions_in(log_dir))
        if not self.log_manager.online_dirs:
            self.fatal = f"every log dir is offline (last: {log_dir})"
            log.critical("broker %d: %s; shutting down", self.broker_id(), self.fatal)
            if not self.stopping():
                self.reactor.stop()          # run_broker's shutdown trigger runs shutdown()
            return
        self.report()

    def report(self) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` naming us: the controller then asks
        us with DescribeLogDirs which replicas are offline. Before we are registered start() does it."""
        if self.broker_epoch() < 0 or self.stopping():
            return
        d = self.kafka_zk().propagate_log_dir_event(self.broker_id())
        d.addCallbacks(lambda path: log.info("reported offline log dir(s) %s at %s",
                                             ", ".join(self.log_manager.offline_dirs), path),
                       lambda f: log.error("could not report the log dir failure: %s", f.value))
