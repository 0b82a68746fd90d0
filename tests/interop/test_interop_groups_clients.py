"""kafka-python, aiokafka, confluent-kafka (cooperative-sticky) and kcat -G groups on 3 brokers.

Each client runs a group of two members with one assignor; the coordinator only relays the
leader's assignment bytes (range, roundrobin, sticky and cooperative-sticky are computed by the
clients), so the checks are: the chosen protocol is the one offered, the two members end up with
disjoint assignments covering every partition, every record is read, and the committed offsets
(read back with OffsetFetch) are the log ends.
"""
from __future__ import annotations

import asyncio
import importlib
import threading
from typing import Any

import pytest

from kafkalite.protocol.api_keys import ApiKey
from tests.interop.group_members import produce_numbered
from tests.support.brokers import Cluster
from tests.support.waiting import wait_for
from tests.support.wire import request

TOPIC = "assignors"
PARTITIONS = 4
RECORDS = 400


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: Any) -> Any:
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("groups-clients"), 3, {"offsets.topic.replication.factor": "3"})
    try:
        cluster.start()
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_for(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30, "a controller")
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()),
                 30, "leaders")
        produce_numbered(cluster.bootstrap, TOPIC, PARTITIONS, RECORDS)
        yield cluster
    finally:
        cluster.stop()


def group_view(cluster: Any, group: str) -> tuple[dict[str, Any], dict[int, int]]:
    """(DescribeGroups entry, committed offset per partition) from the group's coordinator."""
    def coordinator() -> Any:
        r = request(cluster.bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        return f"{r['host']}:{r['port']}" if r["error_code"] == 0 else None
    where = wait_for(coordinator, 30, "the coordinator")
    desc = request(where, ApiKey.DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False})["groups"][0]
    fetched = request(where, ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": list(range(PARTITIONS))}]})
    return desc, {p["partition_index"]: p["committed_offset"] for p in fetched["topics"][0]["partitions"]}


def check_group(cluster: Any, group: str, protocol: str, assignments: list[set[int]], seen: set[bytes]) -> None:
    assert len(seen) == RECORDS
    assert all(assignments) and set.union(*assignments) == set(range(PARTITIONS))
    assert sum(len(a) for a in assignments) == PARTITIONS          # disjoint
    desc, committed = group_view(cluster, group)
    assert desc["group_state"] == "Stable" and desc["protocol_data"] == protocol and len(desc["members"]) == 2
    assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}


def kafka_python_assignor(name: str) -> Any:
    module, cls = {"range": ("range", "RangePartitionAssignor"), "roundrobin": ("roundrobin", "RoundRobinPartitionAssignor"),
                   "cooperative-sticky": ("cooperative_sticky", "CooperativeStickyAssignor")}[name]
    return getattr(importlib.import_module(f"kafka.coordinator.assignors.{module}"), cls)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_kafka_python_group(cluster: Any, assignor: str) -> None:
    from kafka import KafkaConsumer
    group = f"kp-{assignor}"
    seen: set[bytes] = set()
    lock = threading.Lock()
    stop = threading.Event()
    consumers = [KafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                               enable_auto_commit=False, partition_assignment_strategy=[kafka_python_assignor(assignor)],
                               session_timeout_ms=10000, heartbeat_interval_ms=500) for _ in range(2)]
    # kafka-python's group leader assigns from its own metadata snapshot; a member whose first
    # Metadata answer has not arrived yet assigns nothing ("No partition metadata for topic"), a
    # client-side race. Wait until each member knows the topic's partitions (from our brokers).
    for c in consumers:
        wait_for(lambda c=c: c.partitions_for_topic(TOPIC) == set(range(PARTITIONS)), 30, "member metadata")

    def run(c: Any) -> None:
        from kafka.errors import CommitFailedError, RebalanceInProgressError
        while not stop.is_set():
            for records in c.poll(timeout_ms=200).values():
                with lock:
                    seen.update(r.value for r in records)
            try:
                c.commit()
            except (CommitFailedError, RebalanceInProgressError):
                # the group rebalanced between poll and commit (the second member joined): as in
                # any kafka-python application, the next poll rejoins and the commit is retried
                continue
    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in consumers]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(seen) >= RECORDS and all(c.assignment() for c in consumers), 90, "both members reading")
        wait_for(lambda: group_view(cluster, group)[1] == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}, 30,
                 "commits")
        check_group(cluster, group, assignor, [{tp.partition for tp in c.assignment()} for c in consumers], seen)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        for c in consumers:
            c.close(autocommit=False)


