"""All partition logs of a broker across its ``log.dirs`` (Kafka's ``LogManager``).

Per log dir::

    .lock                               flock'ed while a LogManager owns the dir
    .kafka_cleanshutdown                written on close after every log was flushed; its presence at
                                        start lets logs skip CRC recovery (removed once loaded)
    recovery-point-offset-checkpoint    "0\\nN\\ntopic partition offset" lines (checkpoint.py)
    log-start-offset-checkpoint         same format
    replication-offset-checkpoint       same format: the high watermarks
    <topic>-<partition>/                one PartitionLog each (log.py)
    <topic>-<partition>.<uuid>-delete/  a deleted log not yet removed (removed in the background,
                                        or at the next start)

Several dirs, and one failing (Kafka's JBOD handling): a new partition goes to the online dir
holding the fewest partitions. An I/O error in any log of a dir, or in the dir's checkpoints,
takes the whole dir offline (failure.py): its logs refuse every operation with KafkaStorageError
without touching the disk, checkpoints and the clean-shutdown marker skip it, no partition is
placed on it again, its partitions are never re-created elsewhere (their data is on the failed
disk; the controller moves leadership to other replicas), and :meth:`add_failure_listener`
listeners hear of it once. A dir that cannot be created, locked or read at start is offline from
the start; only with no dir online does the manager refuse to start, as Kafka stops then.

Thread-safety: owner-thread only, except :meth:`flush_dirty` and :meth:`checkpoint` (worker
threads: they work on snapshots of the maps and PartitionLog.flush is thread-safe), :meth:`logs`
(the cleaner's threads) and failure reports (any thread). The bookkeeping for a failed dir
(closing its files, dropping its logs from :meth:`logs`) happens on the owner thread at its next
call into the manager, or at :meth:`handle_dir_failures`; until then the dir's logs already
refuse every operation.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
import uuid
from collections import Counter
from typing import Callable, NamedTuple

from kafkalite.config import BROKER_KEYS
from kafkalite.errors import ErrorCode, KafkaStorageError
from kafkalite.storage import checkpoint
from kafkalite.storage.config import LogConfig
from kafkalite.storage.failure import Background, FailureListener, LogDirFailureChannel, run_inline
from kafkalite.storage.log import (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, TOPIC_RE, PartitionLog, future_dir_name,
                                   parse_dir_name, remove_tree)
from kafkalite.topic_partition import TopicPartition

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
PRODUCER_ID_EXPIRATION_MS: int = BROKER_KEYS["producer.id.expiration.ms"].default


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class LogDirInfo(NamedTuple):
    """One log dir as DescribeLogDirs reports it: KAFKA_STORAGE_ERROR and no partitions when
    offline, else the size in bytes of each partition's log."""

    path: str
    error: ErrorCode
    partitions: dict[TopicPartition, int]


