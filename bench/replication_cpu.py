"""The three brokers' CPU per replicated write (issue 33): what one acks=all cycle costs.

One single-record acks=all Produce at a time (``linger.ms=0``, one request in flight, the next
sent when the last is acknowledged) into a 1-partition RF 3 topic with ``min.insync.replicas=2``:
each record is one whole replication cycle (leader append, both followers' parked Fetches
answered, their appends and next Fetches, the high watermark, the Produce's answer), handled
alone. The brokers' utime + stime from ``/proc`` over ``--records`` such cycles, divided by
them, is the figure; it barely moves with the machine's load, where the cycle's wall time moves
2-3x. Printed per run for all three brokers and split into the leader and the mean follower.

``--tree DIR`` (repeatable) starts one 3-broker cluster per source tree, each from that
directory (``python -m`` imports the tree of its working directory first) in its own ZooKeeper
chroot, and alternates the runs between them, so a before/after pair sees the same machine
state; the last line gives each pair's after/before ratio and their median. ``--idle N`` adds an
idle RF 3 topic of N partitions (scenario 4's ``__consumer_offsets`` has 50), which every
follower's fetch session carries. ``--py-spy PREFIX`` records each broker of the first run per
tree into ``PREFIX-<tree>-<role>.txt`` (py-spy raw format, ``--gil``: Python time, not time
blocked in a system call or waiting for a core).

Run: ``.venv/bin/python -m bench.replication_cpu --tree /path/before --tree /path/after --runs 6``.
Not part of ``scripts/bench``; its figures are in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.cpu import PhaseCpu, pids_of
from bench.systems import Kafkalite
from tests.support.zookeeper import ZooKeeperServer

TOPIC = "cycle"
WARMUP = 200


def start_cluster(zk: ZooKeeperServer, tree: str, workdir: Path, idle: int) -> Kafkalite:
    """Three brokers importing ``tree`` (their working directory and PYTHONPATH), the topic, and
    ``idle`` idle partitions."""
    here, saved = os.getcwd(), os.environ.get("PYTHONPATH")
    try:
        os.chdir(tree)
        os.environ["PYTHONPATH"] = tree
        system = Kafkalite(zk, workdir)
        system.start(3)
    finally:
        os.chdir(here)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    system.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    if idle:
        system.create_topic("idle", idle, 3)
    return system


def one_at_a_time(producer: Producer, records: int) -> None:
    """``records`` acks=all Produces, each sent once the previous one is acknowledged."""
    value = b"x" * 100
    for _ in range(records):
        producer.produce(TOPIC, value, partition=0)
        if producer.flush(30) != 0:
            raise RuntimeError("a record was not acknowledged within 30 s")


def measure(system: Kafkalite, records: int, spy_prefix: str | None) -> dict[str, float]:
    """One run: CPU microseconds per cycle, all brokers, the leader, the mean follower."""
    producer = Producer(system.client_conf(**{"acks": "all", "linger.ms": 0, "enable.idempotence": False,
                                              "max.in.flight.requests.per.connection": 1}))
    one_at_a_time(producer, WARMUP)
    leader = system.leader(TOPIC)
    spies = []
    if spy_prefix:
        Path(spy_prefix).parent.mkdir(parents=True, exist_ok=True)
        for b in system.brokers:
            role = "leader" if b.broker_id == leader else f"follower{b.broker_id}"
            spies.append(subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(b.pid), "--rate", "500",
                 "--gil", "--format", "raw", "--nonblocking", "-o", f"{spy_prefix}-{role}.txt"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
    started = time.monotonic()
    with PhaseCpu(pids_of(system.brokers)) as phase:
        one_at_a_time(producer, records)
    seconds = time.monotonic() - started
    for spy in spies:
        spy.send_signal(2)
        spy.wait(60)
    leader_pid = system.broker(leader).pid
    assert leader_pid is not None
    total = phase.total.total
    lead = phase.used[leader_pid].total
    per = 1e6 / records
    return {"all_us": total * per, "leader_us": lead * per, "follower_us": (total - lead) / 2 * per,
            "sys_us": phase.total.system * per, "wall_ms": seconds / records * 1000}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", help="a source tree to run a cluster from (repeatable); "
                                                    "default: the working directory")
    ap.add_argument("--records", type=int, default=2000, help="cycles per run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=int, default=0, help="partitions of an idle RF 3 topic beside it")
    ap.add_argument("--py-spy", help="record the brokers of each tree's first run into PREFIX-<tree>-<role>.txt")
    args = ap.parse_args(argv)
    trees = [str(Path(t).resolve()) for t in (args.tree or [os.getcwd()])]
    tmp = Path(tempfile.mkdtemp(prefix="kafkalite-replication-cpu-", dir="/tmp"))
    zk = ZooKeeperServer(tmp / "zookeeper", tick_ms=2000)
    systems: list[Kafkalite] = []
    out: dict[str, list[dict[str, float]]] = {t: [] for t in trees}
    try:
        zk.start()
        for i, tree in enumerate(trees):
            systems.append(start_cluster(zk, tree, tmp / f"kafkalite-{i}", args.idle))
        for run in range(args.runs):
            for i, (tree, system) in enumerate(zip(trees, systems)):
                spy = f"{args.py_spy}-{i}" if args.py_spy and run == 0 else None
                got = measure(system, args.records, spy)
                out[tree].append(got)
                print(f"{tree} run {run + 1}: {got['all_us']:,.0f} us CPU per cycle (system {got['sys_us']:,.0f}; "
                      f"leader {got['leader_us']:,.0f}, follower {got['follower_us']:,.0f}), "
                      f"{got['wall_ms']:.2f} ms per cycle", flush=True)
        for tree in trees:
            def median(key: str) -> float:
                return statistics.median(r[key] for r in out[tree])
            print(f"{tree}: median {median('all_us'):,.0f} us CPU per cycle (leader {median('leader_us'):,.0f}, "
                  f"follower {median('follower_us'):,.0f}), {median('wall_ms'):.2f} ms per cycle")
        if len(trees) == 2:
            ratios = [b["all_us"] / a["all_us"] for a, b in zip(out[trees[0]], out[trees[1]])]
            print(f"after/before per pair: {', '.join(f'{r:.3f}' for r in ratios)}; median {statistics.median(ratios):.3f}")
    finally:
        for system in systems:
            system.stop()
        zk.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
