"""Tens of thousands of partitions (issue 18) and crash recovery per GB: the measurements that
need a cluster of their own, built on :class:`bench.systems.System`.

Partitions: topics of up to 1,000 partitions, RF 3, on 3 brokers. Measured: time to create them
all (until every partition has a leader and a full ISR), one Metadata request for all of them,
idle CPU per broker (followers fetching mostly empty partitions), RSS, the leaders' failover after
kill -9 of a broker that is not the controller (until no partition names it as leader), its
restart (until registered, then until every ISR is full again) and a controlled shutdown (SIGTERM
to exit).

Recovery: a 3-broker RF 3 topic filled with ``gb`` GB, never flushed by the broker (Kafka's
defaults: the page cache holds it), kill -9 of one broker, restart; time until it is registered
and until it is back in every ISR, per GB of log it held.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from bench import load
from bench.cpu import cpu_seconds
from bench.many_clients import rss_mib
from bench.systems import System


@dataclass
class PartitionFigures:
    create_s: float
    metadata_s: float
    idle_cpu_percent: dict[int, float]
    rss_mib: dict[int, float]
    failover_s: float
    restart_registered_s: float
    restart_full_isr_s: float
    controlled_shutdown_s: float


def _metadata(system: System, timeout: float = 120.0) -> Any:
    return system.admin().list_topics(timeout=timeout)


def _partitions_led_by(md: Any, topics: list[str], broker_id: int) -> int:
    return sum(1 for t in topics for p in md.topics[t].partitions.values() if p.leader == broker_id)


def _all_led_elsewhere(system: System, topics: list[str], gone: int) -> bool:
    try:
        md = _metadata(system, 30)
    except Exception:  # noqa: BLE001 - a broker is down: ask again
        return False
    # a broker that has just started may answer before its metadata holds every topic
    return all(t in md.topics and all(p.leader >= 0 and p.leader != gone for p in md.topics[t].partitions.values())
               for t in topics)


def _full_isr(system: System, topics: list[str], size: int) -> bool:
    try:
        md = _metadata(system, 30)
    except Exception:  # noqa: BLE001
        return False
    return all(t in md.topics and all(len(p.isrs) >= size for p in md.topics[t].partitions.values())
               for t in topics)


def _wait(condition: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - t0


def controller_id(system: System) -> int:
    assert system.cluster is not None
    raw = system.cluster.zk_get("/controller")
    return int(json.loads(raw)["brokerid"]) if raw else -1


def many_partitions(system: System, count: int, per_topic: int, idle_seconds: float) -> PartitionFigures:
    """``count`` partitions at RF 3 on the running 3-broker cluster of ``system``."""
    topics = [f"s10-{count}-{i}-{time.time_ns() % 10**9}" for i in range((count + per_topic - 1) // per_topic)]
    t0 = time.monotonic()
    left = count
    for topic in topics:
        n = min(per_topic, left)
        left -= n
        system.create_topic(topic, n, 3)
    create_s = time.monotonic() - t0
    say = lambda what: print(f"    {system.name}, {count:,} partitions: {what}", flush=True)  # noqa: E731
    say(f"created until every ISR is full in {create_s:.1f} s")
    t0 = time.monotonic()
    md = _metadata(system)
    metadata_s = time.monotonic() - t0
    say(f"one Metadata request for all: {metadata_s:.3f} s")
    brokers = {b.broker_id: b for b in system.brokers}
    time.sleep(5.0)                       # let the followers settle into their idle fetch loop
    cpu0 = {i: cpu_seconds(b.pid or 0) for i, b in brokers.items()}
    t0 = time.monotonic()
    time.sleep(idle_seconds)
    elapsed = time.monotonic() - t0
    idle = {i: 100 * (cpu_seconds(b.pid or 0) - cpu0[i]) / elapsed for i, b in brokers.items()}
    rss = {i: rss_mib(b.pid or 0) for i, b in brokers.items()}
    say(f"idle CPU per broker {', '.join(f'{v:.1f}' for v in idle.values())} %, "
        f"RSS {', '.join(f'{v:.0f}' for v in rss.values())} MiB")
    slow = max(1.0, count / 10_000)       # the waits below grow with the partition count

    controller = controller_id(system)
    victim = next(i for i in sorted(brokers) if i != controller)
    led = _partitions_led_by(md, topics, victim)
    print(f"    {system.name}: kill -9 broker {victim} (leads {led:,} of {count:,}; controller {controller})",
          flush=True)
    brokers[victim].kill()
    failover_s = _wait(lambda: _all_led_elsewhere(system, topics, victim), 600 * slow, "leader failover")
    say(f"leaders moved after {failover_s:.1f} s")
    t0 = time.monotonic()
    brokers[victim].start(timeout=600 * slow)
    registered_s = time.monotonic() - t0
    say(f"restarted broker registered after {registered_s:.1f} s")
    full_isr_s = registered_s + _wait(lambda: _full_isr(system, topics, 3), 1200 * slow, "ISR refill")
    say(f"every ISR full after {full_isr_s:.1f} s")

    other = next(i for i in sorted(brokers) if i not in (controller, victim))
    t0 = time.monotonic()
    brokers[other].stop(timeout=600 * slow)
    shutdown_s = time.monotonic() - t0
    say(f"controlled shutdown took {shutdown_s:.1f} s")
    return PartitionFigures(create_s, metadata_s, idle, rss, failover_s, registered_s, full_isr_s, shutdown_s)


def crash_recovery(system: System, gb: float, partitions: int = 6) -> tuple[float, float, float]:
    """(GB held by the killed broker, seconds until registered, seconds until in every ISR)."""
    topic = f"s11-recovery-{time.time_ns() % 10**9}"
    system.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    records = int(gb * 1e9 / load.VALUE_SIZE)
    load.produce(system, topic, records, acks="all")
    assert system.cluster is not None
    victim = next(b for b in system.brokers if b.broker_id != controller_id(system))
    held = sum(f.stat().st_size for f in victim.dir.rglob(f"{topic}-*/*.log")) / 1e9
    victim.kill()
    t0 = time.monotonic()
    victim.start(timeout=3600)
    registered = time.monotonic() - t0
    in_isr = registered + _wait(lambda: _full_isr(system, [topic], 3), 3600, "ISR refill after recovery")
    return held, registered, in_isr
