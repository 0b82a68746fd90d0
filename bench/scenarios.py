"""The scenarios of issue 9, each run against one :class:`bench.systems.System` whose cluster is
already started; each returns nothing and adds :class:`bench.report.Row` s to ``Results``."""
from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager

from bench import ceiling_load, connect_pipeline, console_pages, latency_probe, load, partitions, stream_pipelines
from bench import many_clients as many_clients_load
from bench.cpu import PhaseCpu, SchedTimes, sched_times
from bench.report import Results, Row
from bench.systems import System

REPLICATED = {"min.insync.replicas": "2"}


@dataclass
class Sizes:
    """Record counts and durations; ``--quick`` shrinks them for development runs."""
    records: int = 1_000_000
    runs: int = 5
    latency_rates: tuple[float, ...] = (1_000, 10_000, 50_000)
    latency_seconds: float = 20.0
    latency_warmup_seconds: float = 60.0
    ceiling_seconds: float = 10.0
    ceiling_warmup_seconds: float = 3.0
    ceiling_connections: int = 4
    ceiling_window: int = 4
    client_counts: tuple[int, ...] = (1_000, 2_000)
    clients_seconds: float = 60.0
    client_workers: int = 4
    partition_counts: tuple[int, ...] = (10_000, 30_000)
    idle_seconds: float = 20.0
    recovery_gb: float = 5.0
    quota_seconds: float = 20.0
    quota_bytes_per_s: float = 1_048_576
    growth_gb: float = 5.0
    growth_chunks: int = 5
    live_gb: float = 20.0
    failover_rate: float = 2_000
    failover_runs: int = 5
    console_partitions: int = 10_000
    console_records: int = 100_000
    console_views: int = 20
    connect_mb: float = 1000.0
    connect_rows: int = 1_000_000
    connect_java_mb: float = 10.0
    streams_rate: float = 500.0
    streams_seconds: float = 15.0
    streams_burst: int = 30_000

    @classmethod
    def quick(cls, runs: int) -> "Sizes":
        return cls(records=200_000, runs=runs, latency_rates=(1_000, 10_000), latency_seconds=3.0,
                   latency_warmup_seconds=2.0, ceiling_seconds=3.0, ceiling_warmup_seconds=1.0, client_counts=(100,), clients_seconds=10.0,
                   partition_counts=(300,), idle_seconds=5.0, recovery_gb=0.2, quota_seconds=4.0,
                   growth_gb=0.2, live_gb=0.5, failover_runs=runs, console_partitions=300,
                   console_records=5_000, console_views=5, connect_mb=4.0,
                   connect_rows=20_000, streams_rate=200.0, streams_seconds=5.0, streams_burst=5_000)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _topic(prefix: str) -> str:
    return f"{prefix}-{time.time_ns() % 10**12}"


def broker_cpu_row(scenario: str, what: str, system_name: str, moved: str,
                   phases: list[tuple[PhaseCpu, float]], note: str = "") -> Row:
    """The row "<what>: broker CPU seconds per GB <moved>" (s/GB, lower is better), one value per
    measured phase: ``phases`` holds each phase's :class:`bench.cpu.PhaseCpu` over the brokers and
    the payload bytes the phase moved. The figure that survives a noisy machine (issue 33): other
    work on the cores moves rates by 2-5x, the brokers' CPU time per byte much less. The user and
    system parts and the raw CPU seconds and GB are kept in ``extra``."""
    totals = [cpu.total for cpu, _ in phases]
    gbs = [payload / 1e9 for _, payload in phases]
    per_gb = [cpu.per_gb(payload) for cpu, payload in phases]
    extra = {"user_s_per_gb": [t.user / gb for t, gb in zip(totals, gbs)],
             "system_s_per_gb": [t.system / gb for t, gb in zip(totals, gbs)],
             "cpu_s": [t.total for t in totals], "gb": gbs}
    brokers = len(phases[0][0].used)
    shown = (f"utime + stime of the broker process{'es' if brokers > 1 else ''} from /proc; medians: "
             f"user {statistics.median(extra['user_s_per_gb']):.2f}, "
             f"system {statistics.median(extra['system_s_per_gb']):.2f} s/GB")
    return Row(scenario, f"{what}: broker CPU seconds per GB {moved}", system_name, "s/GB", per_gb,
               higher_is_better=False, note=f"{note}; {shown}" if note else shown, extra=extra)


# ------------------------------------------------------------------------------ 8: broker ceiling

#: bytes the loopback probe of scenario 8 sends after each run (~0.3-0.5 s on the bench machine)
LOOPBACK_PROBE_MB = 500


def loopback_mb_per_s(megabytes: int = LOOPBACK_PROBE_MB) -> float:
    """The machine's loopback ceiling now: MB/s of ``megabytes`` of 1 MB sends over one loopback
    TCP connection into a Python sink (scenario 0's "loopback TCP -> Python sink")."""
    block = os.urandom(1_000_000)
    return megabytes / loopback_seconds(block, megabytes)


def loopback_fraction_row(scenario: str, what: str, system_name: str, mbs: list[float],
                          loopback: list[float]) -> Row:
    """The row "<what>: payload MB/s as a fraction of the machine's loopback ceiling" (issue 33:
    the ceiling stated as a fraction of the machine's own), one value per run: the run's payload
    MB/s over the loopback MB/s measured right after it (:func:`loopback_mb_per_s`)."""
    return Row(scenario, f"{what}: payload MB/s as a fraction of the machine's loopback ceiling", system_name,
               "fraction", [mb / lo for mb, lo in zip(mbs, loopback, strict=True)],
               note=(f"loopback TCP -> Python sink ({LOOPBACK_PROBE_MB} MB in 1 MB sends) measured after each run: "
                     f"median {statistics.median(loopback):,.0f} MB/s"),
               extra={"loopback_mb_per_s": loopback})



def broker_ceiling(system: System, results: Results, sizes: Sizes, workdir: Path,
                   fresh_broker: Callable[[str], ContextManager[None]]) -> None:
    """Scenario 8: the broker's own produce ceiling, acks=1, 6 partitions on 1 broker, with 100 B
    and 1 KB records: pre-encoded Produce requests of about 500 KB pipelined over
    ``sizes.ceiling_connections`` connections from as many processes (bench/ceiling_load.py), so
    the client is not what is measured. After each run the machine's loopback ceiling (scenario
    0's loopback TCP into a Python sink) is measured again, and each run's payload MB/s is also
    given as a fraction of it. Each run gets a broker of its own from ``fresh_broker(label)``, whose
    data is gone after it: GBs kept in the page cache from earlier runs slow the next runs' writes
    in the kernel. The same load first runs ``sizes.ceiling_warmup_seconds`` into a topic of its
    own, unmeasured, so that Kafka's JVM has compiled its hot paths (a fresh JVM's first seconds
    run interpreted)."""
    for record_size in (100, 1024):
        records_per_request = 500_000 // record_size
        rates, mbs, phases, loopback = [], [], [], []
        for run in range(sizes.runs):
            with fresh_broker(f"ceiling{record_size}-{run}"):
                host, port = system.brokers[0].bootstrap.rsplit(":", 1)
                warmup, topic = _topic(f"s8-warmup-{record_size}b"), _topic(f"s8-{record_size}b")
                for t in (warmup, topic):
                    system.create_topic(t, 6, 1)
                ceiling_load.run(host, int(port), system.raw_produce_version, warmup, 6, record_size,
                                 records_per_request, sizes.ceiling_connections, sizes.ceiling_window,
                                 sizes.ceiling_warmup_seconds, workdir / f"{record_size}-{run}-warmup")
                with system.broker_cpu() as cpu:
                    got = ceiling_load.run(host, int(port), system.raw_produce_version, topic, 6, record_size,
                                           records_per_request, sizes.ceiling_connections, sizes.ceiling_window,
                                           sizes.ceiling_seconds, workdir / f"{record_size}-{run}")
                    stored = load.wait_high_watermark_sum(system, topic, 6, got.records)
            phases.append((cpu, float(got.payload_bytes)))
            if stored != got.records:
                raise RuntimeError(f"{system.name}: {topic} holds {stored} records, {got.records} acknowledged")
            rates.append(got.records_per_s)
            mbs.append(got.mb_per_s)
            loopback.append(loopback_mb_per_s())
        metric = (f"{record_size} B records, acks=1, {sizes.ceiling_connections} connections x "
                  f"{sizes.ceiling_window} in flight")
        results.add(Row("8 broker ceiling, 1 broker", f"{metric}, records/s", system.name, "records/s", rates))
        results.add(Row("8 broker ceiling, 1 broker", f"{metric}, payload MB/s", system.name, "MB/s", mbs))
        results.add(broker_cpu_row("8 broker ceiling, 1 broker", metric, system.name, "produced", phases))
        results.add(loopback_fraction_row("8 broker ceiling, 1 broker", metric, system.name, mbs, loopback))


