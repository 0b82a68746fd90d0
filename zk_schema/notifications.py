"""Sequential notification znodes the controller consumes and deletes.

- ``/isr_change_notification/isr_change_<seq>``:
  ``{"version":1,"partitions":[{"topic":"t","partition":0}]}`` (written by partition leaders)
- ``/log_dir_event_notification/log_dir_event_<seq>``:
  ``{"version":1,"broker":<id>,"event":1}`` (1 = log directory failure)
"""
from __future__ import annotations

from dataclasses import dataclass

from zk_schema import paths
from zk_schema._json import dumps, loads_object, req_int, req_version
from zk_schema._partitions import decode_partitions, encode_partitions
from zk_schema.errors import ZkDataError


@dataclass(frozen=True)
class IsrChangeNotification:
    partitions: tuple[tuple[str, int], ...]

    PREFIX = "isr_change_"

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple((t, int(p)) for t, p in self.partitions))

    @staticmethod
    def path_prefix() -> str:
        return f"{paths.ISR_CHANGE_NOTIFICATION}/{IsrChangeNotification.PREFIX}"

    def encode(self) -> bytes:
        return dumps({"version": 1, "partitions": encode_partitions(self.partitions)})

    @classmethod
    def decode(cls, data: bytes) -> "IsrChangeNotification":
        znode = paths.ISR_CHANGE_NOTIFICATION
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        return cls(decode_partitions(znode, obj))


@dataclass(frozen=True)
class LogDirEventNotification:
    broker_id: int
    event: int = 1

    PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def path_prefix() -> str:
        return f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{LogDirEventNotification.PREFIX}"

    def encode(self) -> bytes:
        return dumps({"version": 1, "broker": self.broker_id, "event": self.event})

    @classmethod
    def decode(cls, data: bytes) -> "LogDirEventNotification":
        znode = paths.LOG_DIR_EVENT_NOTIFICATION
        obj = loads_object(znode, data)
        req_version(znode, obj, (1,))
        event = req_int(znode, obj, "event")
        if event != cls.LOG_DIR_FAILURE:
            raise ZkDataError(znode, f"unknown event {event}")
        return cls(req_int(znode, obj, "broker"), event)
