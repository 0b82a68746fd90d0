"""``/config/changes`` notifications, read the way Kafka's ZkConfigManager reads them.

Whoever writes an entity's config under ``/config/<type>/<name>`` (AlterConfigs, the configs
tool, AlterClientQuotas) adds a sequential ``config_change_<seq>`` znode naming the entity path.
A broker loads the state it keeps at start, then watches the notifications: the watch's first
call only marks what exists as seen (the load read it), each later call reads the new
notifications once and hands every distinct entity path among them to ``on_entity_change``.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.coordination.interfaces import Watch, ZooKeeper
from zk_schema import paths
from zk_schema.config import ConfigEntityChangeNotification
from zk_schema.errors import ZkDataError

log = logging.getLogger(__name__)


def notification_sequences(children: list[str]) -> list[tuple[int, str]]:
    """(sequence, znode name) of each notification among ``children``, in sequence order."""
    prefix = ConfigEntityChangeNotification.PREFIX
    return sorted((int(c[len(prefix):]), c) for c in children
                  if c.startswith(prefix) and c[len(prefix):].isdigit())


class ConfigChangeWatcher:
    """Base of the broker's config syncs (dynamic broker configs, client quotas): subclasses set
    ``zk`` and ``what``, load their state, call :meth:`watch_changes`, and implement
    :meth:`on_entity_change`."""

    zk: ZooKeeper
    what = "config"          # for log lines

    def __init__(self) -> None:
        self.last_seen = -1                 # the highest notification sequence already applied
        self.primed = False                 # the watch's first call (the state just loaded) seen
        self.watch: Watch | None = None

    @defer.inlineCallbacks
    def watch_changes(self) -> Any:
        yield self.zk.ensure_path(paths.CONFIG_CHANGES)
        self.watch = yield self.zk.watch_children(paths.CONFIG_CHANGES, self._changes)

    def on_entity_change(self, entity_path: str) -> Any:
        """Re-read the entity at ``entity_path`` if it is one of ours (may return a Deferred)."""
        raise NotImplementedError

    def _changes(self, children: list[str]) -> None:
        seqs = notification_sequences(children)
        if not self.primed:
            self.primed = True
            self.last_seen = seqs[-1][0] if seqs else -1
            return
        new = [name for seq, name in seqs if seq > self.last_seen]
        if new:
            self.last_seen = seqs[-1][0]
            self._apply(new).addErrback(lambda f: log.error("applying %s changes failed: %s", self.what,
                                                            f.getErrorMessage()))

    @defer.inlineCallbacks
    def _apply(self, names: list[str]) -> Any:
        changed: list[str] = []
        for name in names:
            data, _ = yield self.zk.get_or_none(f"{paths.CONFIG_CHANGES}/{name}")
            if data is None:
                continue
            try:
                change = ConfigEntityChangeNotification.decode(data)
            except ZkDataError as exc:
                log.warning("ignoring unreadable config change %s: %s", name, exc)
                continue
            if change.entity_path not in changed:
                changed.append(change.entity_path)
        for entity_path in changed:
            yield self.on_entity_change(entity_path)
