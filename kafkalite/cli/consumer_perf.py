"""kafkalite-consumer-perf-test: Kafka's ConsumerPerformance on the project's consumer.

Prints Kafka's header and one result line:
``start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec``; with
``--show-detailed-stats`` a line every ``--reporting-interval`` ms as it goes.
"""
from __future__ import annotations

import random
import time
from datetime import datetime

from kafkalite.client import Consumer

from .common import ToolError, client_config_arg, client_properties, parser, run

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def build_parser():
    p = parser("kafkalite-consumer-perf-test", "A tool to verify consumer performance.")
    p.add_argument("--bootstrap-server", "--broker-list", dest="bootstrap_server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--messages", type=int, required=True)
    p.add_argument("--group", default=f"perf-consumer-{random.randint(0, 99999)}")
    p.add_argument("--fetch-size", type=int, default=1048576)
    p.add_argument("--timeout", type=int, default=10000, help="max ms between two records")
    p.add_argument("--from-latest", action="store_true")
    p.add_argument("--show-detailed-stats", action="store_true")
    p.add_argument("--reporting-interval", type=int, default=5000)
    p.add_argument("--hide-header", action="store_true")
    p.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f")
    p.add_argument("--consumer-property", action="append", metavar="PROP=VALUE")
    client_config_arg(p, "consumer")
    p.add_argument("--threads", type=int, default=1, help="accepted for compatibility; one thread is used")
    p.add_argument("--print-metrics", action="store_true")
    return p


def fmt_time(t: float, pattern: str) -> str:
    text = datetime.fromtimestamp(t).strftime(pattern)
    return text[:-3] if pattern.endswith("%f") else text      # milliseconds, as Java's SSS


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    if a.messages < 1:
        raise ToolError("--messages must be positive")
    security, _ = client_properties(a.consumer_config, a.consumer_property, "consumer")
    consumer = Consumer(a.bootstrap_server, group_id=a.group, auto_offset_reset="latest" if a.from_latest else "earliest",
                        max_partition_fetch_bytes=a.fetch_size, client_id="perf-consumer", max_poll_records=10000,
                        security=security)
    consumer.client.partitions_for(a.topic)
    if not a.hide_header:
        print(("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
               "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec") if a.show_detailed_stats else HEADER)
    start = time.time()
    count = nbytes = 0
    consumer.subscribe([a.topic])
    rebalance_end = None
    last_record = time.monotonic()
    last_report, last_count, last_bytes = time.time(), 0, 0
    try:
        while count < a.messages and (time.monotonic() - last_record) * 1000 < a.timeout:
            records = consumer.poll(100, max_records=a.messages - count)
            if rebalance_end is None and consumer.assignment():
                rebalance_end = time.time()
            if not records:
                continue
            last_record = time.monotonic()
            for r in records:
                count += 1
                nbytes += (len(r.value) if r.value is not None else 0) + (len(r.key) if r.key is not None else 0)
            now = time.time()
            if a.show_detailed_stats and (now - last_report) * 1000 >= a.reporting_interval:
                el = now - last_report
                mb = (nbytes - last_bytes) / 1048576
                print(f"{fmt_time(now, a.date_format)}, 0, {nbytes / 1048576:.4f}, {mb / el:.4f}, {count}, "
                      f"{(count - last_count) / el:.4f}, 0, {el * 1000:.0f}, {mb / el:.4f}, {(count - last_count) / el:.4f}")
                last_report, last_count, last_bytes = now, count, nbytes
    finally:
        consumer.close()
    end = time.time()
    if count < a.messages:
        import sys
        sys.stderr.write(f"WARNING: Exiting before consuming the expected number of messages: timeout ({a.timeout} ms) "
                         "exceeded. You can use the --timeout option to increase the timeout.\n")
    elapsed = max(end - start, 1e-9)
    rebalance_ms = int(((rebalance_end or end) - start) * 1000)
    fetch_s = max(elapsed - rebalance_ms / 1000, 1e-9)
    mb = nbytes / 1048576
    if not a.show_detailed_stats:
        print(f"{fmt_time(start, a.date_format)}, {fmt_time(end, a.date_format)}, {mb:.4f}, {mb / elapsed:.4f}, "
              f"{count}, {count / elapsed:.4f}, {rebalance_ms}, {int(fetch_s * 1000)}, {mb / fetch_s:.4f}, "
              f"{count / fetch_s:.4f}")
    return 0


def console() -> None:
    run(main)


if __name__ == "__main__":
    console()
