"""kafkalite-producer-perf-test: Kafka's ProducerPerformance on the project's producer.

Same options and output lines: a progress line every 5 s
``N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency.`` and the final
line with the 50th/95th/99th/99.9th latency percentiles. Latency is send() to acknowledgement.
"""
from __future__ import annotations

import random
import sys
import threading
import time

from kafkalite.client import Producer

from .common import ToolError, client_config_arg, client_properties, parser, run
from .console_producer import producer_options

REPORT_INTERVAL = 5.0


def build_parser():
    p = parser("kafkalite-producer-perf-test", "A tool to verify producer performance.")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--record-size", type=int)
    p.add_argument("--payload-file")
    p.add_argument("--payload-delimiter", default="\\n")
    p.add_argument("--throughput", type=float, required=True, help="max records/sec, -1 for no limit")
    p.add_argument("--producer-props", nargs="+", metavar="PROP=VALUE",
                   help="bootstrap.servers=... and other producer properties")
    client_config_arg(p, "producer")
    p.add_argument("--bootstrap-server", help="alternative to bootstrap.servers in --producer-props")
    p.add_argument("--print-metrics", action="store_true")
    return p


class Stats:
    """Kafka's ProducerPerformance.Stats: windowed progress, sampled latencies for percentiles."""

    def __init__(self, num_records: int) -> None:
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.window_start = self.start
        self.count = self.bytes = 0
        self.total_latency = self.max_latency = 0.0
        self.w_count = self.w_bytes = 0
        self.w_total_latency = self.w_max_latency = 0.0
        self.sampling = max(1, num_records // 500000)
        self.latencies: list[int] = []
        self.index = 0

    def record(self, latency_ms: float, size: int) -> None:
        with self.lock:
            self.count += 1
            self.bytes += size
            self.total_latency += latency_ms
            self.max_latency = max(self.max_latency, latency_ms)
            self.w_count += 1
            self.w_bytes += size
            self.w_total_latency += latency_ms
            self.w_max_latency = max(self.w_max_latency, latency_ms)
            if self.index % self.sampling == 0:
                self.latencies.append(int(latency_ms))
            self.index += 1
            now = time.monotonic()
            if now - self.window_start >= REPORT_INTERVAL:
                self.print_window(now)

    def print_window(self, now: float) -> None:
        elapsed = now - self.window_start
        rate = self.w_count / elapsed
        mb = self.w_bytes / elapsed / (1024 * 1024)
        avg = self.w_total_latency / max(1, self.w_count)
        print(f"{self.w_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), {avg:.1f} ms avg latency, "
              f"{self.w_max_latency:.1f} ms max latency.", flush=True)
        self.window_start = now
        self.w_count = self.w_bytes = 0
        self.w_total_latency = self.w_max_latency = 0.0

    def print_total(self) -> None:
        elapsed = time.monotonic() - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        mb = self.bytes / elapsed / (1024 * 1024) if elapsed > 0 else 0.0
        lat = sorted(self.latencies) or [0]

        def pct(p: float) -> int:
            return lat[min(len(lat) - 1, int(p * len(lat)))]
        print(f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), "
              f"{self.total_latency / max(1, self.count):.2f} ms avg latency, {self.max_latency:.2f} ms max latency, "
              f"{pct(0.5)} ms 50th, {pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.", flush=True)


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    security, props = client_properties(a.producer_config, a.producer_props, "producer", "--producer-props")
    bootstrap = a.bootstrap_server or props.get("bootstrap.servers")
    if not bootstrap:
        raise ToolError("bootstrap.servers must be given in --producer-props (or --bootstrap-server)")
    if (a.record_size is None) == (a.payload_file is None):
        raise ToolError("Either --record-size or --payload-file must be specified but not both.")
    if a.num_records < 1:
        raise ToolError("--num-records must be positive")
    if a.payload_file:
        delim = a.payload_delimiter.encode().decode("unicode_escape")
        try:
            payloads = [p.encode() for p in open(a.payload_file, encoding="utf-8").read().split(delim) if p]
        except OSError as exc:
            raise ToolError(f"cannot read --payload-file {a.payload_file}: {exc.strerror}") from None
        if not payloads:
            raise ToolError("No payloads found in the payload file")
    else:
        rng = random.Random()
        payloads = [bytes(rng.randrange(65, 91) for _ in range(a.record_size))]
    opts = {"acks": "1", **producer_options(props)}
    producer = Producer(bootstrap, client_id="producer-performance", security=security, **opts)
    stats = Stats(a.num_records)
    interval = 1.0 / a.throughput if a.throughput > 0 else 0.0
    start = time.monotonic()
    errors: list[BaseException] = []
    try:
        for i in range(a.num_records):
            payload = payloads[i % len(payloads)] if a.payload_file else payloads[0]
            sent = time.monotonic()
            size = len(payload)

            def done(fut, sent=sent, size=size) -> None:
                exc = fut.exception()
                if exc is not None:
                    if not errors:
                        sys.stderr.write(f"Error: {exc}\n")
                    errors.append(exc)
                    return
                stats.record((time.monotonic() - sent) * 1000.0, size)
            producer.send(a.topic, payload, callback=done)
            if interval:
                ahead = start + (i + 1) * interval - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush()
    finally:
        producer.close()
    stats.print_total()
    return 1 if errors else 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
