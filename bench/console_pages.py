"""Scenario 15 (issue 31): the web console's response times at 10,000 partitions.

A 3-broker cluster (brokers serving /metrics) gets topics totalling ``count`` RF 3 partitions:
one wide topic (1,000 partitions at 10,000), one small topic whose partition 0 holds ``records``
JSON records with timestamps 1 ms apart, and the rest as topics of 10 partitions, so the topics
list has hundreds of entries to page and search, as a cluster of that size has. Then
``kafkalite-console`` runs as a process of its own (``python -m kafkalite.console``, the way
``kafkalite-cluster up`` starts it, pointed at the brokers' /metrics) and an HTTP client asks
each page ``requests`` times after one unmeasured view: p50, p95 and max of the time to the whole
answer, in ms.

The brokers' own request counters (``kafka_network_requestmetrics_requests_total``) are scraped
before and after each page's views: their delta per view tells how many Metadata and
DescribeLogDirs requests one view cost, whatever the partition count (the console promises one
Metadata and one DescribeLogDirs per broker for the topics list, never one per partition). The
console's lag sampler is off (``--lag-sample-interval 0``) so it adds none; its metrics scraper
reads /metrics over HTTP, not the Kafka protocol.

kafkalite only: Kafka 0.9.0.1 has no console.
"""
from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from prometheus_client.parser import text_string_to_metric_families

from bench.partitions import _full_isr, _wait
from bench.systems import System
from kafkalite.cluster.processes import ConsoleProcess

#: the brokers' requests a view's cost is reported in
COUNTED = ("Metadata", "DescribeLogDirs")
SMALL_TOPIC_PARTITIONS = 10
DATA_TOPIC_PARTITIONS = 3
PAGE_SIZE = 50                  # the console's default page of the topics list
SEARCH = "t-00"                 # matches the first 100 small topics (s15-t-0000 ... s15-t-0099)


@dataclass(frozen=True)
class Layout:
    """The topics of one run: names and partition counts, totalling the scenario's count."""
    wide: tuple[str, int]
    data: tuple[str, int]
    small: list[tuple[str, int]]

    @property
    def topics(self) -> list[tuple[str, int]]:
        return [self.wide, self.data, *self.small]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.topics)


def layout(count: int) -> Layout:
    """One wide topic (a tenth of ``count``, at most 1,000 partitions), a data topic of 3, the rest
    in topics of 10 (the last one smaller if ``count`` asks)."""
    if count < 20:
        raise ValueError(f"the console scenario needs at least 20 partitions, not {count}")
    wide = min(1000, count // 10)
    rest = count - wide - DATA_TOPIC_PARTITIONS
    small = [(f"s15-t-{i:04d}", min(SMALL_TOPIC_PARTITIONS, rest - i * SMALL_TOPIC_PARTITIONS))
             for i in range(math.ceil(rest / SMALL_TOPIC_PARTITIONS))]
    return Layout(("s15-wide", wide), ("s15-messages", DATA_TOPIC_PARTITIONS), small)


@dataclass(frozen=True)
class Page:
    label: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    expect: str = ""            # text the answer must hold (so an error page is not timed as a view)


def pages(lay: Layout, middle_ms: int) -> list[Page]:
    """What is measured: the topics list (first page, a search, the last page), the wide topic's
    page, the message browser on the data topic's partition 0 (beginning, end, a timestamp in the
    middle of its records) and over every partition of the wide topic, and the overview."""
    wide, wide_n = lay.wide
    data = lay.data[0]
    listed = len(lay.topics)          # internal topics may add a few: the last page still holds ours
    last = max(1, math.ceil(listed / PAGE_SIZE))
    matching = sum(1 for name, _ in lay.topics if SEARCH in name)
    msgs = f"/topics/{data}/messages"
    return [
        Page(f"topics list, page 1 of {last}", "/topics", {}, "s15-messages"),
        Page(f"topics list, search matching {matching}", "/topics", {"search": SEARCH}, "s15-t-0000"),
        Page(f"topics list, page {last} (last)", "/topics", {"page": str(last)}, "</table>"),
        Page(f"topic page, {wide_n:,} partitions", f"/topics/{wide}", {}, wide),
        Page("messages, 1 partition, from the beginning", msgs, {"partition": "0", "start": "beginning"}, "&#34;n&#34;"),
        Page("messages, 1 partition, from the end", msgs, {"partition": "0", "start": "end"}, "&#34;n&#34;"),
        Page("messages, 1 partition, by timestamp", msgs,
             {"partition": "0", "start": "timestamp", "timestamp": str(middle_ms)}, "&#34;n&#34;"),
        Page(f"messages, all {wide_n:,} partitions of a topic, from the end", f"/topics/{wide}/messages",
             {"start": "end"}, wide),
        Page("overview", "/", {}, "Brokers"),
    ]


def percentiles(ms: list[float]) -> tuple[float, float, float]:
    """(p50, p95, max) by nearest rank: with 20 views the p95 is the 19th slowest, not an
    interpolation between two views."""
    if not ms:
        raise ValueError("no timings")
    ordered = sorted(ms)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]

    return rank(0.50), rank(0.95), ordered[-1]


