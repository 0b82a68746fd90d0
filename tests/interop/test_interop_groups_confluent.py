"""confluent-kafka consumer groups against a 3-broker kafkalite cluster (real ZooKeeper).

A group of 3 members consumes 300,000 records of 100 bytes from a 6-partition topic with manual
commits; a 4th member joins, later one member leaves without committing what it processed last.
Each rebalance hands every partition to exactly one member, every record is processed, and a
record is processed twice only if the member that left had processed it after its last commit.
Rebalance times are written to var/test-reports/groups.json.
"""
from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.group_members import (Member, Ownership, duplicates, failure_report, processed_total,
                                         produce_numbered, report, wait_settled)
from tests.support.brokers import Cluster
from tests.support.waiting import wait_for

TOPIC = "group-stream"
PARTITIONS = 6
RECORDS = 300_000


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: Any) -> Any:
    cluster = Cluster(zookeeper, tmp_path_factory.mktemp("groups-confluent"), 3,
                      {"offsets.topic.replication.factor": "3"})
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def create(cluster: Any, topic: str, partitions: int, rf: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30, "a controller")
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(30)
    wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=5).topics[topic].partitions.values()),
             30, "leaders")


def test_group_of_three_then_four_then_one_leaves(cluster: Any) -> None:
    create(cluster, TOPIC, PARTITIONS)
    per_partition = produce_numbered(cluster.bootstrap, TOPIC, PARTITIONS, RECORDS)
    ownership = Ownership()
    members = [Member(f"m{i}", cluster.bootstrap, "big-group", TOPIC, ownership) for i in range(3)]
    for m in members:
        m.pace = 0.01
    started = time.monotonic()
    for m in members:
        m.start()
    try:
        run_scenario(cluster, ownership, members, per_partition, started)
    finally:
        for m in ALL_MEMBERS:
            m.leave(commit=False)
        ALL_MEMBERS.clear()


ALL_MEMBERS: list[Member] = []


def run_scenario(cluster: Any, ownership: Ownership, members: list[Member], per_partition: dict[int, int],
                 started: float) -> None:
    ALL_MEMBERS.extend(members)
    times: dict[str, float] = {"initial_join_3_members_s": wait_settled(ownership, members, PARTITIONS, 60)}
    assert ownership.violations == []

    wait_for(lambda: processed_total(members) >= RECORDS // 4, 180, "a quarter of the records")
    fourth = Member("m3", cluster.bootstrap, "big-group", TOPIC, ownership)
    fourth.pace = 0.01
    ALL_MEMBERS.append(fourth)
    t0 = time.monotonic()
    fourth.start()
    live = members + [fourth]
    wait_for(lambda: fourth.assigned_at and fourth.assigned_at[-1][1], 60, "the 4th member's partitions")
    wait_settled(ownership, live, PARTITIONS, 60)
    times["member_joins_s"] = time.monotonic() - t0
    assert len(set(ownership.snapshot().values())) == 4

    wait_for(lambda: processed_total(live) >= RECORDS // 2, 180, "half of the records")
    owners = ownership.snapshot()

    def remaining(m: Member) -> int:
        return sum(per_partition[p] - m.position.get(p, 0) for p, who in owners.items() if who == m.member)
    leaver = max(members, key=remaining)          # the member with the most records still ahead of it
    # from now on the leaver stops committing, then leaves without committing its tail
    mark = len(leaver.processed)
    leaver.commit_every = 10**9
    wait_for(lambda: len(leaver.processed) >= mark + 1000, 120, "an uncommitted tail at the leaver")
    t0 = time.monotonic()
    leaver.leave(commit=False)
    uncommitted = {(p, o) for p, o in leaver.processed if o >= leaver.committed.get(p, 0)}
    staying = [m for m in live if m is not leaver]
    wait_settled(ownership, staying, PARTITIONS, 60)
    times["member_leaves_s"] = time.monotonic() - t0

    def caught_up() -> bool:
        """Every record seen, and the leaver's uncommitted tail seen again by the others: the
        leaver had seen that tail already, so "every record seen" alone can hold while the
        member that took its partitions is still re-reading it (CI once stopped it a third of
        the way in)."""
        return processed_total(live) >= RECORDS and uncommitted <= {rec for m in staying for rec in m.processed}
    wait_for(caught_up, 300, "every record processed and the leaver's uncommitted tail processed again")
    times["consume_300k_total_s"] = time.monotonic() - started
    for m in staying:
        m.leave(commit=True)

    assert ownership.violations == []
    assert all(not m.errors for m in live), failure_report(live, cluster, "big-group")
    seen = {rec for m in live for rec in m.processed}
    assert seen == {(p, o) for p, n in per_partition.items() for o in range(n)}
    dups = duplicates(live)
    for (p, offset), who in dups.items():
        # only the leaver's uncommitted tail is processed again, by the member that took over
        assert who[0] == leaver.member and len(who) == 2, (p, offset, who)
    assert set(dups) == uncommitted and len(uncommitted) >= 1000
    reprocessed = len(dups)

    # the group's committed offsets end at the log end of every partition
    check = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "big-group"})
    committed = check.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    check.close()
    assert {tp.partition: tp.offset for tp in committed} == per_partition
    times["reprocessed_records"] = reprocessed
    report("confluent_kafka_3_brokers", {k: round(v, 3) if isinstance(v, float) else v for k, v in times.items()})


def test_regex_subscription_picks_up_new_topic(cluster: Any) -> None:
    create(cluster, "rx-alpha", 2)
    produce_numbered(cluster.bootstrap, "rx-alpha", 2, 100)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "regex-group",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    consumer.subscribe(["^rx-.*"])
    seen: dict[str, int] = {}

    def poll_until(topic: str, n: int) -> bool:
        for msg in consumer.consume(200, 0.5):
            if not msg.error():
                seen[msg.topic()] = seen.get(msg.topic(), 0) + 1
        return seen.get(topic, 0) >= n
    try:
        wait_for(lambda: poll_until("rx-alpha", 100), 60, "records of rx-alpha")
        create(cluster, "rx-beta", 3)
        produce_numbered(cluster.bootstrap, "rx-beta", 3, 90)
        wait_for(lambda: poll_until("rx-beta", 90), 60, "records of the new topic rx-beta")
        assert {tp.topic for tp in consumer.assignment()} == {"rx-alpha", "rx-beta"}
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == {"rx-alpha": 100, "rx-beta": 90}
