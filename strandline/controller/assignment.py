"""Replica assignment for new topics and partitions: Kafka's AdminUtils.assignReplicasToBrokers.

Pure. Rack-unaware: partition i's first replica goes to broker (i + startIndex) mod n of
the sorted broker list, and replica j to (first + 1 + (shift + j) mod (n - 1)) mod n,
where the shift grows by one every n partitions, spreading preferred leaders and
followers evenly. Rack-aware (every broker declares `broker.rack`): the same walk over a
rack-alternated broker list, skipping a broker whose rack (or itself) already holds a
replica while some rack (or broker) holds none.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from strandline.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

__all__ = [
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "assign_replicas_to_brokers",
    "propose_reassignment",
]


def assign_replicas_to_brokers(
    brokers: Sequence[int] | Mapping[int, str | None],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """partition id -> replica list (first = preferred leader).

    `brokers` is a list of broker ids, or broker id -> rack (None when undeclared).
    `fixed_start_index` >= 0 fixes both the start index and the initial shift (Kafka's
    tests and deterministic callers); otherwise both are drawn from `rng`.
    `start_partition_id` numbers the new partitions (CreatePartitions adds after the
    existing ones).
    """
    racks: dict[int, str | None] = (
        dict(brokers) if isinstance(brokers, Mapping) else {b: None for b in brokers}
    )
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(racks):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(racks)}."
        )
    rng = rng or random.Random()
    if all(rack is None for rack in racks.values()):
        return _rack_unaware(
            sorted(racks),
            n_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng,
        )
    if any(rack is None for rack in racks.values()):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    declared = {broker: rack for broker, rack in racks.items() if rack is not None}
    return _rack_aware(
        declared, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng
    )


def _replica_index(first_index: int, shift: int, j: int, n_brokers: int) -> int:
    return (first_index + 1 + (shift + j) % (n_brokers - 1)) % n_brokers


def _rack_unaware(
    broker_list: list[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(broker_list)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        replicas = [broker_list[first]]
        replicas += [
            broker_list[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        result[partition_id] = replicas
        partition_id += 1
    return result


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn: {a:[0,1], b:[2], c:[3,4]} -> 0,2,3,1,4."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(broker_racks):
        result += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return result


def _rack_aware(
    broker_racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    arranged = rack_alternated_brokers(broker_racks)
    n = len(arranged)
    n_racks = len(set(broker_racks.values()))
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                rack_ok = rack not in racks_used or len(racks_used) == n_racks
                broker_ok = broker not in brokers_used or len(brokers_used) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[partition_id] = replicas
        partition_id += 1
    return result


def propose_reassignment(
    current: Mapping[str, Mapping[int, Sequence[int]]],
    brokers: Sequence[int] | Mapping[int, str | None],
    rng: random.Random | None = None,
) -> dict[str, dict[int, list[int]]]:
    """kafka-reassign-partitions.sh --generate: each topic's partitions laid out afresh
    over `brokers`, keeping its partition count and replication factor (Kafka's
    ReassignPartitionsCommand.calculateAssignment)."""
    rng = rng or random.Random()
    return {
        topic: assign_replicas_to_brokers(
            brokers, len(partitions), len(next(iter(partitions.values()))), rng=rng
        )
        for topic, partitions in sorted(current.items())
    }
