"""Moving replicas between this broker's log dirs (AlterReplicaLogDirs, KIP-113).

Kafka's ReplicaAlterLogDirsThread copies a partition's current log into its future replica
(``<topic>-<partition>.<uuid>-future`` in the destination dir) and, once the future replica has
caught up, swaps them under the partition's lock. Here the copy runs in steps on the reactor, the
logs' owner thread: each step appends at most ``replica.fetch.max.bytes`` of stored batches per
partition (offsets, epochs and producer state as in a follower's append) and follows the current
log's start (retention, DeleteRecords); when the future replica's end equals the current log's end,
the swap happens in the same reactor turn, so no append can slip in between, and the partition
serves from the new directory. The file reads and writes of a step block the reactor the way a
produce's append does (page cache; bounded per step). ``replica.alter.log.dirs.io.max.bytes.per.second``
throttles the copy: while its windowed rate is exceeded no partition copies (Kafka's
ReplicaAlterLogDirsThread with its quota), the bytes copied are recorded.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import task

from kafkalite.errors import KafkaError
from kafkalite.quota.replication import ReplicationQuota
from kafkalite.records.batch import scan_valid_prefix

log = logging.getLogger(__name__)

STEP_S = 0.02


class LogDirMover:
    """Copies every future replica of a LogManager forward; swaps the caught-up ones."""

    def __init__(self, replicas: Any, logs: Any, reactor: Any, clock: Any, chunk_bytes: int,
                 quota: ReplicationQuota | None = None) -> None:
        self.replicas = replicas
        self.quota = quota
        self.logs = logs
        self.reactor = reactor
        self.clock = clock
        self.chunk_bytes = max(chunk_bytes, 1)
        self.loop: task.LoopingCall | None = None
        self.moved: list[tuple[str, int, str]] = []          # (topic, partition, new dir): for tests and logs

    def start(self) -> None:
        loop = self.loop = task.LoopingCall(self.step)
        loop.clock = self.reactor
        loop.start(STEP_S, now=False).addErrback(lambda f: log.error("log dir mover failed: %s", f.value))

    def stop(self) -> None:
        if self.loop is not None and self.loop.running:
            self.loop.stop()

    def step(self) -> None:
        for (topic, index), future in self.logs.futures().items():
            try:
                self._advance(topic, index, future)
            except KafkaError as exc:       # a dir failed (the failure channel takes it offline)
                log.warning("moving %s-%d: %s; the move is dropped", topic, index, exc)
                self.logs.abort_future(topic, index)

    def _advance(self, topic: str, index: int, future: Any) -> None:
        current = self.logs.get(topic, index)
        if current is None:
            self.logs.abort_future(topic, index)
            return
        now = self.clock.now_ms()
        if current.log_start_offset > future.log_end_offset:
            future.truncate_fully_and_start_at(current.log_start_offset, now)
        elif current.log_start_offset > future.log_start_offset:
            future.delete_records_before(min(current.log_start_offset, future.log_end_offset), now)
        throttled = self.quota is not None and self.quota.is_quota_exceeded(now)
        if future.log_end_offset < current.log_end_offset and not throttled:
            res = current.read(future.log_end_offset, self.chunk_bytes, max_offset=current.log_end_offset,
                               min_one_batch=True)
            records = res.records
            if len(records):
                infos, end = scan_valid_prefix(records)
                if infos:
                    future.append(records[:end] if end < len(records) else records, infos, leader_epoch=-1,
                                  now_ms=now, assign_offsets=False)
                    if self.quota is not None:
                        self.quota.record(end, now)
        future.high_watermark = min(current.high_watermark, future.log_end_offset)
        if future.log_end_offset == current.log_end_offset:
            new = self.logs.replace_current_with_future(topic, index)
            part = self.replicas.get(topic, index)
            if part is not None:
                part.log = new
            self.moved.append((topic, index, new.log_dir))
