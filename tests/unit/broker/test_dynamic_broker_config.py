"""Dynamic broker configs on the in-memory ZooKeeper: AlterConfigs / IncrementalAlterConfigs for
a BROKER resource write /config/brokers/<id> or <default> with a change notification; every
broker's sync applies them live (per-broker over default over server.properties) with the
sources DescribeConfigs reports; keys Kafka does not allow to change are refused with
INVALID_REQUEST, as are another broker's id and bad values."""
from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from twisted.internet.testing import MemoryReactorClock

from kafkalite.broker.cleaner_threads import CleanerThreads
from kafkalite.broker.config_changes import ConfigChangeManager
from kafkalite.broker.dynamic_config import DynamicBrokerConfigSync
from kafkalite.broker.handlers.alter_configs import handle_alter_configs, handle_incremental_alter_configs
from kafkalite.broker.handlers.describe_configs import handle_describe_configs
from kafkalite.broker.runtime import InlineRunner
from kafkalite.broker.scheduler import BrokerScheduler
from kafkalite.config import BrokerConfig
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from kafkalite.coordination.memory import MemoryZooKeeperServer
from kafkalite.errors import ErrorCode
from tests.support.deferreds import drive as result

BROKER = 4
SET, DELETE = 0, 1


def broker(server: MemoryZooKeeperServer, clock: MemoryReactorClock, broker_id: int, cleaner: bool = False) -> Any:
    zk = KafkaZkClient(zk=server.client("memory/k"))
    result(clock, zk.start())
    config = BrokerConfig.from_properties({"zookeeper.connect": "memory", "broker.id": str(broker_id),
                                           "log.retention.hours": "24"})
    changes: list[set[str]] = []
    sync = DynamicBrokerConfigSync(zk, config, lambda: broker_id, changes.append)
    if cleaner:      # the cleaner's threads as the broker registers them (no log dirs: never started)
        sync.add_reconfigurable(CleanerThreads(config, clock, SimpleNamespace(online_dirs=[]),  # type: ignore[arg-type]
                                               lambda: 0, BrokerScheduler(clock, InlineRunner(), lambda: False)))
    manager = ConfigChangeManager(zk.zk)
    manager.add_watcher(sync)
    result(clock, manager.start())
    result(clock, sync.start())
    ctx = SimpleNamespace(broker_id=broker_id, config=config, dynamic_config=sync, metadata=SimpleNamespace(topics={}),
                          authorize=lambda *action: True)      # no authorizer: everything allowed
    return ctx, changes


