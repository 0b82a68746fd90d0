"""``/controller`` (ephemeral, who is controller) and ``/controller_epoch`` (fencing token).

``/controller``: ``{"version":1,"brokerid":<int>,"timestamp":"<ms>"}`` (2.x);
3.x writes version 2 adding ``"kraftControllerEpoch":-1``, which we also read.
``/controller_epoch``: the epoch as plain decimal text (``7``), not JSON; the znode's
zkVersion, not its content, is what controller writes are fenced on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from zk_schema import paths
from zk_schema._json import dumps, loads_object, req_int, req_long_string, req_version
from zk_schema.errors import ZkDataError


@dataclass(frozen=True)
class ControllerZNode:
    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int | None = None

    PATH = paths.CONTROLLER

    @staticmethod
    def path() -> str:
        return paths.CONTROLLER

    def encode(self) -> bytes:
        return dumps({"version": 1, "brokerid": self.broker_id,
                      "timestamp": str(self.timestamp_ms)})

    @classmethod
    def decode(cls, data: bytes) -> "ControllerZNode":
        obj = loads_object("/controller", data)
        version = req_version("/controller", obj, (1, 2))
        kraft_epoch = req_int("/controller", obj, "kraftControllerEpoch") if version == 2 else None
        return cls(req_int("/controller", obj, "brokerid"),
                   req_long_string("/controller", obj, "timestamp"), kraft_epoch)


_DECIMAL = re.compile(rb"-?[0-9]+")


@dataclass(frozen=True)
class ControllerEpochZNode:
    epoch: int

    PATH = paths.CONTROLLER_EPOCH
    #: Value written when the node is first created (``KafkaController.InitialControllerEpoch``).
    INITIAL_EPOCH = 0

    @staticmethod
    def path() -> str:
        return paths.CONTROLLER_EPOCH

    def encode(self) -> bytes:
        return str(self.epoch).encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> "ControllerEpochZNode":
        text = (data or b"").strip()
        if not _DECIMAL.fullmatch(text):
            raise ZkDataError("/controller_epoch", f"expected decimal text, got {data!r}")
        return cls(int(text))
