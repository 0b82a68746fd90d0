"""Scenario 17's own logic (bench/stream_pipelines.py, scenarios.stream_rows): which input records
pass the filter, when a phase's outputs are complete, latencies and percentiles. No cluster, no
timing."""
from __future__ import annotations

from bench import scenarios
from bench import stream_pipelines as sp
from bench.stream_pipelines import Arrival, PipelineFigures


def test_the_filter_keeps_39_of_every_70_records() -> None:
    assert sp.passing(70) == 39
    assert sp.passing(140) == 78
    assert [sp.speed_of(i) > sp.THRESHOLD for i in range(2)] == [False, True]   # warm-up sends pairs


def filtered(phase: str, ts: list[float]) -> list[Arrival]:
    return [Arrival(phase, (b"", None), {"PTS": 1000.0 * t - 5, "TRUCK": f"{phase}0"}, t) for t in ts]


def test_filter_phase_completes_with_its_last_passing_record() -> None:
    want = sp.passing(10)
    arrivals = filtered("b", [float(i) for i in range(want)])
    assert sp.completed("filter", arrivals[:-1], 10) is None
    assert sp.completed("filter", arrivals, 10) == float(want - 1)
    assert sp.latencies_ms("filter", arrivals) == [5.0] * want


def test_window_phase_completes_when_the_latest_counts_add_up() -> None:
    def update(key: bytes, start: int, n: int, t: float) -> Arrival:
        return Arrival("b", (key, start), {"N": n, "LAST_PTS": 1000.0 * t - 20}, t)
    # two windows of one truck, one of another; counts are running totals per window
    arrivals = [update(b"b0", 0, 1, 1.0), update(b"b0", 0, 3, 2.0), update(b"b1", 0, 2, 3.0),
                update(b"b0", 60_000, 1, 4.0), update(b"b0", 60_000, 2, 5.0)]
    assert sp.completed("window", arrivals, 7) == 5.0
    assert sp.completed("window", arrivals[:4], 7) is None
    assert sp.completed("window", arrivals, 6) == 4.0          # 3 + 2 + 1
    assert sp.latencies_ms("window", arrivals) == [20.0] * 5


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert sp.percentile(values, 0.99) == 99.0
    assert sp.percentile(values, 0.5) == 50.0
    assert sp.percentile([7.0], 0.99) == 7.0


def test_rows_name_the_engine_and_give_cpu_per_thousand_records() -> None:
    sizes = scenarios.Sizes(streams_rate=1000, streams_burst=50_000)
    figs = [PipelineFigures(rate=10_000, p50_ms=12.0, p99_ms=40.0, cpu_s=5.0, records=50_000, outputs=100)]
    rows = scenarios.stream_rows("window", scenarios.QUIX_ENGINE, "kafkalite", sizes, figs)
    assert [r.unit for r in rows] == ["records/s", "ms", "ms", "ms"]
    assert all(scenarios.QUIX_ENGINE in r.metric and "tumbling window" in r.metric for r in rows)
    assert rows[1].values == [100.0]                           # 5 CPU s over 50,000 records
    assert [r.higher_is_better for r in rows] == [True, False, False, False]
