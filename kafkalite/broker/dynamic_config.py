"""Dynamic broker configs as Kafka 2.x keeps them in ZooKeeper (KIP-226).

``/config/brokers/<id>`` holds one broker's overrides, ``/config/brokers/<default>`` the cluster-wide
ones; AlterConfigs / IncrementalAlterConfigs for a BROKER resource write them (``write``) with a
``/config/changes/config_change_<seq>`` notification whose ``entity_path`` is ``brokers/<id>`` or
``brokers/<default>``. Every broker reads both at start and re-reads them when such a notification
arrives; the typed values become :class:`~kafkalite.config.BrokerConfig`'s dynamic layers
(per-broker over default over ``server.properties``), and the broker's ``on_change`` callback
applies what changed (replication throttle rates, the topic defaults of ``log.*`` synonyms, ...).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.config import BrokerConfig
from kafkalite.broker.config_changes import ConfigChangeWatcher
from kafkalite.coordination.interfaces import ZooKeeper
from kafkalite.coordination.kafka_zk_client import KafkaZkClient

log = logging.getLogger(__name__)

DEFAULT = "<default>"


def entity_path_of(broker: str) -> str:
    """``brokers/<id>`` or ``brokers/<default>`` (``broker`` is an id or "" for the default)."""
    return f"brokers/{broker or DEFAULT}"


class DynamicBrokerConfigSync(ConfigChangeWatcher):
    """Keeps a BrokerConfig's dynamic layers equal to ZooKeeper's broker configs."""

    what = "broker config"

    def __init__(self, kafka_zk: KafkaZkClient, config: BrokerConfig, broker_id: Callable[[], int],
                 on_change: Callable[[set[str]], None]) -> None:
        self.kafka_zk = kafka_zk
        self.zk: ZooKeeper = kafka_zk.zk
        self.config = config
        self.broker_id = broker_id
        self.on_change = on_change
        super().__init__()

    @defer.inlineCallbacks
    def start(self) -> Any:
        yield self.reload()
        yield self.watch_changes()

    def read(self, broker: str) -> defer.Deferred:
        """Fires the stored overrides of broker ``broker`` ("" for the cluster default)."""
        return self.kafka_zk.get_entity_config(entity_path_of(broker))

    def write(self, broker: str, config: dict[str, str]) -> defer.Deferred:
        """Replace the overrides and notify every broker (Kafka's AdminZkClient.changeBrokerConfig)."""
        return self.kafka_zk.set_entity_config(entity_path_of(broker), config)

    @defer.inlineCallbacks
    def reload(self) -> Any:
        mine = yield self.read(str(self.broker_id()))
        default = yield self.read("")
        changed = self.config.set_dynamic(mine, default)
        log.info("dynamic broker configs: broker %s, default %s%s", mine or "none", default or "none",
                 f"; changed {sorted(changed)}" if changed else "")
        if changed:
            self.on_change(changed)

    def on_entity_change(self, entity_path: str) -> Any:
        if entity_path in (entity_path_of(str(self.broker_id())), entity_path_of("")):
            return self.reload()
        return None
