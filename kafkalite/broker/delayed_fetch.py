"""A Fetch waiting for MinBytes (Kafka's ``DelayedFetch``), parked by ``ReplicaManager.fetch_messages``.

It watches its partitions' keys (and, for a follower, its :class:`FollowerFetches` key) and is
re-evaluated only when an append, a high-watermark, log-start or role change checks one of them,
or at ``max_wait_ms``. The check is offsets only (:meth:`FetchReader.news`), never a read:
reading and building a response for every partition on each append was most of a leader's CPU
under acks=all. With MinBytes above 1 a check that sees data reads, and the answer reuses that
read.

Two savings over Kafka, both because a follower's session holds every partition the leader leads
for it: a check about one key re-evaluates only that key's partitions (the fetch was not ready
before, so no other can have made it so); and when the first read found nothing at all (and no
replication throttle, lifted by a rate and not an event, held records back) the answer reads
again only the partitions a check was about, reusing the first read's entries for the others
(appends, high watermark, log start and role changes all check their key). An idle partition of
a follower's session (``FetchSession.split``) that a check names, or that changed on this very
request's stack, is woken: read and answered too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Hashable

from kafkalite.broker.fetch_reader import FetchRead, FetchReader
from kafkalite.broker.purgatory import DelayedOperation, FollowerFetches, Purgatory

if TYPE_CHECKING:
    from collections.abc import Mapping


class DelayedFetch(DelayedOperation):
    def __init__(self, reader: FetchReader, first: FetchRead, respond: Callable[[FetchRead], Any],
                 purgatory: Purgatory, events_at_start: int) -> None:
        """``first``: the read that found too little; ``respond`` turns the final read into the
        answer; ``events_at_start``: the purgatory's event count when the request arrived."""
        super().__init__()
        self.reader = reader
        self.first = first
        self.respond = respond
        self.purgatory = purgatory
        self.events_at_start = events_at_start
        #: the answer a readiness check already read (min_bytes > 1)
        self.ready_read: FetchRead | None = None
        #: the purgatory's own try found news, which no key names: the answer reads everything
        self.full = False
        #: the partitions a check was about while the fetch waited
        self.touched: set[Any] = set()
        quota = reader.params.leader_quota
        self.reusable = first.total == 0 and (quota is None or not quota.throttled)
        #: key -> its request entries (a partition may be named twice); an idle partition's is
        #: added when it is woken (:meth:`_wake_idle`), not for all of them on every park
        self.by_key: dict[Any, list[Mapping[str, Any]]] = {}
        for topic, p in reader.wanted:
            self.by_key.setdefault((topic, p["partition"]), []).append(p)

    def watch_keys(self) -> list[Hashable]:
        keys: list[Hashable] = list(self.by_key)
        keys += self.reader.idle
        if self.reader.params.is_follower:
            keys.append(FollowerFetches(self.reader.params.replica_id))
        return keys

    def _wake_idle(self, key: Any) -> None:
        """An idle partition of a follower's session changed: read and answer it too."""
        cached = self.reader.idle.pop(key, None)
        if cached is not None:
            self.reader.wanted.append((cached.topic, cached.request))
            self.by_key[key] = [cached.request]
            self.touched.add(key)

    def try_complete(self) -> bool:
        self.ready_read = None
        reader = self.reader
        idle = reader.idle
        if idle and self.purgatory.total_events != self.events_at_start:
            # this request's own stack changed some partition (recording the follower's offsets
            # moved a high watermark, an acks=all producer appended at once): idle ones included
            events = self.purgatory.events
            changed = self.purgatory.changed_since(self.events_at_start)
            if changed is None:            # too many to name: compare every idle partition
                woken = [k for k, c in idle.items() if events.get(k, 0) != c.idle_since]
            else:                          # only the keys checked since (usually one or two)
                woken = [k for k in dict.fromkeys(changed) if k in idle and events.get(k, 0) != idle[k].idle_since]
                if len(woken) > 1:         # in the session's order, as the full comparison has them
                    named = set(woken)
                    woken = [k for k in idle if k in named]
            for key in woken:
                self._wake_idle(key)
        available = False
        for i, (topic, p) in enumerate(reader.wanted):
            news = reader.news(topic, p, i)
            if news is True:
                self.full = True
                return True
            available = available or news is None
        self.full = available
        return available and self._enough()

    def try_complete_key(self, key: Any) -> bool:
        self.ready_read = None
        if isinstance(key, FollowerFetches):
            return True                   # we lead a partition it follows: let it ask again now
        self.touched.add(key)
        self._wake_idle(key)
        news = [self.reader.news(key[0], p) for p in self.by_key.get(key, ())]
        if True in news:
            return True
        return None in news and self._enough()

    def _enough(self) -> bool:
        if self.reader.params.min_bytes <= 1:
            return True
        fresh = self.reader.read()
        self.ready_read = fresh
        return fresh.total >= self.reader.params.min_bytes or fresh.had_error

    def on_complete(self, timed_out: bool) -> Any:
        if not timed_out and self.ready_read is not None:
            return self.respond(self.ready_read)
        if self.reusable and not self.full:
            return self.respond(self.reader.read(self.first, self.touched))
        return self.respond(self.reader.read())
