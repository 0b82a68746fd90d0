"""Replica assignment for new topics and partitions (``AdminUtils`` in Kafka 2.x).

Pure functions over broker ids. The rack-unaware algorithm spreads leaders round-robin from a
start index and places followers at a shift that grows every time the partition number wraps
around the broker list, so followers of a broker's leaders are not always the same brokers.
The rack-aware one runs the same skeleton over a broker list that alternates racks and skips
a candidate while some rack (then some broker) still holds no replica of the partition.
Randomness comes only from ``rng`` so callers and tests can pin it.
"""
from __future__ import annotations

import random
from typing import Iterator, Mapping, Sequence

from kafkalite.errors import ErrorCode, KafkaError


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


def _check(partitions: int, replication_factor: int, n_brokers: int) -> None:
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > n_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n_brokers}.")


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of the j-th follower candidate: never ``first`` itself when n > 1."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(broker_ids: Sequence[int], partitions: int, replication_factor: int,
                    fixed_start_index: int = -1, start_partition_id: int = -1,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Rack-unaware assignment: partition -> replicas (first = preferred leader).

    ``fixed_start_index`` >= 0 pins both the leader start and the follower shift (Kafka uses
    one value for both); otherwise each is an independent random draw from ``rng``.
    """
    brokers = sorted(broker_ids)
    n = len(brokers)
    _check(partitions, replication_factor, n)
    return {p: [brokers[first]] + [brokers[_follower_index(first, shift, j, n)]
                                   for j in range(replication_factor - 1)]
            for p, first, shift in _walk(n, partitions, fixed_start_index, start_partition_id, rng)}


def _walk(n: int, partitions: int, fixed_start_index: int, start_partition_id: int,
          rng: random.Random | None) -> Iterator[tuple[int, int, int]]:
    """(partition, index of its leader, follower shift) in Kafka's order, shared by both
    algorithms: the leader walks round the broker list, the shift grows once per full lap."""
    rng = rng or random.Random()
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    p = max(0, start_partition_id)
    for _ in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift
        p += 1


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack (racks sorted, brokers ascending within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    result: list[int] = []
    i = 0
    while len(result) < len(broker_racks):
        queue = queues[i % len(queues)]
        if queue:
            result.append(queue.pop(0))
        i += 1
    return result


def assign_replicas_rack_aware(broker_racks: Mapping[int, str], partitions: int,
                               replication_factor: int, fixed_start_index: int = -1,
                               start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """Rack-aware assignment: every partition spans min(RF, #racks) racks."""
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    _check(partitions, replication_factor, n)
    n_racks = len(set(broker_racks.values()))
    result: dict[int, list[int]] = {}
    for p, first, shift in _walk(n, partitions, fixed_start_index, start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_follower_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if ((rack not in racks_used or len(racks_used) == n_racks)
                        and (broker not in brokers_used or len(brokers_used) == n)):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[p] = replicas
    return result


def assign_replicas_for_brokers(brokers: Mapping[int, str | None], partitions: int,
                                replication_factor: int, fixed_start_index: int = -1,
                                start_partition_id: int = -1,
                                rng: random.Random | None = None) -> dict[int, list[int]]:
    """Pick the algorithm like Kafka's enforced rack-aware mode: all racks, or none."""
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if not with_rack:
        return assign_replicas(list(brokers), partitions, replication_factor,
                               fixed_start_index, start_partition_id, rng)
    if len(with_rack) != len(brokers):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment.")
    return assign_replicas_rack_aware(with_rack, partitions, replication_factor,
                                      fixed_start_index, start_partition_id, rng)


def new_partitions_assignment(broker_ids: Sequence[int], existing: Mapping[int, Sequence[int]],
                              total_partitions: int) -> dict[int, list[int]]:
    """Assignment of the partitions CreatePartitions adds (without an explicit assignment).

    Starts at the first broker whose id >= partition 0's preferred leader, and keeps the
    replication factor of partition 0 (``AdminZkClient.createNewPartitionsAssignment``).
    """
    if 0 not in existing:
        raise InvalidPartitionsError("The topic has no partition 0.")
    current = len(existing)
    if total_partitions <= current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, {total_partitions} would not be an increase.")
    brokers = sorted(broker_ids)
    first_leader = existing[0][0]
    start_index = next((i for i, b in enumerate(brokers) if b >= first_leader), 0)
    return assign_replicas(brokers, total_partitions - current, len(existing[0]),
                           fixed_start_index=start_index, start_partition_id=current)
