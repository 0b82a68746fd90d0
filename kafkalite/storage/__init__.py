"""Kafka's partition log on disk: segments, sparse indexes, recovery, idempotence, retention.

Pure synchronous code: no network, no ZooKeeper; time comes in as ``now_ms``.
"""
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import LogClosedError, UnexpectedAppendOffsetError
from kafkalite.storage.failure import Background, LogDirFailureChannel, run_inline
from kafkalite.storage.log import AppendResult, PartitionLog, ReadResult
from kafkalite.storage.manager import LogDirInfo, LogManager

__all__ = ["AppendResult", "Background", "LogClosedError", "LogConfig", "LogDirFailureChannel", "LogDirInfo",
           "LogManager", "PartitionLog", "ReadResult", "UnexpectedAppendOffsetError", "run_inline"]
