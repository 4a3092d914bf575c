"""Which `__transaction_state` partition holds a transactional id: Kafka's
TransactionStateManager.partitionFor, so Strandline and Kafka tooling agree."""

from __future__ import annotations

from strandline.group.partitioning import java_string_hash, kafka_abs

TRANSACTION_STATE_TOPIC = "__transaction_state"


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """`Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`."""
    if num_partitions <= 0:
        raise ValueError("transaction.state.log.num.partitions must be positive")
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions
