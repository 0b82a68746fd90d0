"""A follower's side of a fetch session (KIP-227; Kafka 2.8's FetchSessionHandler rules). Pure.

The first request is full (session 0, epoch 0); once the leader answers with a session id, each
request names only the partitions whose request fields changed since the last one and lists
the ones no longer fetched as forgotten. Any session error, a connection failure, or an answer
naming a partition outside the session makes the next request full again (closing the old
session when its id is known), so replication never depends on the leader's cache.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalite.errors import ErrorCode
from kafkalite.topic_partition import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1


class FollowerFetchSession:
    """Builds the session fields and partition list of each Fetch to one leader."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: what the leader's session holds for each partition (the request entry last sent)
        self.partitions: dict[TopicPartition, Mapping[str, Any]] = {}
        self._sent_full = True

    def build(self, wanted: Mapping[TopicPartition, Mapping[str, Any]]) -> tuple[int, int, dict[str, list[Any]],
                                                                      list[dict[str, Any]]]:
        """(session_id, epoch, topic -> partitions to send, forgotten_topics_data) for ``wanted``
        (every partition to fetch now with its request entry)."""
        topics: dict[str, list[Any]] = {}
        forgotten: dict[str, list[int]] = {}
        full = self.epoch == INITIAL_EPOCH
        for key, entry in wanted.items():
            # the fetcher reuses an unchanged entry object: identity first, then contents
            sent = self.partitions.get(key)
            if full or (sent is not entry and sent != entry):
                topics.setdefault(key[0], []).append(entry)
        if not full:
            for key in self.partitions:
                if key not in wanted:
                    forgotten.setdefault(key[0], []).append(key[1])
        self.partitions = dict(wanted)
        self._sent_full = full
        return (self.session_id, self.epoch, topics,
                [{"topic": t, "partitions": ps} for t, ps in forgotten.items()])

    def handle_response(self, resp: Mapping[str, Any]) -> bool:
        """Advance the session on a good answer; False (next request full) on a session error or
        an answer naming a partition the session does not hold."""
        code = resp.get("error_code", 0)
        if code != ErrorCode.NONE:
            if code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._restart(close=False)
            else:
                self._restart(close=True)
            return False
        if self._sent_full:
            self.session_id = resp.get("session_id", INVALID_SESSION_ID)
            self.epoch = INITIAL_EPOCH if self.session_id == INVALID_SESSION_ID else 1
            return True
        for t in resp["responses"]:
            for p in t["partitions"]:
                if (t["topic"], p["partition_index"]) not in self.partitions:
                    self._restart(close=True)
                    return False
        self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        return True

    def handle_error(self) -> None:
        """The request failed (connection, timeout): the leader may or may not have advanced the
        epoch, so start over with a full fetch that closes the session."""
        self._restart(close=True)

    def _restart(self, close: bool) -> None:
        if not close:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
