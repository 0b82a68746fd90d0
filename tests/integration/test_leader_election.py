"""Requested leader elections on a 3-broker cluster: ElectLeaders (API 43, through the
``kafkalite-leader-election`` tool and on the wire) and the ``/admin/preferred_replica_election``
znode, with auto leader rebalance off so only the request can move leadership back.

A broker is stopped (controlled shutdown moves its leaderships away) and started again (it
rejoins every ISR but leads nothing); the election then gives each partition back to its
preferred replica, in ZooKeeper and in every broker's Metadata.
"""
from __future__ import annotations

import json
import subprocess
import sys

from kafkalite.client import Admin, NewTopic
from kafkalite.errors import ErrorCode
from tests.fault.cluster_support import controller_id, full_isr, leaders, metadata_agrees, zk_assignment
from tests.support import wire
from tests.support.waiting import wait_for

TOPIC = "elect"
PARTITIONS = 6
ZNODE = "/admin/preferred_replica_election"


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkalite.cli.leader_election", *args], text=True,
                          capture_output=True, timeout=120)


def displace(cluster, broker_id: int) -> list[int]:
    """Stop and restart ``broker_id``; return the partitions it prefers but no longer leads."""
    cluster.stop_broker(broker_id)
    cluster.start_broker(broker_id)
    wait_for(lambda: full_isr(cluster, TOPIC, 3), 60, f"broker {broker_id} back in every ISR")
    preferred = {p: r[0] for p, r in zk_assignment(cluster, TOPIC).items()}
    mine = sorted(p for p, b in preferred.items() if b == broker_id)
    now = leaders(cluster, TOPIC)
    assert mine and all(now[p] != broker_id for p in mine), (mine, now)
    return mine


def elect_body(version: int, partitions: list[tuple[str, int]] | None, election_type: int = 0) -> dict:
    body: dict = {"timeout_ms": 30000, "topic_partitions": None if partitions is None else [
        {"topic": t, "partition_id": [p]} for t, p in partitions]}
    if version >= 1:
        body["election_type"] = election_type
    return body


def codes(resp: dict) -> dict[tuple[str, int], int]:
    return {(r["topic"], p["partition_id"]): p["error_code"]
            for r in resp["replica_election_results"] for p in r["partition_result"]}


def test_preferred_election_via_the_api_and_the_znode(cluster_factory) -> None:
    """The tool elects exactly the displaced partitions' preferred replicas (then reports them
    already elected); the wire answers Kafka's codes for unknown partitions, unneeded unclean
    elections and a broker that is not the controller; the znode does the same election and is
    deleted by the controller."""
    cluster = cluster_factory(3, {"auto.leader.rebalance.enable": "false"})
    with Admin(cluster.bootstrap) as admin:
        # the controller learns of the last broker a moment after its registration (watch)
        wait_for(lambda: admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC] is None
                 or TOPIC in admin.list_topics(), 30, "topic created with RF 3")
    wait_for(lambda: len(leaders(cluster, TOPIC)) == PARTITIONS and full_isr(cluster, TOPIC, 3), 30, "full ISRs")
    preferred = {p: r[0] for p, r in zk_assignment(cluster, TOPIC).items()}
    wait_for(lambda: leaders(cluster, TOPIC) == preferred, 30, "preferred leaders at start")
    controller = controller_id(cluster)
    victim = next(b.broker_id for b in cluster.brokers if b.broker_id != controller)

    # -- the API, through the tool
    mine = displace(cluster, victim)
    done = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    assert done.returncode == 0, done.stderr
    expected = ", ".join(f"{TOPIC}-{p}" for p in mine)
    assert f"Successfully completed leader election (PREFERRED) for partitions {expected}" in done.stdout, done.stdout
    assert leaders(cluster, TOPIC) == preferred           # written before the answer
    wait_for(lambda: metadata_agrees(cluster, TOPIC) is None, 30, "every broker's metadata shows it")
    again = tool("--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED",
                 "--topic", TOPIC, "--partition", str(mine[0]))
    assert again.returncode == 0 and f"Valid replica already elected for partitions {TOPIC}-{mine[0]}" in again.stdout

    # -- Kafka's codes on the wire
    ctrl = cluster.broker(controller_id(cluster)).bootstrap
    resp = wire.request(ctrl, 43, 1, elect_body(1, [(TOPIC, 99), ("no-such-topic", 0), (TOPIC, 0)], 1))
    assert resp["error_code"] == 0
    assert codes(resp) == {(TOPIC, 99): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           (TOPIC, 0): ErrorCode.ELECTION_NOT_NEEDED}       # unclean: the leader is alive
    resp = wire.request(ctrl, 43, 0, elect_body(0, [(TOPIC, 0)]))
    assert codes(resp) == {(TOPIC, 0): ErrorCode.ELECTION_NOT_NEEDED}
    other = next(b for b in cluster.brokers if b.broker_id != controller_id(cluster))
    resp = wire.request(other.bootstrap, 43, 2, elect_body(2, [(TOPIC, 0)]))
    assert codes(resp) == {(TOPIC, 0): ErrorCode.NOT_CONTROLLER}

    # -- the znode, as the ZooKeeper-era tool writes it
    mine = displace(cluster, victim)
    request = {"version": 1, "partitions": [{"topic": TOPIC, "partition": p} for p in mine]}
    cluster.zk.create(cluster.chroot + ZNODE, json.dumps(request).encode())
    wait_for(lambda: leaders(cluster, TOPIC) == preferred, 30, "the znode's election")
    wait_for(lambda: cluster.zk_get(ZNODE) is None, 30, "the controller deletes the znode")
    wait_for(lambda: metadata_agrees(cluster, TOPIC) is None, 30, "metadata agreement")


def test_tool_rejects_bad_input(tmp_path) -> None:
    """Bad option combinations and files end with one line and exit 1, before any request."""
    for args in (["--election-type", "preferred"],
                 ["--election-type", "preferred", "--topic", "t"],
                 ["--election-type", "preferred", "--all-topic-partitions", "--topic", "t", "--partition", "0"],
                 ["--election-type", "sideways", "--all-topic-partitions"]):
        r = tool("--bootstrap-server", "127.0.0.1:1", *args)
        assert r.returncode == 1 and r.stderr.startswith("Error:") and len(r.stderr.strip().splitlines()) == 1, r
    bad = tmp_path / "p.json"
    bad.write_text('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}')
    r = tool("--bootstrap-server", "127.0.0.1:1", "--election-type", "preferred", "--path-to-json-file", str(bad))
    assert r.returncode == 1 and "duplicate partitions: t-0" in r.stderr
