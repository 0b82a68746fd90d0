"""kill -9 of the group coordinator mid-run: the group finds the new coordinator (the new leader
of its ``__consumer_offsets`` partition, which replays it) and resumes from committed offsets."""
from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalite.protocol.api_keys import ApiKey
from tests.interop.group_members import Member, Ownership, duplicates, processed_total, produce_numbered, report
from tests.support.waiting import wait_for
from tests.support.wire import request as wire_request

TOPIC = "failover-group"
GROUP = "failover-group"
PARTITIONS = 6
RECORDS = 120_000


def coordinator_of(bootstrap: str, group: str) -> int:
    def found() -> Any:
        r = wire_request(bootstrap, ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        # a 1-tuple: broker id 0 is a coordinator too, and wait_for waits for a truthy value
        return (r["node_id"],) if r["error_code"] == 0 else None
    return wait_for(found, 60, "a coordinator")[0]


def test_coordinator_kill_9_group_resumes_from_committed_offsets(cluster_factory: Any, request: Any) -> None:
    cluster = cluster_factory(3, {"offsets.topic.replication.factor": "3", "min.insync.replicas": "2"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: admin.list_topics(timeout=5).controller_id >= 0, 30, "a controller")
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()),
             30, "leaders")
    ends = produce_numbered(cluster.bootstrap, TOPIC, PARTITIONS, RECORDS)
    victim = coordinator_of(cluster.bootstrap, GROUP)
    survivor = next(b for b in cluster.brokers if b.broker_id != victim)
    ownership = Ownership()
    members = [Member(f"f{i}", survivor.bootstrap, GROUP, TOPIC, ownership, commit_every=1000) for i in range(2)]
    request.addfinalizer(lambda: [m.leave(commit=False) for m in members])    # also when an assertion fails
    for m in members:
        m.pace = 0.02
        m.start()
    wait_for(lambda: processed_total(members) >= RECORDS // 3, 120, "a third of the records")
    committed_before = {m.member: dict(m.committed) for m in members}
    assert any(committed_before.values())
    cluster.broker(victim).kill()
    killed_at = time.monotonic()
    new = wait_for(lambda: (c := coordinator_of(survivor.bootstrap, GROUP)) != victim and c, 60, "a new coordinator")
    assert new != victim

    def committed_after_kill() -> bool:
        return any(m.committed.get(p, -1) > committed_before[m.member].get(p, -1) for m in members for p in m.committed)
    wait_for(committed_after_kill, 90, "a commit accepted by the new coordinator")
    resumed_s = time.monotonic() - killed_at
    # a member dies without committing its tail; its replacement reads the committed offsets
    # from the new coordinator
    crashed = members[0]
    crashed.commit_every = 10**9
    mark = len(crashed.processed)
    wait_for(lambda: len(crashed.processed) >= mark + 500, 60, "an uncommitted tail")
    crashed.leave(commit=False)
    uncommitted = {(p, o) for p, o in crashed.processed if o >= crashed.committed.get(p, 0)}
    replacement = Member("f2", survivor.bootstrap, GROUP, TOPIC, ownership, commit_every=1000)
    replacement.start()
    members.append(replacement)
    wait_for(lambda: processed_total(members) >= RECORDS, 300, "every record processed")
    for m in members[1:]:
        m.leave(commit=True)
    assert ownership.violations == []
    seen = {rec for m in members for rec in m.processed}
    assert seen == {(p, o) for p, n in ends.items() for o in range(n)}
    # nothing committed before the kill was lost: a record processed twice lies after a commit
    # acknowledged before the kill (the group resumed from committed offsets, not from the start)
    floor = {p: max(c.get(p, 0) for c in committed_before.values()) for p in range(PARTITIONS)}
    dups = duplicates(members)
    for (p, offset), who in dups.items():
        assert offset >= floor[p], (p, offset, who, floor)
    assert set(dups) == uncommitted and uncommitted      # exactly the crashed member's uncommitted tail
    check = Consumer({"bootstrap.servers": survivor.bootstrap, "group.id": GROUP})
    final = check.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    check.close()
    assert {tp.partition: tp.offset for tp in final} == ends
    report("coordinator_kill_9", {"victim": victim, "new_coordinator": new,
                                  "first_commit_after_kill_s": round(resumed_s, 3),
                                  "reprocessed_records": len(duplicates(members))})
