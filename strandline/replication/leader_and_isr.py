"""A broker's side of a LeaderAndIsr request, pure: which partition states it takes,
the role each one gives it, and the replication state a new term starts from.

The broker (`server/replica_manager.py`) and the simulated brokers (`sim/cluster.py`)
both apply LeaderAndIsr through these functions; each keeps only its I/O (creating
logs, writing the leader-epoch checkpoint, truncating files, waking purgatories, the
simulator's books). Kafka's `ReplicaManager.becomeLeaderOrFollower`, `makeLeaders`,
`makeFollowers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from strandline.replication.controller_fencing import leader_and_isr_state_error
from strandline.replication.follower import FollowerState
from strandline.replication.partition import Partition
from strandline.replication.truncation import TruncationMode


class StateDecision(NamedTuple):
    """One partition state of a LeaderAndIsr: refused with `error` (a state for another
    broker, or a leader epoch not newer than the one held), or taken, leading or
    following."""

    error: ErrorCode | None
    leads: bool


def decide(
    broker_id: int,
    leader: int,
    replicas: tuple[int, ...],
    leader_epoch: int,
    current_leader_epoch: int | None,
) -> StateDecision:
    """`current_leader_epoch` is the epoch this broker holds for the partition, None
    when it does not host it."""
    error = leader_and_isr_state_error(broker_id, replicas, leader_epoch, current_leader_epoch)
    return StateDecision(error, error is None and leader == broker_id)


class LeaderStart(NamedTuple):
    """A new leader term: the leader's state machine, and the leader-epoch entry the
    caller writes to its epoch cache (durably) before the first append (KIP-101)."""

    partition: Partition
    epoch_start: tuple[int, int]  # (leader epoch, start offset)


def leader_epoch_start(leader_epoch: int, log_end_offset: int) -> tuple[int, int]:
    """A new leader starts its epoch at its log end."""
    return leader_epoch, log_end_offset


def become_leader(
    broker_id: int,
    leader_epoch: int,
    isr: Sequence[int],
    replicas: Sequence[int],
    log_end_offset: int,
    high_watermark: int,
    replica_lag_time_max_ms: int,
    now_ms: int,
) -> LeaderStart:
    """The leader's state for the term the controller decided: the controller's ISR, not
    the one of an earlier term of ours; the HW the replica had (a follower's HW never
    exceeds what the old leader committed)."""
    partition = Partition(broker_id, replica_lag_time_max_ms)
    partition.become_leader(
        leader_epoch, frozenset(isr), list(replicas), log_end_offset, high_watermark, now_ms
    )
    return LeaderStart(partition, leader_epoch_start(leader_epoch, log_end_offset))


class FollowerStart(NamedTuple):
    follower: FollowerState
    # The HW the replica keeps: the one it had as leader if it led until now.
    high_watermark: int
    # Truncate the log to this offset now (the pre-KIP-101 rule: to the HW); None in
    # the epoch modes, where truncation waits for the leader's answer.
    truncate_to: int | None


def become_follower(
    mode: TruncationMode,
    leader: int,
    leader_epoch: int,
    log_end_offset: int,
    high_watermark: int,
    leading: Partition | None,
) -> FollowerStart:
    """The follower's state for the new term; `leading` is the replica's leader state
    if it led until now."""
    if leading is not None:
        high_watermark = leading.high_watermark
    follower = FollowerState(mode)
    cut = follower.become_follower(leader, leader_epoch, log_end_offset, high_watermark)
    return FollowerStart(follower, high_watermark, cut)
