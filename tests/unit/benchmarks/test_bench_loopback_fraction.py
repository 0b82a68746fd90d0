"""Scenario 8 states the broker's ceiling as a fraction of the machine's loopback ceiling (issue
33): the loopback probe (scenario 0's sender and Python sink, a few MB over a real loopback
socket), the fraction row, and that scenario 8 adds it per record size with one value per run.
The broker and the load generator are stand-ins: no cluster."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from bench import ceiling_load, load, scenarios
from bench.ceiling_load import CeilingResult
from bench.report import Results
from bench.systems import KAFKALITE, System

pytestmark = pytest.mark.unit


def test_the_loopback_probe_moves_every_byte_and_appends_them_when_asked(tmp_path: Path) -> None:
    block = os.urandom(64 * 1024)
    assert scenarios.loopback_seconds(block, 8) > 0
    path = tmp_path / "append.log"
    assert scenarios.loopback_seconds(block, 8, str(path)) > 0
    assert path.read_bytes() == block * 8
    assert scenarios.loopback_mb_per_s(4) > 0


def test_the_fraction_row_divides_each_run_by_the_loopback_ceiling_after_it() -> None:
    row = scenarios.loopback_fraction_row("8 broker ceiling, 1 broker", "1024 B records", KAFKALITE,
                                          [250.0, 300.0, 200.0], [1000.0, 1500.0, 800.0])
    assert row.metric == "1024 B records: payload MB/s as a fraction of the machine's loopback ceiling"
    assert row.values == pytest.approx([0.25, 0.2, 0.25]) and row.unit == "fraction"
    assert row.higher_is_better and row.extra["loopback_mb_per_s"] == [1000.0, 1500.0, 800.0]
    assert "median 1,000 MB/s" in row.note
    with pytest.raises(ValueError):         # a run without its probe is a bug, not a shorter row
        scenarios.loopback_fraction_row("8", "x", KAFKALITE, [1.0, 2.0], [1.0])


class FakeBrokerSystem(System):
    """One "broker" (this process, for the CPU rows) at a made-up address."""
    name = KAFKALITE

    def __init__(self) -> None:
        super().__init__(None, Path("."))

    @property
    def brokers(self) -> Any:
        return [SimpleNamespace(pid=os.getpid(), bootstrap="127.0.0.1:1")]

    def create_topic(self, topic: str, partitions: int, replication: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        pass


def test_scenario_8_adds_the_fraction_row_for_each_record_size(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    runs = iter([100.0, 200.0, 300.0, 400.0])       # payload MB/s of the four runs, in order
    probes = iter([1000.0, 2000.0, 1000.0, 2000.0])
    warmups: list[tuple[str, float]] = []

    def fake_run(host: str, port: int, version: int, topic: str, *args: Any, **kwargs: Any) -> CeilingResult:
        if "warmup" in topic:                       # unmeasured: its figures must not reach a row
            warmups.append((brokers[-1], args[-2]))
            return CeilingResult(seconds=1.0, requests=10, records=1000, payload_bytes=10**12)
        mb_per_s = next(runs)
        return CeilingResult(seconds=1.0, requests=10, records=1000, payload_bytes=int(mb_per_s * 1e6))

    brokers: list[str] = []
    monkeypatch.setattr(ceiling_load, "run", fake_run)
    monkeypatch.setattr(load, "wait_high_watermark_sum", lambda system, topic, partitions, expected: expected)
    monkeypatch.setattr(scenarios, "loopback_mb_per_s", lambda: next(probes))
    results = Results(tmp_path, "stamp")

    @contextlib.contextmanager
    def fresh_broker(label: str) -> Iterator[None]:
        brokers.append(label)
        yield
        brokers.append("stopped")

    scenarios.broker_ceiling(FakeBrokerSystem(), results, scenarios.Sizes(runs=2), tmp_path, fresh_broker)
    fractions = {r.metric.split(",")[0]: r.values for r in results.rows if r.unit == "fraction"}
    assert fractions == {"100 B records": pytest.approx([0.1, 0.1]), "1024 B records": pytest.approx([0.3, 0.2])}
    # every run on a broker of its own, stopped (its data removed) before the next run starts
    assert brokers == ["ceiling100-0", "stopped", "ceiling100-1", "stopped",
                       "ceiling1024-0", "stopped", "ceiling1024-1", "stopped"]
    # and each broker first took the warm-up load, for the warm-up's seconds
    assert warmups == [(label, scenarios.Sizes().ceiling_warmup_seconds)
                       for label in ("ceiling100-0", "ceiling100-1", "ceiling1024-0", "ceiling1024-1")]
