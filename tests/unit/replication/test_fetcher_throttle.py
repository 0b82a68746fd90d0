"""The follower's replication throttle: a throttled partition that is not in sync is left out of
the Fetch while follower.replication.throttled.rate is exceeded; one in sync (caught up with the
leader's high watermark at the last answer) never is; bytes fetched for throttled partitions are
recorded, others are not."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import task

from kafkalite.quota import RateConfig
from kafkalite.quota.replication import ReplicationQuota
from kafkalite.records.builder import build_batch
from kafkalite.replication.fetcher import FollowedPartition, ReplicaFetcher

CONFIG = {"inter.broker.protocol.version": "2.8-IV1", "replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": 30000, "replica.fetch.wait.max.ms": 500,
          "replica.fetch.min.bytes": 1, "replica.fetch.max.bytes": 1 << 20,
          "replica.fetch.response.max.bytes": 10 << 20}


class Log:
    def __init__(self) -> None:
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.appended = 0

    def append(self, records: Any, infos: Any, **kw: Any) -> None:
        self.appended += len(records)
        self.log_end_offset += sum(i.last_offset_delta + 1 for i in infos)


def followed(index: int) -> FollowedPartition:
    part = SimpleNamespace(key=("t", index), topic="t", index=index, leader_epoch=0, high_watermark=0, log=Log())
    return FollowedPartition(part, needs_truncation=False)


def test_follower_holds_back_throttled_out_of_sync_partitions_and_records_their_bytes() -> None:
    quota = ReplicationQuota(RateConfig(11, 1000), bound=1000)
    quota.mark_throttled("t", frozenset({0}))
    fetcher = ReplicaFetcher(1, 2, task.Clock(), CONFIG, lambda b: None, quota=quota)
    throttled, free = followed(0), followed(1)
    batch = bytes(build_batch([(0, None, b"v" * 2000, [])]))
    answer = {"error_code": 0, "high_watermark": 10, "log_start_offset": 0, "records": batch}
    assert fetcher._apply(throttled, answer, 0) and fetcher._apply(free, answer, 0)
    assert quota.rate.measure(0) == len(batch) / 10      # only the throttled partition's bytes
    assert throttled.lag is not None and throttled.lag > 0 and not throttled.in_sync
    ready = {("t", 0): throttled, ("t", 1): free}
    assert fetcher.unthrottled(ready) == ready             # 2 KB is under 1000 B/s x 10 s: not exceeded
    quota.record(10_000, 0)
    assert fetcher.unthrottled(ready) == {("t", 1): free}  # exceeded: the throttled one waits
    throttled.lag = 0                                      # caught up: in sync, never held back
    assert fetcher.unthrottled(ready) == ready
    quota.update_bound(2**63 - 1)
    throttled.lag = 5
    assert fetcher.unthrottled(ready) == ready             # no rate set: nothing held back
