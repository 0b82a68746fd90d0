"""The console's cluster-metadata snapshot: one all-topics Metadata answer shared by the pages,
at most ``metadata_max_age_s`` old, the way Redpanda Console and AKHQ keep theirs.

Why: at 10,000 partitions the all-topics Metadata answer is about 440 KB and building the client's
view of it costs hundreds of milliseconds; asking it on every view of the topics list or the
overview made those pages take a second or more. With a snapshot a view reads names and counts
from memory; the topics list then asks Metadata and DescribeLogDirs for its page's topics only.

Freshness: a view never sees a snapshot older than the max age (an older one is refreshed on the
request path, one refresh shared by the views that wait for it); while someone is looking, the
console's own snapshot is refreshed in the background before it gets that old (see
:meth:`ClusterSnapshot.refresh_if_watched`), so a view usually costs no all-topics Metadata at
all. An action that changes the topics (create, delete, add partitions) calls :meth:`invalidate`,
so the next view shows the person's own change at once.

The snapshot has a KafkaClient of its own (same identity and credentials as its context): a
refresh never holds the context's lock, so page views are not queued behind it.
"""
from __future__ import annotations

import logging
import threading
import time

from kafkalite.client.cluster import ClusterMetadata
from kafkalite.client.core import KafkaClient
from kafkalite.client.errors import ClientError

from .settings import ConsoleSettings

log = logging.getLogger(__name__)

#: background refreshes stop when no view asked for the snapshot for this long (nobody looking)
WATCH_S = 60.0


class ClusterSnapshot:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.max_age_s = settings.metadata_max_age_s
        self._refresh_lock = threading.Lock()
        self._client: KafkaClient | None = None
        self._closed = False
        #: (taken at, generation it satisfies, answer); generation grows with every invalidate()
        self._current: tuple[float, int, ClusterMetadata] | None = None
        self._generation = 0
        self._used = 0.0

    def _fresh(self, now: float, max_age_s: float) -> ClusterMetadata | None:
        current = self._current
        if current is None or current[1] != self._generation or now - current[0] > max_age_s:
            return None
        return current[2]

    def get(self) -> ClusterMetadata:
        """The snapshot, refreshed first if older than the max age or invalidated since taken."""
        now = self._used = time.monotonic()
        md = self._fresh(now, self.max_age_s)
        if md is not None:
            return md
        with self._refresh_lock:        # a refresh under way serves the views waiting for it too
            md = self._fresh(time.monotonic(), self.max_age_s)
            return md if md is not None else self._refresh()

    def invalidate(self) -> None:
        """The topics changed (this console changed them): the next :meth:`get` asks the brokers."""
        self._generation += 1

    def refresh_if_watched(self) -> None:
        """The background job: refresh a snapshot past half its max age when a view has read it
        since it was taken (so views keep finding it fresh); nothing while nobody looks, before the
        first view, or while views go to pages that do not read it (each refresh decodes the whole
        cluster's metadata: it is not done for nobody)."""
        now = time.monotonic()
        current = self._current
        if current is None or now - self._used > WATCH_S or self._used <= current[0] \
                or self._fresh(now, self.max_age_s / 2) is not None:
            return
        with self._refresh_lock:
            if self._fresh(time.monotonic(), self.max_age_s / 2) is None:
                self._refresh()

    def _refresh(self) -> ClusterMetadata:
        generation = self._generation
        taken = time.monotonic()
        md = self._connected().metadata(None)
        self._current = (taken, generation, md)
        return md

    def _connected(self) -> KafkaClient:
        if self._closed:
            raise ClientError("the console is shutting down")
        if self._client is None:
            s = self.settings
            self._client = KafkaClient(s.bootstrap_servers, client_id="kafkalite-console-metadata",
                                       request_timeout_ms=s.request_timeout_ms, security=s.security)
        return self._client

    @property
    def client(self) -> KafkaClient:
        """The snapshot's own client (tests count its requests)."""
        return self._connected()

    def close(self) -> None:
        with self._refresh_lock:
            self._closed = True
            if self._client is not None:
                self._client.close()
                self._client = None