def aiokafka_assignor(name: str) -> Any:
    if name == "sticky":
        return importlib.import_module("aiokafka.coordinator.assignors.sticky.sticky_assignor").StickyPartitionAssignor
    module = importlib.import_module(f"aiokafka.coordinator.assignors.{name}")
    return getattr(module, {"range": "RangePartitionAssignor", "roundrobin": "RoundRobinPartitionAssignor"}[name])


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
def test_aiokafka_group(cluster: Any, assignor: str) -> None:
    from aiokafka import AIOKafkaConsumer
    group = f"aio-{assignor}"
    seen: set[bytes] = set()

    async def main() -> list[set[int]]:
        consumers = [AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap, group_id=group,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      partition_assignment_strategy=(aiokafka_assignor(assignor),),
                                      session_timeout_ms=10000, heartbeat_interval_ms=500) for _ in range(2)]
        for c in consumers:
            await c.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 90
            while not (len(seen) >= RECORDS and all(c.assignment() for c in consumers)):
                assert loop.time() < deadline, f"aiokafka group {group}: {len(seen)} records"
                for c in consumers:
                    for records in (await c.getmany(timeout_ms=100)).values():
                        seen.update(r.value for r in records)
                    await c.commit()
            for c in consumers:
                await c.commit()
            return [{tp.partition for tp in c.assignment()} for c in consumers]
        finally:
            for c in consumers:
                await c.stop()

    assignments = asyncio.run(main())
    # the members left: the group is Empty now, but kept its protocol-less record and offsets
    desc, committed = group_view(cluster, group)
    assert desc["group_state"] == "Empty" and committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert len(seen) == RECORDS and set.union(*assignments) == set(range(PARTITIONS))
    assert sum(len(a) for a in assignments) == PARTITIONS


def test_confluent_cooperative_sticky_group(cluster: Any) -> None:
    from confluent_kafka import Consumer
    group = "ck-cooperative"
    seen: set[bytes] = set()
    consumers = [Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                           "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": False,
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}) for _ in range(2)]
    for c in consumers:
        c.subscribe([TOPIC])

    def step() -> bool:
        for c in consumers:
            for msg in c.consume(100, 0.1):
                if not msg.error():
                    seen.add(msg.value())
            if c.assignment():
                try:
                    c.commit(asynchronous=False)
                except Exception:        # nothing consumed since the last commit
                    pass
        return len(seen) >= RECORDS and all(c.assignment() for c in consumers)
    try:
        wait_for(step, 90, "both cooperative members reading", interval=0)
        wait_for(lambda: step() and group_view(cluster, group)[1] == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)},
                 30, "commits", interval=0)
        check_group(cluster, group, "cooperative-sticky", [{tp.partition for tp in c.assignment()} for c in consumers], seen)
    finally:
        for c in consumers:
            c.close()


def test_kcat_balanced_consumer(cluster: Any) -> None:
    import subprocess
    out = subprocess.run(["kcat", "-b", cluster.bootstrap, "-G", "kcat-group", "-o", "beginning", "-e",
                          "-f", "%p:%o\\n", TOPIC], capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.decode().split()
    assert sorted(lines) == sorted(f"{p}:{o}" for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS))
    desc, committed = group_view(cluster, "kcat-group")
    assert desc["group_state"] == "Empty"         # kcat left the group on exit
    assert committed == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}


def test_confluent_static_member_restart_keeps_assignment_without_rebalance(cluster: Any) -> None:
    """group.instance.id (KIP-345): a static member that closes (no LeaveGroup) and comes back
    within its session gets its partitions back under a new member id; the other member is never
    revoked."""
    from confluent_kafka import Consumer
    group = "ck-static"
    revoked: dict[str, int] = {"s-a": 0, "s-b": 0}

    def member(instance: str) -> Any:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.instance.id": instance,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 20000, "heartbeat.interval.ms": 500})

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            if parts:
                revoked[instance] += 1
        c.subscribe([TOPIC], on_revoke=on_revoke)
        return c

    a, b = member("s-a"), member("s-b")

    def both_assigned(*cs: Any) -> bool:
        for c in cs:
            c.consume(100, 0.1)
        return all(c.assignment() for c in cs) and sum(len(c.assignment()) for c in cs) == PARTITIONS
    try:
        wait_for(lambda: both_assigned(a, b), 60, "two static members assigned", interval=0)
        before_a = {tp.partition for tp in a.assignment()}
        first_ids = {m["group_instance_id"]: m["member_id"] for m in group_view(cluster, group)[0]["members"]}
        revoked.update({"s-a": 0, "s-b": 0})
        a.close()
        a = member("s-a")
        wait_for(lambda: both_assigned(a, b), 60, "the static member back", interval=0)
        assert {tp.partition for tp in a.assignment()} == before_a
        desc = group_view(cluster, group)[0]
        ids = {m["group_instance_id"]: m["member_id"] for m in desc["members"]}
        assert desc["group_state"] == "Stable" and set(ids) == {"s-a", "s-b"}
        assert ids["s-a"] != first_ids["s-a"] and ids["s-b"] == first_ids["s-b"]
        assert revoked["s-b"] == 0
    finally:
        a.close()
        b.close()
