"""The reactor delay monitor: lateness into the histogram, and the busy/waiting split in its log."""
from __future__ import annotations

import logging

import pytest
from twisted.internet.task import Clock

from kafkalite.broker.metrics import LATENCY_BUCKETS_MS, BrokerMetrics, LatencyHistogram
from kafkalite.broker.reactor_delay import ReactorDelayMonitor

pytestmark = pytest.mark.unit


class _Cpu:
    def __init__(self) -> None:
        self.thread = 0.0
        self.process = 0.0


def _monitor(clock: Clock, cpu: _Cpu, hist: LatencyHistogram) -> ReactorDelayMonitor:
    return ReactorDelayMonitor(clock, hist, interval_s=0.1, report_ms=250.0, log_every_s=10.0,
                               thread_cpu=lambda: cpu.thread, process_cpu=lambda: cpu.process)


def _count_at_or_above(hist: LatencyHistogram, ms: float) -> int:
    first = next(i for i, bound in enumerate((*LATENCY_BUCKETS_MS, float("inf"))) if bound >= ms)
    return sum(hist.counts[first:])


def test_on_time_ticks_are_observed_as_no_delay() -> None:
    clock, cpu, hist = Clock(), _Cpu(), LatencyHistogram()
    m = _monitor(clock, cpu, hist)
    m.start()
    clock.pump([0.1] * 20)
    assert sum(hist.counts) == 20 and hist.total_ms == pytest.approx(0.0, abs=1e-6)
    m.stop()
    assert clock.getDelayedCalls() == []


def test_a_busy_reactor_and_a_descheduled_process_are_told_apart(caplog: pytest.LogCaptureFixture) -> None:
    clock, cpu, hist = Clock(), _Cpu(), LatencyHistogram()
    m = _monitor(clock, cpu, hist)
    m.start()
    caplog.set_level(logging.INFO, logger="kafkalite.broker.reactor_delay")

    # a callback held the reactor thread for 400 ms past the tick's due time
    cpu.thread += 0.45
    cpu.process += 0.45
    clock.advance(0.5)
    assert hist.total_ms == pytest.approx(400.0)
    assert _count_at_or_above(hist, 400.0) == 1
    assert "ran a timer 400 ms late" in caplog.text and "its thread ran 450 ms" in caplog.text

    # next, the process got no CPU for 300 ms: lateness with no CPU spent, within 10 s of the
    # last line, so only counted
    caplog.clear()
    clock.advance(0.4)
    assert hist.total_ms == pytest.approx(700.0)
    assert caplog.text == ""

    clock.advance(10.0)                  # 9.9 s late, but no CPU anywhere: waiting, not busy
    assert "no thread of it 10000 ms" in caplog.text and "1 more delay(s)" in caplog.text
    assert "ran a timer 9900 ms late" in caplog.text and "its thread ran 0 ms" in caplog.text
    m.stop()


def test_broker_metrics_export_the_delay_histogram() -> None:
    from kafkalite.broker.metrics import BrokerCollector, MetricsSources
    metrics = BrokerMetrics()
    metrics.reactor_delay.observe(300.0)
    sources = MetricsSources(lambda: 1, metrics, None, None, None, lambda: None, None)  # type: ignore[arg-type]
    families = {f.name: f for f in BrokerCollector(sources)._requests()}
    delay = families["kafkalite_reactor_timer_delay_ms"]
    samples = {(s.name, s.labels.get("le")): s.value for s in delay.samples}
    assert samples[("kafkalite_reactor_timer_delay_ms_bucket", "250.0")] == 0
    assert samples[("kafkalite_reactor_timer_delay_ms_bucket", "500.0")] == 1
    assert samples[("kafkalite_reactor_timer_delay_ms_sum", None)] == 300.0
