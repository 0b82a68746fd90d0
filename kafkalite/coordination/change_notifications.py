"""Sequential change notifications under a znode (Kafka's ``ZkNodeChangeNotificationListener``).

Whoever changes shared state that brokers cache (an entity's config under ``/config``, an ACL
resource under ``/kafka-acl``) adds a sequential znode ``<root>/<prefix><seq>`` naming what
changed. Every broker loads the state at start, then listens: the watch's first call only marks
what exists as seen (the load read it); each later call reads the notifications it has not seen,
in sequence order, and hands their payloads to the listener's ``process`` (one batch per call,
which may return a Deferred; the next batch waits for nothing, as the watch's callbacks do not).
With an ``expiration_ms``, notifications created longer ago than that are deleted after each
batch (the first broker to see them does it; the others find them gone), as Kafka does after 15
minutes.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from kafkalite.coordination.errors import NoNodeError
from kafkalite.coordination.interfaces import Watch, ZooKeeper

log = logging.getLogger(__name__)


def notification_sequences(children: list[str], prefix: str) -> list[tuple[int, str]]:
    """(sequence, znode name) of each notification among ``children``, in sequence order."""
    return sorted((int(c[len(prefix):]), c) for c in children
                  if c.startswith(prefix) and c[len(prefix):].isdigit())


class ChangeNotificationListener:
    """Reads ``root``'s ``prefix<seq>`` notifications once each, in order, into ``process``."""

    def __init__(self, zk: ZooKeeper, root: str, prefix: str, process: Callable[[list[bytes]], Any], *,
                 what: str, expiration_ms: int | None = None, now_ms: Callable[[], int] | None = None) -> None:
        assert expiration_ms is None or now_ms is not None, "purging needs a clock"
        self.zk = zk
        self.root = root
        self.prefix = prefix
        self.process = process
        self.what = what                     # for log lines
        self.expiration_ms = expiration_ms
        self.now_ms = now_ms
        self.last_seen = -1                  # the highest notification sequence already read
        self.primed = False                  # the watch's first call (the state just loaded) seen
        self.watch: Watch | None = None

    @defer.inlineCallbacks
    def start(self) -> Any:
        yield self.zk.ensure_path(self.root)
        self.watch = yield self.zk.watch_children(self.root, self._changes)

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None

    def _changes(self, children: list[str]) -> None:
        seqs = notification_sequences(children, self.prefix)
        if not self.primed:
            self.primed = True
            self.last_seen = seqs[-1][0] if seqs else -1
            return
        new = [name for seq, name in seqs if seq > self.last_seen]
        if new:
            self.last_seen = seqs[-1][0]
            d = self._apply(new)
            if self.expiration_ms is not None:
                d.addCallback(lambda _: self._purge([name for _seq, name in seqs]))
            d.addErrback(lambda f: log.error("applying %s changes failed: %s", self.what, f.getErrorMessage()))

    @defer.inlineCallbacks
    def _apply(self, names: list[str]) -> Any:
        payloads: list[bytes] = []
        for name in names:
            data, _ = yield self.zk.get_or_none(f"{self.root}/{name}")
            if data is not None:
                payloads.append(data)
        yield self.process(payloads)

    @defer.inlineCallbacks
    def _purge(self, names: list[str]) -> Any:
        """Delete the notifications created more than ``expiration_ms`` ago."""
        assert self.expiration_ms is not None and self.now_ms is not None
        before_ms = self.now_ms() - self.expiration_ms
        for name in names:
            stat = yield self.zk.exists(f"{self.root}/{name}")
            if stat is not None and stat.ctime < before_ms:
                try:
                    yield self.zk.delete(f"{self.root}/{name}")
                except NoNodeError:
                    pass              # another broker purged it first
