"""Producer-id block allocation on ``/latest_producer_id_block`` (``ProducerIdManager``).

Read the last block and its zkVersion, claim the next one with a setData at that version;
losing the race (BadVersion, or NodeExists when two brokers create it) means re-reading and
trying again, so concurrent brokers always get disjoint blocks.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer

from kafkalite.coordination.errors import NodeExistsError
from kafkalite.coordination.interfaces import ZooKeeper
from kafkalite.coordination.ops import BadVersion
from zk_schema import PRODUCER_ID_BLOCK_SIZE, ProducerIdBlockZNode

log = logging.getLogger(__name__)


@defer.inlineCallbacks
def allocate_producer_id_block(zk: ZooKeeper, broker_id: int,
                               size: int = PRODUCER_ID_BLOCK_SIZE) -> Any:
    """Fires (block_start, block_end), both inclusive."""
    path = ProducerIdBlockZNode.PATH
    attempts = 0
    while True:
        attempts += 1
        data, stat = yield zk.get_or_none(path)
        if stat is None:
            block = ProducerIdBlockZNode.first(broker_id, size)
            try:
                yield zk.create(path, block.encode(), makepath=True)
            except NodeExistsError:
                continue
        else:
            block = (ProducerIdBlockZNode.decode(data).next_block(broker_id, size)
                     if data else ProducerIdBlockZNode.first(broker_id, size))
            outcome = yield zk.conditional_set(path, block.encode(), int(stat.version))
            if isinstance(outcome, BadVersion):
                continue
        log.info("broker %d acquired producer ids [%d, %d] after %d attempt(s)",
                 broker_id, block.block_start, block.block_end, attempts)
        return block.block_start, block.block_end
