"""How late the reactor runs a timer, and whether it was busy or waiting meanwhile.

Every request, watch delivery and timer of a broker runs on the one reactor thread, so a client's
round trip includes whatever the reactor did before reading its socket. A timer due every
``interval_s`` measures that: its lateness is the longest a request arriving at that moment
could have waited. Two CPU clocks say why it was late:

- the reactor thread's own CPU time (``time.thread_time``): high means callbacks ran long
  (the reactor was busy; a profile of the broker shows which);
- the process's CPU time (``time.process_time``, every thread): if it grew while the reactor
  thread's did not, other threads of the broker held the GIL; if neither grew, the process was
  not running at all: the machine's CPUs were taken by other processes, or the reactor thread
  was blocked in a system call (a disk read, a page fault), or a debugger or sampling profiler
  had stopped it.

This is kafkalite's own measure (Kafka's nearest are the network and request handler idle
ratios). Observed into ``BrokerMetrics.reactor_delay`` (``kafkalite_reactor_timer_delay_ms``);
a lateness of ``report_ms`` or more is logged with that split, at most one line per
``log_every_s``.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from twisted.internet.interfaces import IReactorTime

from kafkalite.broker.metrics import LatencyHistogram

log = logging.getLogger(__name__)

INTERVAL_S = 0.1
REPORT_MS = 250.0
LOG_EVERY_S = 10.0


class ReactorDelayMonitor:
    def __init__(self, clock: IReactorTime, histogram: LatencyHistogram, *,
                 interval_s: float = INTERVAL_S, report_ms: float = REPORT_MS, log_every_s: float = LOG_EVERY_S,
                 thread_cpu: Callable[[], float] = time.thread_time,
                 process_cpu: Callable[[], float] = time.process_time) -> None:
        self.clock = clock
        self.histogram = histogram
        self.interval_s = interval_s
        self.report_ms = report_ms
        self.log_every_s = log_every_s
        self._thread_cpu = thread_cpu
        self._process_cpu = process_cpu
        self._call: Any = None
        self._due = self._last = 0.0
        self._cpu = (0.0, 0.0)
        self._logged_at = float("-inf")
        self._unlogged = 0

    def start(self) -> None:
        self._last = self.clock.seconds()
        self._cpu = (self._thread_cpu(), self._process_cpu())
        self._schedule(self._last)

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _schedule(self, now: float) -> None:
        self._due = now + self.interval_s
        self._call = self.clock.callLater(self.interval_s, self._tick)

    def _tick(self) -> None:
        now = self.clock.seconds()
        late_ms = max(0.0, (now - self._due) * 1000.0)
        thread_cpu, process_cpu = self._thread_cpu(), self._process_cpu()
        spent = ((thread_cpu - self._cpu[0]) * 1000.0, (process_cpu - self._cpu[1]) * 1000.0,
                 (now - self._last) * 1000.0)
        self._cpu, self._last = (thread_cpu, process_cpu), now
        self.histogram.observe(late_ms)
        if late_ms >= self.report_ms:
            self._report(now, late_ms, *spent)
        self._schedule(now)

    def _report(self, now: float, late_ms: float, reactor_ms: float, process_ms: float, wall_ms: float) -> None:
        if now - self._logged_at < self.log_every_s:
            self._unlogged += 1
            return
        others = max(0.0, process_ms - reactor_ms)
        waited = max(0.0, wall_ms - reactor_ms - others)
        log.info("the reactor ran a timer %.0f ms late: in the %.0f ms since the previous tick its thread "
                 "ran %.0f ms, the broker's other threads %.0f ms, and no thread of it %.0f ms (idle before the "
                 "tick was due, waiting for a CPU, or blocked in a system call); %d more delay(s) of %.0f ms "
                 "or more since the last such line",
                 late_ms, wall_ms, reactor_ms, others, waited, self._unlogged, self.report_ms)
        self._logged_at, self._unlogged = now, 0
