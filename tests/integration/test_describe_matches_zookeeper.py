"""``kafkalite-topics --describe`` (Kafka's Leader / Replicas / Isr lines) agrees with ZooKeeper's
partition state znodes, asked through any broker, before and after a broker dies and returns."""
from __future__ import annotations

import re
import subprocess
import sys

from tests.fault.cluster_support import full_isr, metadata_agrees, zk_assignment, zk_states
from tests.support.waiting import wait_for

TOPIC = "described"
LINE = re.compile(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+|none)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)")


def describe(bootstrap: str, *extra: str) -> dict[int, tuple[int, list[int], list[int]]]:
    out = subprocess.run([sys.executable, "-m", "kafkalite.cli.topics", "--bootstrap-server", bootstrap,
                          "--describe", "--topic", TOPIC, *extra], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines()[1 if not extra else 0:]:
        m = LINE.fullmatch(line)
        assert m, f"not Kafka's partition line: {line!r}"
        leader = -1 if m.group(3) == "none" else int(m.group(3))
        rows[int(m.group(2))] = (leader, [int(x) for x in m.group(4).split(",") if x],
                                 sorted(int(x) for x in m.group(5).split(",") if x))
    return rows


def zookeeper_view(cluster) -> dict[int, tuple[int, list[int], list[int]]]:
    assignment = zk_assignment(cluster, TOPIC)
    return {p: (s["leader"], assignment[p], sorted(s["isr"])) for p, s in zk_states(cluster, TOPIC).items()}


def agree_everywhere(cluster) -> None:
    """Every live broker's Metadata equals ZooKeeper, and so does the tool through each of them."""
    wait_for(lambda: metadata_agrees(cluster, TOPIC) is None, timeout=30, what="every broker's Metadata = ZooKeeper")
    expected = zookeeper_view(cluster)
    for b in cluster.brokers:
        if b.alive:
            assert describe(b.bootstrap) == expected, f"describe through broker {b.broker_id}"


def test_describe_matches_zookeeper_across_a_failover(cluster_factory):
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    subprocess.run([sys.executable, "-m", "kafkalite.cli.topics", "--bootstrap-server", cluster.bootstrap,
                    "--create", "--topic", TOPIC, "--partitions", "6", "--replication-factor", "3"],
                   check=True, capture_output=True, timeout=60)
    wait_for(lambda: full_isr(cluster, TOPIC, 3), timeout=30, what="full ISR")
    agree_everywhere(cluster)

    victim = cluster.broker(zookeeper_view(cluster)[0][0])          # the leader of partition 0
    victim.kill()
    wait_for(lambda: all(s["leader"] != victim.broker_id and victim.broker_id not in s["isr"]
                         for s in zk_states(cluster, TOPIC).values()), timeout=60, what="leaders moved")
    agree_everywhere(cluster)
    survivor = next(b for b in cluster.brokers if b.alive)
    under = describe(survivor.bootstrap, "--under-replicated-partitions")
    assert sorted(under) == list(range(6)), "every partition lost a replica"
    assert all(victim.broker_id not in isr for _, _, isr in under.values())

    victim.start()
    wait_for(lambda: full_isr(cluster, TOPIC, 3), timeout=60, what="ISR full again")
    agree_everywhere(cluster)
    assert describe(survivor.bootstrap, "--under-replicated-partitions") == {}