def alter(clock: MemoryReactorClock, ctx: Any, name: str, configs: list[tuple[str, int, str | None]],
          incremental: bool = True) -> dict[str, Any]:
    if incremental:
        req = {"resources": [{"resource_type": BROKER, "resource_name": name,
                              "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in configs]}],
               "validate_only": False}
        resp = result(clock, handle_incremental_alter_configs(ctx, req))
    else:
        req = {"resources": [{"resource_type": BROKER, "resource_name": name,
                              "configs": [{"name": k, "value": v} for k, _, v in configs]}], "validate_only": False}
        resp = result(clock, handle_alter_configs(ctx, req))
    clock.advance(0.1)                                      # the notification reaches every broker
    return resp["responses"][0]


def describe(ctx: Any, name: str, key: str) -> dict[str, Any] | None:
    req = {"resources": [{"resource_type": BROKER, "resource_name": name, "configuration_keys": [key]}],
           "include_synonyms": True, "include_documentation": False}
    configs = handle_describe_configs(ctx, req)["results"][0]["configs"]
    return configs[0] if configs else None


def test_broker_and_default_configs_apply_live_with_their_sources() -> None:
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    b1, changes1 = broker(server, clock, 1)
    b2, _ = broker(server, clock, 2)
    assert b1.config["follower.replication.throttled.rate"] == 2**63 - 1

    assert alter(clock, b1, "", [("follower.replication.throttled.rate", SET, "5000")])["error_code"] == 0
    assert b1.config["follower.replication.throttled.rate"] == b2.config["follower.replication.throttled.rate"] == 5000
    assert {"follower.replication.throttled.rate"} in changes1
    assert alter(clock, b1, "1", [("follower.replication.throttled.rate", SET, "7000"),
                                  ("log.retention.ms", SET, "60000")])["error_code"] == 0
    assert b1.config["follower.replication.throttled.rate"] == 7000            # per broker over default
    assert b2.config["follower.replication.throttled.rate"] == 5000
    row = describe(b1, "1", "follower.replication.throttled.rate")
    assert row is not None and row["config_source"] == 2 and row["value"] == "7000" and not row["read_only"]
    assert [s["source"] for s in row["synonyms"]] == [2, 3, 5]
    assert b1.config.topic_default("retention.ms")[:2] == (60000, 2)         # a topic default, live
    assert b2.config.topic_default("retention.ms")[:2] == (86400000, 4)      # static log.retention.hours
    row = describe(b2, "", "follower.replication.throttled.rate")
    assert row is not None and row["config_source"] == 3 and row["value"] == "5000"
    assert describe(b2, "", "log.retention.ms") is None                      # the default entity: its own only
    assert describe(b1, "1", "broker.id")["read_only"]

    # AlterConfigs replaces the whole set; DELETE removes one key
    assert alter(clock, b1, "1", [("log.retention.ms", SET, "120000")], incremental=False)["error_code"] == 0
    assert b1.config["follower.replication.throttled.rate"] == 5000 and b1.config["log.retention.ms"] == 120000
    assert alter(clock, b1, "", [("follower.replication.throttled.rate", DELETE, None)])["error_code"] == 0
    assert b2.config["follower.replication.throttled.rate"] == 2**63 - 1
    stored = result(clock, b1.dynamic_config.zk.get("/config/brokers/1"))[0]
    assert json.loads(stored) == {"version": 1, "config": {"log.retention.ms": "120000"}}


def test_static_keys_other_brokers_and_bad_values_are_refused() -> None:
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    b1, _ = broker(server, clock, 1)
    entry = alter(clock, b1, "1", [("broker.id", SET, "5"), ("log.dirs", SET, "/x")])
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST
    assert entry["error_message"] == "Cannot update these configs dynamically: broker.id, log.dirs"
    entry = alter(clock, b1, "2", [("leader.replication.throttled.rate", SET, "1")])
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST and "expected 1" in entry["error_message"]
    entry = alter(clock, b1, "1", [("leader.replication.throttled.rate", SET, "fast")])
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST
    assert b1.config["leader.replication.throttled.rate"] == 2**63 - 1
    assert result(clock, b1.dynamic_config.zk.exists("/config/brokers/1")) is None


def test_a_change_a_reconfigurable_refuses_is_never_written() -> None:
    """Kafka's LogCleaner.validateReconfiguration through DynamicBrokerConfig.validate: the
    cleaner threads may at most double or halve per change; a bigger step is refused with
    INVALID_REQUEST and Kafka's message (the reason after it) before anything reaches ZooKeeper,
    by IncrementalAlterConfigs and AlterConfigs, for the broker and the default entity; a step
    within bounds is written and applied. A refused config written around the check (another
    tool) is ignored when it arrives: the broker keeps its config."""
    clock = MemoryReactorClock()
    server = MemoryZooKeeperServer(clock)
    b1, changes = broker(server, clock, 1, cleaner=True)
    resource = "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Invalid dynamic configuration: "
    entry = alter(clock, b1, "1", [("log.cleaner.threads", SET, "3")])
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST
    assert entry["error_message"] == resource + "Log cleaner threads cannot be increased to more than double the current value 1"
    assert result(clock, b1.dynamic_config.zk.exists("/config/brokers/1")) is None
    entry = alter(clock, b1, "", [("log.cleaner.threads", SET, "0")], incremental=False)
    assert entry["error_code"] == ErrorCode.INVALID_REQUEST
    assert entry["error_message"] == ("Invalid config value for resource ConfigResource(type=BROKER, name=''): "
                                      "Invalid dynamic configuration: Log cleaner threads should be at least 1")
    assert result(clock, b1.dynamic_config.zk.exists("/config/brokers/<default>")) is None
    assert changes == [] and b1.config["log.cleaner.threads"] == 1

    assert alter(clock, b1, "1", [("log.cleaner.threads", SET, "2")])["error_code"] == 0
    assert b1.config["log.cleaner.threads"] == 2 and changes == [{"log.cleaner.threads"}]
    entry = alter(clock, b1, "1", [("log.cleaner.threads", SET, "5")])
    assert entry["error_message"] == resource + "Log cleaner threads cannot be increased to more than double the current value 2"
    stored = result(clock, b1.dynamic_config.zk.get("/config/brokers/1"))[0]
    assert json.loads(stored)["config"] == {"log.cleaner.threads": "2"}

    result(clock, b1.dynamic_config.write("1", {"log.cleaner.threads": "9"}))     # around the check
    clock.advance(0.1)
    assert b1.config["log.cleaner.threads"] == 2 and changes == [{"log.cleaner.threads"}]
    assert alter(clock, b1, "1", [("log.cleaner.threads", SET, "1")])["error_code"] == 0     # half of 2
    assert b1.config["log.cleaner.threads"] == 1
