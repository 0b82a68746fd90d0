"""Side-by-side benchmark: kafkalite and (with ``--kafka``) Apache Kafka 0.9.0.1 under the same
confluent-kafka load, on one machine, in one run (issue 9).

``scripts/bench <scenario>... [--kafka] [--runs 5] [--quick] [--profile DIR]``

Scenarios (names or numbers): ``ceiling`` (0, the machine's loopback/page-cache limit),
``produce`` (1), ``consume`` (2), ``replicated`` (3), ``latency`` (4), ``growth`` (5),
``memory`` (6), ``failover`` (7), ``broker-ceiling`` (8: pre-encoded Produce requests
from several processes, bench/ceiling_load.py), ``clients`` (9: thousands of producers and
consumers in groups, bench/many_clients.py; kafkalite only: its aiokafka clients need Kafka 0.10+),
``partitions`` (10: 10,000 and 30,000 RF 3
partitions), ``recovery`` (11: kill -9 with GBs of unflushed log), ``transactions`` (12,
kafkalite only: transactions of 1,000 records vs plain acks=all produce, RF 3), ``quotas``
(13, kafkalite only: a well-behaved producer's latency next to a greedy one, with and without a
quota on it), ``security`` (14, kafkalite only: produce and consume over PLAINTEXT and SASL_SSL), ``console`` (15, kafkalite
only: the web console's pages at 10,000 partitions, bench/console_pages.py), ``connect`` (16:
kafkalite's Connect worker and Kafka 0.9.0.1's Java worker, both on a 1-broker kafkalite cluster,
moving a file through a topic into a file, then kafkalite's JDBC sink into a throwaway PostgreSQL,
bench/connect_pipeline.py), ``streams`` (17: a filter-and-project stream and a one-minute tumbling
window aggregate run by kafkalite's SQL server on Spark local[2] and written with Quix Streams, on
kafkalite and on Kafka 0.9.0.1, bench/stream_pipelines.py), or ``all``.

One ZooKeeper (tickTime 2000, as a production one) serves every cluster, each in its own chroot.
Each system gets a 1-broker cluster for scenarios 1, 2, 13, a fresh 1-broker cluster for
each run of 5 and 8, and a 3-broker cluster for 3, 4, 6, 7; scenarios 1, 2, 3, 5 and 8 also report the
brokers' CPU seconds per GB produced or consumed (bench/cpu.py);
the systems run one after the other, never at the same time. The table (median, min, max over
``--runs`` runs and the kafkalite / Kafka ratio) is printed at the end; rows are appended to
``bench/results/<stamp>.jsonl`` as they come, and the chart goes to ``bench/results/<stamp>.png``
(also ``latest.png``). ``--publish`` merges the rows into ``bench/RESULTS.json`` (each row
replaces the one of the same scenario, metric and system measured before; every row keeps the
stamp of its run) and rewrites ``bench/RESULTS.md`` from it, one table and one chart
(``bench/charts/``) per scenario, so scenarios run on different days make one page.
``scripts/bench publish <file.jsonl>...`` does the same with earlier runs' JSON lines.

``--profile DIR`` samples every kafkalite broker with py-spy during its scenarios (raw collapsed
stacks in DIR; only the thread holding the GIL, so idle waits do not count) and prints the top
functions by own and by inclusive samples.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from bench import kafka09, scenarios
from bench import report
from bench.report import Results, Row
from bench.scenarios import Sizes
from bench.systems import Kafka09, Kafkalite, SingleBrokerKafkalite, System
from tests.support.zookeeper import ZooKeeperServer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PUBLISHED = ROOT / "bench" / "RESULTS.json"
CHARTS = ROOT / "bench" / "charts"
NAMES = ["ceiling", "produce", "consume", "replicated", "latency", "growth", "memory", "failover",
         "broker-ceiling", "clients", "partitions", "recovery", "transactions", "quotas",
         "security", "console", "connect", "streams"]
ONE_BROKER = {"produce", "consume", "quotas"}
THREE_BROKERS = {"replicated", "latency", "memory", "failover", "clients", "transactions"}


def parse_scenarios(items: list[str]) -> list[str]:
    chosen: set[str] = set()
    for item in items:
        for part in item.split(","):
            if part == "all":
                chosen.update(NAMES)
            elif part.isdigit() and int(part) < len(NAMES):
                chosen.add(NAMES[int(part)])
            elif part in NAMES:
                chosen.add(part)
            else:
                raise SystemExit(f"unknown scenario {part!r}; choose from {', '.join(NAMES)}, all, or 0-{len(NAMES) - 1}")
    return [n for n in NAMES if n in chosen]


class Profiler:
    """py-spy record attached to running broker processes (raw collapsed stacks)."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def attach(self, system: System, label: str) -> None:
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for b in system.brokers:
            out = self.out_dir / f"{label}-broker{b.broker_id}.txt"
            proc = subprocess.Popen([spy, "record", "--pid", str(b.pid), "--format", "raw", "--rate", "200",
                                     "--gil", "--nonblocking",
                                     "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append((proc, out))

    def detach(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)      # py-spy writes its file on SIGINT
        for proc, _ in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()

    def summary(self, top: int = 20) -> str:
        own: collections.Counter[str] = collections.Counter()
        incl: collections.Counter[str] = collections.Counter()
        total = 0
        for _, path in self.procs:
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                stack, _, n = line.rpartition(" ")
                if not stack or not n.isdigit():
                    continue
                count = int(n)
                frames = [f for f in stack.split(";") if f and not f.startswith("process ")
                          and not f.startswith("thread ")]
                if not frames:
                    continue
                total += count
                own[frames[-1]] += count
                for f in set(frames):
                    incl[f] += count
        if not total:
            return "no samples (is py-spy installed and allowed to ptrace?)"
        lines = [f"{total} samples over {len(self.procs)} broker(s); top {top} by own time:"]
        lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
        lines.append(f"top {top} by inclusive time:")
        lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
        return "\n".join(lines)


def run_system(system: System, chosen: list[str], results: Results, sizes: Sizes,
               profiler: Profiler | None) -> None:
    run_small_clusters(system, chosen, results, sizes, profiler)
    if "growth" in chosen:
        run_growth(system, results, sizes, profiler)
    if "broker-ceiling" in chosen:
        run_ceiling(system, results, sizes, profiler)
    # scenarios 10 and 11 start clusters of their own (the state they build would slow the rest)
    if "partitions" in chosen:
        print(f"== {system.name}: many partitions", flush=True)
        scenarios.many_partitions(system, results, sizes)
    if "recovery" in chosen:
        print(f"== {system.name}: crash recovery", flush=True)
        scenarios.crash_recovery(system, results, sizes)
    if "security" in chosen and isinstance(system, Kafkalite):
        print(f"== {system.name}: PLAINTEXT and SASL_SSL", flush=True)
        scenarios.security(system.zookeeper, system.workdir / "security", results, sizes)
    if "console" in chosen and isinstance(system, Kafkalite):
        print(f"== {system.name}: web console at {sizes.console_partitions:,} partitions", flush=True)
        scenarios.console(system.zookeeper, system.workdir / "console", results, sizes)
    elif "console" in chosen:
        print(f"   {system.name}: scenario 15 skipped: Kafka 0.9.0.1 has no web console", flush=True)
    if "connect" in chosen and isinstance(system, Kafkalite):
        print(f"== {system.name} cluster: Connect workers (kafkalite's, Kafka {kafka09.KAFKA_VERSION}'s), "
              f"{sizes.connect_mb:,.0f} MB of lines, {sizes.connect_rows:,} JDBC rows", flush=True)
        single = SingleBrokerKafkalite(system.zookeeper, system.workdir / "connect")
        single.start(1)
        try:
            scenarios.connect(single, results, sizes, single.workdir / "workers")
        finally:
            single.stop()
    elif "connect" in chosen:
        print(f"   {system.name}: scenario 16 runs both workers on the kafkalite cluster", flush=True)
    if "streams" in chosen and isinstance(system, Kafkalite):
        print(f"== {system.name} and Kafka {kafka09.KAFKA_VERSION}: stream processing (SQL server, Quix Streams)",
              flush=True)
        single = SingleBrokerKafkalite(system.zookeeper, system.workdir / "streams")
        single.start(1)
        reference = Kafka09(system.zookeeper, system.workdir / "streams-kafka09")
        reference.start(1)
        try:
            scenarios.streams(single, reference, results, sizes, single.workdir / "engines")
        finally:
            reference.stop()
            single.stop()
    elif "streams" in chosen:
        print(f"   {system.name}: scenario 17 runs every engine from the kafkalite side", flush=True)


@contextlib.contextmanager
def fresh_broker(system: System, profiler: Profiler | None, label: str) -> Iterator[None]:
    """A 1-broker cluster for one run, its data directory removed after it. For the scenarios
    whose runs write GBs (5 and 8): Kafka 0.9.0.1's stock configuration cannot delete topics
    (``delete.topic.enable=false``), and the page cache keeping a run's GBs made the next runs'
    writes up to 2.5x dearer in the kernel, whichever system wrote them (docs/benchmarks.md,
    "Scenario 8's two modes")."""
    cluster = system.start(1)
    if profiler and isinstance(system, Kafkalite):
        profiler.attach(system, label)
    try:
        yield
    finally:
        if profiler:
            profiler.detach()
        system.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def run_growth(system: System, results: Results, sizes: Sizes, profiler: Profiler | None) -> None:
    """Scenario 5, ``sizes.runs`` times, each run on a fresh 1-broker cluster (:func:`fresh_broker`):
    a run writes ``growth_gb`` + ``live_gb`` GB."""
    runs = []
    for run in range(sizes.runs):
        print(f"== {system.name}: 1 broker, log growth run {run + 1} of {sizes.runs} "
              f"({sizes.growth_gb:g} + {sizes.live_gb:g} GB)", flush=True)
        with fresh_broker(system, profiler, f"growth{run}"):
            runs.append(scenarios.growth_run(system, sizes))
    for row in scenarios.growth_rows(system.name, sizes, runs):
        results.add(row)


def run_ceiling(system: System, results: Results, sizes: Sizes, profiler: Profiler | None) -> None:
    """Scenario 8, each run of each record size on a fresh 1-broker cluster (:func:`fresh_broker`)."""
    print(f"== {system.name}: 1 broker per run, broker ceiling", flush=True)
    scenarios.broker_ceiling(system, results, sizes, system.workdir / "ceiling",
                             lambda label: fresh_broker(system, profiler, label))


def run_small_clusters(system: System, chosen: list[str], results: Results, sizes: Sizes,
                       profiler: Profiler | None) -> None:
    if ONE_BROKER & set(chosen):
        print(f"== {system.name}: 1 broker", flush=True)
        system.start(1)
        if profiler and isinstance(system, Kafkalite):
            profiler.attach(system, "1broker")
        try:
            topics = {}
            if "produce" in chosen or "consume" in chosen:
                for n in (1, 10):
                    topics[n] = scenarios.produce_one_broker(system, results if "produce" in chosen else None,
                                                             sizes, n)
            if "consume" in chosen:
                for n in (1, 10):
                    scenarios.consume_one_broker(system, results, sizes, topics[n], n)
            if "quotas" in chosen and isinstance(system, Kafkalite):
                scenarios.quotas(system, results, sizes, system.workdir / "quotas")
        finally:
            if profiler:
                profiler.detach()
            system.stop()
    if THREE_BROKERS & set(chosen):
        print(f"== {system.name}: 3 brokers", flush=True)
        system.start(3)
        if profiler and isinstance(system, Kafkalite):
            profiler.attach(system, "3brokers")
        try:
            if "memory" in chosen:
                time.sleep(2.0)
                scenarios.memory(system, results, "idle after start")
            if "replicated" in chosen or "memory" in chosen:
                scenarios.replicated(system, results if "replicated" in chosen else None, sizes)
            if "memory" in chosen:
                scenarios.memory(system, results, "after scenario 3")
            if "latency" in chosen:
                scenarios.latency(system, results, sizes, system.workdir / "latency")
            if "clients" in chosen and isinstance(system, Kafkalite):
                scenarios.many_clients(system, results, sizes, system.workdir / "clients")
            elif "clients" in chosen:
                # aiokafka 0.14 bootstraps with ApiVersions (KIP-35, Kafka 0.10): 0.9.0.1 closes
                # the connection and every client fails with "Unable to bootstrap"
                print(f"   {system.name}: scenario 9 skipped: aiokafka needs ApiVersions (Kafka 0.10+)",
                      flush=True)
            if "transactions" in chosen and isinstance(system, Kafkalite):
                scenarios.transactions(system, results, sizes)
            if "failover" in chosen:
                if profiler:
                    profiler.detach()       # py-spy would die with the killed broker anyway
                    profiler = None
                scenarios.failover(system, results, sizes)
        finally:
            if profiler:
                profiler.detach()
            system.stop()


def publish(results: Results, header: str) -> None:
    """Merge ``results`` into bench/RESULTS.json; rewrite bench/RESULTS.md and the charts."""
    try:
        import matplotlib  # noqa: F401  (every chart is rewritten: without it they would all be lost)
    except ImportError:
        raise SystemExit("publish: matplotlib is not installed (pip install -e .[bench]); nothing was "
                         "published (the run's rows stay in bench/results/*.jsonl: scripts/bench "
                         "publish <file>)") from None
    runs, rows = report.load_published(PUBLISHED)
    runs, rows = report.merge_published(runs, rows, results, header)
    report.save_published(PUBLISHED, runs, rows)
    merged = Results(RESULTS, results.stamp)
    merged.rows = sorted(rows, key=lambda r: report.scenario_number(r.scenario))
    lines = ["# Benchmark results", "",
             "Written by `scripts/bench ... --publish` (see docs/benchmarks.md). Each run "
             "replaces the rows it measured again; a row names its run, and a ratio compares figures of "
             "the same run only. Times in ms or s, rates in records/s unless the unit says otherwise.", "",
             "Runs:", ""]
    lines += [f"- `{stamp}`: {text}" for stamp, text in sorted(runs.items())]
    lines += ["", "## Side by side (medians)", "", merged.side_by_side()]
    for old in CHARTS.glob("*.png") if CHARTS.exists() else []:
        old.unlink()
    for scenario in dict.fromkeys(r.scenario for r in merged.rows):
        lines += ["", f"## {scenario}", "", merged.table(markdown=True, scenario=scenario)]
        slug = "".join(c if c.isalnum() else "-" for c in scenario.lower()).strip("-")
        chart = merged.chart(CHARTS / f"{slug}.png", scenario=scenario)
        if chart is not None:
            lines += ["", f"![{scenario}](charts/{chart.name})"]
    md = ROOT / "bench" / "RESULTS.md"
    md.write_text("\n".join(lines) + "\n")
    print(f"wrote {md} ({len(merged.rows)} rows from {len(runs)} runs)")
    page = report.DOC_PAGE
    page.write_text(report.regenerate_doc(page.read_text(), rows))
    print(f"wrote the side-by-side table of {page}")


def publish_jsonl(paths: list[str]) -> int:
    """``scripts/bench publish <file.jsonl>...``: publish earlier runs' rows, oldest first;
    without files, write bench/RESULTS.md and the charts again from bench/RESULTS.json."""
    if not paths:
        publish(Results(RESULTS, "-"), "")
        return 0
    for path in sorted(paths, key=lambda p: Path(p).name):
        loaded: list[Row] = []
        try:
            for line in Path(path).read_text().splitlines():
                raw = json.loads(line)
                data = {k: v for k, v in raw.items() if k in Row.__dataclass_fields__}
                data["run"] = data.get("run") or raw.get("time", "")
                loaded.append(Row(**data))
        except (OSError, ValueError, TypeError) as exc:
            raise SystemExit(f"publish: {path}: {exc}") from None
        if not loaded:
            continue
        stamp = loaded[0].run or Path(path).stem
        results = Results(RESULTS, stamp)
        for row in loaded:
            row.run = row.run or stamp
        results.rows = loaded
        publish(results, f"from `bench/results/{Path(path).name}`")
    return 0


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["publish"]:
        return publish_jsonl(argv[1:])
    ap = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="+", help=f"{', '.join(NAMES)}, all, or numbers 0-{len(NAMES) - 1}")
    ap.add_argument("--kafka", action="store_true", help="also run Apache Kafka 0.9.0.1 (fetched on first use)")
    ap.add_argument("--runs", type=int, default=None, help="runs per figure (default 5; --quick: 1)")
    ap.add_argument("--quick", action="store_true", help="small sizes for development (not for figures)")
    ap.add_argument("--records", type=int, help="records per produce/consume run (default 1,000,000)")
    ap.add_argument("--latency-seconds", type=float, help="duration of one latency run (default 20)")
    ap.add_argument("--latency-rates", help="comma-separated records/s (default 1000,10000,50000)")
    ap.add_argument("--latency-warmup", type=float, help="seconds of warm-up before scenario 4 (default 60)")
    ap.add_argument("--growth-gb", type=float, help="GB produced in scenario 5 (default 5)")
    ap.add_argument("--live-gb", type=float,
                    help="GB produced in scenario 5 while a consumer reads them (default 20)")
    ap.add_argument("--clients", help="comma-separated client counts for scenario 9 (default 1000,2000)")
    ap.add_argument("--partitions", help="comma-separated partition counts for scenario 10 (default 10000,30000)")
    ap.add_argument("--console-partitions", type=int,
                    help="RF 3 partitions on the cluster of scenario 15 (default 10,000; --quick: 300)")
    ap.add_argument("--console-views", type=int, help="views of each console page per run (default 20; --quick: 5)")
    ap.add_argument("--console-records", type=int,
                    help="records in the partition the message browser reads (default 100,000)")
    ap.add_argument("--connect-mb", type=float,
                    help="MB of lines the Connect workers move in scenario 16 (default 1,000; --quick: 20)")
    ap.add_argument("--connect-rows", type=int,
                    help="rows the JDBC sink writes in scenario 16 (default 1,000,000; --quick: 20,000)")
    ap.add_argument("--connect-java-mb", type=float,
                    help="the largest --connect-mb Kafka 0.9.0.1's Java worker is run at (default 10; its "
                         "FileStreamSourceTask's time grows with the square of the file); 0 JDBC rows: no JDBC part")
    ap.add_argument("--streams-rate", type=float,
                    help="records/s of scenario 17's latency phase (default 500; --quick: 200)")
    ap.add_argument("--streams-seconds", type=float, help="seconds of scenario 17's latency phase (default 15)")
    ap.add_argument("--streams-burst", type=int,
                    help="records of scenario 17's throughput phase (default 30,000; --quick: 5,000)")
    ap.add_argument("--recovery-gb", type=float, help="GB written before the kill -9 of scenario 11 (default 5)")
    ap.add_argument("--failover-runs", type=int, help="failovers of each kind (default: --runs)")
    ap.add_argument("--profile", metavar="DIR", type=Path, help="py-spy the kafkalite brokers into DIR")
    ap.add_argument("--publish", action="store_true",
                    help="merge the rows into bench/RESULTS.json and rewrite bench/RESULTS.md and bench/charts/")
    ap.add_argument("--note", default="", help="a line for bench/RESULTS.md (e.g. the machine's load)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (broker logs)")
    args = ap.parse_args(argv)
    chosen = parse_scenarios(args.scenario)

    runs = args.runs or (1 if args.quick else 5)
    sizes = Sizes.quick(runs) if args.quick else Sizes(runs=runs, failover_runs=runs)
    for attr, value in (("records", args.records), ("latency_seconds", args.latency_seconds),
                        ("growth_gb", args.growth_gb), ("live_gb", args.live_gb), ("failover_runs", args.failover_runs),
                        ("latency_warmup_seconds", args.latency_warmup), ("recovery_gb", args.recovery_gb),
                        ("console_partitions", args.console_partitions), ("console_views", args.console_views),
                        ("console_records", args.console_records), ("connect_mb", args.connect_mb), ("connect_java_mb", args.connect_java_mb),
                        ("streams_rate", args.streams_rate), ("streams_seconds", args.streams_seconds),
                        ("streams_burst", args.streams_burst),
                        ("connect_rows", args.connect_rows)):
        if value is not None:
            setattr(sizes, attr, value)

    if args.latency_rates:
        try:
            sizes.latency_rates = tuple(float(r) for r in args.latency_rates.split(","))
        except ValueError:
            raise SystemExit(f"--latency-rates: numbers separated by commas, not {args.latency_rates!r}") from None
    if args.clients:
        try:
            sizes.client_counts = tuple(int(n) for n in args.clients.split(","))
        except ValueError:
            raise SystemExit(f"--clients: whole numbers separated by commas, not {args.clients!r}") from None
    if args.partitions:
        try:
            sizes.partition_counts = tuple(int(n) for n in args.partitions.split(","))
        except ValueError:
            raise SystemExit(f"--partitions: whole numbers separated by commas, not {args.partitions!r}") from None
    results = Results(RESULTS)
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-bench-", dir="/tmp"))
    zk = ZooKeeperServer(tmp / "zookeeper", tick_ms=2000)
    systems: list[System] = []
    profiler = Profiler(args.profile) if args.profile else None
    header = (f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}: Python {platform.python_version()}, "
              f"{platform.machine()}, {__import__('os').cpu_count()} CPUs; scenarios {', '.join(chosen)}; "
              f"sizes {sizes}")
    print(f"side-by-side bench: {header}\ntmp={tmp}, results={results.jsonl}", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        if "ceiling" in chosen:
            print("== machine ceiling", flush=True)
            scenarios.ceiling(results, sizes)
        rest = [c for c in chosen if c != "ceiling"]
        if rest:
            zk.start()
            systems.append(Kafkalite(zk, tmp / "kafkalite"))
            if args.kafka:
                systems.append(Kafka09(zk, tmp / "kafka09"))
            for system in systems:
                run_system(system, rest, results, sizes, profiler)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        print(f"bench failed: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        for system in systems:
            if system.cluster is not None:
                for b in system.cluster.brokers:
                    print(f"--- {system.name} broker {b.broker_id} log tail ---\n{b.tail()}", file=sys.stderr)
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for system in systems:
            system.stop()
        zk.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n===== {', '.join(chosen)}: {time.monotonic() - started:.0f} s =====")
    print(results.table())
    chart = results.chart(RESULTS / f"{results.stamp}.png") if results.rows else None
    if chart is not None:
        shutil.copyfile(chart, RESULTS / "latest.png")
        print(f"chart: {chart}")
    print(f"JSON lines: {results.jsonl}")
    if profiler is not None:
        print("\n===== kafkalite broker profile (py-spy) =====")
        print(profiler.summary())
    if args.publish and results.rows:
        publish(results, header + (f" ({args.note})" if args.note else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
