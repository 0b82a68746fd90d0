"""The partitions this broker holds, their roles, and the produce/fetch paths over them.

Partition state arrives from ZooKeeper (the metadata sync calls :meth:`apply_state`); requests
arrive from handlers. This is where a produce meets the log and where a fetch meets the high
watermark; both wake the purgatory so waiting requests finish as soon as they can.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from kafkalite.broker.partition import Partition, PartitionError, PartitionState
from kafkalite.broker.purgatory import Purgatory
from kafkalite.config import BrokerConfig
from kafkalite.errors import ErrorCode, InvalidRecordError, KafkaError
from kafkalite.records.batch import validate_batches
from kafkalite.records.record import decode_batch

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
ZSTD = 4


class ReplicaManager:
    def __init__(self, broker_id: int, config: BrokerConfig, log_manager: Any, purgatory: Purgatory,
                 topic_config: Callable[[str], dict[str, Any]], now_ms: Callable[[], int],
                 partition_exists: Callable[[str, int], bool]) -> None:
        self.broker_id = broker_id
        self.config = config
        self.logs = log_manager
        self.purgatory = purgatory
        self.topic_config = topic_config        # topic -> effective typed topic config
        self.now_ms = now_ms
        self.partition_exists = partition_exists   # is the partition in the cluster's metadata?
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetchers: Any = None                   # replication.ReplicaFetcherManager, set by the broker
        #: Called with the Partition after each role change or removal (the group coordinator
        #: loads/unloads __consumer_offsets partitions from here).
        self.role_listeners: list[Callable[[Partition], None]] = []

    # -- lookups ---------------------------------------------------------------------------------
    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader(self, topic: str, index: int, current_leader_epoch: int = -1) -> Partition:
        part = self.partitions.get((topic, index))
        if part is None or part.state is None:
            raise PartitionError(f"{topic}-{index} is not hosted here",
                                 ErrorCode.NOT_LEADER_OR_FOLLOWER if self.partition_exists(topic, index)
                                 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        part.check_leader(current_leader_epoch)
        return part

    # -- state changes from ZooKeeper ------------------------------------------------------------
    def apply_state(self, topic: str, index: int, replicas: list[int], state: PartitionState,
                    log_config: Any) -> Partition | None:
        """Make our replica of the partition leader or follower as ``state`` says."""
        if self.broker_id not in replicas:
            return None
        key = (topic, index)
        part = self.partitions.get(key)
        if part is None:
            plog = self.logs.get_or_create(topic, index, log_config)
            part = Partition(topic, index, self.broker_id, plog)
            self.partitions[key] = part
        elif part.state is not None and state.leader_epoch < part.state.leader_epoch:
            return part           # a stale notification; ZooKeeper already told us newer
        old = part.state
        if state.leader == self.broker_id:
            part.become_leader(state, replicas, self.now_ms())
            if self.fetchers is not None:
                self.fetchers.unfollow(key)
        else:
            part.become_follower(state, replicas)
            new_term = old is None or old.leader != state.leader or old.leader_epoch != state.leader_epoch
            if self.fetchers is not None and (new_term or key not in self.fetchers.leader_of):
                self.fetchers.follow(part, state.leader)
        self.purgatory.check(key)
        self._notify_role(part)
        return part

    def _notify_role(self, part: Partition) -> None:
        for listener in self.role_listeners:
            try:
                listener(part)
            except Exception:
                log.exception("%s-%d: role listener failed", part.topic, part.index)

    def update_config(self, topic: str, log_config: Any) -> None:
        for (t, _), part in self.partitions.items():
            if t == topic:
                part.log.config = log_config

    def remove_topic(self, topic: str, delete: bool = True) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            part = self.partitions.pop(key)
            part.state = None
            self._notify_role(part)
            if self.fetchers is not None:
                self.fetchers.unfollow(key)
            self.purgatory.check(key)
            if delete:
                self.logs.delete(topic, key[1])
            log.info("%s-%d: %s", topic, key[1], "deleted" if delete else "stopped")

    # -- produce ---------------------------------------------------------------------------------
    def append(self, topic: str, index: int, records: Any, acks: int, produce_version: int,
               now_ms: int, internal: bool = False) -> tuple[Partition, Any]:
        """Validate and append one partition's batches as leader; raises KafkaError subclasses.
        ``internal``: the broker itself writes (group coordinator), internal topics allowed."""
        if topic in INTERNAL_TOPICS and not internal:
            raise KafkaError(f"clients may not write to internal topic {topic}", ErrorCode.INVALID_TOPIC_EXCEPTION)
        part = self.leader(topic, index)
        if records is None or len(records) == 0:
            raise KafkaError("produce request without records", ErrorCode.CORRUPT_MESSAGE)
        cfg = self.topic_config(topic)
        infos = validate_batches(records, max_batch_bytes=cfg["max.message.bytes"])
        if produce_version < 7 and any(i.compression == ZSTD for i in infos):
            raise KafkaError("zstd needs Produce v7 or later", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if "compact" in cfg["cleanup.policy"]:
            _require_keys(records, infos, topic, index)
        result = part.append_as_leader(records, infos, now_ms, acks, cfg["min.insync.replicas"])
        self.purgatory.check(part.key)
        return part, result

    # -- fetch -----------------------------------------------------------------------------------
    def read(self, topic: str, index: int, fetch_offset: int, max_bytes: int, replica_id: int,
             isolation_level: int, current_leader_epoch: int, min_one_batch: bool) -> tuple[Partition, Any]:
        part = self.leader(topic, index, current_leader_epoch)
        upper = part.fetch_upper_bound(replica_id, isolation_level)
        if fetch_offset > part.log_end_offset or fetch_offset < part.log_start_offset:
            raise PartitionError(f"offset {fetch_offset} outside [{part.log_start_offset}, {part.log_end_offset}]",
                                 ErrorCode.OFFSET_OUT_OF_RANGE)
        if fetch_offset >= upper:
            return part, None
        return part, part.log.read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch)


def _require_keys(records: Any, infos: list[Any], topic: str, index: int) -> None:
    """Kafka's LogValidator: a compacted topic refuses records without a key (INVALID_RECORD).
    Only compacted topics pay for decoding their records; the CRCs were checked just before."""
    for info in infos:
        for rec in decode_batch(records, info, verify_crc=False):
            if rec.key is None:
                raise InvalidRecordError(
                    f"Compacted topic cannot accept message without key in topic partition {topic}-{index}.")
