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
from kafkalite.coordination.interfaces import Watch, ZooKeeper
from kafkalite.coordination.kafka_zk_client import KafkaZkClient
from zk_schema import paths
from zk_schema.config import ConfigEntityChangeNotification
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)

DEFAULT = "<default>"


def entity_path(broker: str) -> str:
    """``brokers/<id>`` or ``brokers/<default>`` (``broker`` is an id or "" for the default)."""
    return f"brokers/{broker or DEFAULT}"


class DynamicBrokerConfigSync:
    """Keeps a BrokerConfig's dynamic layers equal to ZooKeeper's broker configs."""

    def __init__(self, kafka_zk: KafkaZkClient, config: BrokerConfig, broker_id: Callable[[], int],
                 on_change: Callable[[set[str]], None]) -> None:
        self.kafka_zk = kafka_zk
        self.zk: ZooKeeper = kafka_zk.zk
        self.config = config
        self.broker_id = broker_id
        self.on_change = on_change
        self.last_seen = -1
        self.primed = False
        self.watch: Watch | None = None

    @defer.inlineCallbacks
    def start(self) -> Any:
        yield self.zk.ensure_path(paths.CONFIG_CHANGES)
        yield self.reload()
        self.watch = yield self.zk.watch_children(paths.CONFIG_CHANGES, self._changes)

    def read(self, broker: str) -> defer.Deferred:
        """Fires the stored overrides of broker ``broker`` ("" for the cluster default)."""
        return self.kafka_zk.get_entity_config(entity_path(broker))

    def write(self, broker: str, config: dict[str, str]) -> defer.Deferred:
        """Replace the overrides and notify every broker (Kafka's AdminZkClient.changeBrokerConfig)."""
        return self.kafka_zk.set_entity_config(entity_path(broker), config)

    @defer.inlineCallbacks
    def reload(self) -> Any:
        mine = yield self.read(str(self.broker_id()))
        default = yield self.read("")
        changed = self.config.set_dynamic(mine, default)
        log.info("dynamic broker configs: broker %s, default %s%s", mine or "none", default or "none",
                 f"; changed {sorted(changed)}" if changed else "")
        if changed:
            self.on_change(changed)

    def _changes(self, children: list[str]) -> None:
        prefix = ConfigEntityChangeNotification.PREFIX
        seqs = sorted((int(c[len(prefix):]), c) for c in children
                      if c.startswith(prefix) and c[len(prefix):].isdigit())
        if not self.primed:
            self.primed = True                  # start() has just read both znodes
            self.last_seen = seqs[-1][0] if seqs else -1
            return
        new = [name for seq, name in seqs if seq > self.last_seen]
        if new:
            self.last_seen = seqs[-1][0]
            self._apply(new).addErrback(lambda f: log.error("applying broker config changes failed: %s",
                                                            f.getErrorMessage()))

    @defer.inlineCallbacks
    def _apply(self, names: list[str]) -> Any:
        ours = {entity_path(str(self.broker_id())), entity_path("")}
        for name in names:
            data, _ = yield self.zk.get_or_none(f"{paths.CONFIG_CHANGES}/{name}")
            if data is None:
                continue
            try:
                change = ConfigEntityChangeNotification.decode(data)
            except ZkDataError as exc:
                log.warning("ignoring unreadable config change %s: %s", name, exc)
                continue
            if change.entity_path in ours:
                yield self.reload()
                return
