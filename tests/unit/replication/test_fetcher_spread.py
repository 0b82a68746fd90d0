"""num.replica.fetchers: a follower spreads the partitions it follows from one leader over N
fetchers, each with its own connection, by Kafka's rule (AbstractFetcherManager.getFetcherId:
Utils.abs(31 * topic.hashCode() + partition) % N, in Java int arithmetic)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer, task

from kafkalite.protocol.api_keys import ApiKey
from kafkalite.replication.fetcher import ReplicaFetcherManager, fetcher_id

CONFIG = {"inter.broker.protocol.version": "2.8-IV1",
          "replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": 30000, "replica.fetch.wait.max.ms": 500,
          "replica.fetch.min.bytes": 1, "replica.fetch.max.bytes": 1 << 20, "replica.fetch.response.max.bytes": 10 << 20}


def followed(index: int) -> Any:
    """What the fetcher reads of a followed partition before its first request (OffsetForLeaderEpoch)."""
    log = SimpleNamespace(log_end_offset=0, log_start_offset=0, epochs=SimpleNamespace(latest_epoch=0))
    return SimpleNamespace(key=("t", index), topic="t", index=index, leader_epoch=1, high_watermark=0, log=log)


def test_fetcher_id_is_kafkas() -> None:
    """Worked by hand in Java int arithmetic: "t".hashCode() = 116; "hello".hashCode() = 99162322,
    31 * that overflows to -1220935314."""
    assert fetcher_id("t", 0, 3) == (31 * 116) % 3 == 2
    assert fetcher_id("t", 5, 7) == (31 * 116 + 5) % 7
    assert fetcher_id("hello", 1, 4) == 1220935313 % 4 == 1
    assert {fetcher_id("any", p, 1) for p in range(50)} == {0}


class Connections:
    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.requests: list[Any] = []
        self.opened: list[str] = []

    def connect(self, reactor: Any, host: str, port: int, client_id: str, timeout: float) -> defer.Deferred:
        self.opened.append(client_id)
        conn = SimpleNamespace(closed=False, client_id=client_id)
        conn.close = lambda: setattr(conn, "closed", True)

        def request(api: int, version: int, body: dict[str, Any], timeout: float) -> defer.Deferred:
            d: defer.Deferred = defer.Deferred()
            self.requests.append(SimpleNamespace(conn=conn, api=api, body=body, d=d))
            return d
        conn.request = request
        return defer.succeed(conn)


def test_partitions_of_one_leader_spread_over_n_fetchers_each_with_its_own_connection() -> None:
    clock = task.Clock()
    conns = Connections(clock)
    manager = ReplicaFetcherManager(1, clock, {**CONFIG, "num.replica.fetchers": 3},
                                    lambda broker: ("127.0.0.1", 9), connect=conns.connect)
    for i in range(9):
        manager.follow(followed(i), leader_id=2)
    clock.advance(0)
    expected: dict[int, list[int]] = {}
    for i in range(9):
        expected.setdefault(fetcher_id("t", i, 3), []).append(i)
    assert len(expected) == 3                                   # the rule spreads these over all three
    assert sorted(manager.fetchers) == [(2, f) for f in sorted(expected)]
    assert sorted(conns.opened) == [f"broker-1-fetcher-{f}" for f in sorted(expected)]
    by_conn = {r.conn.client_id: sorted(p["partition"] for t in r.body["topics"] for p in t["partitions"])
               for r in conns.requests if r.api == ApiKey.OFFSET_FOR_LEADER_EPOCH}
    assert by_conn == {f"broker-1-fetcher-{f}": ps for f, ps in expected.items()}
    for i in expected[0]:                                      # a fetcher left without partitions stops
        manager.unfollow(("t", i))
    assert (2, 0) not in manager.fetchers and len(manager.fetchers) == 2
    manager.shutdown()


def test_one_fetcher_per_leader_by_default() -> None:
    clock = task.Clock()
    conns = Connections(clock)
    manager = ReplicaFetcherManager(1, clock, {**CONFIG, "num.replica.fetchers": 1},
                                    lambda broker: ("127.0.0.1", 9), connect=conns.connect)
    for i in range(5):
        manager.follow(followed(i), leader_id=2 + i % 2)
    clock.advance(0)
    assert sorted(manager.fetchers) == [(2, 0), (3, 0)] and len(conns.opened) == 2
    manager.shutdown()
