"""One of a broker's two log dirs fills up mid-run; the broker keeps serving the other one.

The victim broker runs with ``log.dirs=<main>,<small tmpfs>`` and is the preferred leader of every
partition of an RF=3 topic, so it leads partitions in both dirs. It is either another broker than
the controller (which then asks it over the wire with DescribeLogDirs) or the controller itself. While an idempotent acks=all
producer streams numbered records, the tmpfs is filled with a file, the next appends there get
ENOSPC and the dir goes offline (Kafka's log-dir failure handling). Needs root for ``mount -t
tmpfs``; skipped with the reason otherwise.
"""
from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tests.fault.cluster_support import (Streamer, controller_id, full_isr, metadata_agrees, verify_exactly_once,
                                         zk_states)
from tests.support import wire
from tests.support.waiting import wait_for
from kafkalite.protocol.api_keys import ApiKey

PARTITIONS = 6
KAFKA_STORAGE_ERROR = 56
OVERRIDES = {"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false",
             "replica.lag.time.max.ms": "10000"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted (lazily: the broker may still hold it) in every path."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                              capture_output=True, text=True, timeout=30)
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs refused (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)


def _fill(mount: Path) -> int:
    """Write a file until the filesystem is full (ENOSPC); returns the bytes written."""
    written = 0
    chunk = b"\0" * (256 * 1024)
    with open(mount / "filler", "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                return written


def _describe_log_dirs(bootstrap: str) -> dict[str, tuple[int, set[int]]]:
    """log dir -> (error code, partition indexes of every topic listed there)."""
    resp = wire.request(bootstrap, ApiKey.DESCRIBE_LOG_DIRS, 2, {"topics": None}, timeout=10)
    return {r["log_dir"]: (r["error_code"], {p["partition_index"] for t in r["topics"] for p in t["partitions"]})
            for r in resp["results"]}


def _registration_czxid(cluster: Any, broker_id: int) -> int:
    _, stat = cluster.zk.get(f"{cluster.chroot}/brokers/ids/{broker_id}")
    return stat.czxid


@pytest.mark.parametrize("victim_kind", ["broker", "controller"])
def test_full_log_dir_moves_leadership_and_loses_nothing(cluster_factory, small_disk: Path, tmp_path: Path,
                                                         victim_kind: str) -> None:
    """After one of the victim's two dirs fills up: every acknowledged record is there exactly
    once, in order; the partitions in the full dir are led elsewhere and the victim left their ISRs;
    the victim is still registered in the same session (same czxid), still leads the partitions of
    its other dir with a full ISR, its Metadata agrees with ZooKeeper, and its DescribeLogDirs
    answers the full dir with KAFKA_STORAGE_ERROR and the other dir with its partitions."""
    # the harness starts brokers in order and the first becomes the controller
    victim_id = 1 if victim_kind == "controller" else 2
    others = [b for b in (1, 2, 3) if b != victim_id]
    main_dir = tmp_path / f"broker-{victim_id}-main"
    cluster = cluster_factory(3, OVERRIDES, broker_overrides={victim_id: {"log.dirs": f"{main_dir},{small_disk}"}})
    assert (controller_id(cluster) == victim_id) == (victim_kind == "controller")
    topic = "logdir-failure"
    assignment = [[victim_id, *others] if p % 2 == 0 else [victim_id, *reversed(others)] for p in range(PARTITIONS)]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, replica_assignment=assignment,
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for(lambda: len(zk_states(cluster, topic)) == PARTITIONS and full_isr(cluster, topic, 3), 30, "full ISRs")
    wait_for(lambda: all(s["leader"] == victim_id for s in zk_states(cluster, topic).values()), 30,
             "the victim leading every partition")

    def placed(d: Path) -> set[int]:
        return {int(n.rsplit("-", 1)[1]) for n in os.listdir(d) if n.startswith(f"{topic}-")}

    # The controller writes the leader and the full ISR at creation, before the brokers act on
    # them: the victim's logs exist once it has applied its leadership.
    wait_for(lambda: placed(small_disk) | placed(main_dir) == set(range(PARTITIONS)), 30, "the victim's logs")
    on_small, on_main = placed(small_disk), placed(main_dir)
    assert on_small and on_main and on_small | on_main == set(range(PARTITIONS)), (on_small, on_main)
    victim = cluster.broker(victim_id)
    czxid = _registration_czxid(cluster, victim_id)

    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        wait_for(lambda: all(stream.count(p) > 30 for p in range(PARTITIONS)), 30, "records flowing")
        filled_at = time.monotonic()
        _fill(small_disk)
        wait_for(lambda: all(s["leader"] != victim_id and victim_id not in s["isr"]
                             for p, s in zk_states(cluster, topic).items() if p in on_small), 30,
                 "leadership of the full dir's partitions moved off the victim")
        wait_for(lambda: all(stream.first_ack_enqueued_after(p, filled_at) for p in range(PARTITIONS)), 30,
                 "acks=all writes acknowledged on every partition after the failure")
        count_after = stream.count()
        wait_for(lambda: stream.count() > count_after + 300, 30, "the producer going on")

    checked = verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)
    assert checked > 600
    assert victim.alive, "the victim stopped"
    assert _registration_czxid(cluster, victim_id) == czxid, "the victim re-registered"
    states = zk_states(cluster, topic)
    for p in on_main:
        assert states[p]["leader"] == victim_id and sorted(states[p]["isr"]) == [1, 2, 3], (p, states[p])
    for p in on_small:
        assert states[p]["leader"] in others and victim_id not in states[p]["isr"], (p, states[p])
    wait_for(lambda: metadata_agrees(cluster, topic) is None, 30, "every broker's Metadata equal to ZooKeeper")
    dirs = _describe_log_dirs(victim.bootstrap)
    assert dirs[str(small_disk)] == (KAFKA_STORAGE_ERROR, set()), dirs
    code, listed = dirs[str(main_dir)]
    assert code == 0 and listed >= on_main, dirs


def test_restart_with_a_dir_gone_keeps_its_replicas_offline(cluster_factory, tmp_path: Path) -> None:
    """Broker 2 is stopped, one of its two dirs is replaced by a plain file (a disk that did not
    come back) and it is started again. Its replicas of that dir are offline from the start: never
    re-created empty on the other dir (their state predates the process: not new), never followed,
    never back in an ISR, while the replicas of its healthy dir rejoin every ISR; DescribeLogDirs
    answers the gone dir with 56; a topic created afterwards is hosted on the healthy dir; every
    record acknowledged before is still readable."""
    victim_id = 2
    dir_a, dir_b = tmp_path / "broker-2-a", tmp_path / "broker-2-b"
    cluster = cluster_factory(3, OVERRIDES, broker_overrides={victim_id: {"log.dirs": f"{dir_a},{dir_b}"}})
    topic = "logdir-restart"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_for(lambda: len(zk_states(cluster, topic)) == PARTITIONS and full_isr(cluster, topic, 3), 30, "full ISRs")
    with Streamer(cluster.bootstrap, topic, PARTITIONS) as stream:
        wait_for(lambda: all(stream.count(p) > 10 for p in range(PARTITIONS)), 30, "records acknowledged")
    on_b = {int(n.rsplit("-", 1)[1]) for n in os.listdir(dir_b) if n.startswith(f"{topic}-")}
    on_a = {int(n.rsplit("-", 1)[1]) for n in os.listdir(dir_a) if n.startswith(f"{topic}-")}
    assert on_a and on_b, (on_a, on_b)
    victim = cluster.broker(victim_id)
    victim.stop()
    dir_b.rename(tmp_path / "broker-2-b.unplugged")
    dir_b.write_text("not a directory\n")
    victim.start()
    wait_for(lambda: all(sorted(s["isr"]) == [1, 2, 3] for p, s in zk_states(cluster, topic).items() if p in on_a),
             60, "broker 2 back in the ISRs of its healthy dir's partitions")
    dirs = wait_for(lambda: _describe_log_dirs(victim.bootstrap), 10, "DescribeLogDirs")
    assert dirs[str(dir_b)] == (KAFKA_STORAGE_ERROR, set()), dirs
    assert dirs[str(dir_a)][0] == 0 and dirs[str(dir_a)][1] >= on_a, dirs
    assert not {n for n in os.listdir(dir_a) if n.startswith(f"{topic}-") and int(n.rsplit("-", 1)[1]) in on_b}, \
        "an offline replica was re-created empty on the healthy dir"
    fresh = "logdir-after-restart"
    admin.create_topics([NewTopic(fresh, 2, 3)])[fresh].result(30)
    wait_for(lambda: len(zk_states(cluster, fresh)) == 2 and full_isr(cluster, fresh, 3), 30,
             "a new topic fully replicated, broker 2 included")
    wait_for(lambda: {n for n in os.listdir(dir_a) if n.startswith(f"{fresh}-")} == {f"{fresh}-0", f"{fresh}-1"},
             30, "broker 2 hosting the new topic's replicas on its healthy dir")
    states = zk_states(cluster, topic)
    assert all(victim_id not in s["isr"] and s["leader"] != victim_id for p, s in states.items() if p in on_b), states
    assert victim.alive
    verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, stream)
