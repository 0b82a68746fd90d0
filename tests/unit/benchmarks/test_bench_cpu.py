"""The brokers' CPU seconds per GB (issue 33; bench/cpu.py and scenarios.broker_cpu_row): /proc
parsing, the process-tree sums, the phase's start/end difference and the per-GB arithmetic, and
that scenarios 1 and 2 add the s/GB rows the side-by-side table compares. No cluster: the only
real process read is this test's own."""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import cpu, load, scenarios
from bench.cpu import CpuTimes, PhaseCpu
from bench.report import Results
from bench.systems import KAFKA, KAFKALITE, System

TCK = cpu.CLK_TCK


def stat_line(pid: int, name: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    """A /proc/<pid>/stat line (fields 1-24 of proc(5)), times in ticks."""
    return (f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194304 100 0 0 0 {utime} {stime} {cutime} {cstime} "
            f"20 0 5 0 1 2 3")


def test_stat_parsing_counts_threads_and_reaped_children_and_survives_odd_names() -> None:
    line = stat_line(4242, "python (x) -m ) y", 17, 3 * TCK, TCK, 2 * TCK, TCK)
    ppid, times = cpu.parse_stat(line)
    assert ppid == 17
    assert times.user == pytest.approx(5.0) and times.system == pytest.approx(2.0)
    assert cpu.parse_stat(stat_line(1, "java", 0, 3 * TCK, TCK))[1].total == pytest.approx(4.0)


def test_cpu_times_of_this_process_and_of_a_gone_one() -> None:
    mine = cpu.cpu_times(os.getpid())
    assert mine.user > 0 and mine.total <= cpu.cpu_seconds(os.getpid()) < mine.total + 1.0   # it runs on
    with pytest.raises(OSError):
        cpu.cpu_times(2**22 + 12345)           # above pid_max: never a process
    assert cpu.tree_times(2**22 + 12345) is None
    assert cpu.tree_cpu_seconds(2**22 + 12345) == 0.0


def test_descendants_are_summed_and_strangers_left_out() -> None:
    table = {10: (1, CpuTimes(1.0, 0.5)),       # the broker
             11: (10, CpuTimes(2.0, 1.0)),      # its child
             12: (11, CpuTimes(0.25, 0.25)),    # a grandchild
             20: (1, CpuTimes(100.0, 100.0)),   # another process of the machine
             21: (20, CpuTimes(7.0, 7.0))}
    assert cpu.descendants_sum(10, table) == CpuTimes(3.25, 1.75)
    assert cpu.descendants_sum(12, table) == CpuTimes(0.25, 0.25)
    assert cpu.descendants_sum(99, table) is None


def test_a_phase_is_the_difference_of_its_ends_over_every_process(monkeypatch: pytest.MonkeyPatch) -> None:
    start = {10: (1, CpuTimes(1.0, 1.0)), 11: (10, CpuTimes(0.5, 0.0)), 30: (1, CpuTimes(3.0, 3.0))}
    end = {10: (1, CpuTimes(2.0, 1.5)), 11: (10, CpuTimes(1.5, 0.2)), 12: (10, CpuTimes(0.1, 0.1)),
           30: (1, CpuTimes(5.0, 4.0)), 40: (1, CpuTimes(50.0, 50.0))}
    tables = iter([start, end])
    monkeypatch.setattr(cpu, "_all_processes", lambda: next(tables))
    with PhaseCpu([10, 30]) as phase:
        pass
    assert (phase.used[10].user, phase.used[10].system) == (pytest.approx(2.1), pytest.approx(0.8))
    assert phase.used[30] == CpuTimes(2.0, 1.0)
    assert phase.total.total == pytest.approx(5.9)
    assert phase.per_gb(2e9) == pytest.approx(2.95)          # 5.9 s over 2 GB of payload


def test_a_broker_gone_before_the_end_makes_the_figure_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = iter([{10: (1, CpuTimes(1.0, 1.0))}, {}])
    monkeypatch.setattr(cpu, "_all_processes", lambda: next(tables))
    with pytest.raises(RuntimeError, match="process 10 is gone"):
        with PhaseCpu([10]):
            pass
    with pytest.raises(ValueError):
        PhaseCpu([])
    with pytest.raises(RuntimeError, match="not ended"):
        _ = PhaseCpu([os.getpid()]).total


def test_this_process_burning_cpu_is_measured() -> None:
    with PhaseCpu([os.getpid()]) as phase:
        before = cpu.cpu_seconds(os.getpid())
        x = 0
        while cpu.cpu_seconds(os.getpid()) < before + 3 / TCK:      # a few clock ticks of work
            x += sum(range(1000))
    assert x > 0
    assert phase.total.total >= 3 / TCK - 1e-9         # tick sums in binary floating point
    assert phase.per_gb(0.5e9) == pytest.approx(phase.total.total * 2)


def test_seconds_per_gb() -> None:
    assert cpu.seconds_per_gb(3.0, 1.5e9) == pytest.approx(2.0)
    assert cpu.seconds_per_gb(0.0, 1e6) == 0.0
    with pytest.raises(ValueError, match="no payload"):
        cpu.seconds_per_gb(1.0, 0)


def test_pids_of_brokers() -> None:
    assert cpu.pids_of([SimpleNamespace(pid=5), SimpleNamespace(pid=7)]) == [5, 7]
    with pytest.raises(RuntimeError, match="no process"):
        cpu.pids_of([SimpleNamespace(pid=5), SimpleNamespace(pid=None)])


def phase_of(user: float, system: float, brokers: int = 1) -> PhaseCpu:
    """A finished phase whose brokers used ``user`` + ``system`` seconds (split evenly)."""
    return PhaseCpu(range(1, brokers + 1),
                    used={i: CpuTimes(user / brokers, system / brokers) for i in range(1, brokers + 1)})


def test_the_row_holds_seconds_per_gb_of_each_phase() -> None:
    phases = [(phase_of(1.5, 0.5), 1e9), (phase_of(3.0, 1.0, brokers=3), 0.5e9), (phase_of(0.3, 0.2), 0.25e9)]
    row = scenarios.broker_cpu_row("1 produce, 1 broker", "1 partition(s), acks=1", KAFKALITE, "produced", phases)
    assert row.metric == "1 partition(s), acks=1: broker CPU seconds per GB produced"
    assert row.unit == "s/GB" and row.higher_is_better is False
    assert row.values == pytest.approx([2.0, 8.0, 2.0])
    assert row.median == pytest.approx(2.0)
    assert row.extra["user_s_per_gb"] == pytest.approx([1.5, 6.0, 1.2])
    assert row.extra["system_s_per_gb"] == pytest.approx([0.5, 2.0, 0.8])
    assert row.extra["cpu_s"] == pytest.approx([2.0, 4.0, 0.5]) and row.extra["gb"] == pytest.approx([1.0, 0.5, 0.25])
    assert "medians: user 1.50, system 0.80 s/GB" in row.note


def test_side_by_side_compares_the_two_systems_cpu_per_gb(tmp_path: Path) -> None:
    results = Results(tmp_path, "stamp")
    for name, seconds in ((KAFKALITE, 3.0), (KAFKA, 2.0)):
        results.add(scenarios.broker_cpu_row("2 consume, 1 broker", "1 partition(s), from beginning", name,
                                             "consumed", [(phase_of(seconds, 0.0), 1e9)]))
    line = next(x for x in results.side_by_side().splitlines() if "per GB consumed" in x)
    assert "| s/GB | 3 | 2 | 1.50 |" in line
    assert "1.50 (lower is better)" in results.table()


class OwnProcessSystem(System):
    """A system whose one "broker" is this test's process: the scenario code runs unchanged."""
    name = KAFKA

    def __init__(self) -> None:
        super().__init__(None, Path("."))

    @property
    def brokers(self) -> Any:
        return [SimpleNamespace(pid=os.getpid())]

    def create_topic(self, topic: str, partitions: int, replication: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        pass


def test_scenarios_1_and_2_add_the_cpu_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(*_: Any, **__: Any) -> float:
        end = cpu.cpu_seconds(os.getpid()) + 3 / TCK        # three clock ticks as /proc counts them
        while cpu.cpu_seconds(os.getpid()) < end:
            pass
        return 0.5

    monkeypatch.setattr(load, "produce", busy)
    monkeypatch.setattr(load, "consume", busy)
    monkeypatch.setattr(load, "wait_high_watermark_sum", lambda system, topic, partitions, expected: expected)
    results = Results(tmp_path, "stamp")
    sizes = scenarios.Sizes(records=1000, runs=3)
    system = OwnProcessSystem()
    topic = scenarios.produce_one_broker(system, results, sizes, 1)
    scenarios.consume_one_broker(system, results, sizes, topic, 1)
    rows = {(r.scenario, r.metric): r for r in results.rows}
    produced = rows[("1 produce, 1 broker", "1 partition(s), acks=1: broker CPU seconds per GB produced")]
    consumed = rows[("2 consume, 1 broker", "1 partition(s), from beginning: broker CPU seconds per GB consumed")]
    for row in (produced, consumed):
        assert row.system == KAFKA and row.unit == "s/GB" and len(row.values) == 3
        assert row.extra["gb"] == pytest.approx([1000 * load.VALUE_SIZE / 1e9] * 3)
        # at least the busy loop's CPU time, over 100 KB of payload
        assert min(row.values) >= 0.999 * 3 / TCK / (1000 * load.VALUE_SIZE / 1e9)
    assert rows[("1 produce, 1 broker", "1 partition(s), acks=1")].values == [2000.0] * 3


def test_scenario_5_rows_hold_every_run(tmp_path: Path) -> None:
    sizes = scenarios.Sizes(runs=2, growth_gb=1.0, growth_chunks=2, live_gb=4.0)
    runs = [scenarios.GrowthRun([100.0, 90.0], phase_of(2.0, 1.0), [50.0, 40.0], [45.0, 36.0], 3.0,
                                phase_of(12.0, 8.0)),
            scenarios.GrowthRun([120.0, 120.0], phase_of(4.0, 2.0), [60.0, 60.0], [50.0, 55.0], 1.0,
                                phase_of(16.0, 8.0))]
    rows = {r.metric: r for r in scenarios.growth_rows(KAFKALITE, sizes, runs)}
    assert rows["1 GB in 2 chunks"].values == [100.0, 90.0, 120.0, 120.0]      # every chunk of every run
    assert rows["1 GB in 2 chunks"].note == "per chunk, run by run: 100, 90 / 120, 120"
    assert rows["last chunk / first chunk"].values == pytest.approx([0.9, 1.0])
    assert rows["1 GB in 2 chunks: broker CPU seconds per GB produced"].values == pytest.approx([3.0, 6.0])
    live = "4 GB of 1 KB records while a consumer reads them"
    assert rows[f"{live}: consume"].values == [45.0, 36.0, 50.0, 55.0]
    assert rows[f"{live}: produce, last chunk / first chunk"].values == pytest.approx([0.8, 1.0])
    assert rows[f"{live}: consumer done after the producer"].values == [3.0, 1.0]
    cpu_row = rows[f"{live}: broker CPU seconds per GB produced and consumed"]
    assert cpu_row.values == pytest.approx([5.0, 6.0]) and cpu_row.unit == "s/GB"     # 20 s and 24 s over 4 GB
    assert not cpu_row.higher_is_better


def test_schedstat_parsing_and_this_process_run_time() -> None:
    got = cpu.parse_schedstat("2500000000 750000000 1234\n")
    assert got == cpu.SchedTimes(2.5, 0.75) and got.wait_per_run == pytest.approx(0.3)
    assert (got - cpu.SchedTimes(0.5, 0.25)) == cpu.SchedTimes(2.0, 0.5)
    assert cpu.SchedTimes().wait_per_run == 0.0
    mine = cpu.sched_times(os.getpid())
    if mine is None:
        pytest.skip("this kernel keeps no schedstat")
    assert mine.run > 0 and mine.wait >= 0
    assert cpu.sched_times(2**22 + 12345) is None          # above pid_max: never a process


def test_scenario_5_reports_the_clients_wait_for_a_cpu_only_when_every_run_measured_it() -> None:
    sizes = scenarios.Sizes(runs=2, growth_gb=1.0, growth_chunks=2, live_gb=4.0)
    live = "4 GB of 1 KB records while a consumer reads them"
    metric = f"{live}: consumer's wait for a CPU per second it ran, while producing"

    def run(consumer: cpu.SchedTimes | None, producer: cpu.SchedTimes | None) -> scenarios.GrowthRun:
        return scenarios.GrowthRun([100.0, 90.0], phase_of(2.0, 1.0), [50.0, 40.0], [45.0, 36.0], 3.0,
                                   phase_of(12.0, 8.0), consumer, producer)
    rows = {r.metric: r for r in scenarios.growth_rows(KAFKALITE, sizes, [
        run(cpu.SchedTimes(1.0, 2.5), cpu.SchedTimes(2.0, 1.0)),
        run(cpu.SchedTimes(2.0, 1.0), cpu.SchedTimes(2.0, 3.0))])}
    row = rows[metric]
    assert row.values == pytest.approx([2.5, 0.5]) and row.unit == "ratio" and not row.higher_is_better
    assert row.note.endswith("the producer's process: 0.50, 1.50")
    assert row.extra["consumer_wait_s"] == [2.5, 1.0]
    partial = {r.metric for r in scenarios.growth_rows(KAFKALITE, sizes, [
        run(cpu.SchedTimes(1.0, 2.5), cpu.SchedTimes(2.0, 1.0)), run(None, None)])}
    assert metric not in partial and f"{live}: consumer done after the producer" in partial
