"""bench/live_lag.py's reduction of librdkafka's statistics into a timeline (counters become
per-interval differences, bootstrap connections are left out, the backlog is the partition's end
less what the application had read by then) and its argument checks. No cluster."""
from __future__ import annotations

from typing import Any

import pytest

from bench import live_lag


def stats(fetches: int, rx: int, rtt_us: int, queued: int, hi: int, bootstrap_fetches: int = 0) -> dict[str, Any]:
    return {"brokers": {"127.0.0.1:1/1": {"nodeid": 1, "req": {"Fetch": fetches}, "rxbytes": rx,
                                          "rtt": {"avg": rtt_us}},
                        "127.0.0.1:1/bootstrap": {"nodeid": -1, "req": {"Fetch": bootstrap_fetches},
                                                  "rxbytes": 10**9, "rtt": {"avg": 9_000_000}}},
            "topics": {live_lag.TOPIC: {"partitions": {"0": {"fetchq_size": queued, "hi_offset": hi}}}}}


def test_read_by_takes_the_last_mark_at_or_before_the_time() -> None:
    marks = [(0, 10.0), (10_000, 11.0), (20_000, 12.5)]
    assert [live_lag.read_by(marks, t) for t in (9.0, 10.0, 12.4, 12.5, 99.0)] == [0, 0, 10_000, 20_000, 20_000]


def test_timeline_turns_counters_into_intervals() -> None:
    marks = [(0, 100.0), (10_000, 100.3), (30_000, 100.5)]
    ticks = live_lag.timeline([(100.0, stats(3, 3_000_000, 800, 0, 0, bootstrap_fetches=7)),
                               (100.2, stats(13, 13_000_000, 2_500, 4_000_000, 25_000)),
                               (100.4, stats(18, 15_000_000, 1_000, 0, -1001))], marks, t0=99.5)
    assert len(ticks) == 2
    first, second = ticks
    assert first.at == pytest.approx(0.7) and first.fetches == 10 and first.fetched_mb == pytest.approx(10.0)
    assert first.mb_per_fetch == pytest.approx(1.0) and first.rtt_ms == pytest.approx(2.5)
    assert first.queued_mb == pytest.approx(4.0) and first.read == 0 and first.backlog == 25_000
    assert second.fetches == 5 and second.mb_per_fetch == pytest.approx(0.4) and second.read == 10_000
    assert second.end_offset == 0 and second.backlog == 0          # librdkafka's "unknown" (-1001) is no backlog
    assert live_lag.Tick(0.0, 0, 0.0, 0.0, 0.0, 0, 0).mb_per_fetch == 0.0


@pytest.mark.parametrize("conf, message", [("{", "not JSON"), ("[1]", "a JSON object")])
def test_bad_consumer_conf_is_a_one_line_error(conf: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        live_lag.main(["--consumer-conf", conf])
