"""Charts from the brokers' Prometheus endpoints (``metrics.port``'s /metrics).

Each scrape reads every broker's exposition with prometheus_client's own parser and keeps, per
series, the newest samples in memory; rates are the counter's increase between two scrapes
divided by the time between them (a counter that went down, a restarted broker, starts over).
Series summed over the brokers: bytes and messages in/out per topic, request latency (the
histogram's mean per API over the interval), ISR shrinks and expands.
"""
from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections import deque
from typing import Iterable

from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger(__name__)

POINTS = 120
BT = "kafka_server_brokertopicmetrics_"
COUNTERS = {           # sample name -> (chart, label that names the series)
    BT + "bytesinpersec_total": ("Bytes in per second", "topic"),
    BT + "bytesoutpersec_total": ("Bytes out per second", "topic"),
    BT + "messagesinpersec_total": ("Messages in per second", "topic"),
    "kafka_server_replicamanager_isrshrinkspersec_total": ("ISR shrinks and expands per second", ""),
    "kafka_server_replicamanager_isrexpandspersec_total": ("ISR shrinks and expands per second", ""),
}
LATENCY = "kafka_network_requestmetrics_totaltimems"
CHARTS = ("Bytes in per second", "Bytes out per second", "Messages in per second",
          "Request latency (mean ms)", "ISR shrinks and expands per second")


def totals(texts: Iterable[str]) -> dict[tuple[str, str], float]:
    """(chart, series) -> summed counter value (and latency sums/counts) over every broker's text."""
    out: dict[tuple[str, str], float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in COUNTERS:
                    chart, label = COUNTERS[s.name]
                    key = (chart, s.labels.get(label, "") if label else s.name.split("_")[3].replace("persec", ""))
                elif s.name in (LATENCY + "_sum", LATENCY + "_count"):
                    key = ("latency" + s.name[len(LATENCY):], s.labels.get("request", ""))
                else:
                    continue
                out[key] = out.get(key, 0.0) + s.value
    return out


class MetricsService:
    def __init__(self, urls: Iterable[str], points: int = POINTS) -> None:
        self.urls = tuple(urls)
        self._lock = threading.Lock()
        self._last: tuple[float, dict[tuple[str, str], float]] | None = None
        self._rates: dict[tuple[str, str], deque[tuple[float, float]]] = {}
        self._points = points
        self.errors: dict[str, str] = {}

    @property
    def configured(self) -> bool:
        return bool(self.urls)

    def _fetch(self, url: str) -> str | None:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                self.errors.pop(url, None)
                return str(resp.read().decode("utf-8", "replace"))
        except OSError as exc:
            self.errors[url] = str(exc)
            return None

    def scrape(self, now: float | None = None) -> None:
        texts = [t for t in (self._fetch(u) for u in self.urls) if t is not None]
        self.add(totals(texts), time.time() if now is None else now)

    def add(self, current: dict[tuple[str, str], float], now: float) -> None:
        """Turn two consecutive totals into one rate point per series."""
        with self._lock:
            last = self._last
            self._last = (now, current)
            if last is None or now <= last[0]:
                return
            dt = now - last[0]
            prev = last[1]
            for key, value in current.items():
                if key[0].startswith("latency"):
                    continue
                before = prev.get(key, 0.0)
                rate = (value - before) / dt if value >= before else value / dt
                self._series(key).append((now, rate))
            for api in {k[1] for k in current if k[0] == "latency_count"}:
                n = current[("latency_count", api)] - prev.get(("latency_count", api), 0.0)
                total = current.get(("latency_sum", api), 0.0) - prev.get(("latency_sum", api), 0.0)
                if n > 0:
                    self._series(("Request latency (mean ms)", api)).append((now, total / n))

    def _series(self, key: tuple[str, str]) -> deque[tuple[float, float]]:
        return self._rates.setdefault(key, deque(maxlen=self._points))

    def charts(self, top: int = 6) -> dict[str, dict[str, list[tuple[float, float]]]]:
        """chart title -> the ``top`` busiest series' points (by their latest value)."""
        with self._lock:
            out: dict[str, dict[str, list[tuple[float, float]]]] = {}
            for chart in CHARTS:
                series = {k[1]: list(v) for k, v in self._rates.items() if k[0] == chart and v}
                busiest = sorted(series, key=lambda n: -series[n][-1][1])[:top]
                out[chart] = {n: series[n] for n in sorted(busiest)}
            return out

    def topic_rates(self) -> dict[str, tuple[float, float, float]]:
        """topic -> (bytes in/s, bytes out/s, messages in/s) at the latest scrape."""
        with self._lock:
            out: dict[str, tuple[float, float, float]] = {}

            def latest(chart: str, topic: str) -> float:
                pts = self._rates.get((chart, topic))
                return pts[-1][1] if pts else 0.0
            for chart, topic in self._rates:
                if chart in CHARTS[:3] and topic:
                    out[topic] = (latest(CHARTS[0], topic), latest(CHARTS[1], topic), latest(CHARTS[2], topic))
            return out
