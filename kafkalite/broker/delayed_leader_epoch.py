"""A follower's OffsetForLeaderEpoch that names a leader epoch newer than this broker knows
(``ReplicaManager.await_leader_epochs``; see ``handlers/offset_for_leader_epoch.py`` for why it
waits instead of answering an error).

It watches the partitions it is behind on and completes once this broker's own state has caught
up with every one (checking again only the partition whose state changed: a follower asks about
thousands at once when a broker's leaderships move), or at ``replica.fetch.wait.max.ms``; the
answer is computed then, with whatever it is by that time.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

from kafkalite.broker.purgatory import DelayedOperation


class DelayedLeaderEpochs(DelayedOperation):
    def __init__(self, requests: list[tuple[str, Any]], behind: Callable[[str, int, int], bool],
                 answer: Callable[[], Any]) -> None:
        """``requests``: (topic, requested partition) this broker is behind on; ``behind(topic,
        index, epoch)``: is it still; ``answer()``: the response, once ready or timed out."""
        super().__init__()
        self.behind = behind
        self.answer = answer
        #: partition -> its requests (one partition may be asked twice) still behind
        self.waiting: dict[tuple[str, int], list[Any]] = {}
        for topic, p in requests:
            self.waiting.setdefault((topic, p["partition"]), []).append(p)

    def watch_keys(self) -> list[Hashable]:
        return list(self.waiting)

    def try_complete_key(self, key: Any) -> bool:
        ps = self.waiting.get(key)
        if ps is not None and not any(self.behind(key[0], key[1], p.get("current_leader_epoch", -1)) for p in ps):
            del self.waiting[key]
        return not self.waiting

    def try_complete(self) -> bool:
        for key in list(self.waiting):
            self.try_complete_key(key)
        return not self.waiting

    def on_complete(self, timed_out: bool) -> Any:
        return self.answer()
