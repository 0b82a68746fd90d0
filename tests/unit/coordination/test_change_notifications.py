"""The one change-notification listener (Kafka's ZkNodeChangeNotificationListener) on the
in-memory ZooKeeper: what exists at start counts as read, later notifications reach ``process``
once each and in sequence order, gone ones are skipped, and with an expiration the listener
deletes notifications older than it (and only those)."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.testing import MemoryReactorClock

from kafkalite.coordination.change_notifications import ChangeNotificationListener, notification_sequences
from kafkalite.coordination.memory import MemoryZooKeeperServer

ROOT, PREFIX = "/changes", "change_"


def settle(clock: MemoryReactorClock, d: defer.Deferred | None = None) -> Any:
    box: list[Any] = []
    if d is not None:
        d.addBoth(box.append)
    for _ in range(30):
        clock.advance(0)
    if d is not None:
        assert box and not hasattr(box[0], "raiseException"), box
        return box[0]
    return None


def test_sequences_are_numeric_and_ordered() -> None:
    assert notification_sequences(["change_0000000010", "change_0000000002", "other", "change_x"], PREFIX) == \
        [(2, "change_0000000002"), (10, "change_0000000010")]


def test_new_notifications_reach_process_once_in_order_and_old_ones_are_purged() -> None:
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    zk = server.client("memory/n")
    settle(clock, zk.start())
    settle(clock, zk.create(f"{ROOT}/{PREFIX}", b"before", sequence=True, makepath=True))
    batches: list[list[bytes]] = []
    listener = ChangeNotificationListener(zk, ROOT, PREFIX, batches.append, what="test",
                                          expiration_ms=60_000, now_ms=lambda: int(clock.seconds() * 1000))
    settle(clock, listener.start())
    assert batches == []                                   # what existed at start was loaded, not re-read
    for payload in (b"a", b"b"):
        settle(clock, zk.create(f"{ROOT}/{PREFIX}", payload, sequence=True))
    flat = [p for batch in batches for p in batch]
    assert flat == [b"a", b"b"]
    assert len(settle(clock, zk.get_children(ROOT))) == 3  # none is older than a minute yet
    clock.advance(61)
    settle(clock, zk.create(f"{ROOT}/{PREFIX}", b"c", sequence=True))
    assert [p for batch in batches for p in batch] == [b"a", b"b", b"c"]
    # the three older than a minute went; the newest stays for brokers that have not read it
    assert len(settle(clock, zk.get_children(ROOT))) == 1
    listener.stop()
    settle(clock, zk.create(f"{ROOT}/{PREFIX}", b"d", sequence=True))
    assert [p for batch in batches for p in batch] == [b"a", b"b", b"c"]
