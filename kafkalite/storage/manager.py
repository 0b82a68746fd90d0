"""All partition logs of a broker across its ``log.dirs`` (Kafka's ``LogManager``).

Per log dir::

    .lock                               flock'ed while a LogManager owns the dir
    .kafka_cleanshutdown                written on close after every log was flushed; its presence at
                                        start lets logs skip CRC recovery (removed once loaded)
    recovery-point-offset-checkpoint    "0\\nN\\ntopic partition offset" lines (checkpoint.py)
    log-start-offset-checkpoint         same format
    replication-offset-checkpoint       same format: the high watermarks
    <topic>-<partition>/                one PartitionLog each (log.py)
    <topic>-<partition>.<uuid>-delete/  a deleted log not yet removed (removed at start)

Owner-thread only, except :meth:`flush_dirty`, which may run on another thread (it only calls
PartitionLog.flush, see its thread-safety note).
"""
from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
import uuid
from typing import Callable

from kafkalite.config import BROKER_KEYS
from kafkalite.errors import KafkaStorageError
from kafkalite.storage import checkpoint
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import TOPIC_RE, PartitionLog, parse_dir_name

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
PRODUCER_ID_EXPIRATION_MS: int = BROKER_KEYS["producer.id.expiration.ms"].default


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class LogManager:
    """Discovers, creates, checkpoints, cleans and flushes the partition logs of some log dirs."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, *,
                 topic_config: Callable[[str], LogConfig] | None = None,
                 clock: Callable[[], int] = wall_clock_ms,
                 producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        """Lock every dir and open every log found in them.

        ``topic_config(topic)`` gives the config of logs found on disk (default: ``default_config``);
        ``clock`` gives "now" in ms for segment creation times and for dropping producers already
        expired at load; ``producer_id_expiration_ms`` is ``producer.id.expiration.ms``.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self._topic_config = topic_config or (lambda topic: default_config)
        self._clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        self._locks: list[int] = []
        self._closed = False
        try:
            for d in self.log_dirs:
                os.makedirs(d, exist_ok=True)
                self._lock_dir(d)
            for d in self.log_dirs:
                self._load_dir(d)
        except BaseException:
            self._release_locks()
            raise

    def _lock_dir(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(f"log dir {d} is in use by another process") from None
        self._locks.append(fd)

    def _release_locks(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks = []

    @staticmethod
    def _read_checkpoint(path: str) -> dict[tuple[str, int], int]:
        try:
            return checkpoint.read_offsets(path)
        except checkpoint.CheckpointError as e:
            log.warning("ignoring %s", e)
            return {}

    def _load_dir(self, d: str) -> None:
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery = self._read_checkpoint(os.path.join(d, checkpoint.RECOVERY_POINT_CHECKPOINT))
        starts = self._read_checkpoint(os.path.join(d, checkpoint.LOG_START_OFFSET_CHECKPOINT))
        hws = self._read_checkpoint(os.path.join(d, checkpoint.REPLICATION_OFFSET_CHECKPOINT))
        now = self._clock()
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing deleted log %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                key = parse_dir_name(name)
            except ValueError:
                log.warning("skipping %s: not a partition directory", path)
                continue
            if key in self._logs:
                raise KafkaStorageError(f"{key[0]}-{key[1]} exists in both {self._dir_of[key]} and {d}")
            self._logs[key] = PartitionLog.open(
                path, self._topic_config(key[0]), now, recovery_point=recovery.get(key, 0),
                log_start_offset=starts.get(key, 0), high_watermark=hws.get(key, 0), clean_shutdown=clean)
            # Kafka's loadFromSnapshot skips producers that have expired meanwhile
            self._logs[key].remove_expired_producers(now, self.producer_id_expiration_ms)
            self._dir_of[key] = d
        if clean:
            os.unlink(marker)
        log.info("loaded %d logs from %s (%s shutdown)", sum(1 for v in self._dir_of.values() if v == d), d,
                 "clean" if clean else "unclean")

    # --- logs --------------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The log of ``topic``-``partition``, created empty in the least loaded dir if absent.
        An existing log gets ``config`` if one is passed."""
        key = (topic, partition)
        plog = self._logs.get(key)
        if plog is not None:
            if config is not None:
                plog.config = config
            return plog
        if not TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic-partition {topic!r}-{partition}")
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        d = min(self.log_dirs, key=lambda x: counts[x])
        plog = PartitionLog.open(os.path.join(d, f"{topic}-{partition}"), config or self._topic_config(topic),
                                 self._clock(), clean_shutdown=True)
        self._logs[key] = plog
        self._dir_of[key] = d
        log.info("created log %s-%d in %s", topic, partition, d)
        return plog

    def delete(self, topic: str, partition: int) -> bool:
        """Close the log and remove its directory (renamed to ``*-delete`` first, so a crash midway
        leaves nothing that looks like a live log)."""
        key = (topic, partition)
        plog = self._logs.pop(key, None)
        if plog is None:
            return False
        self._dir_of.pop(key)
        plog.close()
        doomed = f"{plog.directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(plog.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("deleted log %s-%d", topic, partition)
        return True

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def high_watermark(self, topic: str, partition: int) -> int:
        """The log's high watermark (from replication-offset-checkpoint at start); 0 if unknown."""
        plog = self._logs.get((topic, partition))
        return plog.high_watermark if plog is not None else 0

    # --- periodic work -----------------------------------------------------------------------------

    def cleanup(self, now_ms: int) -> int:
        """Retention over every log; returns the segments deleted."""
        return sum(plog.delete_old_segments(now_ms) for plog in list(self._logs.values()))

    def remove_expired_producers(self, now_ms: int) -> int:
        """Kafka's periodic removeExpiredProducers over every log (every
        ``producer.id.expiration.check.interval.ms``): forget each producer whose last batch is
        ``producer.id.expiration.ms`` old; returns how many were forgotten."""
        return sum(plog.remove_expired_producers(now_ms, self.producer_id_expiration_ms)
                   for plog in list(self._logs.values()) if not plog.closed)

    def flush_dirty(self, now_ms: int) -> int:
        """Flush logs whose flush.messages / flush.ms are due; returns how many were flushed."""
        return sum(1 for plog in list(self._logs.values()) if not plog.closed and plog.maybe_flush(now_ms))

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints of every dir."""
        for d in self.log_dirs:
            keys = [k for k, v in self._dir_of.items() if v == d]
            logs = [(k, self._logs[k]) for k in keys]
            checkpoint.write_offsets(os.path.join(d, checkpoint.RECOVERY_POINT_CHECKPOINT),
                                     {k: p.recovery_point for k, p in logs})
            checkpoint.write_offsets(os.path.join(d, checkpoint.LOG_START_OFFSET_CHECKPOINT),
                                     {k: p.log_start_offset for k, p in logs})
            checkpoint.write_offsets(os.path.join(d, checkpoint.REPLICATION_OFFSET_CHECKPOINT),
                                     {k: p.high_watermark for k, p in logs})

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then mark each dir cleanly shut down."""
        if self._closed:
            return
        for plog in self._logs.values():
            plog.flush()
            plog.close()
        self.checkpoint()
        for d in self.log_dirs:
            fd = os.open(os.path.join(d, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
            os.fsync(fd)
            os.close(fd)
            checkpoint.fsync_dir(d)
        self._release_locks()
        self._closed = True
