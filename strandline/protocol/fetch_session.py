"""KIP-227 fetch session fields shared by the fetcher and the leader: the reserved
session ids and epochs, and what a fetcher asks of one partition."""

from __future__ import annotations

from dataclasses import dataclass

# session_id 0 / epoch -1: a sessionless full fetch; epoch 0: open a new session.
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = (1 << 31) - 1


def next_epoch(epoch: int) -> int:
    """Session epochs run 1..INT32_MAX and then wrap to 1 (0 and -1 are reserved)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class PartitionPosition:
    """What a fetcher asks of one partition."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1
    log_start_offset: int = -1
    # Fetch v12+ (KIP-595's divergence check, as Kafka's Partition.readRecords): the
    # epoch of the last batch the fetcher has; -1 when it does not say.
    last_fetched_epoch: int = -1
