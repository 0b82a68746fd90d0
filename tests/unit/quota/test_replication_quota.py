"""Replication throttle accounting (KIP-73): which replicas a topic's lists throttle on a broker,
when a rate counts as exceeded (Kafka's windowed Rate: at least ``samples - 1`` windows of
elapsed time), and that in-sync replicas are never held back."""
from __future__ import annotations

import pytest

from kafkalite.config import TOPIC_KEYS, ConfigError
from kafkalite.quota import RateConfig
from kafkalite.quota.replication import (ALL, UNBOUNDED, ReplicationQuota, ReplicationQuotas,
                                         format_throttled_replicas, parse_throttled_replicas)


def test_throttled_lists_name_this_brokers_partitions_only() -> None:
    assert parse_throttled_replicas("0:101,1:102, 2:101 ", 101) == frozenset({0, 2})
    assert parse_throttled_replicas("0:101,1:102", 103) == frozenset()
    assert parse_throttled_replicas("*", 7) == ALL
    assert parse_throttled_replicas("", 7) == frozenset() and parse_throttled_replicas(None, 7) == frozenset()
    assert format_throttled_replicas([(1, 2), (0, 3), (1, 2)]) == "0:3,1:2"


def test_the_topic_config_refuses_malformed_lists_as_kafka() -> None:
    key = TOPIC_KEYS["leader.replication.throttled.replicas"]
    key.parse("0:1,1:2")
    key.parse("*")
    for bad in ("0-1", "a:1", "0:1,*", "0:1:2"):
        with pytest.raises(ConfigError):
            key.parse(bad)


def test_rate_is_exceeded_past_bound_times_the_minimum_window() -> None:
    """With 11 samples of 1 s the rate is divided by at least 10 s: a bound of 1000 B/s lets
    10000 bytes pass at once, not one byte more, then only as time passes."""
    quota = ReplicationQuota(RateConfig(11, 1000), bound=1000)
    quota.record(10_000, 0)
    assert not quota.is_quota_exceeded(0)
    quota.record(1, 0)
    assert quota.is_quota_exceeded(0)
    assert quota.is_quota_exceeded(5_000)          # still 10001 bytes over a padded 10 s window
    # the old sample leaves the window (11 s): the rate falls and copying resumes
    assert not quota.is_quota_exceeded(11_000)


def test_only_out_of_sync_throttled_replicas_are_held_back() -> None:
    quotas = ReplicationQuotas(RateConfig(11, 1000), leader_rate=100, follower_rate=UNBOUNDED)
    quotas.update_topic("t", "0:1,1:2", "0:3", broker_id=1)
    leader = quotas.leader
    leader.record(10_000, 0)                        # far above 100 B/s
    assert leader.should_throttle("t", 0, in_sync=False, now_ms=0)
    assert not leader.should_throttle("t", 0, in_sync=True, now_ms=0)    # the ISR keeps full speed
    assert not leader.should_throttle("t", 1, in_sync=False, now_ms=0)   # 1:2 names another broker
    assert not leader.should_throttle("u", 0, in_sync=False, now_ms=0)   # another topic
    assert not quotas.follower.is_throttled("t", 0)                     # 0:3 is not broker 1
    quotas.follower.record(1 << 40, 0)
    assert not quotas.follower.is_quota_exceeded(0)                     # unbounded rate
    leader.update_bound(UNBOUNDED)                  # the rate removed: never exceeded
    assert not leader.should_throttle("t", 0, in_sync=False, now_ms=0)
    quotas.update_topic("t", "*", "", broker_id=1)
    assert quotas.leader.is_throttled("t", 99) and not quotas.follower.throttled
    quotas.remove_topic("t")
    assert not quotas.leader.throttled
