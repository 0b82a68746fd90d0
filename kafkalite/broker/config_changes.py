"""``/config/changes`` notifications, read the way Kafka's ZkConfigManager reads them.

Whoever writes an entity's config under ``/config/<type>/<name>`` (AlterConfigs, the configs
tool, AlterClientQuotas) adds a sequential ``config_change_<seq>`` znode naming the entity path.
A broker loads the state it keeps at start, then listens through the one change-notification
listener (``coordination/change_notifications.py``, shared with the ACL authorizer): every
distinct entity path among a batch of new notifications goes to ``on_entity_change`` once, in
order of first appearance.
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
    """Base of the broker's config syncs (dynamic broker configs, client quotas): subclasses set
    ``zk`` and ``what``, load their state, call :meth:`watch_changes`, and implement
    :meth:`on_entity_change`."""

    zk: ZooKeeper
    what = "config"          # for log lines

    def __init__(self) -> None:
        self.listener: ChangeNotificationListener | None = None

    @defer.inlineCallbacks
    def watch_changes(self) -> Any:
        self.listener = ChangeNotificationListener(self.zk, paths.CONFIG_CHANGES, ConfigEntityChangeNotification.PREFIX,
                                                   self._apply, what=self.what)
        yield self.listener.start()

    def on_entity_change(self, entity_path: str) -> Any:
        """Re-read the entity at ``entity_path`` if it is one of ours (may return a Deferred)."""
        raise NotImplementedError

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
            yield self.on_entity_change(entity_path)
