"""The broker's CPU seconds per GB produced (issue 33): the figure that survives a shared machine.

Rates move by 2-5x when other work shares the cores; the CPU time the broker process spends on a
fixed amount of produced data barely does. This starts one ZooKeeper and one kafkalite broker,
then for each record size sends a fixed number of pre-encoded Produce requests (scenario 8's load,
:mod:`bench.ceiling_load`: about 500 KB per request, acks=1, 6 partitions, ``--connections``
generator processes with ``--window`` requests in flight each) into a fresh topic, and reads the
broker's utime + stime from ``/proc`` before and after (both taken once the high watermarks cover
every acknowledged record). It prints CPU seconds per GB of record payload and records/s.

Run: ``.venv/bin/python -m bench.produce_cpu --mb 1000 --runs 3`` (``--py-spy PATH`` records the
broker with py-spy during the first run of each size into ``PATH-<size>.txt``, collapsed stacks).
``--tree DIR`` (repeatable) starts one broker per source tree (its ``PYTHONPATH``), each in its own
chroot, and alternates the runs between them, so a before/after comparison sees the same machine
state. Not part of ``scripts/bench``; its figures are in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import ceiling_load, load
from bench.cpu import PhaseCpu
from bench.systems import Kafkalite
from tests.support.zookeeper import ZooKeeperServer

PARTITIONS = 6
REQUEST_BYTES = 500_000


def delete_topic(system: Kafkalite, topic: str, timeout: float = 120.0) -> None:
    """Delete the run's topic and wait until its files are gone: the page cache then never fills
    up, so no run pays the kernel's reclaim for the runs before it (which grew the broker's
    system time from 1 to 3.5 s per GB over 16 GB written)."""
    data = Path(system.brokers[0].dir) / "data"
    admin = system.admin()       # must outlive the future: destroying it fails the request
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
    deadline = time.monotonic() + timeout
    while any(p.name.startswith(f"{topic}-") for p in data.iterdir()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}'s files are still in {data}")
        time.sleep(0.2)


def measure(system: Kafkalite, record_size: int, megabytes: int, connections: int, window: int,
            workdir: Path, tag: str, py_spy: str | None) -> dict[str, float]:
    """One run: a fresh topic, ``megabytes`` of payload; CPU s/GB and records/s."""
    broker = system.brokers[0]
    pid = broker.pid
    assert pid is not None
    host, port = broker.bootstrap.rsplit(":", 1)
    records_per_request = REQUEST_BYTES // record_size
    requests = max(1, megabytes * 1_000_000 // (records_per_request * record_size) // connections)
    topic = f"cpu-{record_size}b-{tag}"
    system.create_topic(topic, PARTITIONS, 1)
    spy = None
    if py_spy:
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid),
                                "--format", "raw", "--rate", "200", "--nonblocking", "-o", py_spy],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    with PhaseCpu([pid]) as phase:
        got = ceiling_load.run(host, int(port), system.raw_produce_version, topic, PARTITIONS, record_size,
                               records_per_request, connections, window, 900.0, workdir / tag,
                               requests_per_connection=requests)
        stored = load.wait_high_watermark_sum(system, topic, PARTITIONS, got.records)
    user, system_s = phase.total.user, phase.total.system
    cpu = phase.total.total
    if spy is not None:
        spy.send_signal(2)
        spy.wait(60)
    if stored != got.records:
        raise RuntimeError(f"{topic} holds {stored} records, {got.records} acknowledged")
    delete_topic(system, topic)
    gb = got.payload_bytes / 1e9
    return {"cpu_s_per_gb": cpu / gb, "user_s_per_gb": user / gb, "sys_s_per_gb": system_s / gb,
            "records_per_s": got.records_per_s, "cpu_s": cpu, "gb": gb, "seconds": got.seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1024", help="record sizes in bytes, comma-separated")
    ap.add_argument("--mb", type=int, default=1000, help="payload MB per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--tree", action="append", help="a source tree to run a broker from (repeatable); "
                                                    "default: the PYTHONPATH this runs with")
    ap.add_argument("--py-spy", help="record the first run of each size with py-spy into PATH-<size>.txt")
    ap.add_argument("--json", help="also write the per-run figures here")
    args = ap.parse_args(argv)
    trees = args.tree or [os.environ.get("PYTHONPATH", "")]
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-produce-cpu-", dir="/tmp"))
    zk = ZooKeeperServer(tmp / "zookeeper", tick_ms=2000)
    systems: list[Kafkalite] = []
    out: dict[str, dict[str, list[dict[str, float]]]] = {}
    saved = os.environ.get("PYTHONPATH")
    try:
        zk.start()
        for i, tree in enumerate(trees):
            os.environ["PYTHONPATH"] = tree             # the broker process's tree
            system = Kafkalite(zk, tmp / f"kafkalite-{i}")
            systems.append(system)
            system.start(1)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for size in (int(n) for n in args.sizes.split(",")):
            for run in range(args.runs):
                for tree, system in zip(trees, systems):
                    runs = out.setdefault(tree, {}).setdefault(str(size), [])
                    spy = f"{args.py_spy}-{trees.index(tree)}-{size}.txt" if args.py_spy and run == 0 else None
                    got = measure(system, size, args.mb, args.connections, args.window, tmp,
                                  f"{size}-{run}", spy)
                    runs.append(got)
                    print(f"{tree} {size} B run {run + 1}: {got['cpu_s_per_gb']:.2f} CPU s/GB "
                          f"(user {got['user_s_per_gb']:.2f}, sys {got['sys_s_per_gb']:.2f}; {got['cpu_s']:.1f} s "
                          f"for {got['gb']:.3f} GB), {got['records_per_s']:,.0f} records/s", flush=True)
        for tree in trees:
            for size_name, runs in out[tree].items():
                def spread(key: str, fmt: str) -> str:
                    vals = [r[key] for r in runs]
                    return f"{statistics.median(vals):{fmt}} ({min(vals):{fmt}}-{max(vals):{fmt}})"
                print(f"{tree} {size_name} B: CPU s/GB {spread('cpu_s_per_gb', '.2f')}, user {spread('user_s_per_gb', '.2f')}, "
                      f"sys {spread('sys_s_per_gb', '.2f')}, records/s {spread('records_per_s', ',.0f')}", flush=True)
    finally:
        for system in systems:
            system.stop()
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