def request_counts(texts: Iterable[str]) -> Counter[str]:
    """Requests served per API name, summed over the brokers' /metrics answers (every version)."""
    total: Counter[str] = Counter()
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name != "kafka_network_requestmetrics_requests":
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    total[sample.labels.get("request", "?")] += int(sample.value)
    return total


def per_view(before: Counter[str], after: Counter[str], views: int) -> dict[str, float]:
    """The counted requests' delta per view (0 when a page cost none)."""
    return {name: (after[name] - before[name]) / views for name in COUNTED}


@dataclass
class PageFigures:
    page: Page
    ms: list[float]
    requests_per_view: dict[str, float]


def scrape(client: httpx.Client, urls: list[str]) -> Counter[str]:
    return request_counts(client.get(u, timeout=60).text for u in urls)


def view(client: httpx.Client, page: Page) -> float:
    """One view: ms until the whole answer is read; an answer other than the page is an error."""
    t0 = time.perf_counter()
    resp = client.get(page.path, params=page.params)
    elapsed = (time.perf_counter() - t0) * 1000
    if resp.status_code != 200 or (page.expect and page.expect not in resp.text):
        raise RuntimeError(f"console: {page.label} ({resp.url}) answered {resp.status_code} "
                           f"without {page.expect!r}: {resp.text[:400]!r}")
    return elapsed


def measure(client: httpx.Client, metrics_urls: list[str], page: Page, views: int) -> PageFigures:
    view(client, page)                          # warms the console's caches and connections: not counted
    before = scrape(client, metrics_urls)
    ms = [view(client, page) for _ in range(views)]
    after = scrape(client, metrics_urls)
    return PageFigures(page, ms, per_view(before, after, views))


def create_topics(system: System, lay: Layout, batch: int = 100) -> float:
    """All of ``lay``'s topics at RF 3, ``batch`` per CreateTopics; seconds until every ISR is full."""
    admin = system.admin()
    t0 = time.monotonic()
    topics = lay.topics
    for i in range(0, len(topics), batch):
        futures = admin.create_topics([NewTopic(n, p, 3) for n, p in topics[i:i + batch]], operation_timeout=120)
        for fut in futures.values():
            fut.result(300)
    slow = max(1.0, lay.total / 10_000)
    _wait(lambda: _full_isr(system, [n for n, _ in topics], 3), 900 * slow, "every ISR full")
    return time.monotonic() - t0


def fill(system: System, topic: str, records: int, base_ms: int) -> None:
    """``records`` JSON records into partition 0 of ``topic``, timestamps ``base_ms`` + 1 ms each."""
    errors: list[str] = []
    p = Producer(system.client_conf(**{"linger.ms": 5, "batch.size": 1_000_000, "acks": 1,
                                       "error_cb": lambda e: errors.append(str(e))}))

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(records):
        value = json.dumps({"n": i, "who": f"user-{i % 997}", "amount": i * 7 % 1000})
        while True:
            try:
                p.produce(topic, value.encode(), key=f"k{i}".encode(), partition=0, timestamp=base_ms + i,
                          on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(300)
    if left or errors:
        raise RuntimeError(f"filling {topic}: {left} undelivered, errors {errors[:3]}")


def console_pages(system: System, count: int, records: int, views: int, runs: int,
                  log: Any = print) -> Iterator[list[PageFigures]]:
    """On the running 3-broker cluster of ``system`` (brokers serving /metrics): build the
    topics, start the console, and yield one list of figures per run (``views`` views per page)."""
    assert system.cluster is not None
    lay = layout(count)
    create_s = create_topics(system, lay)
    log(f"    {len(lay.topics):,} topics, {lay.total:,} partitions RF3: every ISR full after {create_s:.1f} s")
    base_ms = int(time.time() * 1000) - records - 60_000
    fill(system, lay.data[0], records, base_ms)
    log(f"    {records:,} records in {lay.data[0]}-0")
    metrics_urls = [b.metrics_url for b in system.brokers if b.metrics_url]
    if len(metrics_urls) != len(system.brokers):
        raise RuntimeError("the console scenario needs brokers that serve /metrics")
    console = ConsoleProcess(system.workdir, system.cluster.bootstrap, metrics_urls=metrics_urls,
                             zookeeper=system.cluster.zk_connect, extra_args=["--lag-sample-interval", "0"])
    t0 = time.monotonic()
    console.start(timeout=120)
    try:
        log(f"    console on {console.url} (pid {console.pid}) answering after {time.monotonic() - t0:.1f} s")
        with httpx.Client(base_url=console.url, timeout=300) as client:
            for _ in range(runs):
                got = []
                for page in pages(lay, base_ms + records // 2):
                    figures = measure(client, metrics_urls, page, views)
                    p50, p95, top = percentiles(figures.ms)
                    log(f"    {page.label}: p50 {p50:.1f} ms, p95 {p95:.1f}, max {top:.1f}; per view "
                        + ", ".join(f"{n} {v:g}" for n, v in figures.requests_per_view.items()))
                    got.append(figures)
                yield got
    finally:
        console.stop()
        if console.alive:
            console.kill()
