"""Replica assignment (AdminUtils) against Kafka's check vectors and its invariants."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from kafkalite.controller.assignment import (InvalidPartitionsError,
                                             InvalidReplicaAssignmentError,
                                             InvalidReplicationFactorError, assign_replicas,
                                             assign_replicas_for_brokers,
                                             assign_replicas_rack_aware,
                                             new_partitions_assignment, rack_alternated_brokers)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_unaware_check_vector():
    """AdminRackAwareTest.testReplicaAssignment: brokers 0-4, 10 partitions, RF 3, start 0."""
    assert assign_replicas([4, 3, 2, 1, 0], 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_create_partitions_example():
    """brokers [1,2,3], partition 0 = [2,3], 3 -> 6 partitions gives 3:[2,3] 4:[3,1] 5:[1,2]."""
    existing = {0: [2, 3], 1: [3, 1], 2: [1, 2]}
    assert new_partitions_assignment([1, 2, 3], existing, 6) == {3: [2, 3], 4: [3, 1], 5: [1, 2]}
    with pytest.raises(InvalidPartitionsError):
        new_partitions_assignment([1, 2, 3], existing, 3)


def test_random_start_is_seeded_and_balanced():
    """With a seeded rng results repeat; leaders are spread evenly and replicas are distinct."""
    a = assign_replicas([1, 2, 3, 4], 8, 3, rng=random.Random(7))
    assert a == assign_replicas([1, 2, 3, 4], 8, 3, rng=random.Random(7))
    assert Counter(r[0] for r in a.values()) == {1: 2, 2: 2, 3: 2, 4: 2}
    assert all(len(set(r)) == 3 for r in a.values())


@pytest.mark.parametrize("brokers, partitions, rf, error", [
    ([1, 2], 0, 1, InvalidPartitionsError),
    ([1, 2], 1, 0, InvalidReplicationFactorError),
    ([1, 2], 1, 3, InvalidReplicationFactorError),
    ([], 1, 1, InvalidReplicationFactorError),
])
def test_invalid_requests(brokers, partitions, rf, error):
    """Partitions < 1 -> 37, RF < 1 or > brokers -> 38, as Kafka answers."""
    with pytest.raises(error) as info:
        assign_replicas(brokers, partitions, rf, fixed_start_index=0)
    assert int(info.value.code) == {InvalidPartitionsError: 37,
                                    InvalidReplicationFactorError: 38}[error]


def test_rack_alternated_list_and_rack_aware_vector():
    """Racks alternate (rack1, rack2, rack3, ...); each partition spans 3 racks."""
    assert rack_alternated_brokers(RACKS) == [0, 3, 1, 5, 4, 2]
    result = assign_replicas_rack_aware(RACKS, 7, 3, fixed_start_index=0)
    assert result == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2],
                      4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}
    for replicas in result.values():
        assert len({RACKS[b] for b in replicas}) == 3


def test_rack_aware_more_replicas_than_racks():
    """RF above the rack count still uses every rack once before doubling up, no broker twice."""
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    result = assign_replicas_rack_aware(racks, 8, 3, rng=random.Random(1))
    for replicas in result.values():
        assert len(set(replicas)) == 3 and {racks[b] for b in replicas} == {"a", "b"}


def test_mode_selection():
    """No racks -> rack-unaware; all racks -> rack-aware; mixed -> refused."""
    assert assign_replicas_for_brokers({0: None, 1: None, 2: None, 3: None, 4: None}, 10, 3, 0) == \
        assign_replicas(range(5), 10, 3, 0)
    assert assign_replicas_for_brokers(RACKS, 7, 3, 0) == assign_replicas_rack_aware(RACKS, 7, 3, 0)
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_replicas_for_brokers({0: "r", 1: None}, 1, 1)
