"""``/config/changes`` notifications, read the way Kafka's ZkConfigManager reads them.

Whoever writes an entity's config under ``/config/<type>/<name>`` (AlterConfigs, the configs
tool, AlterClientQuotas) adds a sequential ``config_change_<seq>`` znode naming the entity path.
A broker keeps one listener on ``/config/changes`` (the one change-notification listener of
``coordination/change_notifications.py``, shared with the ACL authorizer), as Kafka's
``ZkConfigManager`` keeps one for all its config handlers: every distinct entity path among a
batch of new notifications goes once, in order of first appearance, to each registered
:class:`ConfigChangeWatcher` (the dynamic broker configs, the client quotas), which re-reads it
if it is one of its own.

The listener starts (and marks what exists as seen) before the watchers load their state, so a
change is either in what a watcher loads or in a notification it is given afterwards; a watcher
told of a change before its own load only re-reads that entity, which the load reads again.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.coordination.change_notifications import ChangeNotificationListener
from kafkalite.coordination.interfaces import ZooKeeper
from zk_schema import paths
from zk_schema.config import ConfigEntityChangeNotification
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)


class ConfigChangeWatcher:
    """A config sync of the broker (dynamic broker configs, client quotas): it loads its state
    and implements :meth:`on_entity_change`; :class:`ConfigChangeManager` calls it."""

    what = "config"          # for log lines

    def on_entity_change(self, entity_path: str) -> Any:
        """Re-read the entity at ``entity_path`` if it is one of ours (may return a Deferred)."""
        raise NotImplementedError


class ConfigChangeManager:
    """The broker's one listener on ``/config/changes`` (Kafka's ``ZkConfigManager``)."""

    def __init__(self, zk: ZooKeeper) -> None:
        self.zk = zk
        self.watchers: list[ConfigChangeWatcher] = []
        self.listener = ChangeNotificationListener(zk, paths.CONFIG_CHANGES, ConfigEntityChangeNotification.PREFIX,
                                                   self._apply, what="config")

    def add_watcher(self, watcher: ConfigChangeWatcher) -> None:
        """Tell ``watcher`` of every changed entity (after those added before it)."""
        self.watchers.append(watcher)

    def start(self) -> defer.Deferred:
        return self.listener.start()

    def stop(self) -> None:
        self.listener.stop()

    @defer.inlineCallbacks
    def _apply(self, notifications: list[bytes]) -> Any:
        changed: list[str] = []
        for data in notifications:
            try:
                change = ConfigEntityChangeNotification.decode(data)
            except ZkDataError as exc:
                log.warning("ignoring unreadable config change: %s", exc)
                continue
            if change.entity_path not in changed:
                changed.append(change.entity_path)
        for entity_path in changed:
            for watcher in self.watchers:
                try:
                    yield watcher.on_entity_change(entity_path)
                except Exception as exc:  # noqa: BLE001 - one watcher's failure must not starve the next
                    log.error("applying the %s change of %s failed: %s", watcher.what, entity_path, exc)
