"""Where a follower truncates its log before fetching (KIP-101, KIP-279), as pure functions.

Three modes, so the simulator can replay history:
- HW:     pre-0.11 Kafka. On restart or on becoming follower, truncate to the own HW.
- KIP101: one OffsetForLeaderEpoch round (0.11): truncate to min(leader end offset, LEO).
- KIP279: modern Kafka: compare epochs and ask again until they match (2.0+).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from strandline.storage.leader_epoch_cache import LeaderEpochCache
from strandline.types import UNDEFINED_EPOCH, UNDEFINED_OFFSET


class TruncationMode(enum.Enum):
    HW = "hw"
    KIP101 = "kip101"
    KIP279 = "kip279"


class EpochEndOffset(NamedTuple):
    """The leader's OffsetForLeaderEpoch answer for one partition."""

    leader_epoch: int
    end_offset: int


class TruncationDecision(NamedTuple):
    offset: int
    # False: truncate to `offset`, then ask OffsetForLeaderEpoch again (KIP-279 iteration).
    truncation_completed: bool


def needs_epoch_round_trip(mode: TruncationMode) -> bool:
    """HW mode truncates locally at once; the epoch modes must ask the leader first."""
    return mode is not TruncationMode.HW


def truncation_offset_without_leader(log_end_offset: int, high_watermark: int) -> int:
    """HW mode (pre-0.11): a restarted or demoted follower cuts its log back to its HW."""
    return min(high_watermark, log_end_offset)


def follower_truncation(
    mode: TruncationMode,
    epoch_cache: LeaderEpochCache,
    log_end_offset: int,
    high_watermark: int,
    leader_answer: EpochEndOffset,
) -> TruncationDecision:
    """Decide the truncation offset from the leader's answer for `epoch_cache.latest_epoch`.

    `epoch_cache` is the follower's own cache; on a KIP-279 retry the caller first
    truncates the log and cache to the returned offset and asks with the new latest epoch.
    """
    if mode is TruncationMode.HW:
        return TruncationDecision(
            truncation_offset_without_leader(log_end_offset, high_watermark), True
        )
    if leader_answer.end_offset == UNDEFINED_OFFSET:
        # The leader knows nothing of our epoch (or we have none): fall back to the HW.
        return TruncationDecision(min(high_watermark, log_end_offset), True)
    if mode is TruncationMode.KIP101 or leader_answer.leader_epoch == UNDEFINED_EPOCH:
        return TruncationDecision(min(leader_answer.end_offset, log_end_offset), True)
    follower_epoch, follower_end = epoch_cache.end_offset_for(
        leader_answer.leader_epoch, log_end_offset
    )
    if follower_end == UNDEFINED_OFFSET:
        # Every epoch we hold is newer than the leader's answer: keep nothing past its end.
        return TruncationDecision(min(leader_answer.end_offset, log_end_offset), True)
    if follower_epoch == leader_answer.leader_epoch:
        return TruncationDecision(min(leader_answer.end_offset, follower_end, log_end_offset), True)
    # Our largest epoch <= the leader's differs from it: the logs diverged before
    # `follower_end`. Cut there and ask again with the epoch now latest (KIP-279).
    return TruncationDecision(min(follower_end, log_end_offset), False)


def truncation_on_offset_out_of_range(
    log_end_offset: int, leader_log_start_offset: int, leader_log_end_offset: int
) -> tuple[int, int]:
    """OFFSET_OUT_OF_RANGE on fetch: returns (truncate_to, next_fetch_offset).

    A leader whose LEO is below ours (an unclean leader) wins: truncate to its LEO.
    A leader whose log starts above our LEO: drop everything and restart at its start.
    """
    if leader_log_end_offset < log_end_offset:
        return leader_log_end_offset, leader_log_end_offset
    if leader_log_start_offset > log_end_offset:
        return 0, leader_log_start_offset
    return log_end_offset, log_end_offset
