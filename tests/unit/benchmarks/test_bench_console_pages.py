"""Scenario 15's own logic (bench/console_pages.py, scenarios.console_rows): the topic layout,
the percentiles, the brokers' request counters and the rows it publishes. No cluster, no timing."""
from __future__ import annotations

from collections import Counter

import pytest

from bench import console_pages, report, scenarios
from bench.console_pages import Page, PageFigures

METRICS = """\
# HELP kafka_network_requestmetrics_requests_total Requests served (RequestsPerSec)
# TYPE kafka_network_requestmetrics_requests_total counter
kafka_network_requestmetrics_requests_total{request="Metadata",version="9"} 12.0
kafka_network_requestmetrics_requests_total{request="Metadata",version="1"} 3.0
kafka_network_requestmetrics_requests_total{request="DescribeLogDirs",version="1"} 4.0
kafka_network_requestmetrics_requests_total{request="Fetch",version="11"} 900.0
# HELP kafka_network_requestmetrics_requests_created Requests served (RequestsPerSec)
# TYPE kafka_network_requestmetrics_requests_created gauge
kafka_network_requestmetrics_requests_created{request="Metadata",version="9"} 1.7e9
# HELP kafka_server_replicamanager_partitioncount Partitions
# TYPE kafka_server_replicamanager_partitioncount gauge
kafka_server_replicamanager_partitioncount 10000.0
"""


@pytest.mark.parametrize("count", [20, 300, 10_000, 10_007, 30_000])
def test_layout_totals_the_asked_partitions(count: int) -> None:
    lay = console_pages.layout(count)
    assert lay.total == count
    assert lay.wide[1] == min(1000, count // 10)
    assert all(0 < n <= console_pages.SMALL_TOPIC_PARTITIONS for _, n in lay.small)
    assert len({name for name, _ in lay.topics}) == len(lay.topics)


def test_layout_at_10000_has_hundreds_of_topics_to_page_and_search() -> None:
    lay = console_pages.layout(10_000)
    assert len(lay.topics) == 902          # 1,000 + 3 + 899 x 10 + 7
    listed = console_pages.pages(lay, 0)
    assert listed[0].label == "topics list, page 1 of 19"
    assert listed[1].label == "topics list, search matching 100"
    assert listed[2].params == {"page": "19"}
    assert listed[3].path == "/topics/s15-wide"


def test_layout_refuses_a_count_too_small() -> None:
    with pytest.raises(ValueError, match="at least 20"):
        console_pages.layout(19)


def test_percentiles_by_nearest_rank() -> None:
    ms = [float(v) for v in range(20, 0, -1)]       # 20 views, unsorted
    assert console_pages.percentiles(ms) == (10.0, 19.0, 20.0)
    assert console_pages.percentiles([7.0]) == (7.0, 7.0, 7.0)
    with pytest.raises(ValueError):
        console_pages.percentiles([])


def test_request_counts_sum_versions_and_brokers() -> None:
    counts = console_pages.request_counts([METRICS, METRICS.replace("12.0", "1.0")])
    assert counts["Metadata"] == 15 + 4
    assert counts["DescribeLogDirs"] == 8
    assert counts["Fetch"] == 1800


def test_per_view_is_the_delta_over_the_views() -> None:
    before = Counter({"Metadata": 10, "DescribeLogDirs": 30, "Fetch": 5})
    after = Counter({"Metadata": 30, "DescribeLogDirs": 90, "Fetch": 500})
    assert console_pages.per_view(before, after, 20) == {"Metadata": 1.0, "DescribeLogDirs": 3.0}
    assert console_pages.per_view(before, before, 20) == {"Metadata": 0.0, "DescribeLogDirs": 0.0}


def test_rows_per_page_and_the_doc_table_leaves_out_max() -> None:
    page = Page("overview", "/")
    runs = [[PageFigures(page, [3.0, 1.0, 2.0], {"Metadata": 1.0, "DescribeLogDirs": 0.0})],
            [PageFigures(page, [5.0, 4.0, 6.0], {"Metadata": 2.0, "DescribeLogDirs": 0.0})]]
    rows = scenarios.console_rows(10_000, runs, "kafkalite")
    by_metric = {r.metric.rsplit(": ", 1)[1]: r for r in rows}
    assert set(by_metric) == {"p50", "p95", "max", "Metadata requests per view", "DescribeLogDirs requests per view"}
    assert by_metric["p50"].values == [2.0, 5.0]
    assert by_metric["max"].values == [3.0, 6.0]
    assert by_metric["Metadata requests per view"].values == [1.0, 2.0]
    assert all(r.scenario == scenarios.CONSOLE_SCENARIO and "Kafka 0.9.0.1 has none" in r.scenario for r in rows)
    assert rows[0].metric.startswith("10,000 partitions RF3, 3 brokers: overview")
    assert rows[0].extra["views_ms"] == [[3.0, 1.0, 2.0], [5.0, 4.0, 6.0]]
    table = report.doc_table(rows)
    assert ": p50" in table and ": p95" in table and "Metadata requests per view" in table
    assert ": max" not in table
