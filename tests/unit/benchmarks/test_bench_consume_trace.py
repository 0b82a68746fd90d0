"""bench/consume_trace.py's reductions (librdkafka's statistics over a run, a thread's time on a
CPU / waiting for one / asleep, the verdict on what limited the consumer), the per-thread
scheduler times of bench/cpu.py, and the tool's argument checks. No cluster."""
from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from bench import consume_trace as ct
from bench import cpu


def report(fetches: int, rx: int, rtt: tuple[int, int, int] | None,
           bootstrap_rtt_us: int = 9_000_000) -> dict[str, Any]:
    leader: dict[str, Any] = {"nodeid": 1, "req": {"Fetch": fetches}, "rxbytes": rx}
    if rtt is not None:
        leader["rtt"] = {"avg": rtt[0], "p99": rtt[1], "cnt": rtt[2]}
    return {"brokers": {"127.0.0.1:1/1": leader,
                        "127.0.0.1:1/bootstrap": {"nodeid": -1, "req": {"Fetch": 50}, "rxbytes": 10**9,
                                                  "rtt": {"avg": bootstrap_rtt_us, "p99": bootstrap_rtt_us,
                                                          "cnt": 3}}}}


def test_fetch_stats_take_the_last_counters_and_weigh_round_trips_by_count() -> None:
    got = ct.fetch_stats([report(10, 6_000_000, (1_000, 4_000, 10)),
                          report(40, 24_000_000, (2_500, 9_000, 30)),
                          report(40, 24_000_000, None)])          # idle interval: no round trips
    assert got.fetches == 40 and got.rx_bytes == 24_000_000      # the bootstrap connection is left out
    assert got.mb_per_fetch == pytest.approx(0.6)
    assert got.rtt_avg_ms == pytest.approx((1.0 * 10 + 2.5 * 30) / 40)
    assert got.rtt_p99_ms == pytest.approx(9.0)
    empty = ct.fetch_stats([])
    assert (empty.fetches, empty.mb_per_fetch, empty.rtt_avg_ms) == (0, 0.0, 0.0)


def test_a_thread_asleep_is_the_wall_time_it_neither_ran_nor_waited() -> None:
    use = ct.thread_use(cpu.SchedTimes(1.0, 0.5), cpu.SchedTimes(1.4, 0.8), wall=1.0)
    assert use.ran == pytest.approx(0.4) and use.waited == pytest.approx(0.3) and use.slept == pytest.approx(0.3)
    assert ct.thread_use(cpu.SchedTimes(), cpu.SchedTimes(0.7, 0.6), wall=1.0).slept == 0.0


def run(seconds: float, first_at: float, slept: float) -> ct.ConsumeRun:
    return ct.ConsumeRun(records=300_000, seconds=seconds, first_at=first_at, first_records=10_000,
                         app=ct.ThreadUse(ran=0.2, waited=seconds - 0.2 - slept, slept=slept), fetcher=None,
                         fetch=ct.FetchStats(50, 30_000_000, 0.8, 4.0), broker_cpu=0.03)


def test_a_consumer_asleep_only_through_its_start_was_limited_by_itself() -> None:
    # slept through the client's 0.5 s start, then computed (or waited for a core) until the end
    r = run(seconds=0.8, first_at=0.52, slept=0.53)
    assert r.app_asleep_after_first == pytest.approx(0.01) and r.limit == "client"
    assert r.rate == pytest.approx(375_000) and r.rate_after_first == pytest.approx(290_000 / 0.28)
    line = ct.report(r)
    assert "375,000 records/s" in line and "limit: client" in line and "50 fetches, 0.60 MB/fetch" in line
    assert "broker 1.00 s/GB" in line


def test_a_consumer_that_slept_on_after_its_first_records_waited_for_data() -> None:
    r = run(seconds=1.0, first_at=0.5, slept=0.7)
    assert r.app_asleep_after_first == pytest.approx(0.2) and r.limit == "fetch"
    never = run(seconds=1.0, first_at=1.0, slept=1.0)           # nothing after the first records
    assert never.rate_after_first == 0.0 and never.limit == "client"


def test_thread_sched_times_name_this_process_threads() -> None:
    mine = cpu.thread_sched_times(os.getpid())
    if not mine:
        pytest.skip("this kernel keeps no schedstat")
    me = threading.get_native_id()
    assert me in mine and mine[me][1].run > 0
    assert cpu.thread_sched_times(2**22 + 12345) == {}          # above pid_max: never a process
    assert ct.FETCHER_THREAD.fullmatch("rdk:broker1") and ct.FETCHER_THREAD.fullmatch("rdk:broker1001")
    assert not ct.FETCHER_THREAD.fullmatch("rdk:broker-1") and not ct.FETCHER_THREAD.fullmatch("rdk:main")


@pytest.mark.parametrize("conf, message", [("{", "not JSON"), ("[1]", "a JSON object")])
def test_bad_consumer_conf_is_a_one_line_error(conf: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        ct.main(["--consumer-conf", conf])