class LogManager:
    """Discovers, creates, places, checkpoints, cleans, flushes and fails the logs of some dirs."""

    def __init__(self, log_dirs: list[str], default_config: LogConfig, *,
                 topic_config: Callable[[str], LogConfig] | None = None,
                 clock: Callable[[], int] = wall_clock_ms,
                 producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
                 background: Background = run_inline) -> None:
        """Lock every dir and open every log found in them.

        ``topic_config(topic)`` gives the config of logs found on disk (default: ``default_config``);
        ``clock`` gives "now" in ms for segment creation times and for dropping producers already
        expired at load; ``producer_id_expiration_ms`` is ``producer.id.expiration.ms``;
        ``background(job)`` runs the logs' deferred file work (failure.py; it may be replaced later
        through :attr:`background`). Raises KafkaStorageError if a dir is locked by another process,
        a partition exists in two dirs, or no dir can be used at all.
        """
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = list(dict.fromkeys(os.path.abspath(d) for d in log_dirs))
        self.default_config = default_config
        self._topic_config = topic_config or (lambda topic: default_config)
        self._clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.background = background
        self.failures = LogDirFailureChannel()
        self._logs: dict[TopicPartition, PartitionLog] = {}      # online logs
        self._dir_of: dict[TopicPartition, str] = {}             # every known partition, online or not
        self._checkpointed: dict[str, dict[TopicPartition, int]] = {}   # checkpoint path -> what this process wrote there
        self._per_dir: Counter[str] = Counter()        # partitions per dir: where the next new one goes
        #: future replicas (AlterReplicaLogDirs): the copy of a partition being moved to another dir
        self._futures: dict[TopicPartition, PartitionLog] = {}
        #: where a partition not here yet is to be created (AlterReplicaLogDirs before the replica)
        self._preferred: dict[TopicPartition, str] = {}
        self._locks: dict[str, int] = {}
        self._handled_offline: set[str] = set()
        self._closed = False
        try:
            for d in self.log_dirs:
                try:
                    os.makedirs(d, exist_ok=True)
                    self._lock_dir(d)
                except OSError as e:
                    self.failures.report(d, "creating and locking the log dir", e)
            for d in self.online_dirs:
                try:
                    self._load_dir(d)
                except OSError as e:
                    self.failures.report(d, "loading its logs", e)
                except KafkaStorageError:
                    if not self.failures.is_offline(d):
                        raise                          # not an I/O error: a configuration error
            self.handle_dir_failures()
            self._resume_futures()
            if not self.online_dirs:
                raise KafkaStorageError("no log dir is usable: " + "; ".join(
                    f"{d}: {self.failures.reason(d)}" for d in self.log_dirs))
        except BaseException:
            for plog in list(self._logs.values()) + list(self._futures.values()):
                plog.close_handles()
            self._release_locks()
            raise

    def _lock_dir(self, d: str) -> None:
        fd = os.open(os.path.join(d, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise KafkaStorageError(f"log dir {d} is in use by another process") from None
            raise
        self._locks[d] = fd

    def _release_locks(self, only: str | None = None) -> None:
        for d in [only] if only is not None else list(self._locks):
            fd = self._locks.pop(d, None)
            if fd is not None:
                os.close(fd)

    @staticmethod
    def _read_checkpoint(path: str) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read_offsets(path)
        except checkpoint.CheckpointError as e:
            log.warning("ignoring %s", e)
            return {}

    def _load_dir(self, d: str) -> None:
        """Open every log of ``d`` (before the broker serves anything, so the I/O runs here)."""
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
                remove_tree(path)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                # a move between log dirs that a restart interrupted: the copy resumes (Kafka
                # loads future logs too); _resume_futures drops one without a current log
                fkey = parse_dir_name(name)
                if fkey in self._futures:
                    log.warning("removing a second future replica of %s-%d: %s", fkey[0], fkey[1], path)
                    remove_tree(path)
                    continue
                self._futures[fkey] = PartitionLog.open(
                    path, self._topic_config(fkey[0]), now, clean_shutdown=clean, failures=self.failures,
                    background=self._run_background)
                continue
            try:
                key = parse_dir_name(name)
            except ValueError:
                log.warning("skipping %s: not a partition directory", path)
                continue
            if key in self._dir_of:
                raise KafkaStorageError(f"{key[0]}-{key[1]} exists in both {self._dir_of[key]} and {d}")
            self._place(key, d)
            self._logs[key] = PartitionLog.open(
                path, self._topic_config(key[0]), now, recovery_point=recovery.get(key, 0),
                log_start_offset=starts.get(key, 0), high_watermark=hws.get(key, 0), clean_shutdown=clean,
                failures=self.failures, background=self._run_background)
            # Kafka's loadFromSnapshot skips producers that have expired meanwhile
            self._logs[key].remove_expired_producers(now, self.producer_id_expiration_ms)
        if clean:
            os.unlink(marker)
        log.info("loaded %d logs from %s (%s shutdown)", sum(1 for v in self._dir_of.values() if v == d), d,
                 "clean" if clean else "unclean")

    def _resume_futures(self) -> None:
        """Future replicas found at start go on copying if their partition's current log is
        online in another dir; the others are deleted."""
        for (topic, partition), future in list(self._futures.items()):
            current = self._logs.get((topic, partition))
            if current is None or self._dir_of.get((topic, partition)) == future.log_dir \
                    or self.failures.is_offline(future.log_dir):
                log.warning("dropping the future replica %s: no current log to copy", future.directory)
                self.abort_future(topic, partition)
            else:
                log.info("resuming the move of %s-%d to %s at offset %d", topic, partition, future.log_dir,
                         future.log_end_offset)

    def _run_background(self, job: Callable[[], None]) -> None:
        self.background(job)

    # --- log dirs and their failure ------------------------------------------------------------------

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if not self.failures.is_offline(d)]

    @property
    def offline_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if self.failures.is_offline(d)]

    def add_failure_listener(self, listener: FailureListener) -> None:
        """``listener(log_dir, reason)`` once per dir that fails from now on, called on the thread
        that met the error (a listener that needs the reactor hops there itself)."""
        self.failures.add_listener(listener)

    def handle_dir_failures(self) -> list[str]:
        """Owner thread: finish taking failed dirs offline (close their logs' files without
        writing, drop the logs from :meth:`logs`, release the dir lock so the disk can be
        unmounted); returns the dirs handled by this call. Every other owner-thread method calls
        it first, so a caller needs it only to act at once."""
        newly = [d for d in self.failures.offline_dirs if d not in self._handled_offline and d in self.log_dirs]
        for d in newly:
            self._handled_offline.add(d)
            gone = [k for k, v in self._dir_of.items() if v == d and k in self._logs]
            for key in gone:
                self._logs.pop(key).close_handles()
            self._release_locks(d)
            log.error("log dir %s is offline: %d partition(s) there answer KAFKA_STORAGE_ERROR until restart (%s)",
                      d, len([v for v in self._dir_of.values() if v == d]), self.failures.reason(d))
        return newly

    def dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding the partition (online or offline), None if it is not here."""
        return self._dir_of.get((topic, partition))

    def partitions_in(self, log_dir: str) -> list[TopicPartition]:
        """The partitions whose logs live in ``log_dir`` (also when it is offline: those are the
        replicas this broker can no longer serve)."""
        d = os.path.abspath(log_dir)
        return sorted(k for k, v in list(self._dir_of.items()) if v == d)

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions whose log dir is offline."""
        return sorted(k for k, v in list(self._dir_of.items()) if self.failures.is_offline(v))

    def is_offline(self, topic: str, partition: int) -> bool:
        d = self._dir_of.get((topic, partition))
        return d is not None and self.failures.is_offline(d)

    def dir_sizes(self, log_dir: str) -> dict[TopicPartition, int]:
        """Bytes per partition log in ``log_dir`` (from memory: no I/O); empty if it is offline."""
        d = os.path.abspath(log_dir)
        if self.failures.is_offline(d):
            return {}
        return {k: p.size for k, p in sorted(self.logs().items()) if self._dir_of.get(k) == d}

    def describe_dirs(self) -> list[LogDirInfo]:
        """Every configured dir as DescribeLogDirs answers it (Kafka's ``describeLogDirs``)."""
        return [LogDirInfo(d, ErrorCode.KAFKA_STORAGE_ERROR, {}) if self.failures.is_offline(d)
                else LogDirInfo(d, ErrorCode.NONE, self.dir_sizes(d)) for d in self.log_dirs]

    def future_sizes(self, log_dir: str) -> dict[TopicPartition, int]:
        """Bytes per future replica in ``log_dir`` (DescribeLogDirs' ``is_future_key`` entries)."""
        d = os.path.abspath(log_dir)
        if self.failures.is_offline(d):
            return {}
        return {k: p.size for k, p in sorted(self._futures.items()) if p.log_dir == d}

    # --- moving replicas between log dirs (AlterReplicaLogDirs) --------------------------------------

    def set_preferred_dir(self, topic: str, partition: int, log_dir: str) -> None:
        """Create the partition in ``log_dir`` when it comes (Kafka's maybeUpdatePreferredLogDir)."""
        self._preferred[(topic, partition)] = os.path.abspath(log_dir)

    def future(self, topic: str, partition: int) -> PartitionLog | None:
        return self._futures.get((topic, partition))

    def futures(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._futures)

    def create_future(self, topic: str, partition: int, log_dir: str) -> PartitionLog | None:
        """Start moving the partition's log to ``log_dir``: an empty future log
        ``<topic>-<partition>.<uuid>-future`` there, starting at the current log's start (the
        caller copies the data, then :meth:`replace_current_with_future`). None when the log is
        already in ``log_dir`` (a move elsewhere in progress is cancelled); the existing future
        when one is already moving there. KafkaStorageError if ``log_dir`` is offline or the
        partition is not here. Synchronous: a new log is a mkdir and three empty files."""
        key = (topic, partition)
        d = os.path.abspath(log_dir)
        self.failures.check_online(d, f"move {topic}-{partition} to {d}")
        current = self.get(topic, partition)
        if current is None:
            raise KafkaStorageError(f"{topic}-{partition} has no online log here")
        existing = self._futures.get(key)
        if existing is not None and existing.log_dir == d:
            return existing
        self.abort_future(topic, partition)
        if self._dir_of.get(key) == d:
            return None
        path = os.path.join(d, future_dir_name(topic, partition, uuid.uuid4().hex))
        future = PartitionLog.open(path, current.config, self._clock(), log_start_offset=current.log_start_offset,
                                   clean_shutdown=True, failures=self.failures, background=self._run_background)
        self._futures[key] = future
        log.info("moving %s-%d from %s to %s (future replica %s)", topic, partition, self._dir_of.get(key), d, path)
        return future

    def abort_future(self, topic: str, partition: int) -> bool:
        """Drop the partition's future replica (a move cancelled or superseded); False if none."""
        future = self._futures.pop((topic, partition), None)
        if future is None:
            return False
        try:
            future.delete()
        except KafkaStorageError as e:
            log.error("deleting the future replica of %s-%d: %s", topic, partition, e)
        return True

    def replace_current_with_future(self, topic: str, partition: int) -> PartitionLog:
        """The future replica has caught up: it becomes the partition's log (Kafka's
        replaceCurrentWithFutureLog). The current log is deleted (renamed now, removed in the
        background), the future directory renamed to ``<topic>-<partition>`` and reopened there.
        The caller holds off appends meanwhile (the broker runs this on the reactor)."""
        key = (topic, partition)
        future = self._futures.get(key)
        current = self._logs.get(key)
        if future is None or current is None:
            raise KafkaStorageError(f"{topic}-{partition}: no move in progress")
        if future.log_end_offset != current.log_end_offset:
            raise ValueError(f"{topic}-{partition}: the future replica ends at {future.log_end_offset}, "
                             f"the current one at {current.log_end_offset}")
        d = future.log_dir
        target = os.path.join(d, f"{topic}-{partition}")
        hw, start, end, config = current.high_watermark, current.log_start_offset, current.log_end_offset, current.config
        future.flush()
        future.close()
        del self._futures[key]
        self._logs.pop(key, None)
        current.delete()
        try:
            os.replace(future.directory, target)
        except OSError as e:
            self._unplace(key)
            raise self.failures.fail(d, f"renaming the future replica of {topic}-{partition}", e) from e
        self._place(key, d)
        plog = PartitionLog.open(target, config, self._clock(), recovery_point=end, log_start_offset=start,
                                 high_watermark=hw, clean_shutdown=True, failures=self.failures,
                                 background=self._run_background)
        self._logs[key] = plog
        log.info("%s-%d now lives in %s", topic, partition, d)
        return plog

    # --- logs --------------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The online log of the partition; None if absent or its dir is offline."""
        self.handle_dir_failures()
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None, *,
                      is_new: bool = True) -> PartitionLog:
        """The log of ``topic``-``partition``, created empty in the online dir holding the fewest
        partitions if absent. An existing log gets ``config`` if one is passed.

        Raises KafkaStorageError when the partition's dir is offline, when every dir is, and (as
        Kafka's ``getOrCreateLog`` with ``isNew=false``) when the caller says the replica already
        had data (``is_new=False``) while some dir is offline: its log may be on the failed disk,
        and an empty one elsewhere must not stand in for it.

        Creation is synchronous (see PartitionLog.open): the caller is about to lead or follow.
        """
        self.handle_dir_failures()
        key = (topic, partition)
        plog = self._logs.get(key)
        if plog is not None:
            if config is not None:
                plog.config = config
            return plog
        if not TOPIC_RE.match(topic) or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic-partition {topic!r}-{partition}")
        known = self._dir_of.get(key)
        if known is not None:
            raise KafkaStorageError(f"{topic}-{partition} is in offline log dir {known}")
        offline = self.offline_dirs
        if offline and not is_new:
            raise KafkaStorageError(f"cannot create the log of {topic}-{partition}: it is not new and "
                                    f"log dirs {', '.join(offline)} are offline")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(f"cannot create the log of {topic}-{partition}: every log dir is offline")
        d = min(online, key=lambda x: self._per_dir[x])      # the online dir with the fewest partitions
        preferred = self._preferred.pop(key, None)
        if preferred in online:
            d = preferred
        self._place(key, d)              # even if opening fails: the partition is then offline with its dir
        plog = PartitionLog.open(os.path.join(d, f"{topic}-{partition}"), config or self._topic_config(topic),
                                 self._clock(), clean_shutdown=True, failures=self.failures,
                                 background=self._run_background)
        self._logs[key] = plog
        log.info("created log %s-%d in %s", topic, partition, d)
        return plog

    def _place(self, key: TopicPartition, d: str) -> None:
        """Record that ``key`` lives in ``d``, keeping the per-dir counts (a count over every
        partition at each creation made creating N partitions quadratic)."""
        self._unplace(key)
        self._dir_of[key] = d
        self._per_dir[d] += 1

    def _unplace(self, key: TopicPartition) -> str | None:
        d = self._dir_of.pop(key, None)
        if d is not None:
            self._per_dir[d] -= 1
        return d

    def delete(self, topic: str, partition: int) -> bool:
        """Forget the partition and delete its log (PartitionLog.delete: renamed now, removed in
        the background). A log in an offline dir is only forgotten: its files stay on the failed
        disk. Never raises for a disk error (it is reported); False if the partition is unknown."""
        self.handle_dir_failures()
        key = (topic, partition)
        self.abort_future(topic, partition)
        self._preferred.pop(key, None)
        d = self._unplace(key)
        plog = self._logs.pop(key, None)
        if d is None:
            return False
        if plog is None:
            log.warning("forgetting %s-%d: its files stay in offline log dir %s", topic, partition, d)
            return True
        try:
            plog.delete()
        except KafkaStorageError as e:
            log.error("deleting %s-%d: %s", topic, partition, e)
            return True
        log.info("deleted log %s-%d", topic, partition)
        return True

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        """The online logs (any thread)."""
        return {k: p for k, p in list(self._logs.items()) if not self.failures.is_offline(p.log_dir)}

    def high_watermark(self, topic: str, partition: int) -> int:
        """The log's high watermark (from replication-offset-checkpoint at start); 0 if unknown."""
        plog = self._logs.get((topic, partition))
        return plog.high_watermark if plog is not None else 0

    # --- periodic work -----------------------------------------------------------------------------

    def cleanup(self, now_ms: int) -> list[TopicPartition]:
        """Retention over every online log; returns the logs that lost segments (their log start
        moved). The owner thread decides and renames; unlinks run in the background (log.py)."""
        self.handle_dir_failures()
        moved: list[TopicPartition] = []
        for key, plog in self.logs().items():
            try:
                if plog.delete_old_segments(now_ms):
                    moved.append(key)
            except KafkaStorageError:
                continue                     # reported; the dir is offline now
        return moved

    def remove_expired_producers(self, now_ms: int) -> int:
        """Kafka's periodic removeExpiredProducers over every online log (every
        ``producer.id.expiration.check.interval.ms``): forget each producer whose last batch is
        ``producer.id.expiration.ms`` old; returns how many were forgotten."""
        forgotten = 0
        for plog in self.logs().values():
            try:
                forgotten += plog.remove_expired_producers(now_ms, self.producer_id_expiration_ms)
            except KafkaStorageError:
                continue
        return forgotten

    def flush_dirty(self, now_ms: int) -> int:
        """Flush logs whose flush.messages / flush.ms are due; returns how many were flushed.
        Any thread (the broker runs it off the reactor: it fsyncs)."""
        flushed = 0
        for plog in self.logs().values():
            try:
                flushed += plog.maybe_flush(now_ms)
            except KafkaStorageError:
                continue
        return flushed

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints of every online dir
        (any thread: the broker runs it off the reactor, as each file is fsynced). A write error
        takes that dir offline."""
        dir_of = dict(list(self._dir_of.items()))
        logs = self.logs()
        for d in self.online_dirs:
            mine = [(k, p) for k, p in logs.items() if dir_of.get(k) == d]
            try:
                for name, offsets in (
                        (checkpoint.RECOVERY_POINT_CHECKPOINT, {k: p.recovery_point for k, p in mine}),
                        (checkpoint.LOG_START_OFFSET_CHECKPOINT, {k: p.log_start_offset for k, p in mine}),
                        (checkpoint.REPLICATION_OFFSET_CHECKPOINT, {k: p.high_watermark for k, p in mine})):
                    path = os.path.join(d, name)
                    # Unchanged since this process wrote it: skip the sort, the write and two fsyncs
                    # (at 30,000 idle partitions that rewrite was 15 % of a broker's GIL samples).
                    if self._checkpointed.get(path) != offsets:
                        checkpoint.write_offsets(path, offsets)
                        self._checkpointed[path] = offsets
            except OSError as e:
                self.failures.report(d, "writing offset checkpoints", e)

    def close(self) -> None:
        """Flush and close every online log, write the checkpoints, then mark each dir that is
        still online cleanly shut down (an offline dir is recovered in full at the next start).
        Runs at shutdown, when nothing is served any more, so its fsyncs run on the caller.
        Each log's leader-epoch checkpoint and producer snapshot are written without fsync and
        made durable together by one ``sync`` before the checkpoints and the marker: at 3,000
        partitions the three fsyncs per log took a controlled shutdown 16 s on a busy disk."""
        if self._closed:
            return
        self.handle_dir_failures()
        for plog in list(self._logs.values()) + list(self._futures.values()):
            try:
                plog.flush()
                plog.close(sync=False)
            except KafkaStorageError:
                continue
        os.sync()                # every file written above, durable before the clean-shutdown mark
        self.handle_dir_failures()
        self.checkpoint()
        for d in self.online_dirs:
            try:
                fd = os.open(os.path.join(d, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                checkpoint.fsync_dir(d)
            except OSError as e:
                self.failures.report(d, "writing the clean shutdown marker", e)
        for plog in self._logs.values():
            plog.close_handles()             # logs of a dir that failed during close
        self._release_locks()
        self._closed = True
