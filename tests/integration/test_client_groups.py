"""The client's group side against a real coordinator: subscribe/rebalance with the range
assignor, commits and resumption, and the admin group calls (list, describe, offsets, delete)."""
from __future__ import annotations

import threading
import uuid

import pytest

from kafkalite.client import Admin, ClientError, Consumer, NewTopic, Producer, TopicPartition
from kafkalite.errors import ErrorCode
from tests.support.waiting import wait_for


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_two_members_split_partitions_and_commits_resume(broker):
    topic, group = unique("grp"), unique("g")
    with Admin(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 4, 1)])
    with Producer(broker.bootstrap) as p:
        for i in range(40):
            p.send(topic, b"%d" % i, partition=i % 4)
    c1 = Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  heartbeat_interval_ms=500, session_timeout_ms=6000, client_id="c-one")
    c1.subscribe([topic])
    got1 = []
    wait_for(lambda: got1.extend(c1.poll(200)) or len(got1) >= 40, timeout=30, what="c1 reads all")
    assert sorted(c1.assignment()) == [TopicPartition(topic, p) for p in range(4)]
    c1.commit()
    c2 = Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  heartbeat_interval_ms=500, session_timeout_ms=6000, client_id="c-two")
    c2.subscribe([topic])
    # Each member polls in its own thread, as separate processes would: c2's JoinGroup waits
    # until c1, told by a heartbeat that a rebalance started, rejoins from its poll loop.
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(c: Consumer) -> None:
        try:
            while not stop.is_set():
                c.poll(100)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
    threads = [threading.Thread(target=loop, args=(c,), daemon=True) for c in (c1, c2)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: errors or (len(c1.assignment()) == 2 and len(c2.assignment()) == 2
                                    and c1.generation == c2.generation), timeout=40, what="rebalance to 2+2")
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors
    assert sorted(c1.assignment() + c2.assignment()) == [TopicPartition(topic, p) for p in range(4)]
    assert c1.generation == c2.generation > 1
    with Admin(broker.bootstrap) as admin:
        assert (group, "consumer") in admin.list_groups()
        desc = admin.describe_group(group)
        assert desc.state == "Stable" and desc.protocol == "range"
        assert sorted(m.client_id for m in desc.members) == ["c-one", "c-two"]
        assert sorted(tp for m in desc.members for tp in m.assignment) == [TopicPartition(topic, p) for p in range(4)]
        assert admin.list_group_offsets(group) == {TopicPartition(topic, p): 10 for p in range(4)}
        with pytest.raises(ClientError):     # members present: NON_EMPTY_GROUP
            err = admin.delete_groups([group])[group]
            raise err
    c1.close()
    c2.close()
    with Producer(broker.bootstrap) as p:
        for i in range(4):
            p.send(topic, b"new-%d" % i, partition=i)
    # a fresh member resumes from the committed offsets: only the new records
    c3 = Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest")
    c3.subscribe([topic])
    got3 = []
    wait_for(lambda: got3.extend(c3.poll(200)) or len(got3) >= 4, timeout=30, what="c3 reads new")
    assert sorted(r.value for r in got3) == [b"new-0", b"new-1", b"new-2", b"new-3"]
    c3.close()   # auto-commit on close
    with Admin(broker.bootstrap) as admin:
        assert admin.list_group_offsets(group) == {TopicPartition(topic, p): 11 for p in range(4)}
        wait_for(lambda: admin.describe_group(group).state == "Empty", what="group empty")
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): 3})
        assert admin.list_group_offsets(group)[TopicPartition(topic, 0)] == 3
        assert admin.delete_groups([group]) == {group: None}
        assert group not in dict(admin.list_groups())
        assert admin.delete_groups([group])[group].code == ErrorCode.GROUP_ID_NOT_FOUND


def test_manual_assignment_commit_and_committed(broker):
    topic, group = unique("man"), unique("g")
    with Producer(broker.bootstrap) as p:
        for i in range(5):
            p.send(topic, b"%d" % i, partition=0)
    tp = TopicPartition(topic, 0)
    with Consumer(broker.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([tp])
        assert c.committed(tp) is None
        recs = []
        wait_for(lambda: recs.extend(c.poll(200)) or len(recs) >= 5, what="records")
        c.commit()
        assert c.committed(tp) == 5
        assert c.client.offset_fetch(group, [tp]) == {tp: (5, "")}
        c.client.offset_commit(group, {tp: (2, "meta")})
        assert c.client.offset_fetch(group, [tp]) == {tp: (2, "meta")}
