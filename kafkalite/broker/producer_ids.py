"""Producer ids for idempotent producers, handed out from blocks reserved in ZooKeeper.

Each broker reserves 1000 ids at a time in ``/latest_producer_id_block`` (a conditional update,
so two brokers never get the same block) and gives them out one by one; InitProducerId requests
that arrive while a block is being fetched wait for it.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], defer.Deferred]) -> None:
        self.allocate_block = allocate_block      # -> Deferred[(start, end)] inclusive
        self.next_id = 0
        self.end = -1
        self.pending: defer.Deferred | None = None

    @defer.inlineCallbacks
    def next(self) -> Any:
        while self.next_id > self.end:
            if self.pending is None:
                self.pending = self.allocate_block()
                try:
                    start, end = yield self.pending
                finally:
                    self.pending = None
                self.next_id, self.end = start, end
            else:
                waiter: defer.Deferred[None] = defer.Deferred()
                self.pending.addBoth(_release, waiter)
                yield waiter
        pid = self.next_id
        self.next_id += 1
        return pid


def _release(result: object, waiter: "defer.Deferred[None]") -> object:
    """Wake a request waiting for the block being fetched, passing the result on unchanged."""
    waiter.callback(None)
    return result
