"""``/latest_producer_id_block``: the last producer-id block any broker reserved.

``{"version":1,"broker":<id>,"block_start":"<long>","block_end":"<long>"}`` (bounds are
strings, inclusive). Brokers reserve the next block with a conditional setData on the
node's zkVersion, so two brokers can never get overlapping blocks.
"""
from __future__ import annotations

from dataclasses import dataclass

from zk_schema import paths
from zk_schema._json import dumps, loads_object, req_int, req_long_string, req_version
from zk_schema.errors import ZkDataError

#: ``ProducerIdManager.PidBlockSize``
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ProducerIdBlockZNode:
    broker_id: int
    block_start: int
    block_end: int

    PATH = paths.LATEST_PRODUCER_ID_BLOCK

    def __post_init__(self) -> None:
        if self.block_start < 0 or self.block_end < self.block_start:
            raise ValueError(f"bad producer id block [{self.block_start}, {self.block_end}]")

    @staticmethod
    def path() -> str:
        return paths.LATEST_PRODUCER_ID_BLOCK

    @classmethod
    def first(cls, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> "ProducerIdBlockZNode":
        """The block claimed when the node holds no data yet: [0, size-1]."""
        return cls(broker_id, 0, size - 1)

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> "ProducerIdBlockZNode":
        """The block that follows this one, claimed by ``broker_id``."""
        if self.block_end + size > 2**63 - 1:
            raise OverflowError("producer id space exhausted")
        return ProducerIdBlockZNode(broker_id, self.block_end + 1, self.block_end + size)

    def encode(self) -> bytes:
        return dumps({"version": 1, "broker": self.broker_id,
                      "block_start": str(self.block_start), "block_end": str(self.block_end)})

    @classmethod
    def decode(cls, data: bytes) -> "ProducerIdBlockZNode":
        znode = cls.PATH
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        try:
            return cls(req_int(znode, obj, "broker"), req_long_string(znode, obj, "block_start"),
                       req_long_string(znode, obj, "block_end"))
        except ValueError as exc:
            if isinstance(exc, ZkDataError):
                raise
            raise ZkDataError(znode, str(exc)) from None