# ------------------------------------------------------------------------------ 9: many clients


def many_clients(system: System, results: Results, sizes: Sizes, workdir: Path) -> None:
    """Scenario 9: for each count N of ``sizes.client_counts``, N producers (10 keyed records/s
    each, acks=1) and N consumers in N/10 groups on one 30-partition RF 3 topic, for
    ``sizes.clients_seconds`` once every group is stable (bench/many_clients.py)."""
    brokers = {b.broker_id: (b.bootstrap.rsplit(":", 1)[0], int(b.bootstrap.rsplit(":", 1)[1]), b.pid or 0)
               for b in system.brokers}
    bootstrap = ",".join(b.bootstrap for b in system.brokers)
    for n in sizes.client_counts:
        topic = _topic(f"s9-{n}")
        system.create_topic(topic, 30, 3, REPLICATED)
        # Kafka 0.9.0.1 has no ApiVersions: its probe is Metadata v0 for the one topic
        got = many_clients_load.run(bootstrap, brokers, topic, 30, n, n, max(1, n // 10), 10.0,
                                    sizes.clients_seconds, sizes.client_workers, 1, workdir / f"{n}",
                                    probe_topic=topic if system.raw_produce_version < 3 else None,
                                    broker_logs={b.broker_id: b.log_path for b in system.brokers})
        label = f"{n:,} producers x 10 rec/s + {n:,} consumers in {max(1, n // 10)} groups"
        ack, e2e = sorted(got.ack_ms), sorted(got.end_to_end_ms)
        print(f"   {n:,} clients, steady phase: {got.steady_probes_over_100ms} of {got.steady_probes} probes "
              f"over 100 ms, worst {got.steady_worst_probe_ms:.0f} ms; CPU pressure "
              + (f"{got.cpu_pressure_percent:.1f} %" if got.cpu_pressure_percent is not None else "unknown")
              + f"; {len(got.reactor_delays)} reactor delay line(s) from the brokers", flush=True)
        for line in got.reactor_delays[:20]:
            print(f"     {line}", flush=True)
        pressure = [] if got.cpu_pressure_percent is None else [
            ("steady phase: share of time a task waited for a CPU (PSI)", "%", got.cpu_pressure_percent)]
        for metric, unit, value in (
                ("all groups stable after", "s", got.stable_seconds),
                ("produce-to-ack p99", "ms", load.percentile(ack, 99)),
                ("end-to-end p99", "ms", load.percentile(e2e, 99)),
                ("worst probe round trip (ApiVersions; Kafka 0.9: Metadata v0)", "ms", got.worst_api_versions_ms),
                ("steady phase: worst probe round trip", "ms", got.steady_worst_probe_ms),
                ("steady phase: probes over 100 ms", "count", float(got.steady_probes_over_100ms)),
                *pressure,
                ("broker CPU, mean of 3", "%", sum(got.broker_cpu_percent.values()) / len(brokers)),
                ("broker RSS, largest", "MiB", max(got.broker_rss_mib.values())),
                ("client errors", "count", float(got.errors))):
            results.add(Row("9 many clients, 3 brokers", f"{label}: {metric}", system.name, unit, [value],
                            higher_is_better=False,
                            note=f"{len(ack):,} acks, {len(e2e):,} records received"))


# ------------------------------------------------------------------------------ 10, 11: own clusters


def many_partitions(system: System, results: Results, sizes: Sizes) -> None:
    """Scenario 10: for each count of ``sizes.partition_counts``, a fresh 3-broker cluster with
    that many RF 3 partitions (bench/partitions.py)."""
    for count in sizes.partition_counts:
        system.start(3)
        try:
            f = partitions.many_partitions(system, count, 1000, sizes.idle_seconds)
        finally:
            system.stop()
        label = f"{count:,} partitions RF3"
        for metric, unit, value in (
                ("create, until every ISR is full", "s", f.create_s),
                ("one Metadata request for all", "s", f.metadata_s),
                ("idle CPU per broker, mean", "%", sum(f.idle_cpu_percent.values()) / 3),
                ("RSS per broker, largest", "MiB", max(f.rss_mib.values())),
                ("kill -9 of a leader of a third: leaders moved", "s", f.failover_s),
                ("its restart: registered", "s", f.restart_registered_s),
                ("its restart: every ISR full", "s", f.restart_full_isr_s),
                ("controlled shutdown (SIGTERM to exit)", "s", f.controlled_shutdown_s)):
            results.add(Row("10 many partitions, 3 brokers", f"{label}: {metric}", system.name, unit, [value],
                            higher_is_better=False))


def crash_recovery(system: System, results: Results, sizes: Sizes) -> None:
    """Scenario 11: kill -9 a broker holding ``sizes.recovery_gb`` GB of unflushed log; seconds
    per GB until it is registered again and until it is back in every ISR."""
    system.start(3)
    try:
        held, registered, in_isr = partitions.crash_recovery(system, sizes.recovery_gb)
    finally:
        system.stop()
    note = f"{held:.2f} GB of log on the killed broker"
    results.add(Row("11 crash recovery", "kill -9 to registered, per GB", system.name, "s/GB",
                    [registered / held], higher_is_better=False, note=note))
    results.add(Row("11 crash recovery", "kill -9 to back in every ISR, per GB", system.name, "s/GB",
                    [in_isr / held], higher_is_better=False, note=note))


# ------------------------------------------------------------------------------ 13: quotas


def quotas(system: System, results: Results, sizes: Sizes, workdir: Path) -> None:
    """Scenario 13 (kafkalite; issue 16's noisy neighbour): a well-behaved producer (1,000
    records/s, acks=1, client.id ``polite``) measured alone, next to a greedy producer writing
    flat out to another topic (client.id ``greedy``), and next to the same greedy producer held
    to ``producer_byte_rate`` (``sizes.quota_bytes_per_s``, set with AlterClientQuotas on its client
    id). Reported per phase: the polite producer's produce-to-ack p50/p99 and end-to-end p99, and
    the greedy one's rate."""
    from kafkalite.client import Admin

    polite = system.client_conf(**load.LATENCY_PRODUCER, **{"client.id": "polite"})
    consumer_conf = system.client_conf(**load.COMMON_CONSUMER, **{"group.id": "bench-quotas"})
    greedy_conf = system.client_conf(**load.THROUGHPUT_PRODUCER, **{"client.id": "greedy", "acks": "1"})
    bootstrap = ",".join(b.bootstrap for b in system.brokers)
    for phase in ("alone", "next to a greedy producer", "next to the greedy producer under a quota"):
        if phase.endswith("quota"):
            with Admin(bootstrap) as admin:
                admin.alter_client_quotas({"client-id": "greedy"}, {"producer_byte_rate": sizes.quota_bytes_per_s})
        topic, noisy = _topic("s13-polite"), _topic("s13-greedy")
        system.create_topic(topic, 1, 1)
        system.create_topic(noisy, 1, 1)
        out = workdir / f"{len(phase)}-greedy.json"
        greedy = None if phase == "alone" else latency_probe.start_greedy(
            greedy_conf, noisy, sizes.quota_seconds + 4, out)
        try:
            if greedy is not None:
                time.sleep(2.0)             # the greedy producer is at full speed before measuring
            samples = latency_probe.run({**polite, "acks": "1"}, consumer_conf, topic, 1, 1000,
                                        sizes.quota_seconds, workdir / f"{len(phase)}")
        finally:
            if greedy is not None:
                greedy.wait(sizes.quota_seconds + 180)
        ack, e2e = sorted(samples.ack), sorted(samples.end_to_end)
        note = ""
        if greedy is not None and greedy.returncode == 0:
            rate = json.loads(out.read_text())["records_per_s"]
            note = f"greedy producer: {rate:,.0f} records/s ({rate * load.VALUE_SIZE / 1e6:.1f} MB/s of values)"
        for metric, value in (("produce-to-ack p50", load.percentile(ack, 50)),
                              ("produce-to-ack p99", load.percentile(ack, 99)),
                              ("end-to-end p99", load.percentile(e2e, 99))):
            results.add(Row("13 noisy neighbour, 1 broker", f"polite producer {metric}, {phase}", system.name,
                            "ms", [value], higher_is_better=False, note=note))


# ------------------------------------------------------------------------------ 14: security


def security(zookeeper: Any, workdir: Path, results: Results, sizes: Sizes) -> None:
    """Scenario 14 (kafkalite; issue 17): scenarios 1 and 2 (1 broker, 1 partition) over PLAINTEXT
    and over SASL_SSL with SCRAM-SHA-512 on the same broker, the SCRAM user written the way
    kafkalite-configs writes it."""
    from bench.systems import SecureKafkalite
    from kafkalite.cli import configs as configs_tool
    from tests.support.security import ADMIN_PASSWORD, ADMIN_USER

    system = SecureKafkalite(zookeeper, workdir)
    cluster = system.start(1)
    try:
        if configs_tool.main(["--zookeeper", cluster.zk_connect, "--alter", "--entity-type", "users",
                              "--entity-name", ADMIN_USER, "--add-config",
                              f"SCRAM-SHA-512=[password={ADMIN_PASSWORD}]"]) != 0:
            raise RuntimeError("could not write the SCRAM user")
        for protocol in ("PLAINTEXT", "SASL_SSL"):
            system.protocol = protocol
            produced, consumed = [], []
            for _ in range(sizes.runs):
                topic = _topic(f"s14-{protocol.lower()}")
                system.create_topic(topic, 1, 1)
                produced.append(sizes.records / load.produce(system, topic, sizes.records, acks=1))
                consumed.append(sizes.records / load.consume(system, topic, 1, sizes.records))
            results.add(Row("14 security, 1 broker", f"produce, 1 partition, acks=1, {protocol}", system.name,
                            "records/s", produced))
            results.add(Row("14 security, 1 broker", f"consume, 1 partition, {protocol}", system.name,
                            "records/s", consumed))
    finally:
        system.stop()



# ------------------------------------------------------------------------------ 15: web console

CONSOLE_SCENARIO = "15 web console (kafkalite only: Kafka 0.9.0.1 has none)"


def console_rows(count: int, runs: list[list[console_pages.PageFigures]], system: str) -> list[Row]:
    """One row per page and figure: p50, p95 and max of each run's views (ms), and the brokers'
    Metadata and DescribeLogDirs requests per view; every view's time is kept in ``extra``."""
    rows = []
    for i, first in enumerate(runs[0]):
        per_run = [run[i] for run in runs]
        label = f"{count:,} partitions RF3, 3 brokers: {first.page.label}"
        stats = [console_pages.percentiles(f.ms) for f in per_run]
        extra = {"views_ms": [[round(ms, 2) for ms in f.ms] for f in per_run]}
        for j, what in enumerate(("p50", "p95", "max")):
            rows.append(Row(CONSOLE_SCENARIO, f"{label}: {what}", system, "ms", [s[j] for s in stats],
                            higher_is_better=False, note=f"{len(first.ms)} views per run", extra=extra))
        for name in console_pages.COUNTED:
            rows.append(Row(CONSOLE_SCENARIO, f"{label}: {name} requests per view", system, "requests",
                            [f.requests_per_view[name] for f in per_run], higher_is_better=False,
                            note="delta of the brokers' request counters over the views, all brokers"))
    return rows


def console(zookeeper: Any, workdir: Path, results: Results, sizes: Sizes) -> None:
    """Scenario 15 (kafkalite; issue 31): the web console's topics list, topic page, message
    browser and overview on 3 brokers with ``sizes.console_partitions`` RF 3 partitions
    (bench/console_pages.py): p50/p95/max ms of ``sizes.console_views`` views per page, and the
    brokers' Metadata and DescribeLogDirs requests per view."""
    from bench.systems import MeteredKafkalite

    system = MeteredKafkalite(zookeeper, workdir)
    system.start(3)
    try:
        runs = list(console_pages.console_pages(system, sizes.console_partitions, sizes.console_records,
                                                sizes.console_views, sizes.runs))
    finally:
        system.stop()
    for row in console_rows(sizes.console_partitions, runs, system.name):
        results.add(row)

# ------------------------------------------------------------------------------ 1, 2: one broker


def produce_one_broker(system: System, results: Results | None, sizes: Sizes, partitions: int) -> str:
    """Scenario 1: ``records`` into a fresh topic per run, acks=1; returns the first topic (for 2)."""
    rates, phases, first = [], [], None
    for _ in range(sizes.runs if results else 1):
        topic = _topic(f"s1-{partitions}p")
        system.create_topic(topic, partitions, 1)
        with system.broker_cpu() as cpu:
            secs = load.produce(system, topic, sizes.records, acks=1)
            got = load.wait_high_watermark_sum(system, topic, partitions, sizes.records)
        if got != sizes.records:
            raise RuntimeError(f"{system.name}: {topic} holds {got} records, produced {sizes.records}")
        rates.append(sizes.records / secs)
        phases.append((cpu, float(sizes.records * load.VALUE_SIZE)))
        first = first or topic
    if results is not None:
        what = f"{partitions} partition(s), acks=1"
        results.add(Row("1 produce, 1 broker", what, system.name, "records/s",
                        rates, note=f"{sizes.records:,} x {load.VALUE_SIZE} B, fresh topic per run"))
        results.add(broker_cpu_row("1 produce, 1 broker", what, system.name, "produced", phases))
    assert first is not None
    return first


def consume_one_broker(system: System, results: Results, sizes: Sizes, topic: str, partitions: int) -> None:
    """Scenario 2: read the records of scenario 1 from the beginning, a new consumer per run."""
    rates, phases = [], []
    for _ in range(sizes.runs):
        with system.broker_cpu() as cpu:
            rates.append(sizes.records / load.consume(system, topic, partitions, sizes.records))
        phases.append((cpu, float(sizes.records * load.VALUE_SIZE)))
    what = f"{partitions} partition(s), from beginning"
    results.add(Row("2 consume, 1 broker", what, system.name, "records/s", rates))
    results.add(broker_cpu_row("2 consume, 1 broker", what, system.name, "consumed", phases))


# ------------------------------------------------------------------------------ 5: log growth


GROWTH_SCENARIO = "5 log growth, 1 broker"
LIVE_VALUE_SIZE = 1000


@dataclass
class GrowthRun:
    """One run of scenario 5, on a broker of its own."""
    rates: list[float]              # records/s of each chunk of the 100-byte part
    growth_cpu: PhaseCpu            # the brokers over every chunk of it
    produce_mb_s: list[float]       # the 1 KB part, per chunk: the producer's MB/s of values
    consume_mb_s: list[float]       # ... and the consumer's, between its marks
    consumer_after_s: float         # the consumer done after the producer
    live_cpu: PhaseCpu              # the brokers from the first record produced to the last consumed
    #: the consumer's and the producer's (this) process while the producer ran: CPU time and
    #: run-queue wait (None where the kernel keeps no schedstat)
    consumer_sched: SchedTimes | None = None
    producer_sched: SchedTimes | None = None


def log_growth(system: System, sizes: Sizes) -> tuple[list[float], PhaseCpu]:
    """Scenario 5: produce ``growth_gb`` of 100-byte records into one 1-partition topic in equal
    chunks; the rate of each chunk shows whether speed stays constant as stored data grows."""
    topic = _topic("s5-growth")
    system.create_topic(topic, 1, 1)
    per_chunk = int(sizes.growth_gb * 1e9 / sizes.growth_chunks / load.VALUE_SIZE)
    rates = []
    with system.broker_cpu() as cpu:
        for _ in range(sizes.growth_chunks):
            rates.append(per_chunk / load.produce(system, topic, per_chunk, acks=1))
    got = load.high_watermark_sum(system, topic, 1)
    if got != per_chunk * sizes.growth_chunks:
        raise RuntimeError(f"{system.name}: {topic} holds {got} records, produced {per_chunk * sizes.growth_chunks}")
    return rates, cpu


@dataclass
class LiveRun:
    """Scenario 5's second part, measured (see :func:`growth_while_consuming`)."""
    produce_mb_s: list[float]
    consume_mb_s: list[float]
    consumer_after_s: float
    cpu: PhaseCpu
    consumer_sched: SchedTimes | None
    producer_sched: SchedTimes | None


def _sched_delta(start: SchedTimes | None, end: SchedTimes | None) -> SchedTimes | None:
    return end - start if start is not None and end is not None else None


def growth_while_consuming(system: System, sizes: Sizes) -> LiveRun:
    """Scenario 5, second part: ``live_gb`` GB of 1 KB records into a new 1-partition topic in
    ``growth_chunks`` chunks while a consumer in a process of its own reads it from the start:
    the produce and the consume rate of each chunk (MB/s of values), how long after the producer
    the consumer is done, and the brokers' CPU time until then. The consumer reads the tail as it
    is written while it keeps up, older data once it falls behind. Also, while the producer ran,
    the CPU time and run-queue wait of the consumer's process and of this one (the producer):
    whether a consumer that fell behind waited for its broker or for a core."""
    import multiprocessing
    topic = _topic("s5-live")
    system.create_topic(topic, 1, 1)
    per_chunk = int(sizes.live_gb * 1e9 / sizes.growth_chunks / LIVE_VALUE_SIZE)
    total = per_chunk * sizes.growth_chunks
    chunk_mb = per_chunk * LIVE_VALUE_SIZE / 1e6
    ctx = multiprocessing.get_context("spawn")     # a fresh process: no librdkafka state forked
    marks: Any = ctx.Queue()
    conf = system.client_conf(**load.COMMON_CONSUMER, **{"group.id": "bench-live"})
    reader = ctx.Process(target=load.consume_marks, args=(conf, topic, total, per_chunk, 3600.0, marks),
                         daemon=True)
    reader.start()
    try:
        first = marks.get(timeout=120)
        if first is None:
            raise RuntimeError(f"{system.name}: the consumer of {topic} ended before reading")
        produce_rates = []
        with system.broker_cpu() as cpu:            # until the consumer is done too
            sched_start = sched_times(reader.pid or 0), sched_times(os.getpid())
            for _ in range(sizes.growth_chunks):
                produce_rates.append(chunk_mb / load.produce(system, topic, per_chunk, acks=1,
                                                             value_size=LIVE_VALUE_SIZE))
            produced_at = time.time()
            consumer_sched = _sched_delta(sched_start[0], sched_times(reader.pid or 0))
            producer_sched = _sched_delta(sched_start[1], sched_times(os.getpid()))
            seen = [first]
            while True:
                mark = marks.get(timeout=3600)
                if mark is None:
                    break
                seen.append(mark)
    finally:
        reader.join(60)
        if reader.is_alive():
            reader.kill()
    if seen[-1][0] != total:
        raise RuntimeError(f"{system.name}: the consumer read {seen[-1][0]:,} of {total:,} records of {topic}")
    consume_rates = [(b[1] - a[1]) / 1e6 / (b[2] - a[2]) for a, b in zip(seen, seen[1:])]
    return LiveRun(produce_rates, consume_rates, max(0.0, seen[-1][2] - produced_at), cpu,
                   consumer_sched, producer_sched)


def growth_run(system: System, sizes: Sizes) -> GrowthRun:
    """Both parts of scenario 5 on the running 1-broker cluster."""
    rates, growth_cpu = log_growth(system, sizes)
    live = growth_while_consuming(system, sizes)
    return GrowthRun(rates, growth_cpu, live.produce_mb_s, live.consume_mb_s, live.consumer_after_s, live.cpu,
                     live.consumer_sched, live.producer_sched)


def _per_chunk(runs: list[list[float]]) -> str:
    return "per chunk" + (", run by run" if len(runs) > 1 else "") + ": " + " / ".join(
        ", ".join(f"{r:,.0f}" for r in rates) for rates in runs)


def growth_rows(system_name: str, sizes: Sizes, runs: list[GrowthRun]) -> list[Row]:
    """Scenario 5's rows over ``runs``: the chunk rates of every run together (their median is
    the median chunk), the last/first chunk ratio, the consumer's delay and the brokers' CPU
    seconds per GB once per run."""
    chunks = sizes.growth_chunks
    growth_bytes = float(int(sizes.growth_gb * 1e9 / chunks / load.VALUE_SIZE) * chunks * load.VALUE_SIZE)
    live_bytes = float(int(sizes.live_gb * 1e9 / chunks / LIVE_VALUE_SIZE) * chunks * LIVE_VALUE_SIZE)
    what = f"{sizes.growth_gb:g} GB in {chunks} chunks"
    rows = [Row(GROWTH_SCENARIO, what, system_name, "records/s", [r for run in runs for r in run.rates],
                note=_per_chunk([run.rates for run in runs]), extra={"chunk_gb": sizes.growth_gb / chunks}),
            Row(GROWTH_SCENARIO, "last chunk / first chunk", system_name, "ratio",
                [run.rates[-1] / run.rates[0] for run in runs], note="target: >= 0.9"),
            broker_cpu_row(GROWTH_SCENARIO, what, system_name, "produced",
                           [(run.growth_cpu, growth_bytes) for run in runs])]
    label = f"{sizes.live_gb:g} GB of 1 KB records while a consumer reads them"
    for kind, per_run in (("produce", [run.produce_mb_s for run in runs]),
                          ("consume", [run.consume_mb_s for run in runs])):
        rows.append(Row(GROWTH_SCENARIO, f"{label}: {kind}", system_name, "MB/s",
                        [r for rates in per_run for r in rates], note=_per_chunk(per_run),
                        extra={"chunk_gb": live_bytes / chunks / 1e9}))
        rows.append(Row(GROWTH_SCENARIO, f"{label}: {kind}, last chunk / first chunk", system_name, "ratio",
                        [rates[-1] / rates[0] for rates in per_run], note="target: >= 0.9"))
    rows.append(Row(GROWTH_SCENARIO, f"{label}: consumer done after the producer", system_name, "s",
                    [run.consumer_after_s for run in runs], higher_is_better=False))
    rows.append(broker_cpu_row(GROWTH_SCENARIO, label, system_name, "produced and consumed",
                               [(run.live_cpu, live_bytes) for run in runs],
                               note="each GB in once and out once, from the first record produced "
                                    "until the consumer has read the last"))
    waits = [(run.consumer_sched, run.producer_sched) for run in runs]
    if all(c is not None and p is not None for c, p in waits):
        consumer = [c for c, _ in waits if c is not None]
        producer = [p for _, p in waits if p is not None]
        rows.append(Row(GROWTH_SCENARIO, f"{label}: consumer's wait for a CPU per second it ran, while producing",
                        system_name, "ratio", [c.wait_per_run for c in consumer], higher_is_better=False,
                        note="run-queue time / CPU time of the consumer process's threads (schedstat), "
                             "first record produced to the producer's end; the producer's process: "
                             + ", ".join(f"{p.wait_per_run:.2f}" for p in producer),
                        extra={"consumer_run_s": [c.run for c in consumer], "consumer_wait_s": [c.wait for c in consumer],
                               "producer_run_s": [p.run for p in producer],
                               "producer_wait_s": [p.wait for p in producer]}))
    return rows


# ------------------------------------------------------------------------------ 3, 6: replicated


def memory(system: System, results: Results, when: str) -> None:
    """Scenario 6: resident memory of every broker process (one value per broker)."""
    values = [rss_kib(b.pid or 0) / 1024 for b in system.brokers]
    results.add(Row("6 broker memory (RSS)", f"{len(values)} brokers, {when}", system.name, "MiB", values,
                    higher_is_better=False, note="one value per broker process"))


def replicated(system: System, results: Results | None, sizes: Sizes) -> None:
    """Scenario 3: 3 brokers, 6 partitions, RF 3, min.insync.replicas=2; acks=all then acks=1."""
    for acks in ("all", 1):
        topic = _topic(f"s3-acks{acks}")
        system.create_topic(topic, 6, 3, REPLICATED)
        rates, phases = [], []
        for run in range(sizes.runs if results else 1):
            with system.broker_cpu() as cpu:
                secs = load.produce(system, topic, sizes.records, acks=acks)
                t = time.perf_counter()
                got = load.wait_high_watermark_sum(system, topic, 6, sizes.records * (run + 1))
            phases.append((cpu, float(sizes.records * load.VALUE_SIZE)))
            if (lag := time.perf_counter() - t) > 1.0:
                print(f"    {system.name}: high watermark caught up {lag:.1f} s after the producer's flush",
                      flush=True)
            if got != sizes.records * (run + 1):
                raise RuntimeError(f"{system.name}: {topic} holds {got} records after run {run + 1}")
            rates.append(sizes.records / secs)
        if results is not None:
            what = f"6 partitions, min.insync=2, acks={acks}"
            results.add(Row("3 produce, 3 brokers RF3", what, system.name, "records/s", rates))
            results.add(broker_cpu_row("3 produce, 3 brokers RF3", what, system.name, "produced", phases,
                                       note="the 3 brokers together (each GB is stored 3 times)"))


# ------------------------------------------------------------------------------ 8: transactions


def transactions(system: System, results: Results, sizes: Sizes,
                 txn_sizes: tuple[int, ...] = (1_000, 100_000)) -> None:
    """Scenario 12 (kafkalite only; Kafka 0.9 has no transactions): the scenario 3 cluster and topic
    settings, acks=all; plain produce, then one transactional producer committing transactions of
    each of ``txn_sizes`` records. Prints the transactional / plain ratios.

    Two sizes because a transaction costs a fixed chain of round trips whatever its size (the
    previous transaction's markers and Complete state, AddPartitionsToTxn, the data's acks=all
    wait, EndTxn's PrepareCommit: four replicated writes one after the other): 1,000 records show
    that chain, 100,000 records (about the 100 ms transactions of Kafka's own measurements) show
    what is left of it when it is spread over more data."""
    rates: dict[str, list[float]] = {"plain": [], **{str(n): [] for n in txn_sizes}}
    for run in range(sizes.runs):
        for kind in rates:
            topic = _topic(f"s8-{kind}")
            system.create_topic(topic, 6, 3, REPLICATED)
            if kind == "plain":
                secs = load.produce(system, topic, sizes.records, acks="all")
                got = load.wait_high_watermark_sum(system, topic, 6, sizes.records)
                if got != sizes.records:
                    raise RuntimeError(f"{system.name}: {topic} holds {got} records, not {sizes.records}")
            else:
                secs = load.produce_transactional(system, topic, sizes.records, int(kind))
                hw, lso = load.last_stable_offsets(system, topic, 6)
                # each transaction adds one COMMIT marker per partition it wrote
                if lso != hw or hw < sizes.records:
                    raise RuntimeError(f"{system.name}: {topic} high watermarks {hw}, LSOs {lso}, "
                                       f"{sizes.records} records committed")
            rates[kind].append(sizes.records / secs)
    scenario = "12 transactional produce, 3 brokers RF3"
    results.add(Row(scenario, "6 partitions, min.insync=2, acks=all, plain", system.name, "records/s", rates["plain"]))
    plain = sorted(rates["plain"])[len(rates["plain"]) // 2]
    for n in txn_sizes:
        results.add(Row(scenario, f"6 partitions, min.insync=2, acks=all, {n:,} records/transaction",
                        system.name, "records/s", rates[str(n)]))
        txn = sorted(rates[str(n)])[len(rates[str(n)]) // 2]
        print(f"    {system.name}: {n:,}-record transactions / plain acks=all throughput (medians): "
              f"{txn / plain:.2f}", flush=True)


# ------------------------------------------------------------------------------ 4: latency


def latency(system: System, results: Results, sizes: Sizes, workdir: Path) -> None:
    """Scenario 4: end-to-end and produce-to-ack latency on RF 3 (6 partitions, min.insync.replicas
    2), producer and consumer in processes of their own, per-record receive times
    (:mod:`bench.latency_probe`); each rate of ``sizes.latency_rates`` with acks=1 and acks=all, a
    fresh topic per run. A warm-up run at the highest rate comes first and is not counted (Kafka's
    JVM compiles its hot paths in the first minute). The last run of each combination is drawn
    over time into ``<results>/<stamp>-latency-<system>.png``."""
    producer_conf = system.client_conf(**load.LATENCY_PRODUCER)
    consumer_conf = system.client_conf(**load.COMMON_CONSUMER, **{"group.id": "bench-latency"})
    top = max(sizes.latency_rates)
    if sizes.latency_warmup_seconds > 0:
        topic = _topic("s4-warmup")
        system.create_topic(topic, 6, 3, REPLICATED)
        latency_probe.run({**producer_conf, "acks": "all"}, consumer_conf, topic, 6, top,
                          sizes.latency_warmup_seconds, workdir / "warmup")
    traces: dict[str, latency_probe.LatencySamples] = {}
    for rate in sizes.latency_rates:
        for acks in ("1", "all"):
            per_run: dict[str, list[float]] = {}
            for run in range(sizes.runs):
                topic = _topic("s4-latency")
                system.create_topic(topic, 6, 3, REPLICATED)
                samples = latency_probe.run({**producer_conf, "acks": acks}, consumer_conf, topic, 6, rate,
                                            sizes.latency_seconds, workdir / f"{rate:g}-{acks}-{run}")
                for kind, values in (("end-to-end", samples.end_to_end), ("produce-to-ack", samples.ack)):
                    ordered = sorted(values)
                    for q in (50.0, 99.0, 99.9):
                        per_run.setdefault(f"{kind} p{q:g}", []).append(load.percentile(ordered, q))
                    per_run.setdefault(f"{kind} max", []).append(ordered[-1])
                traces[f"{rate:,.0f} rec/s, acks={acks}"] = samples
            for name, values in per_run.items():
                results.add(Row("4 latency", f"{name}, {rate:,.0f} rec/s x {sizes.latency_seconds:g} s, "
                                f"acks={acks} RF3", system.name, "ms", values, higher_is_better=False))
    plot_latency_over_time(traces, results.out_dir / f"{results.stamp}-latency-{system.name.split()[0]}.png",
                           system.name)


def plot_latency_over_time(traces: dict[str, latency_probe.LatencySamples], path: Path, title: str) -> None:
    """One panel per rate/acks: each record's end-to-end latency against its receive time."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    if not traces:
        return
    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 2.2 * len(traces)), squeeze=False)
    for ax, (label, samples) in zip(axes.flat, traces.items()):
        ax.plot(samples.at, samples.end_to_end, ",", alpha=0.6)
        ax.set_yscale("log")
        ax.set_title(f"{title}: {label}", fontsize=8)
        ax.set_ylabel("ms", fontsize=7)
        ax.tick_params(labelsize=7)
    axes.flat[-1].set_xlabel("seconds since the first send", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"latency over time: {path}", flush=True)


# ------------------------------------------------------------------------------ 7: failover


#: scenario 7: the records sent this long after the signal make its "longest produce-to-ack"
WAIT_WINDOW_S = 2.0


def failover(system: System, results: Results, sizes: Sizes) -> None:
    """Scenario 7: an acks=all producer at a fixed rate; kill -9 (then SIGTERM) the partition
    leader; the gap is from the signal to the first acknowledgement of a record sent after it.
    That gap rewards a leader slow to step down (the old leader still acknowledges the records
    sent right after the signal), so the producer's view is reported too: the longest
    produce-to-ack time of the records sent in the ``WAIT_WINDOW_S`` after the signal. The
    stopped broker is restarted and the ISR refilled before the next run."""
    for kind, sig in (("kill -9", signal.SIGKILL), ("SIGTERM (controlled shutdown)", signal.SIGTERM)):
        topic = _topic("s7-failover")
        system.create_topic(topic, 1, 3, REPLICATED)
        gaps, notes, waits = [], [], []
        for _ in range(sizes.failover_runs):
            producer = load.PacedProducer(system, topic, sizes.failover_rate).start()
            try:
                deadline = time.monotonic() + 30
                while not producer.acks and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(1.0)                        # steady state
                victim = system.broker(system.leader(topic))
                t0 = time.monotonic()
                assert victim.proc is not None
                victim.proc.send_signal(sig)
                limit = t0 + 90
                acked = None
                while acked is None and time.monotonic() < limit:
                    time.sleep(0.01)
                    acked = producer.first_ack_of_record_sent_after(t0)
                gap = (acked - t0) if acked is not None else 90.0
                if acked is None:
                    notes.append("no ack within 90 s")
                exited = victim.proc.wait(120)
                notes.append(f"broker {victim.broker_id} exit {exited}")
                gaps.append(gap)
                while time.monotonic() < t0 + WAIT_WINDOW_S:
                    time.sleep(0.05)
            finally:
                producer.stop()
            worst = producer.worst_wait(t0, t0 + WAIT_WINDOW_S)
            if worst is not None:
                waits.append(worst)
            victim.start()
            system.wait_topic(topic, 1, 3, timeout=120)
        results.add(Row("7 failover, acks=all RF3", f"{kind} of the leader, {sizes.failover_rate:,.0f} rec/s",
                        system.name, "s to next ack", gaps, higher_is_better=False,
                        note="; ".join(sorted(set(notes)))))
        if waits:
            results.add(Row("7 failover, acks=all RF3",
                            f"{kind} of the leader, {sizes.failover_rate:,.0f} rec/s: longest produce-to-ack of "
                            f"the records sent in the {WAIT_WINDOW_S:.0f} s after the signal",
                            system.name, "s", waits, higher_is_better=False))


# ------------------------------------------------------------------------------ machine ceiling


def _batch_bytes(records: int) -> tuple[bytes, int, int]:
    """One ~1 MB v2 batch of 100-byte values; (batch, records in it, batches for ``records``)."""
    from kafkalite.records.builder import BatchBuilder
    b = BatchBuilder()
    value = os.urandom(load.VALUE_SIZE)
    bound = BatchBuilder.record_size_upper_bound(None, value)
    ts = int(time.time() * 1000)
    while b.size_in_bytes + bound <= 1_000_000:
        b.append(ts, None, value)
    batch = bytes(b.build())
    per = int.from_bytes(batch[57:61], "big")
    return batch, per, max(1, records // per)


def _sink(listener: socket.socket, path: str | None, total: int) -> None:
    """The trivial Python sink: recv_into one buffer, optionally append it to a file."""
    conn, _ = listener.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    got = 0
    f = open(path, "ab", buffering=0) if path else None
    try:
        while got < total:
            n = conn.recv_into(buf)
            if not n:
                break
            if f is not None:
                f.write(view[:n])
            got += n
        if got >= total:
            conn.sendall(b"k")          # else the sender sees the connection close
    finally:
        conn.close()
        if f is not None:
            f.close()


def loopback_seconds(block: bytes, count: int, append_to: str | None = None) -> float:
    """Seconds to send ``block`` ``count`` times over one loopback TCP connection into
    :func:`_sink` (a Python thread reading with ``recv_into``; with ``append_to``, appending each
    read to that file), until the sink has it all."""
    listener = socket.create_server(("127.0.0.1", 0))
    t = threading.Thread(target=_sink, args=(listener, append_to, len(block) * count), daemon=True)
    t.start()
    try:
        with socket.create_connection(listener.getsockname()) as s:
            start = time.perf_counter()
            for _ in range(count):
                s.sendall(block)
            if s.recv(1) != b"k":
                raise RuntimeError("the loopback sink did not receive every byte")
            return time.perf_counter() - start
    finally:
        t.join(30)
        listener.close()


def ceiling(results: Results, sizes: Sizes) -> None:
    """The machine's limit for the bytes of scenario 1 (v2 batches of ``records`` 100-byte values):
    loopback TCP into a Python sink, page-cache append from Python, and both together."""
    batch, per_batch, count = _batch_bytes(sizes.records)
    total = len(batch) * count
    records = per_batch * count
    tmp = tempfile.mkdtemp(prefix="kafkalite-bench-ceiling-", dir="/tmp")
    rates: dict[str, list[float]] = {"loopback TCP -> Python sink": [], "page-cache append (Python, 1 MB writes)": [],
                                     "loopback TCP -> Python sink -> append": []}
    try:
        for run in range(sizes.runs):
            path = os.path.join(tmp, f"append-{run}.log")
            start = time.perf_counter()
            with open(path, "ab", buffering=0) as f:
                for _ in range(count):
                    f.write(batch)
            rates["page-cache append (Python, 1 MB writes)"].append(records / (time.perf_counter() - start))
            os.unlink(path)
            for name, sink_path in (("loopback TCP -> Python sink", None),
                                    ("loopback TCP -> Python sink -> append", path)):
                rates[name].append(records / loopback_seconds(batch, count, sink_path))
                if sink_path:
                    os.unlink(sink_path)
    finally:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    for name, values in rates.items():
        mbs = total / records * sorted(values)[len(values) // 2] / 1e6
        results.add(Row("0 machine ceiling", name, "machine", "records/s", values,
                        note=f"{total / 1e6:,.0f} MB = {records:,} records in v2 batches; {mbs:,.0f} MB/s"))


# ------------------------------------------------------------------------------ 16: Kafka Connect

CONNECT_SCENARIO = "16 Kafka Connect (both workers on a kafkalite cluster)"


def connect_rows(megabytes: float, figures: dict[str, connect_pipeline.Figures]) -> list[Row]:
    """The file pipeline's rows, one per figure and worker (``figures``: system name -> figures)."""
    rows = []
    for system, f in figures.items():
        what = f"file source -> topic -> file sink, {megabytes:,.0f} MB = {f.records:,} lines"
        note = f"worker start-up {f.startup_s:.1f} s (spawn to the source connector's start)"
        note += "".join(f"; {n}" for n in f.notes)
        rows += [Row(CONNECT_SCENARIO, f"{what}: records/s, connector start to the last line in the sink file",
                     system, "records/s", [f.pipeline_rate], note=note),
                 Row(CONNECT_SCENARIO, f"{what}: source records/s, connector start to the last record in the topic",
                     system, "records/s", [f.source_rate]),
                 Row(CONNECT_SCENARIO, f"{what}: worker CPU seconds (utime + stime, start-up included)",
                     system, "s", [f.cpu_s], higher_is_better=False),
                 Row(CONNECT_SCENARIO, f"{what}: worker peak RSS (VmHWM)",
                     system, "MiB", [f.peak_rss_mib], higher_is_better=False)]
    return rows


def connect(system: System, results: Results, sizes: Sizes, workdir: Path) -> None:
    """Scenario 16: kafkalite's standalone Connect worker and Kafka 0.9.0.1's Java one, one after
    the other on the running 1-broker kafkalite cluster, move the same file through a topic into a
    file (bench/connect_pipeline.py); then kafkalite's JDBC sink writes rows into PostgreSQL."""
    from bench.systems import KAFKA
    from tests.support.postgres import PostgresServer, postgres_bin_dir
    assert system.cluster is not None
    workdir.mkdir(parents=True, exist_ok=True)
    bootstrap = system.cluster.bootstrap
    source = workdir / "source.txt"
    t0 = time.monotonic()
    lines = connect_pipeline.generate_lines(source, sizes.connect_mb)
    print(f"    source file: {sizes.connect_mb:,.0f} MB, {lines:,} lines in {time.monotonic() - t0:.1f} s", flush=True)

    def create(topic: str) -> None:
        system.create_topic(topic, 1, 1)

    timeout = max(600.0, sizes.connect_mb * 20)            # 50 KB/s: a stuck worker, not a slow one
    # Kafka 0.9.0.1's source task sends nothing until it has read the whole file (one poll): at
    # 10 MB that took 235 s on a loaded machine, all of it without a record in the topic
    stall = 600.0
    runs: dict[str, list[connect_pipeline.Figures]] = {system.name: [], KAFKA: []}
    failed: dict[str, str] = {}
    workers = [("kafkalite", system.name), ("kafka", KAFKA)]
    if sizes.connect_mb > sizes.connect_java_mb:
        # Kafka 0.9.0.1's FileStreamSourceTask copies its whole read buffer (as large as the file
        # read so far) for every line: its time grows with the square of the file's size, on
        # kafkalite's brokers and on Kafka 0.9.0.1's own alike (docs/benchmarks.md, scenario 16)
        workers = workers[:1]
        failed[KAFKA] = (f"not run at {sizes.connect_mb:,.0f} MB (above --connect-java-mb "
                         f"{sizes.connect_java_mb:,.0f}): FileStreamSourceTask's time grows with the square of the file")
        print(f"    {KAFKA} worker: {failed[KAFKA]}", flush=True)
    for run in range(sizes.runs):
        for kind, name in workers:
            try:
                f = connect_pipeline.run_file_pipeline(kind, bootstrap, create, source, lines,
                                                       workdir / f"{kind}-{run}", timeout, stall=stall)
            except (RuntimeError, TimeoutError) as exc:
                # Kafka 0.9.0.1's FileStreamSourceTask reads a file already there in one poll,
                # doubling its read buffer whenever a read fills it and copying the whole buffer for
                # every line it extracts: past a few MB it sends nothing for minutes
                first = str(exc).splitlines()[0]
                print(f"    {name} worker did not finish: {first}", flush=True)
                failed.setdefault(name, first)
                continue
            print(f"    {name} worker: {f.pipeline_rate:,.0f} records/s end to end, source {f.source_rate:,.0f}/s, "
                  f"CPU {f.cpu_s:.1f} s, peak RSS {f.peak_rss_mib:,.0f} MiB, start-up {f.startup_s:.1f} s", flush=True)
            runs[name].append(f)
    source.unlink()
    merged: dict[str, list[Row]] = {}
    for name, figs in runs.items():
        for f in figs:
            for row in connect_rows(sizes.connect_mb, {name: f}):
                if row.key in {r.key for r in merged.get(name, [])}:
                    next(r for r in merged[name] if r.key == row.key).values += row.values
                else:
                    merged.setdefault(name, []).append(row)
    for name in runs:
        for row in merged.get(name, []):
            others = "; ".join(f"{n}'s worker did not finish: {why}" for n, why in failed.items() if n != name)
            if others and "last line in the sink file" in row.metric:
                row.note = f"{row.note}; {others}" if row.note else others
            results.add(row)

    if sizes.connect_rows <= 0:
        return
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        print("    JDBC sink skipped: PostgreSQL is not installed (scripts/setup installs it)", flush=True)
        return
    server = PostgresServer(bin_dir).start()
    try:
        rates, cpus, rss = [], [], []
        for run in range(sizes.runs):
            rate, cpu, peak = connect_pipeline.run_jdbc_sink(bootstrap, create, server, sizes.connect_rows,
                                                             workdir / f"jdbc-{run}", timeout)
            print(f"    JDBC sink: {rate:,.0f} rows/s, CPU {cpu:.1f} s, peak RSS {peak / 1024:,.0f} MiB", flush=True)
            rates.append(rate)
            cpus.append(cpu)
            rss.append(peak / 1024)
    finally:
        server.remove()
    what = f"JDBC sink into PostgreSQL, {sizes.connect_rows:,} rows (insert, JSON with schemas; kafkalite only)"
    results.add(Row(CONNECT_SCENARIO, f"{what}: rows/s, first row in the table to the last", system.name,
                    "rows/s", rates, note="Kafka 0.9.0.1 ships no JDBC connector"))
    results.add(Row(CONNECT_SCENARIO, f"{what}: worker CPU seconds", system.name, "s", cpus, higher_is_better=False))
    results.add(Row(CONNECT_SCENARIO, f"{what}: worker peak RSS", system.name, "MiB", rss, higher_is_better=False))


# ------------------------------------------------------------------------------ 17: stream processing

STREAMS_SCENARIO = "17 stream processing (1 broker)"
SQL_ENGINE = "SQL server (Spark local[2])"
QUIX_ENGINE = "Quix Streams"
PIPELINES = {"filter": "filter-and-project stream", "window": "1-minute tumbling window aggregate"}


def stream_rows(kind: str, engine: str, system: str, sizes: Sizes,
                figures: list[stream_pipelines.PipelineFigures], note: str = "") -> list[Row]:
    what = f"{PIPELINES[kind]}, {engine}"
    return [Row(STREAMS_SCENARIO, f"{what}: records/s, {sizes.streams_burst:,} records produced flat out, "
                                  "first produced to last output", system, "records/s", [f.rate for f in figures],
                note=note),
            Row(STREAMS_SCENARIO, f"{what}: engine CPU per 1,000 records (throughput phase)", system, "ms",
                [1000 * f.cpu_s * 1000 / f.records for f in figures], higher_is_better=False),
            Row(STREAMS_SCENARIO, f"{what}: end-to-end p50 at {sizes.streams_rate:,.0f} records/s", system, "ms",
                [f.p50_ms for f in figures], higher_is_better=False),
            Row(STREAMS_SCENARIO, f"{what}: end-to-end p99 at {sizes.streams_rate:,.0f} records/s", system, "ms",
                [f.p99_ms for f in figures], higher_is_better=False)]


def streams(kafkalite: System, kafka: System | None, results: Results, sizes: Sizes, workdir: Path) -> None:
    """Scenario 17: the two pipelines of bench/stream_pipelines.py run by kafkalite's SQL server and
    by Quix Streams on ``kafkalite``, and by Quix Streams on ``kafka`` (Kafka 0.9.0.1) where it can;
    interleaved within each run: SQL server, Quix on kafkalite, Quix on Kafka."""
    from bench import kafka09
    from bench.systems import KAFKA
    assert kafkalite.cluster is not None
    workdir.mkdir(parents=True, exist_ok=True)
    figures: dict[tuple[str, str, str], list[stream_pipelines.PipelineFigures]] = {}
    failed: dict[tuple[str, str, str], str] = {}
    startups: list[float] = []

    def one(kind: str, engine: str, system: System, run: int, sql: stream_pipelines.SqlServer | None) -> None:
        key = (kind, engine, system.name)
        if key in failed:
            return
        assert system.cluster is not None
        tag = f"{kind}-{'sql' if sql else 'quix'}-{'k09' if system is kafka else 'kl'}-{run}-{time.time_ns() % 10**6}"
        in_topic, out_topic = f"s17-in-{tag}", f"s17-out-{tag}"
        system.create_topic(in_topic, 2, 1)
        conf = dict(kafka09.CLIENT_CONF) if system is kafka else {}
        app: stream_pipelines.QuixApp | None = None
        query = None
        try:
            if sql is not None:
                query = sql.start_pipeline(kind, in_topic, out_topic)
                pid, alive = sql.proc.pid, sql.dead
            else:
                if system is kafka:
                    system.create_topic(out_topic, 1, 1)
                app = stream_pipelines.QuixApp(kind, system.cluster.bootstrap, in_topic, out_topic,
                                               workdir / tag, conf)
                pid, alive = app.proc.pid, app.dead
            f = stream_pipelines.run_pipeline(kind, system.cluster.bootstrap, in_topic, out_topic, pid, alive,
                                              sizes.streams_rate, sizes.streams_seconds, sizes.streams_burst,
                                              conf, read_committed=sql is not None,
                                              warmup_timeout=90.0 if system is kafka else 240.0)
        except (RuntimeError, TimeoutError) as exc:
            why = str(exc).splitlines()[0]
            if app is not None and "Quix" not in why:
                why = f"{why}; the app's log: {app.error_line()}"
            print(f"    {PIPELINES[kind]}, {engine} on {system.name}: did not finish: {why}", flush=True)
            failed[key] = why
            return
        finally:
            if app is not None:
                app.stop()
            if sql is not None and query is not None and sql.dead() is None:
                sql.stop_pipeline(query)
        print(f"    {PIPELINES[kind]}, {engine} on {system.name}: {f.rate:,.0f} records/s, "
              f"CPU {1e6 * f.cpu_s / f.records:,.0f} ms per 1,000, p50 {f.p50_ms:,.1f} ms, p99 {f.p99_ms:,.1f} ms "
              f"({f.outputs:,} outputs)", flush=True)
        figures.setdefault(key, []).append(f)

    for run in range(sizes.runs):
        sql = stream_pipelines.SqlServer(kafkalite.cluster.bootstrap, workdir / f"sql-{run}")
        try:
            startups.append(sql.wait_ready())
            print(f"    SQL server ready after {startups[-1]:.1f} s", flush=True)
            for kind in PIPELINES:
                one(kind, SQL_ENGINE, kafkalite, run, sql)
                one(kind, QUIX_ENGINE, kafkalite, run, None)
                if kafka is not None:
                    one(kind, QUIX_ENGINE, kafka, run, None)
        finally:
            sql.stop()
    for (kind, engine, name), figs in figures.items():
        note = ""
        if engine == QUIX_ENGINE and name != KAFKA and (kind, engine, KAFKA) in failed:
            note = f"Quix Streams on {KAFKA}: {failed[(kind, engine, KAFKA)]}"
        if (kind, engine, name) in failed:      # measured before it failed (later runs skip it)
            note = f"{len(figs)} of {sizes.runs} runs; then: {failed[(kind, engine, name)]}"
        for row in stream_rows(kind, engine, name, sizes, figs, note):
            results.add(row)
    if startups:
        results.add(Row(STREAMS_SCENARIO, f"{SQL_ENGINE}: start-up, spawn to a healthy /healthcheck",
                        kafkalite.name, "s", startups, higher_is_better=False))
    for (kind, engine, name), why in failed.items():
        if (kind, engine, name) not in figures:
            print(f"    not measured: {PIPELINES[kind]}, {engine} on {name}: {why}", flush=True)
