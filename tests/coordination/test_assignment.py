"""Replica assignment follows Kafka's AdminUtils.assignReplicasToBrokers."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strandline.controller.assignment import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
)


def test_matches_kafka_admin_utils_vector() -> None:
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, start index 0.
    assert assign_replicas_to_brokers([4, 3, 2, 1, 0], 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_start_partition_id_continues_numbering() -> None:
    full = assign_replicas_to_brokers([0, 1, 2], 6, 2, fixed_start_index=1)
    added = assign_replicas_to_brokers([0, 1, 2], 3, 2, fixed_start_index=1, start_partition_id=3)
    assert added == {p: full[p] for p in (3, 4, 5)}


def test_rack_alternated_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]


@given(
    n_brokers=st.integers(1, 9),
    n_partitions=st.integers(1, 60),
    data=st.data(),
)
def test_rack_unaware_properties(n_brokers: int, n_partitions: int, data: st.DataObject) -> None:
    rf = data.draw(st.integers(1, n_brokers))
    brokers = list(range(100, 100 + n_brokers))
    assignment = assign_replicas_to_brokers(brokers, n_partitions, rf, rng=random.Random(7))
    assert sorted(assignment) == list(range(n_partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf  # distinct
        assert set(replicas) <= set(brokers)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    # Every broker leads floor or ceil of n/brokers partitions.
    assert all(
        n_partitions // n_brokers <= leaders[b] <= -(-n_partitions // n_brokers) for b in brokers
    )
    hosted = Counter(b for replicas in assignment.values() for b in replicas)
    assert max(hosted.values()) - min(hosted.get(b, 0) for b in brokers) <= rf


def test_rack_aware_spreads_replicas_over_racks() -> None:
    racks: dict[int, str | None] = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assignment = assign_replicas_to_brokers(racks, 12, 3, rng=random.Random(1))
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}  # one replica per rack
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert set(leaders.values()) == {2}


def test_rack_aware_with_more_replicas_than_racks() -> None:
    racks: dict[int, str | None] = {0: "a", 1: "a", 2: "b", 3: "b"}
    assignment = assign_replicas_to_brokers(racks, 8, 3, fixed_start_index=0)
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b"}


def test_errors() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers([0, 1], 3, 3)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers([0, 1], 3, 0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers([0, 1], 0, 1)
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_replicas_to_brokers({0: "a", 1: None}, 2, 1)
